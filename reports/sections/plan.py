"""The plan-vs-profile table (napkin plan, cost model, trace) and why its rows differ, for
markdown and HTML; the terminal renders the same rows in `terminal.py`."""

from __future__ import annotations

from html import escape
from typing import Callable

from . import quantities as qty

_FORMAT: dict[str, Callable[[object], str]] = {"FLOP": qty.flops, "B": qty.nbytes, "s": qty.seconds}
_HEADER = ["Per step, per device", "Plan [napkin]", "Expected [model]", "Measured [trace]"]


def _cells(row: dict) -> list[str]:
    f = _FORMAT.get(str(row.get("unit")), str)
    return [str(row.get("quantity", "")), f(row.get("plan")), f(row.get("model")),
            f(row["measured"]) if row.get("measured") is not None else qty.UNKNOWN]


def plan_markdown(report: dict, text) -> list[str]:
    """Markdown lines (`text` escapes one cell); [] when the report has no plan."""
    table = report.get("plan_vs_profile") or {}
    rows = table.get("rows") or []
    if not rows:
        return []
    lines = ["### Plan vs model vs measured", "", "| " + " | ".join(_HEADER) + " |",
             "|" + "---|" * len(_HEADER)]
    lines += ["| " + " | ".join(text(c, 60) for c in _cells(r)) + " |" for r in rows]
    for r in rows:
        if r.get("reasons"):
            lines += ["", f"Why {text(r['quantity'], 60)} differs ({text(r['gap'], 60)}):"]
            lines += [f"- {text(reason, 300)}" for reason in r["reasons"]]
    return lines


def plan_html(report: dict) -> str | None:
    table = report.get("plan_vs_profile") or {}
    rows = table.get("rows") or []
    if not rows:
        return None
    head = "".join(f"<th>{escape(h)}</th>" for h in _HEADER)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in _cells(r)) + "</tr>" for r in rows)
    why = "".join(
        f'<p class="gap"><b>Why {escape(str(r["quantity"]))} differs ({escape(str(r["gap"]))}):</b></p><ul>'
        + "".join(f"<li>{escape(reason)}</li>" for reason in r["reasons"]) + "</ul>"
        for r in rows if r.get("reasons"))
    note = f'<p class="note">{escape(table.get("note", ""))}</p>' if table.get("note") else ""
    return f'<table class="plan"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}{why}'
