"""The inspect and explain tools' documents, picked from the report the CLI's `--json` writes.

The rows come from the report's own records through the declared columns
(`reports.model.columns`): the same values, units and origins the terminal, CSV and HTML show.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base.errors import UsageError
from ..reports.json_report import clean
from ..reports.model.columns import COLUMNS, for_report
from ..optable.record import OpRecord
from ..reports.model.report import PartName
from ..reports.sections.ops import top_columns, top_ops
from .reports import Held

JSON = dict[str, Any]
HARDWARE_FACTS = ("name", "kind", "vendor", "source", "identified_by", "topology")
"""What the replies say of the chip; its every figure is the hardware tool's `show`."""
PASSED_THROUGH: tuple[PartName, ...] = ("findings",)
"""Report parts every inspect reply carries when the analysis attached them."""


def inspect_doc(held: Held, rows: int, offset: int, op: str | None, parts: Sequence[str]) -> JSON:
    """The inspect tool's reply: summary, warnings, findings, flagged and top ops, one op's record, parts."""
    model = held.report.model
    doc = held.doc
    listed = top_ops(model, offset + rows)[offset:]
    columns = top_columns(model)
    return {
        "chip": model.hardware.get("name"), "hardware": hardware_facts(doc), "source": doc["source"],
        "summary": doc["summary"], "warnings": doc["warnings"], "flagged": doc["flagged"][:rows],
        **{name: doc.get(name) for name in PASSED_THROUGH},
        "top_ops": [{"key": o.key, **{c.key: clean(c.value(o)) for c in columns}} for o in listed],
        "top_ops_page": {"offset": offset, "shown": len(listed), "total": len(model.timed_ops)},
        "op": None if op is None else find_op(model.ops, op).to_json(),
        "parts": {name: doc[name] for name in parts if name in doc},
    }


def explain_doc(held: Held, op: str) -> JSON:
    """Every figure of one op with where it comes from, its verdict, the reasons and the suggestion."""
    model = held.report.model
    record = find_op(model.ops, op)
    figures = []
    for column in for_report(tuple(COLUMNS.values()), model.predicted):
        value = column.value(record)
        if value is None or value == "" or column.key in ("reasons", "flops_source", "bytes_source"):
            continue
        figures.append({"key": column.key, "label": column.label, "value": clean(value), "unit": column.unit,
                        "text": column.text(record), "source": _source(record, column.key, column.origin),
                        "meaning": column.title})
    return {"key": record.key, "name": record.name, "module": record.module, "verdict": record.verdict,
            "figures": figures, "reasons": list(record.reasons), "suggestion": record.suggestion,
            "lower_bound": record.lower_bound, "achievable_source": record.achievable_source,
            "hardware": hardware_facts(held.doc)}


def hardware_facts(doc: JSON) -> JSON:
    hardware = doc.get("hardware") or {}
    return {k: hardware[k] for k in HARDWARE_FACTS if k in hardware}


def _source(record: OpRecord, key: str, origin: str) -> str:
    """Where the figure comes from: its column's origin, or for FLOPs and bytes what gave them."""
    if key == "flops":
        return record.provenance.flops
    if key == "bytes":
        return record.provenance.bytes
    return origin


def find_op(ops: Sequence[OpRecord], wanted: str) -> OpRecord:
    """The op with this key (`program/name`, as `key` in every row), or the one op of this name."""
    for record in ops:
        if record.key == wanted:
            return record
    named = [record for record in ops if record.name == wanted]
    if len(named) == 1:
        return named[0]
    if named:
        keys = ", ".join(r.key for r in named[:5])
        raise UsageError(f"{len(named)} ops are named {wanted!r}; give one key: {keys}")
    raise UsageError(f"no op {wanted!r} in this report", hint="give a key from top_ops or flagged")
