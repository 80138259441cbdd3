"""The report's answer in one line, first in every format: the time per step and how close the
judged ops come to what good kernels reach (the achievable time, the ceiling the flags use), then
what follows from it. The details below it say how each figure was found."""

from __future__ import annotations

from ...costmodel import units as qty
from ...base.options import DEFAULTS
from ..model.report import ReportModel
from .judged import judged_any, none_judged
from .programs import executions


def answer(report: ReportModel) -> str:
    """One line: `74.8 ms per step, 97.7% of what good kernels reach: nothing to fix in the kernels`."""
    s = report.summary
    if report.predicted:
        tag = "model; before optimization: an estimate of a program that does not run as priced" \
            if report.source.get("before_optimization") else "model"
        if s.programs:
            return (f"predicted, not measured: {qty.count(s.programs)} programs, one execution of each "
                    f"{qty.seconds(s.expected_s)} in all [{tag}]; none is summed into a step")
        step = s.step_time_s.median if s.step_time_s.median is not None else s.expected_s
        return f"predicted, not measured: {qty.seconds(step)} per step [{tag}]"
    if s.programs:
        what = f"{qty.count(s.programs)} programs run {qty.count(executions(report))} times"
    else:
        what = f"{qty.seconds(s.step_time_s.median)} per step"
    if not judged_any(report) or not qty.known(s.achievable_fraction):
        return f"{what}: {none_judged(report)}"
    return f"{what}, {qty.percent(s.achievable_fraction)} of what good kernels reach: {_so(report)}"


def _so(report: ReportModel) -> str:
    """What the reader should take from the fraction: the flags' cost, or where the time went instead."""
    s = report.summary
    flagged = report.flagged
    if flagged:
        cost = (f" lose {qty.seconds(s.wasted_step_s)} per step" if qty.known(s.wasted_step_s) and not s.programs
                else f" lose {qty.seconds(sum(o.wasted_s or 0.0 for o in flagged))}")
        return f"{qty.count(len(flagged))} flagged op(s){cost} beyond their achievable time"
    fraction = s.achievable_fraction or 0.0
    if fraction >= DEFAULTS.good_kernels:
        return "nothing to fix in the kernels"
    slowed = sum(1 for o in report.timed_ops if o.verdict == "interference")
    if slowed:
        return (f"no op flagged; {qty.count(slowed)} op(s) slowed by what ran beside them, not by their kernels "
                "(see Slowed by interference)")
    return "no op is far enough from it to be flagged; the shortfall is spread over many ops"
