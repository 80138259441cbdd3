"""Compare two sides of runs: what changed in the program (exact), what changed in time (beyond noise),
and which gates tripped. The analysis behind `audit diff` and `audit.diff`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Union

from ..costmodel.units import percent, signed
from ..reports.model.diff import CompileTimeChanges, DiffModel, Gates, MeasuredChanges, DiffSide
from ..reports.model.report import ReportModel
from .diff_findings import finding_changes
from .diff_pairing import pair_ops
from .diff_program import compile_time, measured_ops, program_ops
from .diff_timing import measured

NO_GATES = Gates()  # only the default step-time threshold decides the verdict; nothing else trips
AnyReport = Union[ReportModel, Mapping[str, Any]]  # a JSON report is read as the typed one at the edge


def _typed(side: AnyReport | Sequence[AnyReport]) -> list[ReportModel]:
    items = [side] if isinstance(side, (ReportModel, Mapping)) else list(side)
    return [r if isinstance(r, ReportModel) else ReportModel.from_json(r) for r in items]


def diff_reports(base: AnyReport | Sequence[AnyReport], head: AnyReport | Sequence[AnyReport],
                 gates: Gates = NO_GATES) -> DiffModel:
    """The diff of two sides, each one report or the reports of repeated runs of the same code; the
    program (compile-time) comparison uses each side's first report."""
    base_list, head_list = _typed(base), _typed(head)
    b0, h0 = base_list[0], head_list[0]
    timed = measured_ops(b0), measured_ops(h0)
    ops = program_ops(b0, timed[0]), program_ops(h0, timed[1])
    pairs, removed, added = pair_ops(*ops)
    ct = compile_time(b0, h0, ops, pairs, removed, added)
    # The step-time comparison pairs the ops as the trace timed them (a command buffer as one op).
    timed_pairs = pairs if ops == timed else pair_ops(*timed)[0]
    me = _same_runs(_one_run_guard(measured(base_list, head_list, timed_pairs, gates.fail_on_slowdown), ct), ct)
    return DiffModel(DiffSide(b0.source, str(b0.hardware.get("name")), len(base_list)),
                     DiffSide(h0.source, str(h0.hardware.get("name")), len(head_list)), len(pairs), ct, me, gates,
                     tuple(_tripped(me, ct, gates)), finding_changes(b0, h0))


def _one_run_guard(me: MeasuredChanges, ct: CompileTimeChanges) -> MeasuredChanges:
    """One run a side cannot tell a runtime slowdown from a busy machine (a CPU hog beside one run slows
    it severalfold); with the program unchanged there is no second witness, so no verdict either way."""
    c = me.compared
    if c is None or not c.weak or me.verdict not in ("regression", "improvement") or ct.changed:
        return me
    why = (f"step time {signed(c.change, percent)} with one run a side and the program unchanged: machine load "
           "alone moves one run this much; repeat the runs (audit run --repeat N) to tell")
    return replace(me, verdict="inconclusive", compared=replace(c, verdict_reason=why))


def _same_runs(me: MeasuredChanges, ct: CompileTimeChanges) -> MeasuredChanges:
    """A report against itself (the same program, every step time the same): no change, not the
    inconclusive a widened one-run interval would give."""
    c = me.compared
    if c is None or ct.changed or me.verdict == "no change":
        return me
    times = [tuple(r.step_times_s) for r in c.runs_base], [tuple(r.step_times_s) for r in c.runs_head]
    if not times[0] or times[0] != times[1] or not all(times[0]):
        return me
    return replace(me, verdict="no change", compared=replace(
        c, verdict_reason="both sides are the same runs: the same program and every step time the same"))


def _tripped(me: MeasuredChanges, ct: CompileTimeChanges, gates: Gates) -> list[str]:
    """Each gate that tripped, in one line."""
    out = []
    c = me.compared
    if me.regression and c is not None:
        out.append(f"step time {signed(c.change, percent)} (interval {signed(c.interval[0], percent)} .. "
                   f"{signed(c.interval[1], percent)}) is beyond noise and the {percent(me.threshold)} "
                   "threshold" + ("" if me.threshold_given else " (default)"))
    if gates.strict and me.verdict == "inconclusive" and c is not None:
        out.append(f"step time inconclusive (--strict): {c.verdict_reason}")
    totals = ct.totals_per_step
    if gates.fail_on_flops and totals["flops"].delta > 0 and totals["flops"].changed:
        out.append("FLOPs per step increased (--fail-on-flops)")
    if gates.fail_on_comm_bytes and totals["comm_bytes"].delta > 0 and totals["comm_bytes"].changed:
        out.append("communicated bytes per step increased (--fail-on-comm-bytes)")
    return out
