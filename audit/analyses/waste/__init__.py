"""Program waste: what only the program shows, each detector in its own module, each finding timed
by the ops it names (measured in a profile, expected in an HLO dump) and evidenced by their HLO
lines. `detect_waste` runs them all over every program of a report."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ...costmodel.chips.hardware import Hardware
from ...costmodel.costs import OpCost
from ...base.options import DEFAULTS, Thresholds
from ...parsers.hlo.model import Module
from ...reports.model.findings import Finding, ranked
from ...reports.model.report import ReportModel
from . import collectives, layout, loop_carry, offload, padding, precision, recompute, undonated
from .program import ProgramView, Timing

__all__ = ["DETECTORS", "detect_waste", "attach_waste"]

DETECTORS: tuple[Callable[[ProgramView, Timing], list[Finding]], ...] = (
    loop_carry.detect, undonated.detect, layout.detect, precision.detect, recompute.detect, collectives.detect,
    padding.detect, offload.detect)


def detect_waste(report: ReportModel, modules: Mapping[int, Module],
                 costs: Mapping[int, Mapping[str, OpCost]] | None = None, hw: Hardware | None = None,
                 thresholds: Thresholds = DEFAULTS.thresholds) -> list[Finding]:
    """Every detector over every program, the findings that cost at least `min_waste_share` of the
    step (of the program's op time where no step is known), largest first."""
    timing = Timing.of(report)
    found: list[Finding] = []
    for pid, module in modules.items():
        view = ProgramView(pid, module, (costs or {}).get(pid), hw)
        whole = timing.step_s or sum(s for (p, _), s in timing.seconds.items() if p == pid)
        for detect in DETECTORS:
            found += [f for f in detect(view, timing)
                      if whole and f.time_per_step_s >= thresholds.min_waste_share * whole]
    return ranked(found)


def attach_waste(report: ReportModel, modules: Mapping[int, Module],
                 costs: Mapping[int, Mapping[str, OpCost]] | None = None, hw: Hardware | None = None,
                 thresholds: Thresholds = DEFAULTS.thresholds) -> ReportModel:
    """The report with its `waste` part (an empty list where no detector fired)."""
    return report.attach("waste", [f.to_json() for f in detect_waste(report, modules, costs, hw, thresholds)])
