"""The verdict of every op: joined facts in, complete `OpRecord`s out, in one pass.

An op is `flagged` when its achievable time (what good kernels take on the chip,
costmodel.achievable) is below `min_efficiency` of its measured time and it takes at least
`min_share` of the measured op time; its wasted time is its self time beyond the achievable
time. The roofline time stays `expected_s` and its roofline fraction, the lower bound; `not judged` when its
measured time is a wait (a collective between simulated CPU devices, an op that launches
nothing), an event at the timer's resolution, or it is a container; `bound only` when it is an
opaque kernel whose only bound is its bytes (a lower bound cannot show it slow); `unknown`
without an expected time; `not measured` in a prediction; else `ok`. Then identical ops are judged
together (audit.optable.identical): an op far slower than its identical instances elsewhere
is `interference`, not `flagged`.
"""

from __future__ import annotations

from functools import lru_cache
from collections.abc import Iterable, Mapping
from dataclasses import replace

import pandas as pd

from ..costmodel.achievable import AchievableTime, achievable_time
from ..costmodel.chips.hardware import Hardware
from ..costmodel.costs import Expectation, OpCost
from ..costmodel.roofline import launches_work
from ..costmodel.schedule import StepWalk, Window
from ..parsers.hlo.model import Module
from ..parsers.hlo.opcodes import CONTAINERS
from ..base.options import DEFAULTS, Thresholds
from .record import DeviceTime, OpRecord, Origin, Provenance, Spread
from .beside import EventWindow, Overlaps
from .identical import judge_identical
from ..base.timebase import PS
from .join import Joined
from .overlap import fused_work, overlap_of
from .predicted import PredictedRecords, predicted_records
from .suggest import suggest
from .verdict import Judging, decide, safe_ratio
from .waits import collective_wait, hidden_unmeasured


SIMULATED_COLLECTIVE = ("collective between simulated CPU devices: its time is a rendezvous wait for the "
                        "other devices' work on the shared cores, not communication, so it is not judged")
# Profilers stamp events in nanoseconds: an op whose runs last that long each is a marker, not a launch.
TIMER_RESOLUTION_S = 1e-9
AT_TIMER_RESOLUTION = ("measured at the timer's resolution (1 ns or less per run): the event is a marker, not "
                       "a kernel launch, so it is not judged")
WAIT_ONLY = ("launches no work of its own: its measured time is a wait (for asynchronous work or other "
             "devices), so it is not judged")


def judge_table(rows: Iterable[Joined], hw: Hardware, thresholds: Thresholds = DEFAULTS.thresholds, *,
                per_device: pd.DataFrame | None = None, walks: Mapping[int, StepWalk | None] | None = None,
                overlapped: Mapping[str, bool] | None = None, measured_on: str | None = None,
                window: EventWindow | None = None) -> list[OpRecord]:
    """Every op's record with its verdict, the largest self time (else expected time) first.

    `per_device` (measured reports) adds each op's per-device times and spread, and judges
    identical ops together (`window`: the exported events, for what ran beside them); `walks`
    (costmodel.schedule) adds how much of each asynchronous op hides behind compute;
    `overlapped` says which async collectives the trace shows other ops running beside;
    `measured_on` is the platform the trace was taken on (default: `hw`'s): a GPU's collective
    kernels wait for the other ranks, and simulated CPU devices' collectives are rendezvous, whatever
    chip the report is projected onto.
    """
    rows = list(rows)
    total_self = sum(r.self_s or 0.0 for r in rows if r.opcode not in CONTAINERS) or None
    by_key = _per_device_lists(per_device) if per_device is not None else {}
    windows = {(pid, w.start): w for pid, walk in (walks or {}).items() if walk is not None for w in walk.windows}
    ridge = _ridge(hw)
    reaches: dict[tuple[OpCost | None, Expectation | None], AchievableTime] = {}
    overlapped = overlapped or {}

    def one(r: Joined) -> OpRecord:
        return _record(r, hw, thresholds, total_self, by_key, windows, overlapped, ridge, bool(by_key),
                       measured_on or hw.kind, reaches)

    if by_key:
        records = [one(r) for r in rows]
    else:  # an op in a walk's window is judged on its own (its overlap is its own)
        predicted = PredictedRecords(one)
        records = [one(r) if (r.program_id, r.name) in windows else predicted.judged(r, overlapped.get(r.name))
                   for r in rows]
    records.sort(key=lambda o: -(o.self_s if o.self_s is not None else (o.expected_s or 0.0)))
    if not by_key:
        return records
    overlaps = Overlaps(window, {o.key for o in records if o.container},
                        {o.key for o in records if o.collective is not None or o.comm_bytes}) if window else None
    return judge_identical(records, {r.key: r.identity for r in rows}, min_efficiency=thresholds.min_efficiency,
                           overlaps=overlaps, simulated=(measured_on or hw.kind) == "cpu")


def judge_predicted(modules: Mapping[int, Module], costs: Mapping[int, Mapping[str, OpCost]],
                    expectations: Mapping[tuple[int, str], Expectation], hw: Hardware,
                    thresholds: Thresholds = DEFAULTS.thresholds, *, devices: int = 0,
                    walks: Mapping[int, StepWalk | None] | None = None) -> list[OpRecord]:
    """`judge_table` of programs compiled but not run, without a joined row per op: every costed
    op's record, each distinct op judged once (optable.predicted), the largest expected time first."""
    windows = {(pid, w.start): w for pid, walk in (walks or {}).items() if walk is not None for w in walk.windows}
    ridge = _ridge(hw)
    reaches: dict[tuple[OpCost | None, Expectation | None], AchievableTime] = {}

    def one(r: Joined) -> OpRecord:
        return _record(r, hw, thresholds, None, {}, windows, {}, ridge, False, hw.kind, reaches)

    records: list[OpRecord] = []
    for pid, module in modules.items():
        # An op in a walk's window is judged on its own (its overlap is its own).
        records += predicted_records(module, pid, costs.get(pid, {}), expectations, devices, one,
                                     alone=lambda name, pid=pid: (pid, name) in windows)  # type: ignore[misc]
    records.sort(key=lambda o: -(o.expected_s or 0.0))
    return records


def _record(r: Joined, hw: Hardware, thresholds: Thresholds, total_self: float | None,
            by_key: Mapping[tuple[int, str], tuple[DeviceTime, ...]], windows: Mapping[tuple[int, str], Window],
            overlapped: Mapping[str, bool], ridge: float | None, measured_report: bool,
            measured_on: str, reaches: dict[tuple[OpCost | None, Expectation | None], AchievableTime]) -> OpRecord:
    occ = r.occurrences
    cost, exp = r.cost, r.expectation
    container = r.opcode in CONTAINERS
    flops, bytes_, transcendentals, comm, prov = _quantities(r)
    expected = _times(exp.expected_s, occ) if exp else None
    reach = r.achievable or reaches.get((cost, exp))  # priced once per distinct cost and expectation
    if reach is None:
        reach = reaches[(cost, exp)] = achievable_time(cost, exp, hw)
    achievable = _times(reach.seconds, occ)
    share = safe_ratio(r.self_s, total_self)
    roofline_fraction = safe_ratio(expected, r.measured_s)
    bound_only = bytes_only_bound(cost, exp)
    unjudged = (r.unjudged or not_judged(cost, r.measured_s, hw, occ, measured_on=measured_on)
                if r.measured_s is not None and not container else "")
    if not unjudged and measured_report and measured_on == "gpu" and not container:
        unjudged = collective_wait(cost, by_key.get((r.program_id, r.name)))
    was_overlapped = ((overlapped.get(r.name) if r.opcode.endswith("-start") else False)
                      if cost is not None and cost.collective is not None else None)
    overlap = (overlap_of(windows.get((r.program_id, r.name)), expected, comm, occ, fused_work(cost, exp, occ))
               if not container and expected is not None else None)
    if not unjudged and r.measured_s is not None and not container:
        unjudged = hidden_unmeasured(cost, overlap, was_overlapped)
    decided = decide(Judging(measured_s=r.measured_s, occurrences=occ, container=container, unjudged=unjudged,
                             bound_only=bound_only, cost=cost, expectation=exp, expected_s=expected,
                             achievable_s=achievable, reach=reach, share=share,
                             priced_as_its_ops=r.achievable is not None, in_hlo=r.instr_found),
                     thresholds, hw)
    flagged, verdict, reasons, achievable_fraction = (decided.flagged, decided.verdict, decided.reasons,
                                                      decided.achievable_fraction)
    per_device = by_key.get((r.program_id, r.name), ()) if measured_report else None
    record = OpRecord(
        key=r.key, program_id=r.program_id, module=r.module, name=r.name, opcode=r.opcode,
        category=r.category, framework_op=r.framework_op, source=r.source, shape=r.shape,
        fingerprint=r.fingerprint, position=r.position, custom_call_target=r.custom_call_target,
        container=container, devices=r.devices, occurrences=occ, measured_s=r.measured_s,
        measured_s_max=r.measured_s_max, self_s=r.self_s,
        flops=flops, transcendentals=transcendentals, bytes=bytes_, comm_bytes=comm,
        dtype=cost.dtype if cost else "",
        compute_s=_times(exp.compute_s, occ) if exp else None,
        memory_s=_times(exp.memory_s, occ) if exp else None,
        comm_s=_times(exp.comm_s, occ) if exp else None,
        # A bound-only kernel's bytes bound its lower bound, not the kernel: what bounds it is unknown.
        expected_s=expected, bound_by=exp.bound_by if exp and not bound_only else "unknown",
        memory_level=(exp.memory_level or None) if exp else None,
        launches_work=launches_work(cost),
        peak_flops_per_s=exp.peak_flops_per_s if exp is not None and flops else None,
        lower_bound=(cost.lower_bound or None) if cost is not None else None,
        verdict=verdict, flagged=flagged, roofline_fraction=roofline_fraction, reasons=_distinct(tuple(reasons)),
        suggestion="", share=share,
        # An op not judged (a wait on other ranks, a marker, a collective hidden without a measured overlap) wastes
        # nothing of its own that we can tell.
        wasted_s=(None if achievable is None or r.measured_s is None or r.self_s is None or container or bound_only
                  or unjudged else max(r.self_s - achievable, 0.0)),
        intensity=safe_ratio(flops, bytes_), achieved_flops_per_s=safe_ratio(flops, r.measured_s),
        achieved_bytes_per_s=safe_ratio(bytes_, r.measured_s), provenance=prov,
        collective=cost.collective if cost is not None else None,
        placement=exp.collective if exp is not None and cost is not None and cost.collective is not None else None,
        # A synchronous collective never overlaps; an async one is None where the trace cannot tell
        # (no -done event bounds its window, as in nsys thunk ranges).
        overlapped=was_overlapped, overlap=overlap,
        per_device=per_device, spread=_spread(per_device) if per_device else None,
        achievable_s=achievable, achievable_fraction=achievable_fraction, achievable_source=reach.source,
    )
    return replace(record, suggestion=suggest(record, ridge, hw.kind)) if flagged else record


@lru_cache(maxsize=4096)  # most ops repeat the reasons of many others
def _distinct(reasons: tuple[str, ...]) -> tuple[str, ...]:
    """The reasons without blanks and repeats, in order."""
    return tuple(dict.fromkeys(x for x in reasons if x))


def bytes_only_bound(cost: OpCost | None, exp: Expectation | None) -> str:
    """For an opaque kernel whose only bound is its bytes at the memory roof, what that bound is
    and what is missing ("" for any other op): such a bound cannot show the kernel slow."""
    if cost is None or exp is None or not cost.lower_bound or exp.expected_s is None:
        return ""
    if exp.bound_by == "compute" and cost.flops is not None:
        return ""  # its FLOPs are stated (by the trace or its config) and bound it
    what = cost.lower_bound.split(":")[0] or "opaque kernel"
    missing = "no stated FLOPs" if cost.flops is None else "FLOPs that do not bound it"
    return (f"bound only: {what} with {missing}; its operand and result bytes at the memory roof are a lower "
            "bound, which cannot show it slow, so it is not flagged")


def not_judged(cost: OpCost | None, measured_s: float | None, hw: Hardware, occurrences: float = 1.0, *,
               measured_on: str | None = None) -> str:
    """Why a measured op's expected time cannot be compared with its measured time ("" if it can);
    `measured_on` is the platform the trace was taken on (default: `hw`'s)."""
    if measured_s is not None and measured_s <= TIMER_RESOLUTION_S * max(occurrences, 1.0):
        return AT_TIMER_RESOLUTION
    if cost is None:
        return ""
    if (measured_on or hw.kind) == "cpu" and (cost.collective is not None or cost.comm_bytes):
        return SIMULATED_COLLECTIVE
    if launches_work(cost) is False and measured_s:
        return WAIT_ONLY
    return ""


def _times(value: float | None, occurrences: float) -> float | None:
    return None if value is None else value * occurrences


def _quantities(r: Joined) -> tuple[float | None, float | None, float | None, float, Provenance]:
    """(FLOPs, bytes, transcendentals, communicated bytes) over the op's occurrences, with provenance."""
    occ, cost = r.occurrences, r.cost
    flops = bytes_ = transcendentals = None
    comm = 0.0
    prov_flops: Origin = "unknown"
    prov_bytes: Origin = "unknown"
    if cost is not None and cost.modeled:
        flops, bytes_ = _times(cost.flops, occ), _times(cost.bytes, occ)
        transcendentals = _times(cost.transcendentals, occ)
        comm = cost.comm_bytes * occ
        prov_flops = cost.provenance if flops is not None else "unknown"
        prov_bytes = cost.provenance if bytes_ is not None else "unknown"
    # The figures that priced the op are the ones shown: the HLO's where both exist (a disagreement
    # is a report warning); an opaque kernel's cost already took what the trace states where that
    # binds it (join), so a trace's 0 bytes beside a bound on 33.5 MB is not shown as 0.
    if cost is not None and cost.modeled:
        if cost.lower_bound and r.trace_flops is not None and cost.flops == r.trace_flops:
            prov_flops = "trace"
        if cost.lower_bound and r.trace_bytes is not None and cost.bytes == r.trace_bytes:
            prov_bytes = "trace"
    else:  # no cost of ours: what the trace states is all there is
        if r.trace_flops is not None:
            flops, prov_flops = r.trace_flops * occ, "trace"
        if r.trace_bytes is not None:
            bytes_, prov_bytes = r.trace_bytes * occ, "trace"
    return flops, bytes_, transcendentals, comm, Provenance(prov_flops, prov_bytes,
                                                            "measured" if r.measured_s is not None else "predicted")


def _per_device_lists(per_device: pd.DataFrame) -> dict[tuple[int, str], tuple[DeviceTime, ...]]:
    out: dict[tuple[int, str], list[DeviceTime]] = {}
    stated = "dur_min_ps" in per_device.columns and "dur_max_ps" in per_device.columns
    nothing = [None] * len(per_device)
    for host, dev, pid, op, occ, dur, self_, lo, hi in zip(
            per_device["host"], per_device["device"], per_device["program_id"], per_device["op"],
            per_device["occurrences"], per_device["dur_ps"], per_device["self_ps"],
            per_device["dur_min_ps"] if stated else nothing, per_device["dur_max_ps"] if stated else nothing):
        runs = (float(lo) * PS, float(hi) * PS) if lo is not None and hi is not None and lo == lo else (None, None)
        out.setdefault((int(pid), str(op)), []).append(
            DeviceTime(str(host), int(dev), int(occ), float(dur) * PS, float(self_) * PS, *runs))
    return {k: tuple(v) for k, v in out.items()}


def _spread(per_device: tuple[DeviceTime, ...]) -> Spread:
    """Straggler view of one op: median over devices, slowest/median, and per-host mean and max."""
    times = sorted(d.measured_s for d in per_device)
    n = len(times)
    median = times[n // 2] if n % 2 else (times[n // 2 - 1] + times[n // 2]) / 2
    hosts: dict[str, list[float]] = {}
    for d in per_device:
        hosts.setdefault(d.host, []).append(d.measured_s)
    per_host = {h: (sum(v) / len(v), max(v)) for h, v in hosts.items()} if len(hosts) > 1 else None
    return Spread(median, safe_ratio(times[-1], median), per_host)


def _ridge(hw: Hardware) -> float | None:
    try:
        return hw.ridge("bf16")
    except (ZeroDivisionError, StopIteration):
        return None
