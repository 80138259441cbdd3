"""Measured on this CPU next to predicted on the target, op by op, for one workload.

The two compiles fuse differently, so HLO names and fingerprints do not line up; ops are
matched by the framework op they come from (`jit(step)/dot_general`...), each side's ops
of one framework op summed per step. Ops without a framework op, or whose framework op
appears on one side only, are listed as unmatched.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..reports.model.report import ReportModel


def _by_framework_op(report: ReportModel, field: str, per_step: float) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = defaultdict(lambda: {"ops": [], "seconds": 0.0, "flops": 0.0})
    for op in report.ops:
        if op.container or not op.framework_op:
            continue
        g = groups[op.framework_op]
        g["ops"].append(op.name)
        g["seconds"] += (getattr(op, field) or 0.0) / per_step
        g["flops"] += (op.flops or 0.0) / per_step
    return groups


def compare(cpu: ReportModel, target: ReportModel) -> dict[str, Any]:
    """Per framework op and step: measured seconds on CPU, predicted seconds on the target."""
    cpu_groups = _by_framework_op(cpu, "self_s", float(cpu.summary.steps or 1))
    target_groups = _by_framework_op(target, "expected_s", 1.0)
    rows = []
    for name in sorted(set(cpu_groups) & set(target_groups),
                       key=lambda n: -target_groups[n]["seconds"]):
        c, t = cpu_groups[name], target_groups[name]
        rows.append({"framework_op": name, "cpu_ops": c["ops"], "cpu_measured_s": c["seconds"],
                     "target_ops": t["ops"], "target_expected_s": t["seconds"],
                     "cpu_flops": c["flops"], "target_flops": t["flops"]})
    return {
        "matched": rows,
        "cpu_only": sorted(set(cpu_groups) - set(target_groups)) + _unnamed(cpu, "self_s"),
        "target_only": sorted(set(target_groups) - set(cpu_groups)) + _unnamed(target, "expected_s"),
        "cpu_hardware": cpu.hardware["name"], "cpu_steps": cpu.summary.steps,
        "units": "seconds per step per device; CPU measured [trace], target predicted [model]",
    }


def _unnamed(report: ReportModel, field: str) -> list[str]:
    """Ops that take time but name no framework op (copies, layout changes the compiler added)."""
    return [o.name for o in report.ops
            if not o.container and not o.framework_op and (getattr(o, field) or 0.0) > 1e-9
            and o.launches_work is not False]
