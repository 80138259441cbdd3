"""The data the HTML page's script reads: a compact, deterministic JSON document.

Ops are columnar rows; every string goes into one interned table (module
names, opcodes and source files repeat across thousands of ops), and numbers
keep four significant digits, which is more than the page shows. The JSON is
escaped for a `<script type="application/json">` element, so no trace string
can close the element or start markup.
"""

from __future__ import annotations

import json

from . import quantities as qty
from .rows import Column, op_columns, is_predicted

# Characters that could end the script element or start markup, and the two
# line separators that older JavaScript parsers reject inside strings.
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_TIP_FIELDS = ("category", "dtype", "devices", "measured_s_max", "comm_bytes")


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


def _cell(op: dict, col: Column, strings: _Strings) -> object:
    value = op.get(col.key)
    if col.fmt == "text":
        return strings(value if value is not None else "")
    if col.fmt == "bool":
        return 1 if value else 0
    return _number(value)


def _details(op: dict, strings: _Strings) -> list:
    """What the hover card shows beyond the table columns."""
    reasons = op.get("reasons") or []
    prov = op.get("provenance") or {}
    prov_text = ", ".join(f"{k}: {v}" for k, v in sorted(prov.items()) if v)
    return [strings("; ".join(str(r) for r in reasons)), strings(op.get("suggestion") or ""),
            strings(prov_text)] + \
        [strings(op.get(f)) if f in ("category", "dtype") else _number(op.get(f)) for f in _TIP_FIELDS]


def build_payload(report: dict) -> dict:
    """The page's data: columns, interned strings, one row per op, and the flagged keys in order."""
    predicted = is_predicted(report)
    columns = op_columns(predicted)
    strings = _Strings()
    ops = report.get("ops") or []
    rows = [[_cell(op, c, strings) for c in columns] for op in ops]
    details = [_details(op, strings) for op in ops]
    return {
        "predicted": predicted,
        "columns": [{"key": c.key, "label": c.label, "fmt": c.fmt, "title": c.title} for c in columns],
        "detail_fields": ["reasons", "suggestion", "provenance", *_TIP_FIELDS],
        "strings": strings.table,
        "rows": rows,
        "details": details,
    }


def script_json(data: object) -> str:
    """JSON safe to place verbatim inside `<script type="application/json">`."""
    text = json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
    for raw, escaped in _SCRIPT_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text
