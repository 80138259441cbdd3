"""The HTML report's sections, in page order; each one appears only when the report has its data."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Callable

from . import quantities as qty
from .html_summary import flagged_html, header_html, verdict_html, warnings_html
from .diff_render import render_diff_html
from .html_tables import collectives_html, op_table_html
from .plan_render import plan_html
from .pod import pod_html
from .rows import is_predicted
from .svg import roofline_svg
from .timeline import KINDS, timeline_svg


@dataclass(frozen=True)
class Section:
    """One section: its anchor id, heading, and a renderer returning HTML or None to leave it out."""

    id: str
    title: str
    render: Callable[[dict], str | None]
    intro: str = ""
    own_heading: bool = False  # the renderer writes its own <section> and heading


def _legend(kinds: tuple[str, ...]) -> str:
    return '<ul class="legend">' + "".join(f'<li><span class="sw k-{k}"></span>{k}</li>' for k in kinds) + "</ul>"


def roofline_section(report: dict) -> str:
    chart, omitted = roofline_svg(report)
    what = "predicted FLOP/s (FLOPs / expected time)" if is_predicted(report) else "achieved FLOP/s"
    note = (f'<p class="note" id="roofline-omitted" data-omitted="{omitted}">{omitted} op(s) are not on the chart: '
            "they have no FLOPs or no time (data movement, collectives, unmeasured).</p>") if omitted else ""
    return (f'<p class="note">Each point is one op: x is its arithmetic intensity, y its {escape(what)}; '
            "area is proportional to its time, colour is what bounds it, a red ring marks a flagged op. "
            "Hover a point for details; click it to find the op in the table.</p>"
            f'<div class="chart-wrap">{chart}<div id="tip" class="tip" hidden></div></div>'
            + _legend(("compute", "memory", "collective", "latency", "unknown")) + note)


def timeline_section(report: dict) -> str | None:
    if not report.get("timeline"):
        return None
    return (timeline_svg(report) + _legend(KINDS)
            + '<p class="note">Top lane: compute and memory ops; bottom lane: collectives. '
              "Grey is idle. Hover a block for the op.</p>")


def diff_section(report: dict) -> str | None:
    diff = report.get("diff")
    return render_diff_html(diff) if isinstance(diff, dict) and diff else None


SECTIONS: tuple[Section, ...] = (
    Section("verdict", "Verdict", verdict_html),
    Section("warnings", "Warnings", warnings_html),
    Section("flagged", "Flagged ops", flagged_html,
            "The top offenders by wasted time (measured minus expected), with the rule that fired."),
    Section("roofline", "Roofline", roofline_section),
    Section("collectives", "Collectives", collectives_html),
    Section("plan", "Plan vs model vs measured", plan_html,
            "The book's closed forms for this configuration beside the cost model and the trace, "
            "with the main reasons wherever two of them differ by more than 2x."),
    Section("pod", "Pod", pod_html,
            "Across hosts: top hosts and ops, and distributions over every host (measured, from the trace)."),
    Section("timeline", "Step timeline", timeline_section,
            "One representative step per device class."),
    Section("diff", "Diff", diff_section, own_heading=True),
    Section("ops", "All ops", op_table_html,
            "Per device, summed over occurrences in the analysed steps. Click a header to sort."),
)


def _wrap(section: Section, html: str) -> str:
    if section.own_heading:
        return f'<div id="sec-{section.id}" class="embedded">{html}</div>'
    intro = f'<p class="intro">{escape(section.intro)}</p>' if section.intro else ""
    return f'<section id="sec-{section.id}"><h2>{escape(section.title)}</h2>{intro}{html}</section>'


def render_all(report: dict, sections: tuple[Section, ...] = SECTIONS) -> str:
    """Header, navigation, every section that has data, and the footer."""
    rendered = [(s, html) for s in sections if (html := s.render(report)) is not None]
    nav = "".join(f'<a href="#sec-{s.id}">{escape(s.title)}</a>' for s, _ in rendered)
    body = "".join(_wrap(s, html) for s, html in rendered)
    tool = report.get("tool") or {}
    footer = (f'<footer>{escape(str(tool.get("name", "audit")))} {escape(str(tool.get("version", "")))} · '
              f'{escape(str(report.get("schema", "audit.report/v1")))} · times in seconds per device, '
              f"GB = 10<sup>9</sup> bytes · unknown values show as {qty.UNKNOWN}</footer>")
    return f'{header_html(report)}<nav class="toc">{nav}</nav><main>{body}</main>{footer}'
