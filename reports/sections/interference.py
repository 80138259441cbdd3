"""The ops slowed by interference: an identical op runs far faster elsewhere in the capture, so
their time beyond the kernel's is what ran beside them, not their kernel (audit.optable.identical)."""

from __future__ import annotations

from html import escape

from ...costmodel import units as qty
from ...optable.interference import Beside, beside_summary
from ...optable.record import OpRecord
from ..model.report import ReportModel
from ..text import md_table, md_text, more
from ._base import RenderOptions
from ...base.options import DEFAULTS

MAX_ROWS = DEFAULTS.markdown_beside
TERMINAL_ROWS = DEFAULTS.terminal_beside
INTRO = ("slowed by interference, not by their kernel: an identical op (the same computation on the same shapes) "
         "runs far faster elsewhere in this capture, beyond the run-to-run noise; not flagged")


def _per_run(o: OpRecord) -> float | None:
    return o.measured_s / o.occurrences if o.measured_s is not None and o.occurrences else None


def _cells(o: OpRecord) -> tuple[str, str, str, str, str]:
    """(per run, times the fastest identical, the fastest identical: time, op and device, what computed and
    waited beside it against beside the fastest, beyond the kernel): one short row per op."""
    same = o.identical
    beyond = qty.seconds(o.interference_s)
    if same is None:
        return qty.seconds(_per_run(o)), "-", "-", "-", beyond
    kernel = same.kernel_key.split("/", 1)[-1]
    fastest = f"{qty.seconds(same.kernel_s)} ({kernel} on {same.kernel_device})"
    return (qty.seconds(_per_run(o)), f"{qty.ratio(same.ratio)} (threshold {qty.ratio(same.threshold)})", fastest,
            _beside(same.beside), beyond)


def _beside(b: Beside | None) -> str:
    """Ops computing + in collectives at a time beside it, and beside the fastest instance: `4.1 + 4.3 (vs 0 + 6.0)`."""
    if b is None:
        return "not in the exported window"
    text = f"{qty.figure(b.concurrency - b.collective_concurrency)} + {qty.figure(b.collective_concurrency)}"
    if b.kernel_concurrency is not None and b.kernel_collective_concurrency is not None:
        text += (f" (vs {qty.figure(b.kernel_concurrency - b.kernel_collective_concurrency)} + "
                 f"{qty.figure(b.kernel_collective_concurrency)})")
    return f"{text} in {b.window}"


_HEADER = ("Op", "Per run", "vs fastest identical", "Fastest identical", "Beside it: computing + in collectives",
           "Beyond the kernel")


def terminal(report: ReportModel, opts: RenderOptions) -> list[str] | None:
    ops = report.interference
    if not ops:
        return None
    shown = min(opts.top, TERMINAL_ROWS)
    head = ("op", "per run", "x fastest", "fastest", "beside (computing + collectives)", "beyond kernel")
    rows: list[tuple[str, ...]] = [head, *((o.name, *_cells(o)) for o in ops[:shown])]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]

    def line(cells: tuple[str, ...]) -> str:
        return "  " + "  ".join(f"{c:<{w}}" for c, w in zip(cells, widths)).rstrip()

    return ([f"{len(ops)} op(s) {INTRO}:"] + [line(r) for r in rows]
            + more(shown, len(ops), "in the JSON, CSV and HTML reports"))


def markdown(report: ReportModel, _: RenderOptions) -> list[str] | None:
    ops = report.interference
    if not ops:
        return None
    rows = [[md_text(o.name), *(md_text(x, 120) for x in _cells(o))] for o in ops[:MAX_ROWS]]
    return (["### Slowed by interference", "", f"{len(ops)} op(s) {INTRO}.", ""] + md_table(list(_HEADER), rows)
            + more(MAX_ROWS, len(ops)))


def html(report: ReportModel, _: RenderOptions) -> str | None:
    ops = report.interference
    if not ops:
        return None
    rows = "".join(
        f'<tr data-key="{escape(o.key)}" title="{escape(_most(o))}"><td><code>{escape(o.name)}</code></td>'
        + "".join(f'<td class="num">{escape(x)}</td>' if i in (0, 4) else f"<td>{escape(x)}</td>"
                  for i, x in enumerate(_cells(o))) + "</tr>" for o in ops)
    head = "".join(f'<th class="num">{escape(h)}</th>' if h in ("Per run", "Beyond the kernel")
                   else f"<th>{escape(h)}</th>" for h in _HEADER)
    return (f'<p class="note">{len(ops)} op(s) {escape(INTRO)}. Their time beyond the kernel\'s is what ran '
            "beside them: ops of other devices or streams in the exported window [trace]; hover a row for the "
            "ops that overlapped it most.</p>"
            f'<div class="scroll"><table id="interference-table" class="data"><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table></div>")


def _most(o: OpRecord) -> str:
    """The full account of what ran beside the op, for its row's tooltip."""
    same = o.identical
    return beside_summary(same.beside) if same is not None and same.beside is not None else ""
