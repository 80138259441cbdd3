"""The report's headline numbers: `Summary`, its step times and its overlapped step.

Seconds per device, summed over the analysed steps, except the figures named "step", which are
one step (the sum over the steps divided by them). `StepOverlap` (the op table's) is the step with
asynchronous work hidden behind compute, as the op table finds it from the schedule walk;
`expected_s` stays the no-overlap sum of every op's expected time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...costmodel.costs import BOUNDS, Bound
from ...optable.record import StepOverlap

JSON = dict[str, Any]
@dataclass(frozen=True)
class StepTimes:
    """Step time over the analysed steps [trace], or the predicted step [model]."""

    min: float | None
    median: float | None
    max: float | None

    def to_json(self) -> JSON:
        return {"min": self.min, "median": self.median, "max": self.max}


@dataclass(frozen=True)
class Summary:
    """The report's headline numbers: seconds per device, summed over the analysed steps, except the
    figures named "step" (`expected_step_s`, `exposed_comm_s`, `hidden_comm_s`, `hidden_s` in `overlap`,
    `expected_op_step_s`, `wasted_step_s`), which are one step: the sum over the `steps` divided by them."""

    devices: int | None
    hosts: int
    steps: int
    step_time_s: StepTimes
    idle_s: float | None
    step_source: str  # StepTraceAnnotation | module launches | predicted | ...
    measured_s: float | None  # [trace] op self time
    expected_s: float | None  # [model] sum of every op's roofline time; None when no op has one
    roofline_fraction: float | None  # judged ops: expected / measured
    time_by_bound_s: Mapping[Bound, float]
    flagged_ops: int
    unmodeled_ops: int
    lower_bound_ops: int
    not_judged_ops: int
    unmodeled_by_target: Mapping[str, int]
    predicted: bool
    overlap: StepOverlap
    platform: str | None = None  # measured reports: tpu | gpu | cpu
    unknown_trip_count_loops: tuple[JSON, ...] | None = None  # predicted reports
    unknown_trip_count_ops: int | None = None
    expected_op_step_s: float | None = None  # [model] expected_s for one step (no overlap)
    wasted_step_s: float | None = None  # flagged ops' self time beyond their achievable time, one step
    units: str = ("seconds per device, summed over the analysed steps; fields named step "
                  "(expected_step_s, expected_op_step_s, achievable_step_s, exposed_comm_s, hidden_comm_s, hidden_s, "
                  "wasted_step_s) "
                  "are one step")
    # [model] what good kernels take for every op (costmodel.achievable): summed like expected_s,
    # one step of it, and its share of the judged ops' measured time.
    achievable_s: float | None = None
    achievable_step_s: float | None = None
    achievable_fraction: float | None = None
    # [trace] ops slowed by what ran beside them (audit.optable.identical), and their self time beyond
    # what their kernel takes at its fastest, summed like measured_s.
    interference_ops: int = 0
    interference_s: float | None = None
    # Measured ops judged against their expected time (ok or flagged); None in a prediction. The
    # fractions above are theirs, and null when it is 0.
    judged_ops: int | None = None
    # A capture whose steps are executions of several different programs: how many programs. No
    # step repeats, so the figures named step are null and the `programs` part holds each
    # program's times per execution. None for the steps of one program (or a prediction).
    programs: int | None = None

    def to_json(self) -> JSON:
        out: JSON = {
            "devices": self.devices, "hosts": self.hosts, "steps": self.steps,
            "step_time_s": self.step_time_s.to_json(), "idle_s": self.idle_s, "step_source": self.step_source,
            "measured_s": self.measured_s, "expected_s": self.expected_s,
            "roofline_fraction": self.roofline_fraction, "time_by_bound_s": dict(self.time_by_bound_s),
            "flagged_ops": self.flagged_ops, "unmodeled_ops": self.unmodeled_ops,
            "lower_bound_ops": self.lower_bound_ops, "not_judged_ops": self.not_judged_ops,
            "unmodeled_by_target": dict(self.unmodeled_by_target), "predicted": self.predicted,
            "units": self.units, **self.overlap.to_json(),
            "expected_op_step_s": self.expected_op_step_s, "wasted_step_s": self.wasted_step_s,
            "time_by_bound_share": time_by_bound_share(self),
            "achievable_s": self.achievable_s, "achievable_step_s": self.achievable_step_s,
            "achievable_fraction": self.achievable_fraction,
            "interference_ops": self.interference_ops, "interference_s": self.interference_s,
            "judged_ops": self.judged_ops, "programs": self.programs,
        }
        if self.platform is not None:
            out["platform"] = self.platform
        if self.unknown_trip_count_loops is not None:
            out["unknown_trip_count_loops"] = [dict(x) for x in self.unknown_trip_count_loops]
            out["unknown_trip_count_ops"] = self.unknown_trip_count_ops
        return out

    @classmethod
    def from_json(cls, s: Mapping[str, Any]) -> Summary:
        st = s.get("step_time_s") or {}
        loops = s.get("unknown_trip_count_loops")
        return cls(
            devices=s.get("devices"), hosts=s.get("hosts") or 0, steps=s.get("steps") or 0,
            step_time_s=StepTimes(st.get("min"), st.get("median"), st.get("max")), idle_s=s.get("idle_s"),
            step_source=s.get("step_source") or "", measured_s=s.get("measured_s"),
            expected_s=s.get("expected_s"), roofline_fraction=s.get("roofline_fraction"),
            time_by_bound_s=dict(s.get("time_by_bound_s") or {}), flagged_ops=s.get("flagged_ops") or 0,
            unmodeled_ops=s.get("unmodeled_ops") or 0, lower_bound_ops=s.get("lower_bound_ops") or 0,
            not_judged_ops=s.get("not_judged_ops") or 0, unmodeled_by_target=dict(s.get("unmodeled_by_target") or {}),
            predicted=bool(s.get("predicted")),
            overlap=StepOverlap(s.get("expected_step_s"), s.get("exposed_comm_s"), s.get("hidden_comm_s"),
                                s.get("hidden_s"), ()),
            platform=s.get("platform"),
            unknown_trip_count_loops=tuple(loops) if loops is not None else None,
            unknown_trip_count_ops=s.get("unknown_trip_count_ops"),
            expected_op_step_s=s.get("expected_op_step_s"), wasted_step_s=s.get("wasted_step_s"),
            achievable_s=s.get("achievable_s"), achievable_step_s=s.get("achievable_step_s"),
            achievable_fraction=s.get("achievable_fraction"),
            interference_ops=s.get("interference_ops") or 0, interference_s=s.get("interference_s"),
            judged_ops=s.get("judged_ops"), programs=s.get("programs"),
        )


def time_by_bound_parts(s: Summary) -> tuple[list[tuple[str, float]], float]:
    """(kind, seconds) of time by bound that are not zero, then idle time, and their total: the one
    split every format shows (terminal, markdown, HTML, and the JSON's `time_by_bound_share`)."""
    parts: list[tuple[str, float]] = [(b, float(s.time_by_bound_s[b])) for b in BOUNDS
                                      if (s.time_by_bound_s.get(b) or 0.0) > 0]
    if s.idle_s:
        parts.append(("idle", float(s.idle_s)))
    return parts, sum(t for _, t in parts)


def time_by_bound_share(s: Summary) -> dict[str, float]:
    """Each kind's share of the time by bound plus idle (empty when there is no time)."""
    parts, total = time_by_bound_parts(s)
    return {kind: t / total for kind, t in parts} if total > 0 else {}
