"""What the report could not count or judge, in its own words."""

from __future__ import annotations

from html import escape

from ..model.report import ReportModel
from ..text import md_text
from ._base import RenderOptions
from ...base.options import DEFAULTS

MAX_WARNINGS = DEFAULTS.markdown_warnings


def terminal(report: ReportModel, _: RenderOptions) -> list[str] | None:
    return [f"warning: {w}" for w in report.warnings] or None


def markdown(report: ReportModel, _: RenderOptions) -> list[str] | None:
    warnings = report.warnings
    if not warnings:
        return None
    lines = ["### Warnings", ""] + [f"- {md_text(w, 240)}" for w in warnings[:MAX_WARNINGS]]
    if len(warnings) > MAX_WARNINGS:
        lines.append(f"- …and {len(warnings) - MAX_WARNINGS} more")
    return lines


def html(report: ReportModel, _: RenderOptions) -> str | None:
    if not report.warnings:
        return None
    return '<ul class="warnings">' + "".join(f"<li>{escape(w)}</li>" for w in report.warnings) + "</ul>"
