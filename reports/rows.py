"""What the reports read from an op row, and the op table's columns.

Reports render, they never compute costs: this module only picks fields that
the analysis already wrote, choosing predicted or measured ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..costmodel.records import BOUNDS
from . import quantities as qty

__all__ = ["BOUNDS", "Column", "op_columns", "plot_point", "op_time", "is_predicted"]


@dataclass(frozen=True)
class Column:
    """One column of the op table: report field, header, and how the page formats it."""

    key: str
    label: str
    fmt: str  # text | time | pct | flop | bytes | flops | bps | fpb | int | bool
    measured: bool = False  # meaningless for predicted (ahead-of-time) reports
    title: str = ""


_COLUMNS = (
    Column("name", "Op", "text", title="HLO instruction name"),
    Column("module", "Module", "text", title="HLO module (program)"),
    Column("opcode", "Opcode", "text", title="HLO opcode or fusion kind"),
    Column("bound_by", "Bound", "text", title="What the cost model says limits this op"),
    Column("memory_level", "Memory", "text",
           title="Memory level whose bandwidth judged this op: the smallest that holds its bytes"),
    Column("measured_s", "Measured", "time", True, "Measured time per device, summed over occurrences (s)"),
    Column("expected_s", "Expected", "time", title="Roofline time per device from the cost model (s)"),
    Column("efficiency", "Roofline", "pct", True, "Expected over measured time"),
    Column("wasted_s", "Wasted", "time", True, "Measured minus expected time (s)"),
    Column("share", "Share", "pct", True, "Share of measured op time"),
    Column("flops", "FLOPs", "flop", title="FLOPs per device, summed over occurrences"),
    Column("bytes", "Bytes", "bytes", title="Bytes read and written per device, summed over occurrences"),
    Column("intensity", "Intensity", "fpb", title="Arithmetic intensity, FLOPs per byte"),
    Column("achieved_flops_per_s", "Achieved", "flops", True, "Achieved FLOP/s (FLOPs / measured time)"),
    Column("achieved_bytes_per_s", "Bandwidth", "bps", True, "Achieved bytes/s (bytes / measured time)"),
    Column("occurrences", "Runs", "int", title="Executions per device in the analysed steps"),
    Column("framework_op", "Framework op", "text", title="JAX operation that produced this op"),
    Column("source", "Source", "text", title="Python source location"),
    Column("flagged", "Flag", "bool", title="Flagged: far from its roofline"),
)


def is_predicted(report: dict) -> bool:
    """Ahead-of-time reports carry predictions only; they show no measured columns."""
    return bool((report.get("summary") or {}).get("predicted"))


def op_columns(predicted: bool) -> tuple[Column, ...]:
    """The op table's columns; measured ones are dropped for predicted reports."""
    return tuple(c for c in _COLUMNS if not (predicted and c.measured))


def op_time(op: dict, predicted: bool) -> float | None:
    """The op's time as the report states it: measured, or expected when predicted."""
    value = op.get("expected_s") if predicted else op.get("measured_s")
    return float(value) if qty.known(value) else None


def _intensity(op: dict) -> float | None:
    value = op.get("intensity")
    if qty.known(value):
        return float(value)
    f, b = op.get("flops"), op.get("bytes")
    if qty.known(f) and qty.known(b) and float(b) > 0:
        return float(f) / float(b)
    return None


def plot_point(op: dict, predicted: bool) -> tuple[float, float, float] | None:
    """(intensity FLOP/B, FLOP/s, time s) for the roofline chart, or None if it has no place there.

    Measured reports use the achieved rate the analysis wrote; predicted ones
    use FLOPs over expected time, which lies on the roof by construction.
    """
    x = _intensity(op)
    t = op_time(op, predicted)
    if x is None or x <= 0 or t is None or t <= 0:
        return None
    if predicted:
        f = op.get("flops")
        y = float(f) / t if qty.known(f) else None
    else:
        rate = op.get("achieved_flops_per_s")
        y = float(rate) if qty.known(rate) else None
    if y is None or y <= 0:
        return None
    return x, y, t
