"""The ops themselves: the top ops by time in text, the roofline chart and the full table in HTML."""

from __future__ import annotations

from collections import Counter
from html import escape

from ...costmodel import units as qty

from ..model.columns import TABLE_COLUMNS, Column, columns, for_report
from ...optable.record import JUDGED, OpRecord
from ..model.report import ReportModel
from ..svg import above_roof, roofline_svg
from ..text import clip, md_table, md_text
from ._base import RenderOptions, shared_modules
from ...base.options import DEFAULTS

TOP_COLUMNS = columns("name", "module", "category", "devices", "occurrences", "self_s", "share", "expected_s",
                      "efficiency", "achievable_s", "achievable_efficiency", "bound_by", "verdict")
"""The top-ops list of the terminal and markdown summaries (measured ones dropped in a prediction)."""
MARKDOWN_TOP = DEFAULTS.markdown_ops
_TERMINAL_WIDTH = {"name": 36, "module": 17, "program_id": 10, "category": 18, "devices": 7, "occurrences": 6, "bound_by": 10,
                   "verdict": 12, "efficiency": 17, "achievable_efficiency": 19}


def top_ops(report: ReportModel, n: int) -> list[OpRecord]:
    """The `n` ops with the most time: measured self time, or expected time in a prediction."""
    ops = report.timed_ops
    if report.predicted:
        ops = sorted(ops, key=lambda o: -(o.expected_s or 0.0))
    return ops[:n]


def listed_ops(report: ReportModel, n: int) -> tuple[list[OpRecord], str]:
    """The top ops the text lists, the judged ones (measured against what can show them slow) first,
    and a line on the not-judged ops left out of the list (waits, markers): their time is not their kernels'."""
    if report.predicted:
        return top_ops(report, n), ""
    timed = report.timed_ops
    judged = [o for o in timed if o.verdict in JUDGED]
    if len(judged) == len(timed) or not judged:
        return timed[:n], ""
    others = [o for o in timed if o.verdict not in JUDGED and o.self_s]
    total = sum(o.self_s or 0.0 for o in timed)
    left = sum(o.self_s or 0.0 for o in others)
    why = Counter(o.verdict for o in others).most_common(1)[0][0] if others else ""
    note = (f"{qty.count(len(others))} op(s) that are {why} or unmodeled take {qty.seconds(left)} "
            f"({qty.percent(left / total) if total else qty.UNKNOWN}) of the self time: left out of this list; "
            "the warnings say why, the HTML and JSON list them") if others else ""
    return judged[:n], note


def _width(c: Column) -> int:
    return _TERMINAL_WIDTH.get(c.key, 10)


def top_columns(report: ReportModel) -> tuple[Column, ...]:
    """The top-ops columns, with the program where several programs share a module name."""
    cols = for_report(TOP_COLUMNS, report.predicted)
    if not shared_modules(report):
        return cols
    at = next(i for i, c in enumerate(cols) if c.key == "module") + 1
    return cols[:at] + columns("program_id") + cols[at:]


def terminal(report: ReportModel, opts: RenderOptions) -> list[str]:
    cols = top_columns(report)
    ops, note = listed_ops(report, opts.top)
    what = "expected time" if report.predicted else "self time per device"

    def cell(c: Column, text: str) -> str:
        w = _width(c)
        return f"{clip(text, w):<{w}}" if c.unit == "text" else f"{text:>{w}}"

    head = " ".join(cell(c, c.label) for c in cols)
    lines = [f"top {len(ops)} ops by {what}:", head, "-" * len(head)]
    lines += [" ".join(cell(c, c.text(o)) for c in cols).rstrip() for o in ops]
    return lines + ([note] if note else [])


def markdown(report: ReportModel, _: RenderOptions) -> list[str]:
    cols = top_columns(report)
    ops, note = listed_ops(report, MARKDOWN_TOP)
    if not ops:
        return []
    what = "expected time" if report.predicted else "measured self time per device"
    rows = [[md_text(c.text(o), 60) for c in cols] for o in ops]
    return ([f"### Top {len(ops)} ops by {what}", ""] + md_table([c.label for c in cols], rows)
            + (["", md_text(note, 300) + "."] if note else []))


def roofline_html(report: ReportModel, _: RenderOptions) -> str:
    chart, omitted = roofline_svg(report)
    what = "predicted FLOP/s (FLOPs / expected time)" if report.predicted else "achieved FLOP/s"
    note = (f'<p class="note" id="roofline-omitted" data-omitted="{omitted}">{omitted} op(s) are not on the chart: '
            "they have no FLOPs or no time (data movement, collectives, unmeasured).</p>") if omitted else ""
    note += _above_note(report)
    legend = "".join(f'<li><span class="sw k-{k}"></span>{k}</li>'
                     for k in ("compute", "memory", "collective", "latency", "unknown"))
    return (f'<p class="note">Each point is one op: x is its arithmetic intensity, y its {escape(what)}; '
            "area is proportional to its time, colour is what bounds it, a red ring marks a flagged op. "
            "Hover a point for details; click it to find the op in the table.</p>"
            f'<div class="chart-wrap">{chart}<div id="tip" class="tip" hidden></div></div>'
            f'<ul class="legend">{legend}</ul>' + note)


def _above_note(report: ReportModel) -> str:
    """The ops drawn above a roof no kernel beats, and why: each one's reason, the largest first."""
    above = [o for o in report.timed_ops if above_roof(o)]
    if not above:
        return ""
    why = "".join(f"<li><code>{escape(o.name)}</code>: {escape(next((r for r in o.reasons if 'above its roofline' in r), ''))}"
                  "</li>" for o in above[:5])
    return (f'<div class="note" id="roofline-above"><p>{len(above)} op(s) ran faster than their roofline, a bound '
            "no kernel beats, and are drawn above it with a dashed ring: a cache held their data, or a ceiling "
            f"reads low for them.</p><ul>{why}</ul></div>")


def table_html(report: ReportModel, _: RenderOptions) -> str:
    """The op table's controls and header; the page's script fills the rows from the embedded data."""
    cols = for_report(TABLE_COLUMNS, report.predicted)
    head = "".join(f'<th data-col="{n}" class="{"text" if c.unit == "text" else "num"}" title="{escape(c.title)}" '
                   f'aria-sort="none"><button type="button">{escape(c.label)}</button></th>'
                   for n, c in enumerate(cols))
    bounds = "".join(f'<option value="{b}">{b}</option>'
                     for b in ("compute", "memory", "collective", "latency", "unknown"))
    return (
        '<div class="controls">'
        '<input id="op-filter" type="search" placeholder="Filter by op, module, framework op or source" '
        'aria-label="Filter ops">'
        f'<select id="bound-filter" aria-label="Bound"><option value="">any bound</option>{bounds}</select>'
        '<label><input id="flagged-only" type="checkbox"> flagged only</label>'
        f'<span id="op-count" class="count">{len(report.ops)} ops</span></div>'
        f'<div class="scroll"><table id="ops-table" class="data sortable"><thead><tr>{head}</tr></thead>'
        '<tbody></tbody></table></div>'
        '<button id="show-all" type="button" hidden>Show all rows</button>'
        '<noscript><p class="note">The op table needs JavaScript; the JSON and CSV reports have every op.</p>'
        "</noscript>")
