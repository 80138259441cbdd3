"""The collectives: what each moves, over which links, predicted against measured."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from ...costmodel import units as qty
from ...optable.record import CollectiveRow
from ..model.report import ReportModel
from ..text import clip, md_table, md_text, more
from ._base import RenderOptions
from ...base.options import DEFAULTS

MAX_COLLECTIVES = DEFAULTS.markdown_collectives
TERMINAL_ROWS = DEFAULTS.terminal_collectives
MAX_STATIC_ROWS = DEFAULTS.html_collectives


def _bandwidth(c: CollectiveRow) -> str:
    text = f"{qty.bytes_per_s(c.achieved_bytes_per_s)} / {qty.bytes_per_s(c.peak_bytes_per_s)}"
    if c.achieved_bytes_per_s is not None and c.peak_bytes_per_s:
        text += f" ({qty.percent(c.achieved_bytes_per_s / c.peak_bytes_per_s)})"
    return text


def _kind(c: CollectiveRow) -> str:
    """The collective, and the fusion computation that carries it when XLA fused it."""
    return f"{c.kind} (fused: {c.fused})" if c.fused else c.kind


# (header, numeric, cell, measured only)
_COLUMNS: tuple[tuple[str, bool, Callable[[CollectiveRow], str], bool], ...] = (
    ("Collective", False, lambda c: c.name, False),
    ("Kind", False, _kind, False),
    ("Bytes", True, lambda c: qty.nbytes(c.bytes), False),
    ("Group", True, lambda c: qty.count(c.group_size), False),
    ("Axes", False, lambda c: ", ".join(c.axes) or qty.UNKNOWN, False),
    ("Hops", True, lambda c: qty.count(c.hops), False),
    ("Expected", True, lambda c: qty.seconds(c.expected_s), False),
    ("Exposed (schedule)", True, lambda c: qty.seconds(c.exposed_s), False),
    ("Window compute", True, lambda c: qty.seconds(c.window_compute_s), False),
    ("Measured", True, lambda c: qty.seconds(c.measured_s), True),
    ("Achieved / peak bandwidth", True, _bandwidth, True),
    # None: the trace cannot bound its window (nsys thunk ranges have no -done event).
    ("Overlapped", False, lambda c: "unknown" if c.overlapped is None else qty.format_as(c.overlapped, "bool"), True),
)
_TEXT = ("Collective", "Kind", "Bytes", "Group", "Expected", "Exposed (schedule)", "Measured",
         "Achieved / peak bandwidth", "Overlapped")


def _columns(report: ReportModel, names: tuple[str, ...] | None = None,
             ) -> list[tuple[str, bool, Callable[[CollectiveRow], str], bool]]:
    return [c for c in _COLUMNS if not (report.predicted and c[3]) and (names is None or c[0] in names)]


def terminal(report: ReportModel, opts: RenderOptions) -> list[str] | None:
    rows = report.collectives
    if not rows:
        return None
    measured = "" if report.predicted else " and measured [trace]"
    lines = [f"{len(rows)} collective(s) per execution, expected [model]{measured}:"]
    shown = min(opts.top, TERMINAL_ROWS)
    for c in rows[:shown]:
        cells = [f"{label} {get(c)}" for label, _, get, _ in _columns(report, _TEXT[2:])]
        lines.append(f"  {clip(c.name, 40)} ({_kind(c)}): " + ", ".join(cells))
    return lines + [x for x in more(shown, len(rows), "in the JSON, CSV and HTML reports") if x]


def markdown(report: ReportModel, _: RenderOptions) -> list[str] | None:
    rows = report.collectives
    if not rows:
        return None
    cols = _columns(report, _TEXT)
    body = [[md_text(get(c), 60) for _, _, get, _ in cols] for c in rows[:MAX_COLLECTIVES]]
    return ["### Collectives", ""] + md_table([label for label, *_ in cols], body) + \
        more(MAX_COLLECTIVES, len(rows))


def html(report: ReportModel, _: RenderOptions) -> str | None:
    rows = report.collectives
    if not rows:
        return None
    cols = _columns(report)
    head = "".join(f'<th class="{"num" if num else "text"}">{escape(label)}</th>' for label, num, _, _ in cols)
    body = "".join("<tr>" + "".join(f'<td class="{"num" if num else "text"}">{escape(get(c))}</td>'
                                    for _, num, get, _ in cols) + "</tr>" for c in rows[:MAX_STATIC_ROWS])
    note = (f'<p class="note">Showing {MAX_STATIC_ROWS} of {len(rows)} collectives; the JSON report has all.</p>'
            if len(rows) > MAX_STATIC_ROWS else "")
    return (f'<div class="scroll short"><table id="collectives-table" class="data"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>{note}")
