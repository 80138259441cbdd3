"""The step diagnosis across a diff: findings that appear in the head or are gone from it, paired by
cause and program (a new cause is a regression with a name; a cause gone is what a fix removed)."""

from __future__ import annotations

from ..reports.model.diff import FindingChanges
from ..reports.model.findings import Finding, ranked
from ..reports.model.report import ReportModel


def finding_changes(base: ReportModel, head: ReportModel) -> FindingChanges:
    before = {(f.cause, f.program): f for f in _findings(base)}
    after = {(f.cause, f.program): f for f in _findings(head)}
    return FindingChanges(appeared=tuple(ranked(f for k, f in after.items() if k not in before)),
                          disappeared=tuple(ranked(f for k, f in before.items() if k not in after)))


def _findings(report: ReportModel) -> list[Finding]:
    return [Finding.from_json(f) for f in report.part("findings") or []]
