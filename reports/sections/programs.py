"""A capture of several programs run one per step: each program's measured time per execution
[trace] beside its expected and achievable time per execution [model]. No step repeats in such a
capture, so this table, not a mean over the steps, is what each program should take."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ...costmodel import units as qty
from ..model.report import ReportModel
from ..text import clip, md_table, md_text, more
from ._base import RenderOptions
from ...base.options import DEFAULTS

MARKDOWN_TOP = DEFAULTS.markdown_programs
_HEADER = ("Program", "Module", "Largest op", "Runs", "Measured (median run)", "Op time per run", "Expected per run",
           "Achievable per run", "Flagged ops")
_WIDTH = (10, 20, 34, 5, 21, 15, 16, 18, 11)
_TEXT = 3  # the columns of text, left-aligned


def rows(report: ReportModel) -> list[Mapping[str, Any]]:
    """The programs part's rows (empty unless the capture is of several programs)."""
    return [r for r in report.part("programs") or [] if isinstance(r, Mapping)]


def executions(report: ReportModel) -> int:
    """Every program's executions: the steps, and the runs of programs the trace ties to no launch."""
    return sum(int(r.get("executions") or 0) for r in rows(report))


def intro(report: ReportModel) -> str:
    s = report.summary
    if report.predicted:
        return (f"{qty.count(s.programs)} programs compiled, not run: each one's expected and achievable time per "
                "execution [model], seconds per device; no step runs them all, so none is summed")
    return (f"{qty.count(s.programs)} programs, one execution per step: per execution, the measured time "
            "[trace] beside the expected and achievable time [model], seconds per device")


def _columns(report: ReportModel) -> list[int]:
    """The columns shown: a prediction has no measured ones (Runs, Measured, Op time)."""
    return [0, 1, 2, 6, 7, 8] if report.predicted else list(range(len(_HEADER)))


def _untied(found: list[Mapping[str, Any]]) -> list[str]:
    """The note on programs whose executions have no wall time (a dash in the measured column)."""
    n = sum(1 for r in found if r.get("measured_s") is None)
    if not n:
        return []
    return [f"{n} program(s) show no measured run ({qty.UNKNOWN}): the trace ties none of their kernels to a launch, "
            "so their runs have no span; their op time per run is measured and their runs counted from their ops'"]


def _expected(row: Mapping[str, Any]) -> object:
    """The expected time per run, with asynchronous work overlapped where the schedule says how."""
    return row.get("expected_step_s") if row.get("expected_step_s") is not None else row.get("expected_s")


def _cells(row: Mapping[str, Any]) -> list[str]:
    return [str(row.get("program_id")), str(row.get("module") or ""), str(row.get("largest_op") or ""),
            qty.count(row.get("executions")),
            qty.seconds(row.get("measured_s")), qty.seconds(row.get("op_time_s")), qty.seconds(_expected(row)),
            qty.seconds(row.get("achievable_s")), qty.count(row.get("flagged_ops"))]


def _pick(values: list[Any], report: ReportModel) -> list[Any]:
    return [values[i] for i in _columns(report)]


def _notes(report: ReportModel, found: list[Mapping[str, Any]]) -> list[str]:
    return [] if report.predicted else _untied(found)


def terminal(report: ReportModel, opts: RenderOptions) -> list[str] | None:
    found = rows(report)
    if not found:
        return None
    header, width = _pick(list(_HEADER), report), _pick(list(_WIDTH), report)
    line = "  ".join(f"{h:<{w}}" if i < _TEXT else f"{h:>{w}}" for i, (h, w) in enumerate(zip(header, width)))
    out = [intro(report) + ":", line, "-" * len(line)]
    out += ["  ".join(f"{clip(c, w):<{w}}" if i < _TEXT else f"{c:>{w}}" for i, (c, w) in
                      enumerate(zip(_pick(_cells(r), report), width))).rstrip() for r in found[:opts.top]]
    out += [x for x in more(opts.top, len(found), "programs in the JSON report (programs)") if x]
    return out + _notes(report, found)


def markdown(report: ReportModel, _: RenderOptions) -> list[str] | None:
    found = rows(report)
    if not found:
        return None
    table = md_table(_pick(list(_HEADER), report),
                     [[md_text(c, 60) for c in _pick(_cells(r), report)] for r in found[:MARKDOWN_TOP]])
    notes = [md_text(n, 300) + "." for n in _notes(report, found)]
    return (["### Programs", "", md_text(intro(report), 300) + ".", ""] + table + more(MARKDOWN_TOP, len(found))
            + (["", *notes] if notes else []))


def html(report: ReportModel, _: RenderOptions) -> str | None:
    found = rows(report)
    if not found:
        return None
    head = "".join(f'<th class="{"text" if i < _TEXT else "num"}">{escape(h)}</th>'
                   for i, h in enumerate(_pick(list(_HEADER), report)))
    body = "".join("<tr>" + "".join(f'<td class="{"text" if i < _TEXT else "num"}">{escape(c)}</td>'
                                    for i, c in enumerate(_pick(_cells(r), report))) + "</tr>" for r in found)
    notes = "".join(f'<p class="note">{escape(n)}.</p>' for n in _notes(report, found))
    return (f'<p class="note">{escape(intro(report))}.</p>'
            f'<table class="pod" id="programs"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}')
