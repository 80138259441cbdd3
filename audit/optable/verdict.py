"""An op measured against its ceiling: whether it is flagged (`judge`) and the reasons that say
what bounds it and what it reached (`flag_reasons`).

The cost model prices (`costmodel.roofline.expect`: the expected time and its reasons); this
module judges, putting the measured time beside that expectation.
"""

from __future__ import annotations

from ..costmodel.chips.hardware import LINK_NAMES, Hardware
from ..costmodel.costs import Expectation, OpCost
from ..costmodel.roofline import flops_peak
from ..costmodel.units import count, human, intensity as per_byte, ratio
from ..options import DEFAULTS, Thresholds


def judge(ceiling_s: float | None, measured_s: float | None, share: float,
          thresholds: Thresholds = DEFAULTS.thresholds) -> tuple[bool, float | None]:
    """(flagged, efficiency): efficiency = ceiling / measured; flagged when it is below the
    thresholds' `min_efficiency` and the op takes at least `min_share` of the time `share` is a
    fraction of.

    `ceiling_s` is the time the op is judged against: the op table passes its achievable time and
    its share of the measured op time; the book's worked examples pass a roofline time and a share
    of the step."""
    if ceiling_s is None or measured_s is None or measured_s <= 0:
        return False, None
    efficiency = ceiling_s / measured_s
    return bool(efficiency < thresholds.min_efficiency and share >= thresholds.min_share), efficiency


def flag_reasons(cost: OpCost, expectation: Expectation, measured_s: float | None,
                 hw: Hardware) -> list[str]:
    """Human reasons for an op's verdict: what bounds it, what it reached against its ceiling."""
    out: list[str] = []
    bound = expectation.bound_by
    if expectation.expected_s is None or bound == "unknown":
        return _dedupe(list(expectation.reasons))
    if bound == "compute":
        out.append(_compute_reason(cost, measured_s, hw))
    elif bound == "memory":
        out.extend(_memory_reasons(cost, expectation, measured_s, hw))
    elif bound in ("collective", "latency"):
        out.append(_comm_reason(expectation, measured_s, hw))
    if measured_s and expectation.expected_s and measured_s > expectation.expected_s:
        out.append(f"took {ratio(measured_s / expectation.expected_s)} its roofline time "
                   f"({human(measured_s, 's')} measured, {human(expectation.expected_s, 's')} expected)")
    if (why := above_roof(cost, expectation, measured_s, hw)) is not None:
        out.append(why)
    return _dedupe(out + list(expectation.reasons))


BEYOND_ROOF = 1.02  # faster than the roofline by more than timer rounding: the bound needs explaining


def above_roof(cost: OpCost, expectation: Expectation, measured_s: float | None, hw: Hardware) -> str | None:
    """Why an op ran faster than its roofline, a bound no kernel beats: its data was likely resident in a
    faster level than the one that priced it, or the ceiling is a figure this op contradicts (None when
    it did not beat it)."""
    expected = expectation.expected_s
    if not measured_s or not expected or expected <= measured_s * BEYOND_ROOF:
        return None
    beat = f"above its roofline ({human(measured_s, 's')} measured, {ratio(expected / measured_s)} faster than the bound)"
    if expectation.bound_by == "memory":
        level = expectation.memory_level or hw.main_memory
        rate = expectation.peak_bytes_per_s or 0.0
        faster = [c for c in hw.caches if c.bytes_per_s.value > rate]
        holds = [c for c in faster if cost.bytes is not None and cost.bytes <= c.capacity_bytes.value]
        if holds:
            c = holds[-1]
            return (f"{beat}: its {human(cost.bytes, 'B')} were likely resident in {c.name} "
                    f"({human(c.capacity_bytes.value, 'B')} at {human(c.bytes_per_s.value, 'B/s')}), which the model's "
                    f"walk of the program did not place there, so it was priced at {level}")
        if faster:
            c = faster[-1]
            return (f"{beat}: part of its {human(cost.bytes, 'B')} was likely served from {c.name} "
                    f"({human(c.capacity_bytes.value, 'B')}), faster than the {level} bandwidth that priced it")
        return (f"{beat}: the {level} bandwidth {human(rate, 'B/s')} is below what this op reached, or it moved "
                "fewer bytes than its HLO states")
    if expectation.bound_by == "compute":
        peak = flops_peak(cost, hw)
        where = {"trace": "the trace's", "calibrated": "this machine's calibrated", "user": "your --set"}.get(
            peak.source, f"the {peak.source}")
        return (f"{beat}: {where} {cost.dtype or 'bf16'} peak {human(peak.value / max(hw.devices_per_chip, 1), 'FLOP/s')} "
                "is below what this op reached, so that figure reads low for it")
    return f"{beat}: the collective moved fewer bytes over its links than the algorithm the model prices"


def _compute_reason(cost: OpCost, measured_s: float | None, hw: Hardware) -> str:
    peak = flops_peak(cost, hw).value / max(hw.devices_per_chip, 1)
    achieved = cost.flops / measured_s if cost.flops and measured_s else None
    return (f"compute-bound: reached {human(achieved, 'FLOP/s')} of {human(peak, 'FLOP/s')} "
            f"({cost.dtype or 'bf16'} peak)")


def _memory_reasons(cost: OpCost, expectation: Expectation, measured_s: float | None, hw: Hardware) -> list[str]:
    level, bandwidth = expectation.memory_level or hw.main_memory, expectation.peak_bytes_per_s
    moved = expectation.memory_bytes if expectation.memory_bytes is not None else cost.bytes
    achieved = moved / measured_s if moved and measured_s else None
    held = ("" if level == hw.main_memory or cost.resident is not None
            else f"; its {human(cost.bytes, 'B')} working set fits in {level}")
    out = [f"memory-bound: reached {human(achieved, 'B/s')} of {human(bandwidth, 'B/s')} {level} bandwidth{held}"]
    intensity = cost.intensity
    dtype = cost.dtype or "bf16"
    ridge = hw.ridge(dtype)
    problem = describe_problem(cost)
    if intensity and problem:
        out.append(f"memory-bound: {problem[0]} does {per_byte(intensity)}, below the {per_byte(ridge)} where "
                   f"{hw.name}'s {dtype} peak binds; {problem[1]}")
    elif intensity:  # ops with no FLOPs (copies, transposes) have no intensity to speak of
        out.append(f"memory-bound: {per_byte(intensity)} is below the chip's ridge of {per_byte(ridge)}")
    return out


def describe_problem(cost: OpCost) -> tuple[str, str] | None:
    """(what the op computes, what sets its intensity), in the op's own terms: a matmul's M, N and K,
    a convolution's batch, positions, channels and kernel; None for any other op."""
    if cost.gemm is not None:
        batch, m, n, k = cost.gemm
        dims = {"M": m, "N": n, "K": k}
        smallest = min(dims, key=lambda d: dims[d])
        what = f"a matmul M={count(m)} N={count(n)} K={count(k)}" + (f" (batch {count(batch)})" if batch > 1 else "")
        return what, f"its smallest dimension, {smallest}={count(dims[smallest])}, limits it"
    if cost.convolution is not None:
        batch, spatial, cin, cout, kernel = cost.convolution
        where = "x".join(str(x) for x in spatial) or "1"
        window = "x".join(str(x) for x in kernel) or "1"
        what = (f"a convolution over batch {count(batch)} and {where} output positions, {count(cin)} -> {count(cout)} "
                f"channels, "
                f"kernel {window}")
        return what, "its channels and kernel window set how often each loaded value is reused"
    return None


def _comm_reason(expectation: Expectation, measured_s: float | None, hw: Hardware) -> str:
    comm = expectation.collective
    if comm is None:
        return f"latency-bound: the fixed per-op overhead of {hw.name} dominates"
    if expectation.bound_by == "latency":
        return (f"latency-bound: {comm.kind} of {human(comm.volume_bytes, 'B')} over {comm.hops} hops "
                f"(latency floor {human(comm.latency_s, 's')})")
    achieved = comm.bytes_moved / measured_s if measured_s else None
    link = (hw.interconnect.scale_out_name if comm.link == "dcn"
            else LINK_NAMES.get(comm.link, "host memory" if comm.link == "memory" else comm.link))
    return (f"{comm.kind} reached {human(achieved, 'B/s')} of {human(comm.bandwidth_bytes_per_s, 'B/s')} "
            f"({link}, {comm.group_size} devices)")


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))
