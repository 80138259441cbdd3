"""The plan-vs-profile table (napkin plan, cost model, trace) and why its rows differ."""

from __future__ import annotations

from html import escape
from typing import Any, Callable

from ...costmodel import units as qty
from ..model.report import ReportModel
from ..text import md_text
from ._base import RenderOptions

_FORMAT: dict[str, Callable[[object], str]] = {"FLOP": qty.flops, "B": qty.nbytes, "s": qty.seconds,
                                               "count": qty.count}
_HEADER = ["Per step, per device", "Plan [napkin]", "Expected [model]", "Measured [trace]"]


def _cells(row: dict[str, Any]) -> list[str]:
    f = _FORMAT.get(str(row.get("unit")), str)
    return [str(row.get("quantity", "")), f(row.get("plan")), f(row.get("model")),
            f(row["measured"]) if row.get("measured") is not None else qty.UNKNOWN]


def _table(report: ReportModel) -> dict[str, Any]:
    table = report.part("plan_vs_profile")
    return table if isinstance(table, dict) else {}


def terminal(report: ReportModel, _: RenderOptions) -> list[str] | None:
    """The napkin plan, the cost model and the measurement of one step, side by side."""
    table = _table(report)
    if table.get("error"):
        return [f"plan: not available ({table['error']})"]
    rows = table.get("rows") or []
    if not rows:
        return None
    lines = [f"{'per step':<32} {'plan [napkin]':>14} {'expected [model]':>17} {'measured [trace]':>17}"]
    for r in rows:
        quantity, plan, model, measured = _cells(r)
        lines.append(f"{quantity:<32} {plan:>14} {model:>17} {measured:>17}")
    for r in rows:
        if r.get("reasons"):
            lines.append(f"why {r['quantity']} differs ({r['gap']}):")
            lines += [f"  - {reason}" for reason in r["reasons"]]
    return lines


def markdown(report: ReportModel, _: RenderOptions) -> list[str] | None:
    """Markdown lines; None when the report has no plan."""
    table = _table(report)
    if table.get("error"):
        return ["### Plan vs model vs measured", "", f"Not available: {md_text(table['error'], 300)}"]
    rows = table.get("rows") or []
    if not rows:
        return None
    text = md_text
    lines = ["### Plan vs model vs measured", "", "| " + " | ".join(_HEADER) + " |",
             "|" + "---|" * len(_HEADER)]
    lines += ["| " + " | ".join(text(c, 60) for c in _cells(r)) + " |" for r in rows]
    for r in rows:
        if r.get("reasons"):
            lines += ["", f"Why {text(r['quantity'], 60)} differs ({text(r['gap'], 60)}):"]
            lines += [f"- {text(reason, 300)}" for reason in r["reasons"]]
    return lines


def html(report: ReportModel, _: RenderOptions) -> str | None:
    table = _table(report)
    if table.get("error"):
        return f'<p class="note">Not available: {escape(str(table["error"]))}</p>'
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
