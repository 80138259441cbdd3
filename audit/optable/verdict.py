"""An op measured against its ceiling: its verdict (`decide`, the one place the op table's verdicts
are decided: `identical` only turns a judged op into `interference`), whether it is flagged
(`judge`) and the reasons that say what bounds it and what it reached (`flag_reasons`).

The cost model prices (`costmodel.roofline.expect`: the expected time and its reasons); this
module judges, putting the measured time beside that expectation.
"""

from __future__ import annotations

import math

from dataclasses import dataclass

from ..costmodel.achievable import AchievableTime
from ..costmodel.chips.hardware import LINK_NAMES, Hardware
from ..costmodel.costs import Expectation, OpCost
from ..costmodel.roofline import flops_peak
from ..costmodel.units import count, factor, human, intensity as per_byte, ratio
from ..base.options import DEFAULTS, Thresholds
from .record import Verdict

# Ops judged on their own time: only these are compared with their identical instances.
JUDGED: tuple[Verdict, ...] = ("ok", "flagged")
# A judged op far beyond its identical instances' kernel: what ran beside it took its time (`identical`).
INTERFERENCE: Verdict = "interference"


@dataclass(frozen=True)
class Judging:
    """What an op's verdict is decided from, for all its executions (`occurrences`): its measured,
    expected (roofline) and achievable times, its share of the measured op time, why it is not
    judged ("" when it is), and what it is (a container, a bytes-only bound, priced as its ops)."""

    measured_s: float | None
    occurrences: float
    container: bool
    unjudged: str
    bound_only: str
    cost: OpCost | None
    expectation: Expectation | None
    expected_s: float | None
    achievable_s: float | None
    reach: AchievableTime
    share: float | None
    priced_as_its_ops: bool
    in_hlo: bool


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    flagged: bool
    reasons: list[str]
    achievable_fraction: float | None


def decide(op: Judging, thresholds: Thresholds, hw: Hardware) -> Decision:
    """An op's verdict, whether it is flagged, and the reasons that say why."""
    cost, exp, measured = op.cost, op.expectation, op.measured_s
    flagged, achievable_fraction = False, safe_ratio(op.achievable_s, measured)
    reasons: list[str] = []
    if op.unjudged:
        reasons = [op.unjudged] + (list(exp.reasons) if exp is not None else [])
    elif measured is not None and not op.container:
        # Judged against what good kernels reach on this chip, not against the datasheet roofline.
        flagged, achievable_fraction = judge(op.achievable_s, measured, op.share or 0.0, thresholds)
        flagged = flagged and not op.bound_only
        per_exec = measured / op.occurrences if op.occurrences else measured
        if op.bound_only and exp is not None and exp.expected_s is not None:
            reasons = [f"took {human(per_exec, 's')} per run; its bound is {human(exp.expected_s, 's')} "
                       f"({exp.memory_level or hw.main_memory} roof for its bytes)"] + list(exp.reasons)
        elif cost is not None and exp is not None:
            # An op priced as the ops it runs has no one bound to explain: its expectation says what it is.
            roofline = list(flag_reasons(cost, exp, per_exec, hw)) if not op.priced_as_its_ops else list(exp.reasons)
            reasons = roofline[:1] + achievable_reasons(op.reach, per_exec) + roofline[1:]
    elif exp is not None:
        reasons = list(exp.reasons)
    if cost is None:
        reasons.append("not in the program's HLO: no cost available" if not op.in_hlo
                       else "no cost computed for this op")
    elif not cost.modeled and cost.reason:
        reasons.append(cost.reason)
    flagged = bool(flagged and not op.container)
    verdict = _verdict(flagged, op.unjudged, op.expected_s, measured, op.container)
    if op.bound_only and verdict in ("ok", "not measured"):
        verdict = "bound only"
        reasons = [op.bound_only] + [x for x in reasons if x != op.bound_only]
    return Decision(verdict, flagged, reasons, achievable_fraction)


def _verdict(flagged: bool, unjudged: str, expected_s: float | None, measured_s: float | None,
             container: bool) -> Verdict:
    if container or unjudged:
        return "not judged"
    if expected_s is None:
        return "unknown"
    if measured_s is None:
        return "not measured"
    return "flagged" if flagged else "ok"


def safe_ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is unknown, b is not positive or the ratio is not finite."""
    if a is None or b is None or b <= 0:
        return None
    value = a / b
    return value if math.isfinite(value) else None


def achievable_reasons(reach: AchievableTime, measured_s: float | None) -> list[str]:
    """How far one execution is from what good kernels take on this chip, and the shape effects in it."""
    if reach.seconds is None or not measured_s or not reach.seconds:
        return list(reach.notes)
    ratio = measured_s / reach.seconds
    how = "at" if abs(ratio - 1) < 0.05 else factor(ratio)
    return [f"took {how} its achievable time per run ({human(measured_s, 's')} measured, {human(reach.seconds, 's')} "
            f"achievable from {reach.source})", *reach.notes]


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
