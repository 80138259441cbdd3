"""A layout's step at the rates good kernels reach, beside its roofline bound.

The bound prices compute at the datasheet peak and collectives at the link rates. Real runs
reach the chip's achievable figures (`Hardware.achievable`: measured GEMM rates, collective
bus bandwidth on the fast links and the scale-out network), so this estimate stretches each
part of the bound by peak over achievable (never below 1: the bound stays a lower bound):
compute and the bubble (idle time in units of that compute) by the GEMM ratio, each network
level's exposed time by its bandwidth ratio. An estimate, not a bound; overlap windows are
kept as the bound has them.
"""

from __future__ import annotations

from typing import Any

from ..chips.hardware import Hardware, Quantity


def _ratio(peak: Quantity | None, reached: Quantity | None) -> float | None:
    if peak is None or reached is None or reached.value <= 0:
        return None
    return max(1.0, peak.value / reached.value)


def achievable_step(hw: Hardware, dtype: str, step: dict[str, Any], fast: str, slow: str) -> dict[str, Any] | None:
    """The step's parts at the chip's achievable rates (seconds), with the figures used; None
    when the hardware states no achievable GEMM rate."""
    ach = hw.achievable
    peak = hw.peak(dtype)
    key = next((k for k, q in hw.peak_flops.items() if q is peak), dtype)
    gemm = None if ach is None else ach.matmul_flops_per_s.get(key)
    compute = _ratio(peak, gemm)
    if ach is None or gemm is None or compute is None:
        return None
    ic = hw.interconnect
    links = {fast: (ic.link_bytes_per_s, ach.collective_bytes_per_s.get("scale_up")),
             slow: (ic.dcn_bytes_per_s, ach.collective_bytes_per_s.get("scale_out"))}
    levels = {}
    used = {f"matmul_flops_per_s.{key}": gemm.to_json()}
    for level, seconds in step["exposed_comm_by_level"].items():
        peak_bw, reached = links.get(level, (None, None))
        factor = _ratio(peak_bw, reached) or 1.0
        levels[level] = seconds * factor
        if reached is not None:
            used[f"collective_bytes_per_s.{'scale_up' if level == fast else 'scale_out'}"] = reached.to_json()
    out = {"compute": step["compute"] * compute, "exposed_comm_by_level": levels,
           "bubble": step["bubble"] * compute}
    out["total"] = out["compute"] + sum(levels.values()) + out["bubble"]
    out["figures"] = used
    return out
