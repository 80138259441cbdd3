"""The data the HTML page's script reads: a compact, deterministic JSON document.

Ops are columnar rows; every string goes into one interned table (module
names, opcodes and source files repeat across thousands of ops), and numbers
keep four significant digits, which is more than the page shows: they sort the
table. What a cell shows is formatted here, by costmodel/units.py, as every other
format prints it (`shown`): the page's script formats no number itself. The JSON is
escaped for a `<script type="application/json">` element, so no trace string
can close the element or start markup.
"""

from __future__ import annotations

import json
from typing import Any

from ..costmodel import units as qty
from .model.columns import TABLE_COLUMNS, Column, for_report
from ..optable.record import OpRecord
from .model.report import ReportModel

# Characters that could end the script element or start markup, and the two
# line separators that older JavaScript parsers reject inside strings.
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_TIP_FIELDS = ("category", "dtype", "devices", "measured_s_max", "comm_bytes")
# How the page's script treats a column (reports/assets/report.js), by the unit it declares: text is
# sorted as text, a number by its value and shown as units.py wrote it.
_FMT = {"text": "text", "bool": "bool", "s": "num", "fraction": "num", "FLOP": "num", "FLOP/s": "num",
        "B": "num", "B/s": "num", "FLOP/B": "num", "count": "num"}


class _Strings:
    """Interns strings: each distinct string is stored once and referred to by index."""

    def __init__(self) -> None:
        self.table: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, text: object) -> int:
        s = "" if text is None else str(text)
        if s not in self._index:
            self._index[s] = len(self.table)
            self.table.append(s)
        return self._index[s]


def _number(value: object) -> float | int | None:
    if not qty.known(value):
        return None
    v = float(value)
    return int(v) if v.is_integer() and abs(v) < 2**53 else float(f"{v:.4g}")


def _cell(op: OpRecord, col: Column, strings: _Strings) -> object:
    value = col.value(op)
    if col.unit == "text":
        return strings(value if value is not None else "")
    if col.unit == "bool":
        return 1 if value else 0
    return _number(value)


def _shown(op: OpRecord, col: Column, strings: _Strings) -> int | None:
    """The text a number's cell shows, as units.py formats the column's unit."""
    return None if col.unit in ("text", "bool") else strings(qty.format_as(col.value(op), col.unit))


def _details(op: OpRecord, strings: _Strings) -> list[Any]:
    """What the hover card shows beyond the table columns."""
    prov = op.provenance.to_json()
    prov_text = ", ".join(f"{k}: {v}" for k, v in sorted(prov.items()) if v)
    return [strings("; ".join(op.reasons)), strings(op.suggestion), strings(prov_text)] + \
        [strings(getattr(op, f)) if f in ("category", "dtype") else _number(getattr(op, f)) for f in _TIP_FIELDS] + \
        [strings(qty.seconds(op.measured_s_max))]


def build_payload(report: ReportModel) -> dict[str, Any]:
    """The page's data: columns, interned strings, one row per op, and the flagged keys in order."""
    predicted = report.predicted
    columns = for_report(TABLE_COLUMNS, predicted)
    strings = _Strings()
    rows = [[_cell(op, c, strings) for c in columns] for op in report.ops]
    shown = [[_shown(op, c, strings) for c in columns] for op in report.ops]
    details = [_details(op, strings) for op in report.ops]
    return {
        "predicted": predicted,
        "columns": [{"key": c.key, "label": c.label, "fmt": _FMT[c.unit], "title": c.title} for c in columns],
        "detail_fields": ["reasons", "suggestion", "provenance", *_TIP_FIELDS, "slowest"],
        "strings": strings.table,
        "rows": rows,
        "shown": shown,
        "details": details,
    }


def script_json(data: object) -> str:
    """JSON safe to place verbatim inside `<script type="application/json">`."""
    text = json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
    for raw, escaped in _SCRIPT_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text
