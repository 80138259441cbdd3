"""Pipeline schedules: the bubble, the microbatches in flight, and the weight copies each keeps.

With `p` stages and `m` microbatches, one microbatch's forward and backward on one stage
take t = F + B (B the full backward, W its weight-gradient half; F : B : W = 1 : 2 : 1). The
idle time per step, in units of t:
- GPipe and 1F1B: (p - 1) (Huang et al. 2019; Narayanan et al. 2021);
- interleaved 1F1B with v chunks per chip: (p - 1) / v (Narayanan et al. 2021);
- zero bubble (ZB-H1): (p - 1)(F + B - 2W) / (F + B) = (p - 1) / 3 (Qi et al. 2023);
- DualPipe: (p/2 - 1)(F&B + B - 3W) / (F + B) with F&B = F + B = 3: (p/2 - 1) * 2/3, at the
  price of two copies of each stage's weights (DeepSeek-V3 report, table 2).
Activations in flight on the busiest (first) stage, in microbatches: all m for GPipe, p for
1F1B and zero bubble, p (1 + (p - 1)/(p v)) interleaved, p + 1 for DualPipe; never more than m.
"""

from __future__ import annotations

from dataclasses import dataclass

from .layout import Layout


@dataclass(frozen=True)
class Schedule:
    """What a schedule costs: idle fraction of the step's work, microbatches held, weight copies."""

    bubble_units: float  # idle time in units of one microbatch's F + B on one stage
    in_flight: float
    weight_copies: int
    note: str

    def bubble_fraction(self, microbatches: int) -> float:
        """Idle time over useful time: bubble / (m t)."""
        return self.bubble_units / max(microbatches, 1)


def schedule_of(layout: Layout, microbatches: int) -> Schedule:
    p, m, v = layout.pp, max(microbatches, 1), max(layout.virtual_stages, 1)
    if p <= 1:
        return Schedule(0.0, 1.0, 1, "no pipeline")
    name = layout.schedule
    if name == "gpipe":
        return Schedule(p - 1.0, float(m), 1, "GPipe: all forwards, then all backwards")
    if name == "interleaved":
        held = min(p * (1 + (p - 1) / (p * v)), float(m))
        return Schedule((p - 1.0) / v, held, 1, f"interleaved 1F1B, {v} chunks per chip")
    if name == "zero-bubble":
        return Schedule((p - 1.0) / 3, float(min(p, m)), 1, "zero bubble (ZB-H1): weight gradients fill the bubble")
    if name == "dualpipe":
        return Schedule(max(p / 2 - 1.0, 0.0) * 2 / 3, float(min(p + 1, m)), 2,
                        "DualPipe: both ends feed the pipe; two copies of each stage's weights")
    return Schedule(p - 1.0, float(min(p, m)), 1, "1F1B: one forward, one backward")


def schedule_problem(layout: Layout, microbatches: int, layers: int) -> str:
    """Why this schedule cannot run these microbatches on these layers ('' when it can)."""
    p, v = layout.pp, layout.virtual_stages
    if p <= 1:
        return ""
    if p > layers:
        return f"pp={p} stages for {layers} layers"
    if layout.schedule == "interleaved" and (v < 2 or p * v > layers):
        return f"interleaved needs 2 <= v and pp x v <= layers ({p} x {v} for {layers})"
    if layout.schedule == "interleaved" and microbatches % p:
        return f"interleaved 1F1B needs microbatches ({microbatches}) to be a multiple of pp ({p})"
    if layout.schedule == "dualpipe" and (p % 2 or microbatches % 2):
        return f"DualPipe needs an even pp ({p}) and an even number of microbatches ({microbatches})"
    return ""
