"""Matrix work done on padding: a matmul (or a convolution run as one) whose dimensions do not fill
the matrix unit's tiles (TPU MXU padding) or the GPU's output tiles and waves of compute units.

The cost model states this factor for each matmul (`costmodel.shape_effects`: the work done over the
useful work); here the time it costs is the op's time times the share of its work that is padding,
an estimate, for the matmuls whose compute bounds them (a matmul bound by memory or by its launch
does not pay for the padded work). Left out: tile padding of arrays in memory
(priced in each op's bytes) and padding ops (`pad`) a program asks for.
"""

from __future__ import annotations

from ...costmodel.achievable import implicit_gemm, shape_factor
from ...costmodel.units import percent
from ...parsers.hlo.model import Instruction
from ...reports.model.findings import Finding
from .program import ProgramView, Timing, evidence, finding

CAUSE = "waste:padding"


def detect(view: ProgramView, timing: Timing) -> list[Finding]:
    if view.costs is None or view.hw is None or view.hw.achievable is None:
        return []
    hw, ach = view.hw, view.hw.achievable
    rows: list[tuple[Instruction, float, str]] = []
    for comp in view.running():
        for instr in comp.instructions:
            cost = view.costs.get(instr.name)
            seconds = timing.seconds.get((view.program, instr.name), 0.0)
            if cost is None or seconds <= 0 or not (cost.gemm or cost.convolution):
                continue
            if timing.bound.get((view.program, instr.name)) != "compute":
                continue  # a matmul bound by memory or launch does not pay for its padded work
            factor, how = shape_factor(cost.gemm or implicit_gemm(cost.convolution), hw, ach)
            if how and factor > 1:
                rows.append((instr, seconds * (1 - 1 / factor), how))
    seconds = sum(r[1] for r in rows)
    if not rows or seconds <= 0:
        return []
    rows.sort(key=lambda r: -r[1])
    worst = rows[0]
    return [finding(view, timing, cause=CAUSE, seconds=seconds,
                    origin="trace+model" if timing.origin == "trace" else "model",
                    what=(f"{len(rows)} matmul{'s' if len(rows) > 1 else ''} partly computing padding "
                          f"(estimate; worst: {percent(worst[1] / max(timing.seconds.get((view.program, worst[0].name), 1e-30), 1e-30))} "
                          "of its time)"),
                    lines=evidence([r[0] for r in rows], [r[2] for r in rows[:3]]),
                    action=("Pick dimensions that are multiples of the matrix unit's tile (128 on TPU, the GPU "
                            "library's tiles of 64-256) and batch enough tiles to fill every compute unit: pad the "
                            "model dimensions once (vocabulary, heads, hidden size) rather than each matmul."))]
