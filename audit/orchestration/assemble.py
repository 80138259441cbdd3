"""The one place a `ReportModel` is built: judged ops in, summary, flagged list and collectives derived."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any

from .. import __version__
from ..costmodel.chips.hardware import Hardware
from ..costmodel.costs import BOUNDS, Bound
from ..optable.verdict import safe_ratio
from ..optable.record import JUDGED, OpRecord, collective_row
from ..reports.model.report import DeviceSteps, ReportModel
from ..optable.record import StepOverlap
from ..reports.model.summary import StepTimes, Summary
from .caveats import not_judged_warning, peaks_used, unmodeled_groups, unmodeled_list, unmodeled_warning


def assemble(*, ops: Sequence[OpRecord], hw: Hardware, warnings: Sequence[str], overlap: StepOverlap,
             source: Mapping[str, Any], steps: Sequence[Mapping[str, Any]] = (), step_time: StepTimes | None = None,
             timeline: Sequence[Mapping[str, Any]] = (), devices: int | None, hosts: int = 0,
             idle_s: float | None = None, step_source: str = "predicted", platform: str | None = None,
             loops: Sequence[Mapping[str, Any]] | None = None, device_steps: DeviceSteps | None = None,
             programs: Sequence[Mapping[str, Any]] | None = None) -> ReportModel:
    """A measured report (with `steps`) or a prediction (`loops` given: compiled, not run); `programs`:
    for a capture whose steps are executions of several programs, each program's times per execution."""
    predicted = loops is not None
    timed = [o for o in ops if not o.container]
    modeled = [o for o in timed if o.expected_s is not None]
    # Unknown is null: a profile none of whose ops has an expected time expects nothing known.
    expected_total = sum(o.expected_s for o in modeled if o.expected_s is not None) if modeled else None
    reachable = [o for o in timed if o.achievable_s is not None]
    achievable_total = sum(o.achievable_s for o in reachable if o.achievable_s is not None) if reachable else None
    # Judged: measured against an expected time that can show them slow (not waits, markers or
    # opaque kernels with only a bytes bound); the fractions are theirs, and unknown without any.
    judged = [o for o in timed if o.verdict in JUDGED]
    expected_judged = sum(o.expected_s for o in judged if o.expected_s is not None) if judged else None
    unmodeled = unmodeled_list(ops)
    unjudged = [o for o in timed if o.verdict == "not judged"]
    notes = list(warnings) + overlap.warnings()
    if (line := unmodeled_warning(unmodeled)) is not None:
        notes.append(line)
    if unjudged:
        notes.append(not_judged_warning(unjudged))
    # Ops are summed over the analysed steps (a prediction is one step); "step" figures are one of them,
    # and unknown where the steps are executions of different programs (no step repeats).
    per_step = None if programs else max(len(steps), 1)
    overlap = overlap.per_step(per_step) if per_step else StepOverlap(None, None, None, None, ())

    def one_step(total: float | None) -> float | None:
        return None if total is None or per_step is None else total / per_step

    expected_step = one_step(expected_total)
    if step_time is None and programs:  # a prediction of several programs: no one step, each per execution
        step_time = StepTimes(None, None, None)
    elif step_time is None:  # a prediction: the step is the overlapped one where the schedule says it
        step = overlap.expected_step_s if overlap.expected_step_s is not None else expected_total
        step_time = StepTimes(step, step, step)
    flagged = [o for o in ops if o.flagged]
    interfered = [o for o in ops if o.verdict == "interference"]
    summary = Summary(
        devices=devices, hosts=hosts, steps=len(steps), step_time_s=step_time, idle_s=idle_s,
        step_source=step_source,
        measured_s=None if predicted else sum(o.self_s or 0.0 for o in timed),
        expected_s=expected_total,
        roofline_fraction=None if predicted else safe_ratio(expected_judged,
                                                            sum(o.self_s or 0.0 for o in judged)),
        time_by_bound_s=_by_bound(timed, "expected_s" if predicted else "self_s"),
        flagged_ops=len(flagged), unmodeled_ops=len(unmodeled), judged_ops=None if predicted else len(judged),
        lower_bound_ops=sum(1 for o in unmodeled if o.expected_s is not None), not_judged_ops=sum(1 for o in ops if o.verdict == "not judged"),
        unmodeled_by_target=unmodeled_groups(unmodeled), predicted=predicted, overlap=overlap, platform=platform,
        unknown_trip_count_loops=tuple(dict(x) for x in loops) if loops is not None else None,
        unknown_trip_count_ops=sum(int(x["ops"]) for x in loops) if loops is not None else None,
        expected_op_step_s=expected_step,
        wasted_step_s=one_step(sum(o.wasted_s or 0.0 for o in flagged)) if not predicted else None,
        achievable_s=achievable_total, achievable_step_s=one_step(achievable_total),
        programs=len(programs) if programs else None,
        achievable_fraction=None if predicted else safe_ratio(
            sum(o.achievable_s or 0.0 for o in judged) if judged else None, sum(o.self_s or 0.0 for o in judged)),
        interference_ops=len(interfered),
        interference_s=None if predicted else sum(o.interference_s or 0.0 for o in interfered),
    )
    report = ReportModel(
        tool={"name": "audit", "version": __version__},
        source={"created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "jax_running": _jax_version(), **source},
        hardware={**hw.to_json(), "peaks_used": peaks_used(ops, hw)},
        summary=summary, steps=list(steps), ops=list(ops),
        collectives=[row for o in ops if (row := collective_row(o)) is not None],
        timeline=list(timeline), warnings=tuple(notes), device_steps=device_steps,
    )
    return report.attach("programs", [dict(p) for p in programs]) if programs else report


def _by_bound(ops: Sequence[OpRecord], time: str) -> dict[Bound, float]:
    """Time per device split by what bounds each op: measured self time, or expected in a prediction."""
    out: dict[Bound, float] = {b: 0.0 for b in BOUNDS}
    for o in ops:
        value = getattr(o, time)
        if value is not None:
            out[o.bound_by] += value
    return out


def _jax_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jax")
    except PackageNotFoundError:
        return None
