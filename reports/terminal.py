"""The terminal summary: the report's sections as plain text, for people."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ..base.options import DEFAULTS
from .model.report import ReportModel
from .sections import REPORT_SECTIONS, RenderOptions, Section, header

D = TypeVar("D")
FOOTER = "times: seconds per device summed over the analysed steps; [trace] measured, [model] expected"


def render_sections(doc: D, sections: Sequence[Section[D]], opts: RenderOptions) -> list[str]:
    """Every section that has something to say, a blank line apart."""
    lines: list[str] = []
    for section in sections:
        block = section.terminal(doc, opts)
        if block:
            lines += [""] + block if lines else block
    return lines


def render_terminal(report: ReportModel, *, top: int = DEFAULTS.top) -> str:
    """A readable summary for people (stderr or stdout)."""
    body = render_sections(report, REPORT_SECTIONS, RenderOptions(top=top))
    return "\n".join(header.terminal(report) + body + ["", FOOTER]) + "\n"
