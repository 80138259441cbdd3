"""The per-op table: measured time from the trace joined with expected time from the HLO.

One row per (program, HLO op). Per-op quantities are per device: the mean over the
devices that ran the op, summed over that device's occurrences; `measured_s_max`
is the slowest device. Per-device detail is kept in `per_device`.
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol, cast

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..parsers.hlo_category import category, fingerprint
from ..parsers.hlo_model import Module
from .chips.hardware import Hardware
from .records import Expectation, OpCost
from .roofline import expect, launches_work

PS = 1e-12


@dataclass(frozen=True)
class Thresholds:
    """When an op is flagged: efficiency below `min_efficiency` and share above `min_share`."""

    min_efficiency: float = 0.5
    min_share: float = 0.01


def measure(events: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Aggregate op events to (per device, per op) and (per op) tables, times in ps."""
    keys = ["host", "device", "program_id", "op"]
    agg = {"occurrences": ("occurrences", "sum"), "dur_ps": ("dur_ps", "sum"),
           "self_ps": ("self_ps", "sum")}
    if "kernels" in events.columns:
        agg["kernels"] = ("kernels", "sum")
    per_device = events.groupby(keys, observed=True, sort=False).agg(**agg).reset_index()
    trace_cols = {c: (c, "first") for c in ("trace_flops", "trace_model_flops", "trace_bytes",
                                              "trace_category") if c in events.columns}
    per_op = per_device.groupby(["program_id", "op"], observed=True, sort=False).agg(
        devices=("dur_ps", "size"),
        occurrences=("occurrences", "mean"),
        measured_ps=("dur_ps", "mean"),
        measured_ps_max=("dur_ps", "max"),
        self_ps=("self_ps", "mean"),
    ).reset_index()
    if trace_cols:
        first = events.groupby(["program_id", "op"], observed=True, sort=False).agg(**trace_cols)
        per_op = per_op.merge(first.reset_index(), on=["program_id", "op"], how="left")
    return per_device, per_op


def _num(x: float | None) -> float | None:
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def _scaled(value: float | None, times: float) -> float | None:
    return None if value is None else value * times


@dataclass
class OpRow:
    """Everything known about one op, before rendering."""

    key: str
    program_id: int
    module: str
    name: str
    instr_found: bool
    opcode: str
    category: str
    framework_op: str
    source: str
    shape: str
    fingerprint: str
    devices: int
    occurrences: float
    measured_s: float | None
    measured_s_max: float | None
    self_s: float | None
    cost: OpCost | None
    expectation: Expectation | None
    trace_flops: float | None = None
    trace_bytes: float | None = None
    trace_category: str = ""
    position: float | None = None  # 0..1 in its computation's schedule, for matching across compiles
    custom_call_target: str = ""


class _MeasuredOp(Protocol):
    """One row of the measured per-op frame, as `itertuples` yields it."""

    program_id: int
    op: str
    devices: int
    occurrences: float
    measured_ps: float
    measured_ps_max: float
    self_ps: float


def build_rows(per_op: pd.DataFrame, modules: dict[int, Module], module_names: dict[int, str],
               costs: dict[int, dict[str, OpCost]], expectations: dict[tuple[int, str], Expectation],
               ) -> list[OpRow]:
    """Join measured rows with HLO facts, costs and expectations."""
    rows: list[OpRow] = []
    for rec in cast(Iterable[_MeasuredOp], per_op.itertuples(index=False)):
        pid = int(rec.program_id)
        module = modules.get(pid)
        found = module.find(rec.op) if module is not None else None
        instr = found[1] if found else None
        cost = costs.get(pid, {}).get(rec.op)
        occ = float(rec.occurrences)
        rows.append(OpRow(
            key=f"{pid}/{rec.op}",
            program_id=pid,
            module=module_names.get(pid, module.name if module else ""),
            name=str(rec.op),
            instr_found=instr is not None,
            opcode=instr.opcode if instr else "",
            category=(str(getattr(rec, "trace_category", "") or "") or
                      (category(instr) if instr else "unknown")),
            framework_op=instr.metadata.op_name if instr else "",
            source=instr.metadata.source if instr else "",
            shape=str(instr.shape) if instr else "",
            fingerprint=fingerprint(module, instr) if (module and instr) else f"name:{rec.op}",
            devices=int(rec.devices),
            occurrences=occ,
            measured_s=float(rec.measured_ps) * PS,
            measured_s_max=float(rec.measured_ps_max) * PS,
            self_s=float(rec.self_ps) * PS,
            cost=cost,
            expectation=expectations.get((pid, str(rec.op))),
            trace_flops=_num(getattr(rec, "trace_flops", None)),
            trace_bytes=_num(getattr(rec, "trace_bytes", None)),
            position=module.position(str(rec.op)) if (module and instr) else None,
            custom_call_target=instr.custom_call_target if instr else "",
        ))
    return rows


def with_trace_costs(rows: list[OpRow], hw: Hardware, coords: dict[int, tuple[int, ...]] | None = None) -> None:
    """An op known only as a lower bound (an opaque kernel) whose trace states its FLOPs or bytes:
    its expectation takes them in, so it is judged on max(bytes / memory roof, FLOPs / peak)."""
    from dataclasses import replace

    for r in rows:
        cost = r.cost
        if cost is None or not cost.lower_bound or (r.trace_flops is None and r.trace_bytes is None):
            continue
        stated = []
        if cost.flops is None and r.trace_flops is not None:
            cost = replace(cost, flops=r.trace_flops)
            stated.append("FLOPs")
        if r.trace_bytes is not None and (cost.bytes is None or r.trace_bytes > cost.bytes):
            cost = replace(cost, bytes_read=r.trace_bytes, bytes_written=0.0)
            stated.append("bytes accessed")
        if stated:
            r.cost = replace(cost, notes=cost.notes + (f"{' and '.join(stated)} stated by the trace",))
            r.expectation = expect(r.cost, hw, coords=coords)


def static_rows(module: Module, pid: int, costs: dict[str, OpCost],
                expectations: dict[tuple[int, str], Expectation], devices: int = 0) -> list[OpRow]:
    """Rows for an HLO module with no measurement: every costed op, one execution each."""
    rows = []
    for name, cost in costs.items():
        found = module.find(name)
        if found is None:
            continue
        instr = found[1]
        trips = cost.trip_count if cost.trip_count is not None else 1
        rows.append(OpRow(
            key=f"{pid}/{name}", program_id=pid, module=module.name, name=name, instr_found=True,
            opcode=instr.opcode, category=category(instr), framework_op=instr.metadata.op_name,
            source=instr.metadata.source, shape=str(instr.shape),
            fingerprint=fingerprint(module, instr), devices=devices, occurrences=float(trips),
            measured_s=None, measured_s_max=None, self_s=None, cost=cost,
            expectation=expectations.get((pid, name)), position=module.position(name),
            custom_call_target=instr.custom_call_target,
        ))
    return rows


def op_quantities(row: OpRow) -> dict[str, Any]:
    """Per-device totals over the row's occurrences, with provenance."""
    occ = row.occurrences
    cost = row.cost
    flops = bytes_ = transc = None
    comm = 0.0
    prov_flops = prov_bytes = "unknown"
    if cost is not None and cost.modeled:
        flops = _scaled(cost.flops, occ)
        bytes_ = _scaled(cost.bytes, occ)
        transc = _scaled(cost.transcendentals, occ)
        comm = cost.comm_bytes * occ
        prov_flops = cost.provenance if flops is not None else "unknown"
        prov_bytes = cost.provenance if bytes_ is not None else "unknown"
    if row.trace_flops is not None:
        flops, prov_flops = row.trace_flops * occ, "trace"
    if row.trace_bytes is not None:
        bytes_, prov_bytes = row.trace_bytes * occ, "trace"
    exp = row.expectation

    def per_exec(v: float | None) -> float | None:
        return None if v is None else v * occ

    return {
        "flops": flops, "bytes": bytes_, "transcendentals": transc, "comm_bytes": comm,
        "dtype": cost.dtype if cost else "",
        "compute_s": per_exec(exp.compute_s) if exp else None,
        "memory_s": per_exec(exp.memory_s) if exp else None,
        "comm_s": per_exec(exp.comm_s) if exp else None,
        "expected_s": per_exec(exp.expected_s) if exp else None,
        "bound_by": exp.bound_by if exp else "unknown",
        "memory_level": (exp.memory_level or None) if exp else None,
        "launches_work": launches_work(cost),
        "provenance": {"flops": prov_flops, "bytes": prov_bytes,
                       "time": "measured" if row.measured_s is not None else "predicted"},
    }


def safe_ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    r = a / b
    return None if not np.isfinite(r) else r
