"""The ops slowed by interference: an identical op runs far faster elsewhere in the capture, so
their time beyond the kernel's is what ran beside them, not their kernel (audit.optable.identical)."""

from __future__ import annotations

from html import escape

from ...costmodel import units as qty
from ..model.interference import beside_summary
from ..model.record import OpRecord
from ..model.report import ReportModel
from ..text import md_table, md_text, more
from ._base import RenderOptions

MAX_ROWS = 10  # markdown rows; the JSON, CSV and HTML have all
TERMINAL_ROWS = 5
INTRO = ("slowed by interference, not by their kernel: an identical op (the same computation on the same shapes) "
         "runs far faster elsewhere in this capture, beyond the run-to-run noise; not flagged")


def _per_run(o: OpRecord) -> float | None:
    return o.measured_s / o.occurrences if o.measured_s is not None and o.occurrences else None


def _facts(o: OpRecord, names: bool = True) -> tuple[str, str, str]:
    """(per run against the kernel, the fastest instance, what ran beside it: `names` the ops)."""
    same = o.identical
    if same is None:
        return qty.seconds(_per_run(o)), "-", "-"
    kernel = same.kernel_key.split("/", 1)[-1]
    ratio = f"{qty.seconds(_per_run(o))} per run, {qty.ratio(same.ratio)} (threshold {qty.ratio(same.threshold)})"
    fastest = f"{qty.seconds(same.kernel_s)} ({kernel} on {same.kernel_device})"
    beside = beside_summary(same.beside, names) if same.beside is not None else "not in the exported window"
    return ratio, fastest, beside


def terminal(report: ReportModel, opts: RenderOptions) -> list[str] | None:
    ops = report.interference
    if not ops:
        return None
    lines = [f"{len(ops)} op(s) {INTRO}:"]
    shown = min(opts.top, TERMINAL_ROWS)
    for o in ops[:shown]:
        ratio, fastest, beside = _facts(o, names=False)
        lines.append(f"  {o.name} ({o.module}): {ratio} against its fastest identical {fastest}; "
                     f"{qty.seconds(o.interference_s)} beyond the kernel's time; beside it {beside}")
    return lines + more(shown, len(ops), "in the JSON, CSV and HTML reports")


def markdown(report: ReportModel, _: RenderOptions) -> list[str] | None:
    ops = report.interference
    if not ops:
        return None
    rows = [[str(n), md_text(o.name), md_text(o.module, 40), *(md_text(x, 160) for x in _facts(o, names=False)),
             qty.seconds(o.interference_s)]
            for n, o in enumerate(ops[:MAX_ROWS], 1)]
    header = ["#", "Op", "Module", "Measured vs fastest identical", "Fastest identical", "Beside it",
              "Beyond the kernel"]
    return (["### Slowed by interference", "", f"{len(ops)} op(s) {INTRO}.", ""] + md_table(header, rows)
            + more(MAX_ROWS, len(ops)))


def html(report: ReportModel, _: RenderOptions) -> str | None:
    ops = report.interference
    if not ops:
        return None
    rows = "".join(
        f'<tr data-key="{escape(o.key)}"><td><code>{escape(o.name)}</code></td><td>{escape(o.module)}</td>'
        + "".join(f'<td class="prose">{escape(x)}</td>' for x in _facts(o))
        + f'<td class="num">{escape(qty.seconds(o.interference_s))}</td></tr>' for o in ops)
    return (f'<p class="note">{len(ops)} op(s) {escape(INTRO)}. Their time beyond the kernel\'s is what ran '
            "beside them: ops of other devices or streams in the exported window [trace].</p>"
            '<div class="scroll"><table id="interference-table" class="data"><thead><tr><th>Op</th><th>Module</th>'
            "<th>Measured vs fastest identical</th><th>Fastest identical</th><th>Beside it</th>"
            f'<th class="num">Beyond the kernel</th></tr></thead><tbody>{rows}</tbody></table></div>')
