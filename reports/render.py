"""One interface for every output: a document, the formats it can be written in, and how.

`audit run`, `inspect` and `diff` hand a `Renderer` and the requested paths to
`audit.outputs.write_outputs`, which writes each format the same way (atomically).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from .model.report import ReportModel
from .model.diff import DiffModel
from .sections import RenderOptions


class Format(enum.Enum):
    """An output format; the value is the command-line option's name."""

    TERMINAL = "terminal"
    JSON = "json"
    CSV = "csv"
    HTML = "html"
    MARKDOWN = "markdown"
    TRACE = "trace"  # Chrome trace-event JSON for Perfetto / chrome://tracing


class Renderer(Protocol):
    """A document that can be written in some formats."""

    @property
    def formats(self) -> frozenset[Format]:
        """The formats this document can be written in."""
        ...

    def render(self, fmt: Format, opts: RenderOptions) -> str:
        """The document in `fmt` (one of `formats`)."""
        ...

    def notes(self, fmt: Format) -> list[str]:
        """What a reader of the file in `fmt` must know that the file alone may not show (warnings)."""
        ...


@dataclass(frozen=True)
class ReportRenderer:
    """An analysed profile or a prediction, in every format."""

    report: ReportModel
    formats: frozenset[Format] = frozenset(Format)

    def render(self, fmt: Format, opts: RenderOptions) -> str:
        from . import csv_report, html, json_report, markdown, terminal, trace_events

        if fmt is Format.TERMINAL:
            return terminal.render_terminal(self.report, top=opts.top)
        if fmt is Format.JSON:
            return json_report.render_json(self.report.to_json())
        if fmt is Format.CSV:
            return csv_report.render_csv(self.report)
        if fmt is Format.HTML:
            return html.render_html(self.report)
        if fmt is Format.TRACE:
            return trace_events.render_trace(self.report)
        return markdown.render_markdown(self.report, html_path=opts.html_path)

    def notes(self, fmt: Format) -> list[str]:
        from .trace_devices import capture_note

        note = capture_note(self.report) if fmt is Format.TRACE else None
        return [note] if note else []


@dataclass(frozen=True)
class DiffRenderer:
    """An `audit diff` document: every format but CSV and the trace (it has no op table or timeline of its own)."""

    diff: DiffModel
    formats: frozenset[Format] = frozenset(Format) - {Format.CSV, Format.TRACE}

    def render(self, fmt: Format, opts: RenderOptions) -> str:
        from . import diff_sections, json_report

        if fmt is Format.TERMINAL:
            return diff_sections.render_diff_terminal(self.diff, top=opts.top)
        if fmt is Format.JSON:
            return json_report.render_json(self.diff.to_json())
        if fmt is Format.HTML:
            return diff_sections.render_diff_page(self.diff)
        return diff_sections.render_diff_markdown(self.diff, top=opts.top, html_path=opts.html_path)

    def notes(self, fmt: Format) -> list[str]:
        return []
