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
| `command_buffers` | the pipeline, for measured GPU profiles with CUDA graphs | the ops each command buffer ran, priced (`reports.model.buffer_contents`) |
| `findings` | the step diagnosis | the step's losses, ranked by the step time each costs (`reports.model.findings`) |
| `waste` | the program waste detectors | findings only the program shows (HLO evidence), as `Finding` rows |
| `program_memory` | the buffer-assignment reader | each program's peak heap, parameters, live-out, temporaries and largest buffers |
| `step_diagnosis` | the step diagnosis | per program, the waterfall roofline -> achievable -> measured step and its bars |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, get_args, overload

from ...optable.record import CollectiveRow, OpRecord
from .summary import JSON, Summary

if TYPE_CHECKING:
    import pandas as pd

SCHEMA = "audit.report/v1"
PartName = Literal["hosts", "pod", "plan_vs_profile", "xla", "memory", "devices", "cpu_comparison", "runs",
                   "repeat", "run_source", "matching", "programs", "command_buffers", "findings", "waste",
                   "program_memory", "step_diagnosis"]
PARTS: tuple[PartName, ...] = get_args(PartName)
ListPart = Literal["hosts", "devices", "runs", "programs", "command_buffers", "findings", "waste",
                   "program_memory"]  # the parts that are lists of rows
PartValue = list[JSON] | JSON | str
"""A part is a list of JSON rows (hosts, devices, runs), a JSON object, or a path (run_source)."""
_PART_TYPES: dict[str, type] = {"hosts": list, "devices": list, "runs": list, "run_source": str, "programs": list,
                                 "command_buffers": list, "findings": list, "waste": list, "program_memory": list,
                                 **{name: dict for name in ("pod", "plan_vs_profile", "xla", "memory",
                                                            "cpu_comparison", "repeat", "matching",
                                                            "step_diagnosis")}}


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
                                 "matching", "step_diagnosis"]) -> JSON | None: ...
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
                                   "matching", "step_diagnosis"], value: JSON) -> ReportModel: ...
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
