"""HTML for the tables: collectives and the op table's shell."""

from __future__ import annotations

from html import escape

from . import quantities as qty
from .rows import is_predicted, op_columns

MAX_STATIC_ROWS = 500


def _yes_no(value: object) -> str:
    return qty.UNKNOWN if value is None else ("yes" if value else "no")


def _bandwidth(c: dict) -> str:
    achieved, peak = c.get("achieved_bytes_per_s"), c.get("peak_bytes_per_s")
    text = f"{qty.bytes_per_s(achieved)} / {qty.bytes_per_s(peak)}"
    if qty.known(achieved) and qty.known(peak) and peak > 0:
        text += f" ({qty.percent(achieved / peak)})"
    return text


_COLLECTIVE_COLUMNS = (
    ("Collective", "text", lambda c: str(c.get("name") or "")),
    ("Kind", "text", lambda c: str(c.get("kind") or "")),
    ("Bytes", "num", lambda c: qty.nbytes(c.get("bytes"))),
    ("Group", "num", lambda c: qty.count(c.get("group_size"))),
    ("Axes", "text", lambda c: ", ".join(str(a) for a in c.get("axes") or []) or qty.UNKNOWN),
    ("Hops", "num", lambda c: qty.count(c.get("hops"))),
    ("Expected", "num", lambda c: qty.seconds(c.get("expected_s"))),
    ("Exposed (schedule)", "num", lambda c: qty.seconds(c.get("exposed_s"))),
    ("Window compute", "num", lambda c: qty.seconds(c.get("window_compute_s"))),
    ("Measured", "num", lambda c: qty.seconds(c.get("measured_s"))),
    ("Achieved / peak bandwidth", "num", _bandwidth),
    ("Overlapped", "text", lambda c: _yes_no(c.get("overlapped"))),
)


def collectives_html(report: dict) -> str | None:
    rows = [c for c in report.get("collectives") or [] if isinstance(c, dict)]
    if not rows:
        return None
    predicted = is_predicted(report)
    cols = [c for c in _COLLECTIVE_COLUMNS if not (predicted and c[0] in ("Measured", "Achieved / peak bandwidth",
                                                                          "Overlapped"))]
    head = "".join(f'<th class="{kind}">{escape(label)}</th>' for label, kind, _ in cols)
    body = "".join("<tr>" + "".join(f'<td class="{kind}">{escape(get(c))}</td>' for _, kind, get in cols) + "</tr>"
                   for c in rows[:MAX_STATIC_ROWS])
    more = (f'<p class="note">Showing {MAX_STATIC_ROWS} of {len(rows)} collectives; the JSON report has all.</p>'
            if len(rows) > MAX_STATIC_ROWS else "")
    return (f'<div class="scroll short"><table id="collectives-table" class="data"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>{more}")


def op_table_html(report: dict) -> str:
    """The op table's controls and header; the page's script fills the rows from the embedded data."""
    columns = op_columns(is_predicted(report))
    head = "".join(f'<th data-col="{n}" class="{"text" if c.fmt == "text" else "num"}" title="{escape(c.title)}" '
                   f'aria-sort="none"><button type="button">{escape(c.label)}</button></th>'
                   for n, c in enumerate(columns))
    bounds = "".join(f'<option value="{b}">{b}</option>'
                     for b in ("compute", "memory", "collective", "latency", "unknown"))
    n = len(report.get("ops") or [])
    return (
        '<div class="controls">'
        '<input id="op-filter" type="search" placeholder="Filter by op, module, framework op or source" '
        'aria-label="Filter ops">'
        f'<select id="bound-filter" aria-label="Bound"><option value="">any bound</option>{bounds}</select>'
        '<label><input id="flagged-only" type="checkbox"> flagged only</label>'
        f'<span id="op-count" class="count">{n} ops</span></div>'
        f'<div class="scroll"><table id="ops-table" class="data sortable"><thead><tr>{head}</tr></thead>'
        '<tbody></tbody></table></div>'
        '<button id="show-all" type="button" hidden>Show all rows</button>'
        '<noscript><p class="note">The op table needs JavaScript; the JSON and CSV reports have every op.</p>'
        "</noscript>")
