"""Why the napkin plan, the cost model and the trace disagree on one step, in numbers.

For each row of the plan-vs-profile table whose values differ by more than 2x, the main
causes are measured on the report's own ops: bytes in f32 where the plan assumes bf16,
bytes moved by standalone (unfused) ops, FLOPs outside the matmuls the plan counts,
collectives the plan does not make, working sets the memory hierarchy keeps in cache,
the fixed per-op overhead, time the trace spends in ops that cannot be judged or beyond
their expected time (and of that, interference: ops whose identical ops run far faster), and
idle time.
"""

from __future__ import annotations

from typing import Any

from collections import defaultdict

from ..costmodel.chips.hardware import Quantity
from ..optable.record import OpRecord
from ..costmodel.units import count, human, ratio as factor, share
from ..reports.model.report import ReportModel

GAP = 2.0  # a row is explained when two of its values differ by more than this factor
_MATMUL_WORDS = ("dot", "conv", "gemm", "matmul", "custom fusion", "fmha")


def ratio(row: dict[str, Any]) -> tuple[float, str] | None:
    """(largest / smallest, which two) over the row's known positive values, or None."""
    known = {k: row[k] for k in ("plan", "model", "measured") if row.get(k)}
    if len(known) < 2:
        return None
    hi, lo = max(known, key=known.__getitem__), min(known, key=known.__getitem__)
    return known[hi] / known[lo], f"{hi} {factor(known[hi] / known[lo])} {lo}"


def _is_matmul(op: OpRecord) -> bool:
    what = f"{op.opcode} {op.category} {op.custom_call_target}".lower()
    return any(w in what for w in _MATMUL_WORDS)


def _bytes_reasons(ops: list[OpRecord], steps: float, row: dict[str, Any], main_memory: str,
                   plan: dict[str, Any]) -> list[str]:
    total = sum(o.bytes or 0.0 for o in ops)
    if not total:
        return []
    out = []
    f32 = sum(o.bytes or 0.0 for o in ops if o.dtype in ("f32", "f64"))
    # the plan's element size is its configuration's dtype: an f32 workload is planned in f32
    per_element = float(plan["param_bytes"]) / float(plan["params"]) if plan.get("params") else 2.0
    if f32 / total > 0.25 and per_element < 4:
        planned = "bf16" if per_element == 2 else f"{count(per_element)}-byte elements"
        out.append(f"f32 instead of {planned}: {human(f32 / steps, 'B')} ({share(f32, total)}) of the model's bytes "
                   f"are in f32/f64 ops; the plan counts {count(per_element)} bytes per element")
    unfused = [o for o in ops if o.opcode != "fusion" and not _is_matmul(o) and not o.comm_bytes
               and o.bytes]
    fused = [o for o in ops if o.opcode == "fusion" and not _is_matmul(o) and o.bytes]
    moved = sum(o.bytes or 0.0 for o in unfused + fused)
    if moved / total > 0.25:
        out.append(f"activations through memory: {len(fused)} elementwise/reduction fusions and {len(unfused)} "
                   f"unfused ops move {human(moved / steps, 'B')} ({share(moved, total)}); the plan counts "
                   "weights, gradients and optimizer state once and activations not at all")
    cached = sum(o.bytes or 0.0 for o in ops if o.memory_level not in (None, main_memory))
    if cached / total > 0.25:
        out.append(f"cache-resident working sets: {human(cached / steps, 'B')} ({share(cached, total)}) are in ops "
                   f"whose working set fits a cache, judged at its bandwidth, not {main_memory}'s")
    if row.get("plan") and row.get("model") and row["model"] > row["plan"]:
        top = sorted(ops, key=lambda o: -(o.bytes or 0.0))[:3]
        out.append("largest: " + ", ".join(f"{o.name} {human((o.bytes or 0.0) / steps, 'B')}" for o in top))
    return out


def _flops_reasons(ops: list[OpRecord], steps: float, row: dict[str, Any]) -> list[str]:
    total = sum(o.flops or 0.0 for o in ops)
    if not total:
        return []
    other = sum(o.flops or 0.0 for o in ops if not _is_matmul(o))
    out = [f"{human(other / steps, 'FLOP')} ({share(other, total)}) of the model's FLOPs are outside matmuls "
           "(elementwise, reductions, softmax); the plan counts matmuls only"]
    if row.get("plan") and row.get("model") and row["model"] > 1.3 * row["plan"]:
        out.append(f"the program does {factor(row['model'] / row['plan'])} the plan's FLOPs: rematerialisation "
                   "(recomputed activations) or work beyond 6 x params x tokens")
    return out


def _comm_reasons(ops: list[OpRecord], steps: float, plan: dict[str, Any]) -> list[str]:
    by_kind: dict[str, float] = defaultdict(float)
    for o in ops:
        if o.comm_bytes:
            info = (o.category or o.opcode).replace("-start", "")
            by_kind[info] += o.comm_bytes
    total = sum(by_kind.values())
    if not total:
        return []
    planned = {c["kind"] for c in plan.get("collectives", [])}
    parts = ", ".join(f"{k} {human(v / steps, 'B')} ({share(v, total)})"
                      for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]))
    extra = sorted(k for k in by_kind if k not in planned)
    out = [f"the program's collectives: {parts}"]
    if extra:
        out.append(f"collectives the plan does not have (it plans {', '.join(sorted(planned)) or 'none'}): "
                   + ", ".join(f"{k} {human(by_kind[k] / steps, 'B')}" for k in extra))
    return out


def _time_reasons(report: ReportModel, ops: list[OpRecord], steps: float, plan: dict[str, Any], row: dict[str, Any],
                  overhead: Quantity | None) -> list[str]:
    s = report.summary
    out = []
    by: dict[str, float] = defaultdict(float)
    for o in ops:
        if o.expected_s:
            by[o.bound_by] += o.expected_s
    model_total = sum(by.values())
    if model_total and row.get("model") is not None:
        out.append("expected step by bound: " + ", ".join(
            f"{k} {human(v / steps, 's')} ({share(v, model_total)})" for k, v in sorted(by.items(), key=lambda kv: -kv[1])))
        bound = plan.get("step_time_lower_bound_s") or {}
        out.append("plan step: " + ", ".join(f"{k} {human(v, 's')}" for k, v in bound.items() if k != "total" and v))
    launches = sum(o.occurrences or 0.0 for o in ops if o.launches_work and o.expected_s is not None)
    if overhead is not None and overhead.value and launches:
        out.append(f"per-op overhead: {count(launches / steps)} op launches x {human(overhead.value, 's')} "
                   f"[{overhead.source}] = {human(launches * overhead.value / steps, 's')} per step, "
                   "which the plan does not count")
    if row.get("measured") is not None:
        measured = row["measured"]
        unjudged = sum(o.self_s or 0.0 for o in ops if o.verdict == "not judged") / steps
        if unjudged:
            out.append(f"not judged: {human(unjudged, 's')} per step ({share(unjudged, measured)} of the measured "
                       "step) in ops whose time is a wait (collectives between simulated devices)")
        wasted = sum(o.wasted_s or 0.0 for o in ops if o.verdict != "not judged") / steps
        if wasted:
            out.append(f"slower than expected: judged ops take {human(wasted, 's')} per step beyond their "
                       f"expected time ({share(wasted, measured)} of the measured step)")
        interfered = sum(o.interference_s or 0.0 for o in ops if o.verdict == "interference") / steps
        if interfered:
            out.append(f"interference: {human(interfered, 's')} per step of that ({share(interfered, measured)}) in "
                       "ops whose identical ops run far faster elsewhere: what ran beside them, not their kernels")
        if s.idle_s:
            idle = s.idle_s / steps
            out.append(f"idle: {human(idle, 's')} per step with no op running ({share(idle, measured)})")
    return out


def _bubble_reasons(row: dict[str, Any], report: ReportModel) -> list[str]:
    out = [row["note"]] if row.get("note") else []
    measured, step = row.get("measured"), report.summary.step_time_s.median
    if measured and step:
        out.append(f"measured: {human(measured, 's')} per step ({share(measured, step)}) outside the stages' own "
                   "work, idle or waiting in a collective-permute; on simulated devices this also holds the wait "
                   "for the host's cores, which the stages share")
    return out


def explain(table: dict[str, Any], report: ReportModel, main_memory: str, overhead: Quantity | None) -> None:
    """Add `gap` and `reasons` to each row of `table` whose values differ by more than 2x."""
    ops = report.timed_ops
    steps = 1.0 if report.predicted else float(report.summary.steps or 1)
    plan = table.get("plan") or {}
    for row in table.get("rows", []):
        found = ratio(row)
        if found is None or found[0] <= GAP or row["unit"] == "count":
            continue
        row["gap"] = found[1]
        if row["quantity"].startswith("pipeline bubble"):
            reasons = _bubble_reasons(row, report)
        elif row["unit"] == "B" and row["quantity"].startswith("HBM"):
            reasons = _bytes_reasons(ops, steps, row, main_memory, plan)
        elif row["unit"] == "FLOP":
            reasons = _flops_reasons(ops, steps, row)
        elif row["unit"] == "B":
            reasons = _comm_reasons(ops, steps, plan)
        else:
            reasons = _time_reasons(report, ops, steps, plan, row, overhead)
        row["reasons"] = reasons
