"""The markdown summary for a pull-request comment (GitHub-flavoured, no HTML needed).

Tables are capped so the comment stays far below GitHub's 65,536-character
limit whatever the profile; every string from a trace is escaped so it shows
as text and cannot break a table or open a tag.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from .model.report import ReportModel
from .sections import REPORT_SECTIONS, RenderOptions, Section, header
from .sections.flagged import MAX_FLAGGED
from .text import md_text

__all__ = ["MAX_FLAGGED", "md_text", "render_markdown", "render_sections"]
D = TypeVar("D")


def render_sections(doc: D, sections: Sequence[Section[D]], opts: RenderOptions) -> list[str]:
    """Every section that has something to say, a blank line apart."""
    lines: list[str] = []
    for section in sections:
        block = section.markdown(doc, opts)
        if block:
            lines += [""] + block
    return lines


def render_markdown(report: ReportModel, *, html_path: str | None = None) -> str:
    """A compact PR-comment summary of an analysed report.

    **Arguments:**
    - `report`: the analysed report.
    - `html_path`: where the full HTML report was written, named in the last line.

    **Returns:** GitHub-flavoured markdown, at most a few thousand characters
    for any report (tables are capped).
    """
    lines = header.markdown(report) + render_sections(report, REPORT_SECTIONS, RenderOptions(html_path=html_path))
    where = f"`{html_path.replace('`', '')}`" if html_path else "not written (pass `--html FILE`)"
    lines += ["", f"Full report with the roofline chart, timeline and every op: {where}"]
    return "\n".join(lines) + "\n"
