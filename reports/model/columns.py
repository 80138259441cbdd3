"""The per-op table's columns, declared once: name, header, unit and where the value comes from.

CSV, the HTML table, the terminal and markdown summaries pick their columns from here
by key and format every cell by its unit (costmodel.units), so a column means the same
thing in every output. The JSON report writes every field of `OpRecord` (record.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from ...costmodel.units import Unit, format_as
from ...optable.record import OpRecord

ColumnOrigin = Literal["hlo", "trace", "model", "verdict"]
"""hlo: what the program says; trace: measured; model: the cost model; verdict: derived from both."""


@dataclass(frozen=True)
class Column:
    """One column of the op table."""

    key: str
    label: str
    unit: Unit
    origin: ColumnOrigin
    title: str
    get: Callable[[OpRecord], object]
    measured: bool = False  # meaningless in a predicted (ahead-of-time) report

    def value(self, op: OpRecord) -> object:
        return self.get(op)

    def text(self, op: OpRecord) -> str:
        return format_as(self.get(op), self.unit)


def _field(key: str) -> Callable[[OpRecord], object]:
    return lambda op: getattr(op, key)


def _c(key: str, label: str, unit: Unit, origin: ColumnOrigin, title: str, *, measured: bool = False,
       get: Callable[[OpRecord], object] | None = None) -> Column:
    return Column(key, label, unit, origin, title, get or _field(key), measured)


_ALL = (
    _c("program_id", "Program", "text", "hlo", "XLA program id", get=lambda op: str(op.program_id)),
    _c("module", "Module", "text", "hlo", "HLO module (program)"),
    _c("name", "Op", "text", "hlo", "HLO instruction name"),
    _c("opcode", "Opcode", "text", "hlo", "HLO opcode or fusion kind"),
    _c("category", "Category", "text", "hlo", "Kind of op (trace category, else from the HLO)"),
    _c("framework_op", "Framework op", "text", "hlo", "JAX operation that produced this op"),
    _c("source", "Source", "text", "hlo", "Python source location"),
    _c("devices", "Devices", "count", "trace", "Devices that ran the op"),
    _c("occurrences", "Runs", "count", "trace", "Executions per device in the analysed steps (the mean over the devices that ran it)"),
    _c("measured_s", "Measured", "s", "trace", "Measured time per device, summed over occurrences (s)", measured=True),
    _c("measured_s_max", "Slowest device", "s", "trace", "Measured time of the slowest device (s)", measured=True),
    _c("self_s", "Self", "s", "trace", "Measured time minus nested ops, per device (s)", measured=True),
    _c("flops", "FLOPs", "FLOP", "model", "FLOPs per device, summed over occurrences"),
    _c("bytes", "Bytes", "B", "model", "Bytes read and written per device, summed over occurrences"),
    _c("comm_bytes", "Communicated", "B", "model", "Bytes a collective moves per device, summed over occurrences"),
    _c("dtype", "Dtype", "text", "hlo", "Element type that prices the op's FLOPs"),
    _c("compute_s", "Compute", "s", "model", "FLOPs / peak (s)"),
    _c("memory_s", "Memory time", "s", "model", "Bytes / the judging memory level's bandwidth (s)"),
    _c("comm_s", "Comm", "s", "model", "Collective time on its placement (s)"),
    _c("expected_s", "Expected", "s", "model", "Roofline time per device from the cost model (s)"),
    _c("achievable_s", "Achievable", "s", "model",
       "Achievable time per device: what good kernels take on this chip (s)"),
    _c("exposed_s", "Exposed", "s", "model", "Time not hidden behind compute in the schedule walk (s)",
       get=lambda op: op.overlap.exposed_s if op.overlap is not None else None),
    _c("hidden_s", "Hidden", "s", "model", "Time hidden behind compute in the schedule walk (s)",
       get=lambda op: op.overlap.hidden_s if op.overlap is not None else None),
    _c("bound_by", "Bound", "text", "model", "What the cost model says limits this op"),
    _c("memory_level", "Memory", "text", "model",
       "Memory level whose bandwidth judged this op: the smallest that holds its bytes"),
    _c("efficiency", "Roofline fraction", "fraction", "verdict", "Expected over measured time", measured=True,
       get=lambda op: op.roofline_fraction),
    _c("achievable_efficiency", "Achievable fraction", "fraction", "verdict",
       "Achievable over measured time: the verdict is judged on it", measured=True,
       get=lambda op: op.achievable_fraction),
    _c("wasted_s", "Wasted", "s", "verdict", "Self time beyond the achievable time (s)", measured=True),
    _c("share", "Share", "fraction", "trace", "Share of measured op time", measured=True),
    _c("intensity", "Intensity", "FLOP/B", "model", "Arithmetic intensity, FLOPs per byte"),
    _c("achieved_flops_per_s", "Achieved", "FLOP/s", "verdict", "Achieved FLOP/s (FLOPs / measured time)",
       measured=True),
    _c("achieved_bytes_per_s", "Bandwidth", "B/s", "verdict", "Achieved bytes/s (bytes / measured time)",
       measured=True),
    _c("verdict", "Verdict", "text", "verdict",
       "flagged, ok, interference, not judged, bound only, unknown or not measured"),
    _c("interference_s", "Interference", "s", "verdict",
       "Self time beyond what its identical ops take at their fastest: what ran beside it (s)", measured=True),
    _c("identical_ops", "Identical ops", "count", "trace",
       "Ops running the same computation on the same shapes, this one included",
       get=lambda op: op.identical.ops if op.identical is not None else None, measured=True),
    _c("kernel_s", "Fastest identical", "s", "trace",
       "Per run: the fastest instance of its identical ops, what the kernel itself does (s)",
       get=lambda op: op.identical.kernel_s if op.identical is not None else None, measured=True),
    _c("identical_ratio", "Vs fastest identical", "ratio", "trace",
       "Its time per run over the fastest identical instance's",
       get=lambda op: op.identical.ratio if op.identical is not None else None, measured=True),
    _c("flagged", "Flag", "bool", "verdict", "Flagged: far from its achievable time"),
    _c("achievable_source", "Achievable from", "text", "model", "The figures that set the achievable time"),
    _c("flops_source", "FLOPs from", "text", "verdict", "Where the FLOPs came from: model, trace, xla or unknown",
       get=lambda op: op.provenance.flops),
    _c("bytes_source", "Bytes from", "text", "verdict", "Where the bytes came from: model, trace, xla or unknown",
       get=lambda op: op.provenance.bytes),
    _c("reasons", "Why", "text", "verdict", "Why the op got its verdict", get=lambda op: "; ".join(op.reasons)),
)
COLUMNS: dict[str, Column] = {c.key: c for c in _ALL}


def columns(*keys: str) -> tuple[Column, ...]:
    """The declared columns with these keys, in this order."""
    return tuple(COLUMNS[k] for k in keys)


CSV_COLUMNS = columns(
    "program_id", "module", "name", "opcode", "category", "framework_op", "source", "devices", "occurrences",
    "measured_s", "measured_s_max", "self_s", "flops", "bytes", "comm_bytes", "dtype", "compute_s", "memory_s",
    "comm_s", "expected_s", "exposed_s", "hidden_s", "bound_by", "memory_level", "efficiency", "flagged",
    "flops_source", "bytes_source", "reasons", "achievable_s", "achievable_efficiency", "achievable_source",
    "verdict", "interference_s", "identical_ops", "kernel_s", "identical_ratio")
"""Every column of the CSV, in its order (headers are the keys)."""
TABLE_COLUMNS = columns(
    "name", "module", "opcode", "bound_by", "memory_level", "measured_s", "expected_s", "efficiency",
    "achievable_s", "achievable_efficiency", "wasted_s", "interference_s",
    "share", "flops", "bytes", "intensity", "achieved_flops_per_s", "achieved_bytes_per_s", "occurrences",
    "framework_op", "source", "verdict", "flagged")
"""The HTML op table's columns."""


def for_report(cols: tuple[Column, ...], predicted: bool) -> tuple[Column, ...]:
    """The columns that mean something in this report: measured ones go for a prediction."""
    return tuple(c for c in cols if not (predicted and c.measured))
