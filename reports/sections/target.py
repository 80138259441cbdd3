"""`audit run --target --compare-cpu`: each framework op measured on this CPU beside its
prediction on the target chip, per step (the two compiles fuse differently, so ops match by
the framework op they come from)."""

from __future__ import annotations

from html import escape
from typing import Any

from ...costmodel import units as qty
from ..model.report import ReportModel
from ..text import clip, md_table, md_text, more
from ._base import RenderOptions
from ...base.options import DEFAULTS

MAX_ROWS = DEFAULTS.markdown_target
_HEADER = ["Framework op", "CPU measured [trace]", "Target predicted [model]"]


def _comparison(report: ReportModel) -> dict[str, Any] | None:
    cmp = report.part("cpu_comparison")
    return cmp if isinstance(cmp, dict) else None


def _unmatched(cmp: dict[str, Any]) -> str:
    return (f"unmatched: {len(cmp['cpu_only'])} framework op(s) on the CPU only, "
            f"{len(cmp['target_only'])} on the target only")


def terminal(report: ReportModel, opts: RenderOptions) -> list[str] | None:
    cmp = _comparison(report)
    if cmp is None:
        return None
    lines = [f"{'framework op':<56} {'CPU measured [trace]':>21} {'target predicted [model]':>25}"]
    lines += [f"{clip(r['framework_op'], 56):<56} {qty.seconds(r['cpu_measured_s']):>21} "
              f"{qty.seconds(r['target_expected_s']):>25}" for r in cmp["matched"][:opts.top]]
    if cmp["cpu_only"] or cmp["target_only"]:
        lines.append(_unmatched(cmp))
    return lines


def markdown(report: ReportModel, _: RenderOptions) -> list[str] | None:
    cmp = _comparison(report)
    if cmp is None:
        return None
    rows = [[md_text(r["framework_op"], 80), qty.seconds(r["cpu_measured_s"]), qty.seconds(r["target_expected_s"])]
            for r in cmp["matched"][:MAX_ROWS]]
    lines = [f"### Measured on {md_text(cmp.get('cpu_hardware') or 'this CPU')} vs predicted on the target", ""]
    lines += md_table(_HEADER, rows) + more(MAX_ROWS, len(cmp["matched"]))
    if cmp["cpu_only"] or cmp["target_only"]:
        lines += ["", _unmatched(cmp)]
    return lines


def html(report: ReportModel, _: RenderOptions) -> str | None:
    cmp = _comparison(report)
    if cmp is None:
        return None
    head = "".join(f'<th class="{"text" if i == 0 else "num"}">{escape(h)}</th>' for i, h in enumerate(_HEADER))
    body = "".join(f'<tr><td class="text">{escape(r["framework_op"])}</td>'
                   f'<td class="num">{escape(qty.seconds(r["cpu_measured_s"]))}</td>'
                   f'<td class="num">{escape(qty.seconds(r["target_expected_s"]))}</td></tr>' for r in cmp["matched"])
    note = (f'<p class="note">{escape(_unmatched(cmp))}: '
            f'{escape(", ".join(map(str, (cmp["cpu_only"] + cmp["target_only"])[:20])))}</p>'
            if cmp["cpu_only"] or cmp["target_only"] else "")
    return (f'<div class="scroll short"><table id="target-table" class="data"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>{note}")
