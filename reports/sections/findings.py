"""The step diagnosis: the findings, ranked by the step time each costs, and the waterfall from the
roofline step to the measured step (`audit.analyses.step_diagnosis`)."""

from __future__ import annotations

from html import escape
from typing import Any

from ...costmodel import units as qty
from ...base.options import DEFAULTS
from ..model.findings import Finding, ranked
from ..model.report import ReportModel
from ..text import md_table, md_text
from ..waterfall_svg import waterfall_svg
from ._base import RenderOptions


def findings_of(report: ReportModel) -> list[Finding]:
    """The report's findings, largest cost to the step first."""
    return ranked(Finding.from_json(f) for f in report.part("findings") or [])


def _cost(f: Finding) -> str:
    share = f" ({qty.percent(f.share)} of the step)" if f.share is not None else ""
    return f"{qty.seconds(f.time_per_step_s)} per step{share} [{f.origin}]"


def headline(report: ReportModel) -> str | None:
    """The largest finding in one line: the verdict's first line."""
    found = findings_of(report)
    return f"largest cost to the step: {found[0].title}; {_cost(found[0])}" if found else None


def terminal(report: ReportModel, _: RenderOptions) -> list[str] | None:
    found = findings_of(report)
    if not found:
        return None
    lines = ["findings, by the step time each costs:"]
    for n, f in enumerate(found[:DEFAULTS.findings_top], 1):
        lines.append(f"  {n}. {f.title}: {_cost(f)}")
        if f.evidence:
            lines.append(f"     evidence: {f.evidence[0]}")
    if len(found) > DEFAULTS.findings_top:
        lines.append(f"  ...and {len(found) - DEFAULTS.findings_top} more in the JSON and HTML reports")
    return lines


def markdown(report: ReportModel, _: RenderOptions) -> list[str] | None:
    found = findings_of(report)
    if not found:
        return None
    rows = [[str(n), md_text(f.title, 240), qty.seconds(f.time_per_step_s),
             qty.percent(f.share) if f.share is not None else "unknown", f.origin,
             md_text("; ".join(f.evidence[:2]), 240), md_text(f.action, 200)]
            for n, f in enumerate(found[:DEFAULTS.findings_top], 1)]
    return ["### Findings", ""] + md_table(["#", "Finding", "Per step", "Share", "From", "Evidence", "What to do"],
                                            rows)


def html(report: ReportModel, _: RenderOptions) -> str | None:
    found = findings_of(report)
    diagnosis: dict[str, Any] = report.part("step_diagnosis") or {}
    if not found and not diagnosis:
        return None
    pictures = "".join(f"<figure>{svg}<figcaption>{escape(str(row.get('program', '')))}: roofline step [model] "
                       "-> achievable step [model] -> each cause -> measured step [trace]: the mean step per "
                       "device, of which the findings' shares are</figcaption></figure>"
                       for row in diagnosis.get("programs", []) if (svg := waterfall_svg(row)))
    rows = "".join(
        f"<tr><td>{n}</td><td>{escape(f.title)}<div class=\"flag-meta\">{escape('; '.join(f.evidence[:3]))}</div>"
        f"</td><td class=\"num\">{escape(qty.seconds(f.time_per_step_s))}</td><td class=\"num\">"
        f"{escape(qty.percent(f.share) if f.share is not None else 'unknown')}</td><td>{escape(f.origin)}</td>"
        f"<td>{escape(f.action)}</td></tr>" for n, f in enumerate(found, 1))
    table = ('<table class="mini findings"><thead><tr><th>#</th><th>Finding</th><th class="num">per step</th>'
             f'<th class="num">share</th><th>from</th><th>what to do</th></tr></thead><tbody>{rows}</tbody></table>'
             if rows else "")
    return table + pictures
