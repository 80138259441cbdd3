"""The report every output renders: one typed `ReportModel`, JSON (`audit.report/v1`) only at the edge.

The analysis builds a report in one place (`audit.orchestration.assemble`); anything a
command adds afterwards goes through `ReportModel.attach` (a named optional part) or
`ReportModel.warn`, which return a new report, so no code patches a report in place. The
optional parts and who attaches them:

| part | attached by | what |
|---|---|---|
| `hosts`, `pod` | the pipeline, for two or more hosts | per-host step times; pod analyses |
| `plan_vs_profile` | the pipeline, for a workload that states its model config | napkin plan vs model vs trace |
| `xla`, `memory`, `devices` | `audit run --target` | XLA's estimate and the gap to ours; memory fit; the slice's devices |
| `cpu_comparison` | `audit run --target --compare-cpu` | measured on this CPU beside predicted on the target |
| `runs`, `repeat` | `audit run --repeat N` | every run's step times; which run the report shows |
| `run_source` | `audit run --repeat N`, `audit diff` | which file a run's report came from |
| `matching` | the pipeline, for measured GPU profiles | measured time matched to HLO ops, and the largest other ranges |
| `programs` | assemble, for a capture of several programs run one per step | each program's measured, expected and achievable time per execution |
| `command_buffers` | the pipeline, for measured GPU profiles with CUDA graphs | the ops each command buffer ran, priced (`reports.buffer_contents`) |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, get_args, overload

from ..costmodel.records import BOUNDS, Bound
from ..costmodel.table.overlap import StepOverlap
from ..costmodel.table.record import CollectiveRow, OpRecord

if TYPE_CHECKING:
    import pandas as pd

SCHEMA = "audit.report/v1"
PartName = Literal["hosts", "pod", "plan_vs_profile", "xla", "memory", "devices", "cpu_comparison", "runs",
                   "repeat", "run_source", "matching", "programs", "command_buffers"]
PARTS: tuple[PartName, ...] = get_args(PartName)
ListPart = Literal["hosts", "devices", "runs", "programs", "command_buffers"]  # the parts that are lists of rows
JSON = dict[str, Any]
PartValue = list[JSON] | JSON | str
"""A part is a list of JSON rows (hosts, devices, runs), a JSON object, or a path (run_source)."""
_PART_TYPES: dict[str, type] = {"hosts": list, "devices": list, "runs": list, "run_source": str, "programs": list,
                                 "command_buffers": list,
                                 **{name: dict for name in ("pod", "plan_vs_profile", "xla", "memory",
                                                            "cpu_comparison", "repeat", "matching")}}


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
    # [trace] ops slowed by what ran beside them (costmodel.table.identical), and their self time beyond
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


@dataclass(frozen=True, eq=False)  # frames do not compare as one truth value
class DeviceSteps:
    """What the trace-viewer export draws, as the trace recorded it [trace]: one representative
    step on every device, or, for a host whose steps are not one repeated program (`capture`), the
    capture window of every device, at most `cap` events each. In memory only; the JSON report keeps
    the one-strip `timeline`."""

    events: pd.DataFrame  # host, device, program_id, op, start_ps, dur_ps, occurrences (the trace's clock)
    windows: pd.DataFrame  # host, device, step, start_ps, end_ps: the window on each device (step -1: capture)
    device_names: Mapping[tuple[str, int], str]  # (host, device) -> the device's name in the trace
    capture: Mapping[str, Mapping[int, int]] = field(default_factory=dict)  # host -> device -> events left out
    cap: int | None = None  # events per device the export keeps
    steps: pd.DataFrame | None = None  # host, device, step, start_ps, end_ps: the steps of the capture hosts


@dataclass(frozen=True)
class ReportModel:
    """An analysed profile or a prediction, ready for every output format."""

    tool: Mapping[str, str]
    source: Mapping[str, Any]  # kind: run | xplane | hlo | aot, paths, workload, command, config...
    hardware: Mapping[str, Any]  # the chip's ceilings with their sources, and the peaks that priced the ops
    summary: Summary
    steps: Sequence[Mapping[str, Any]]  # {index, time_s, per_device_s[, per_host_s]}
    ops: Sequence[OpRecord]
    collectives: Sequence[CollectiveRow]
    timeline: Sequence[Mapping[str, Any]]  # one representative step per device class
    warnings: tuple[str, ...] = ()
    parts: Mapping[PartName, PartValue] = field(default_factory=dict)
    device_steps: DeviceSteps | None = field(default=None, compare=False)  # measured from a profile; not in the JSON

    @property
    def predicted(self) -> bool:
        return self.summary.predicted

    @property
    def flagged(self) -> list[OpRecord]:
        """Flagged ops, most wasted time first."""
        return sorted((o for o in self.ops if o.flagged), key=lambda o: -(o.wasted_s or 0.0))

    @property
    def interference(self) -> list[OpRecord]:
        """Ops slowed by what ran beside them, most time beyond their kernel's first."""
        return sorted((o for o in self.ops if o.verdict == "interference"), key=lambda o: -(o.interference_s or 0.0))

    @property
    def timed_ops(self) -> list[OpRecord]:
        """Ops whose own time counts (containers left out), in report order."""
        return [o for o in self.ops if not o.container]

    @overload
    def part(self, name: ListPart) -> list[JSON] | None: ...
    @overload
    def part(self, name: Literal["pod", "plan_vs_profile", "xla", "memory", "cpu_comparison", "repeat",
                                 "matching"]) -> JSON | None: ...
    @overload
    def part(self, name: Literal["run_source"]) -> str | None: ...

    def part(self, name: PartName) -> PartValue | None:
        """An optional part, or None when the report has none (or a report read back holds it mistyped)."""
        value = self.parts.get(name)
        return value if isinstance(value, _PART_TYPES[name]) else None

    @overload
    def attach(self, name: ListPart, value: list[JSON]) -> ReportModel: ...
    @overload
    def attach(self, name: Literal["pod", "plan_vs_profile", "xla", "memory", "cpu_comparison", "repeat",
                                   "matching"], value: JSON) -> ReportModel: ...
    @overload
    def attach(self, name: Literal["run_source"], value: str) -> ReportModel: ...

    def attach(self, name: PartName, value: PartValue) -> ReportModel:
        """This report with an optional part (see the module docstring for who attaches what)."""
        if name not in PARTS:
            raise ValueError(f"unknown report part {name!r}")
        if not isinstance(value, _PART_TYPES[name]):
            raise TypeError(f"report part {name!r} is a {_PART_TYPES[name].__name__}, not {type(value).__name__}")
        return replace(self, parts={**self.parts, name: value})

    def warn(self, text: str) -> ReportModel:
        """This report with one more warning."""
        return replace(self, warnings=(*self.warnings, text))

    def to_json(self) -> JSON:
        """Schema `audit.report/v1`."""
        summary = self.summary.to_json()
        xla = self.parts.get("xla")
        if isinstance(xla, Mapping):
            summary["xla_optimal_s"] = xla.get("optimal_seconds")
        return {
            "schema": SCHEMA, "tool": dict(self.tool), "source": dict(self.source), "hardware": dict(self.hardware),
            "summary": summary, "steps": [dict(s) for s in self.steps], "ops": [o.to_json() for o in self.ops],
            "flagged": [{"key": o.key, "name": o.name, "module": o.module, "wasted_s": o.wasted_s,
                         "efficiency": o.roofline_fraction, "reasons": list(o.reasons), "suggestion": o.suggestion}
                        for o in self.flagged],
            "collectives": [c.to_json() for c in self.collectives], "timeline": [dict(t) for t in self.timeline],
            "warnings": list(self.warnings), **{str(k): v for k, v in self.parts.items()},
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ReportModel:
        """A JSON report read back (fields a partial report lacks take neutral defaults)."""
        return cls(
            tool=dict(doc.get("tool") or {}), source=dict(doc.get("source") or {}),
            hardware=dict(doc.get("hardware") or {}), summary=Summary.from_json(doc.get("summary") or {}),
            steps=list(doc.get("steps") or []), ops=[OpRecord.from_json(o) for o in doc.get("ops") or []],
            collectives=[CollectiveRow.from_json(c) for c in doc.get("collectives") or [] if isinstance(c, Mapping)],
            timeline=[t for t in doc.get("timeline") or [] if isinstance(t, Mapping)],
            warnings=tuple(doc.get("warnings") or ()),
            parts={name: doc[name] for name in PARTS if name in doc},
        )
