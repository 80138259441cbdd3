"""The flagged ops, most wasted time first, with the rule that fired and what to try."""

from __future__ import annotations

from html import escape

from ...costmodel import units as qty
from ...optable.record import OpRecord
from ..model.report import ReportModel
from ..text import md_table, md_text, more
from ._base import RenderOptions, module_label
from .judged import judged_any, none_judged
from ...base.options import DEFAULTS

MAX_FLAGGED = DEFAULTS.markdown_flagged
FLAGGED_OPEN = DEFAULTS.html_flagged_open


def terminal(report: ReportModel, opts: RenderOptions) -> list[str] | None:
    flagged = report.flagged
    if not flagged:
        return None
    lines = [f"{len(flagged)} flagged op(s) (below the threshold of their achievable time, share above "
             "threshold):"]
    where = module_label(report)
    lines += [f"  {o.name} ({where(o)}): wasted {qty.seconds(o.wasted_s)} beyond achievable "
              f"{qty.seconds(o.achievable_s)} (roofline {qty.seconds(o.expected_s)}); " + "; ".join(o.reasons[:2])
              for o in flagged[:opts.top]]
    return lines


def markdown(report: ReportModel, _: RenderOptions) -> list[str]:
    flagged = report.flagged
    if not flagged:
        return ["### Flagged ops", "", md_text(_none_flagged(report), 600)]
    predicted = report.predicted
    header = (["#", "Op", "Module"] + ([] if predicted else ["Measured"])
              + ["Expected (roofline)", "Achievable", "Wasted", "Why", "Try"])
    where = module_label(report)
    rows = [[str(n), md_text(o.name), md_text(where(o), 60)]
            + ([] if predicted else [qty.seconds(o.measured_s)])
            + [qty.seconds(o.expected_s), qty.seconds(o.achievable_s), qty.seconds(o.wasted_s),
               md_text("; ".join(o.reasons[:2]), 140),
               md_text(o.suggestion, 240)]
            for n, o in enumerate(flagged[:MAX_FLAGGED], 1)]
    return ["### Top flagged ops", ""] + md_table(header, rows) + more(MAX_FLAGGED, len(flagged))


def _none_flagged(report: ReportModel) -> str:
    """Why no op is flagged: a prediction measures nothing, nothing was judged, or no judged op is far."""
    if report.predicted:
        return "No op was flagged: flags compare measured with expected time."
    if not judged_any(report):
        return f"No op was flagged: {none_judged(report)}."
    return ("No op was flagged: no judged op is both far from its achievable time and a large enough share "
            "of the op time.")


def _item(n: int, o: OpRecord, predicted: bool, module: str) -> str:
    reasons = "".join(f"<li>{escape(r)}</li>" for r in o.reasons)
    timing = ([] if predicted else [f"measured {qty.seconds(o.measured_s)}"]) + \
        [f"expected {qty.seconds(o.expected_s)} (roofline)", f"achievable {qty.seconds(o.achievable_s)}",
         f"{o.bound_by}-bound"]
    meta = " · ".join([module] + timing)
    return (f'<li class="flag-item" data-key="{escape(o.key)}">'
            f'<div class="flag-head"><span class="rank">{n}</span>'
            f'<code class="op-name">{escape(o.name)}</code>'
            f'<span class="wasted">{escape(qty.seconds(o.wasted_s))} wasted</span></div>'
            f'<div class="flag-meta">{escape(meta)}</div><ul class="reasons">{reasons}</ul>'
            + (f'<p class="suggestion"><strong>Try:</strong> {escape(o.suggestion)}</p>' if o.suggestion else "")
            + "</li>")


def html(report: ReportModel, _: RenderOptions) -> str:
    """The flagged ops exactly as the report orders them, the first few open."""
    flagged = report.flagged
    if not flagged:
        return f'<p class="empty">{escape(_none_flagged(report))}</p>'
    where = module_label(report)
    items = [_item(n, o, report.predicted, where(o)) for n, o in enumerate(flagged, 1)]
    out = f'<ol id="flagged-list" class="flagged">{"".join(items[:FLAGGED_OPEN])}</ol>'
    if len(items) > FLAGGED_OPEN:
        out += (f'<details class="more-flagged"><summary>{len(items) - FLAGGED_OPEN} more flagged ops</summary>'
                f'<ol class="flagged" start="{FLAGGED_OPEN + 1}">{"".join(items[FLAGGED_OPEN:])}</ol></details>')
    return out
