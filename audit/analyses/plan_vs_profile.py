"""One table for a workload step: the napkin plan, the cost model's expectation, and the measurement."""

from __future__ import annotations

from typing import Any

from ..costmodel.chips.hardware import Hardware
from ..costmodel.units import percent
from ..base.errors import InputError
from ..reports.model.report import ReportModel
from .plan_gaps import explain


def _per_step(report: ReportModel, field: str) -> float | None:
    ops = report.timed_ops
    values = [getattr(o, field) for o in ops]
    if not ops or all(v is None for v in values):
        return None
    return sum(v or 0.0 for v in values) / (report.summary.steps or 1)


def _collective_permutes(report: ReportModel) -> float | None:
    ops = [o for o in report.timed_ops if "collective-permute" in f"{o.opcode} {o.category}"
           and not o.opcode.endswith("-done")]
    if not ops:
        return 0.0 if report.timed_ops else None
    return sum(o.occurrences for o in ops) / (1 if report.predicted else (report.summary.steps or 1))


def _outside_stage_work(report: ReportModel, measured_step: float | None) -> float | None:
    """Seconds per step per device not spent in the stages' own work: idle, or waiting in a
    collective (on simulated devices a stage that has nothing to do waits in the next permute)."""
    if measured_step is None:
        return None
    steps = report.summary.steps or 1
    busy = sum(o.self_s or 0.0 for o in report.timed_ops if not o.comm_bytes) / steps
    return max(0.0, measured_step - busy)


def pipeline_rows(report: ReportModel, pipe: dict[str, Any], bubble_s: float,
                  measured_step: float | None) -> list[dict[str, Any]]:
    """Stages, collective-permutes and the bubble: the pipeline's structure, plan beside trace."""
    return [
        {"quantity": "pipeline stages", "unit": "count", "plan": pipe["stages"], "model": None,
         "measured": report.summary.devices},
        {"quantity": "collective-permutes per step", "unit": "count", "plan": pipe["collective_permutes"],
         "model": None, "measured": _collective_permutes(report)},
        {"quantity": "pipeline bubble (idle per device)", "unit": "s", "plan": bubble_s, "model": None,
         "measured": _outside_stage_work(report, measured_step),
         "note": f"{pipe['schedule']}: each stage works {pipe['microbatches']} of {pipe['ticks']} ticks, idle "
                 f"{percent(pipe['idle_fraction_of_step'])} of the step"},
    ]


def plan_vs_profile(report: ReportModel, config: dict[str, Any], hw: Hardware) -> dict[str, Any] | None:
    """Rows of (quantity, plan, model, measured) per device per step; None without a model config."""
    from ..costmodel.planner.workload import plan_for_config

    if not config or "d_model" not in config:
        return None
    try:
        plan = plan_for_config(config, hw)
    except InputError as exc:
        return {"error": str(exc), "rows": []}
    steps = report.summary.steps or 1
    expected_all = report.summary.expected_s
    expected_step = None if expected_all is None else expected_all / (1 if report.predicted else steps)
    measured_step = None if report.predicted else report.summary.step_time_s.median
    rows = [
        {"quantity": "FLOPs per device", "unit": "FLOP",
         "plan": plan["flops_per_step_per_device"], "model": _per_step(report, "flops"), "measured": None},
        {"quantity": "HBM bytes per device", "unit": "B",
         "plan": plan["hbm_bytes_per_device"], "model": _per_step(report, "bytes"), "measured": None},
        {"quantity": "communicated bytes per device", "unit": "B",
         "plan": plan["collective_bytes_per_device"], "model": _per_step(report, "comm_bytes"), "measured": None},
        {"quantity": "step time", "unit": "s",
         "plan": plan["step_time_lower_bound_s"]["total"], "model": expected_step, "measured": measured_step},
    ]
    if plan.get("pipeline"):
        rows += pipeline_rows(report, plan["pipeline"], plan["step_time_lower_bound_s"]["bubble"], measured_step)
    table = {"rows": rows, "plan_bound_by": plan["bound_by"], "plan": plan,
             "note": "plan: the book's closed forms for this configuration (a lower bound on time); "
                     "model: sum over the compiled program's ops; measured: median step in the trace"}
    explain(table, report, hw.main_memory, hw.op_overhead_s)
    return table
