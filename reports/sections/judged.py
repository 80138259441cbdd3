"""Which measured ops the report's fractions speak for, and when there are none, why: a fraction of
no op is not printed as a number, nor as a dash."""

from __future__ import annotations

from collections import Counter

from ...costmodel import units as qty
from ...optable.record import JUDGED
from ..model.report import ReportModel

_WHY = {  # verdict: (one op, several ops)
    "bound only": ("is bound only", "are bound only"),
    "unknown": ("has no cost model", "have no cost model"),
    "not judged": ("is not judged", "are not judged"),
}
_BOUND_ONLY = "opaque kernels: a bound on their bytes alone cannot show them slow"


def none_judged(report: ReportModel) -> str:
    """Why no measured op is judged, by the verdicts of the measured ops: "no op is judged: ..."."""
    measured = [o for o in report.timed_ops if o.measured_s is not None]
    if not measured:
        return "no op is judged: no op was measured"
    groups: Counter[tuple[str, str]] = Counter()
    for o in measured:
        if o.verdict in JUDGED:
            continue
        detail = _BOUND_ONLY if o.verdict == "bound only" else ""
        if o.verdict == "not judged" and o.reasons:
            detail = o.reasons[0].split(":")[0]
        groups[(o.verdict, detail)] += 1
    parts = []
    for (verdict, detail), n in groups.most_common():
        one, many = _WHY.get(verdict, (f"is {verdict}", f"are {verdict}"))
        parts.append(f"{n} {'op' if n == 1 else 'ops'} {one if n == 1 else many}" + (f" ({detail})" if detail else ""))
    return "no op is judged: " + ", ".join(parts)


def fraction_clause(report: ReportModel) -> str:
    """The roofline fraction of the judged ops, or that none is judged and why."""
    s = report.summary
    if qty.known(s.roofline_fraction):
        return f"roofline fraction of the judged ops {qty.percent(s.roofline_fraction)}"
    return none_judged(report)


def judged_any(report: ReportModel) -> bool:
    """Whether the measured report has judged ops (a report read back from an older file: a known fraction)."""
    s = report.summary
    if s.judged_ops is not None:
        return s.judged_ops > 0
    return qty.known(s.roofline_fraction)
