"""The matching section: how much measured time the per-op table covers, and the largest
ranges it does not, with what they are. Seconds per device summed over the analysed steps [trace]."""

from __future__ import annotations

from html import escape
from typing import Any

from ...costmodel import units as qty
from ..model.report import ReportModel
from ..text import md_text
from ._base import RenderOptions
from ...base.options import DEFAULTS

TOP = DEFAULTS.unmatched_shown


def _facts(report: ReportModel) -> dict[str, Any] | None:
    part = report.part("matching")
    return part if isinstance(part, dict) and part.get("measured_s") else None


def _headline(m: dict[str, Any]) -> str:
    return (f"{qty.percent(m['matched_share'])} of measured op time matched to HLO ops with an expected time "
            f"({qty.seconds(m['matched_s'])} of {qty.seconds(m['measured_s'])} [trace]); explained "
            f"{qty.seconds(m['explained_s'])}, unmatched {qty.seconds(m['unmatched_s'])}")


def terminal(report: ReportModel, _: RenderOptions) -> list[str] | None:
    m = _facts(report)
    if m is None:
        return None
    lines = [f"matching: {_headline(m)}"]
    lines += [f"  {r['name']} ({r['module'] or '-'})  {qty.seconds(r['measured_s'])}  {r['status']}: {r['what']}"
              for r in m["largest"][:TOP]]
    return lines


def markdown(report: ReportModel, _: RenderOptions) -> list[str] | None:
    m = _facts(report)
    if m is None:
        return None
    lines = ["### Matching", "", _headline(m) + "."]
    if m["largest"]:
        lines += ["", "| range | module | measured | status | what it is |", "|---|---|---|---|---|"]
        lines += [f"| {md_text(r['name'])} | {md_text(r['module'] or '-')} | {qty.seconds(r['measured_s'])} | "
                  f"{r['status']} | {md_text(r['what'])} |" for r in m["largest"][:TOP]]
    return lines


def html(report: ReportModel, _: RenderOptions) -> str | None:
    m = _facts(report)
    if m is None:
        return None
    rows = "".join(f"<tr><td>{escape(r['name'])}</td><td>{escape(r['module'] or '-')}</td>"
                   f"<td>{escape(qty.seconds(r['measured_s']))}</td><td>{escape(r['status'])}</td>"
                   f"<td>{escape(r['what'])}</td></tr>" for r in m["largest"])
    table = ('<table class="pod"><thead><tr><th>range</th><th>module</th><th>measured</th><th>status</th>'
             f"<th>what it is</th></tr></thead><tbody>{rows}</tbody></table>") if rows else ""
    return f"<p>{escape(_headline(m))}.</p>{table}"
