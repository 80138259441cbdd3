"""Measured time from the trace joined with cost and expected time from the HLO.

`measure` aggregates op events per device and per op; `join_measured` and `join_static`
pair each op with its HLO instruction, cost and expectation (a `Joined` fact, before any
verdict); `judge.judge_table` turns those into the report's `OpRecord`s. Per-op
quantities are per device: the mean over the devices that ran the op, summed over that
device's occurrences; `measured_s_max` is the slowest device.
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol, cast

import math
from dataclasses import dataclass, replace

import pandas as pd

from ..costmodel.achievable import AchievableTime
from ..costmodel.chips.hardware import Hardware
from ..costmodel.costs import Expectation, OpCost
from ..costmodel.roofline import expect
from ..parsers.hlo.category import category, fingerprint
from ..parsers.hlo.identity import identity
from ..parsers.hlo.model import Computation, Instruction, Module
from ..base.timebase import PS



def measure(events: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Aggregate op events to (per device, per op) and (per op) tables, times in ps."""
    keys = ["host", "device", "program_id", "op"]
    agg = {"occurrences": ("occurrences", "sum"), "dur_ps": ("dur_ps", "sum"),
           "self_ps": ("self_ps", "sum")}
    if "kernels" in events.columns:
        agg["kernels"] = ("kernels", "sum")
    # Each device's fastest and slowest run, where the rows state them (per-host summaries do).
    agg.update({c: (c, how) for c, how in (("dur_min_ps", "min"), ("dur_max_ps", "max")) if c in events.columns})
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


@dataclass(frozen=True)
class Joined:
    """Everything known about one op before its verdict: the measurement, the HLO, the cost.

    A type of its own, not an `OpRecord`: the stage before one. It holds what the verdict is decided
    from and the record does not keep (the cost model's `OpCost`, `Expectation` and `AchievableTime`,
    whether the HLO instruction was found, why a command buffer cannot be judged); `judge` makes the
    `OpRecord` of it.
    """

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
    # An op priced as the ops it runs (a command buffer): their summed achievable time, and why its
    # time cannot be judged ("" when it can); None and "" for every other op.
    achievable: AchievableTime | None = None
    unjudged: str = ""
    identity: str = ""  # the same for ops that run the same computation on the same shapes (parsers.hlo.identity)


class _MeasuredOp(Protocol):
    """One row of the measured per-op frame, as `itertuples` yields it."""

    program_id: int
    op: str
    devices: int
    occurrences: float
    measured_ps: float
    measured_ps_max: float
    self_ps: float


def join_measured(per_op: pd.DataFrame, modules: dict[int, Module], module_names: dict[int, str],
                  costs: dict[int, dict[str, OpCost]], expectations: dict[tuple[int, str], Expectation],
                  hw: Hardware) -> list[Joined]:
    """Join measured rows with HLO facts, costs and expectations (and what the trace states of
    an opaque kernel's FLOPs and bytes)."""
    rows: list[Joined] = []
    for rec in cast(Iterable[_MeasuredOp], per_op.itertuples(index=False)):
        pid = int(rec.program_id)
        module = modules.get(pid)
        found = module.find(rec.op) if module is not None else None
        instr = found[1] if found else None
        cost = costs.get(pid, {}).get(rec.op)
        occ = float(rec.occurrences)
        rows.append(Joined(
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
            identity=identity(module, instr) if (module and instr) else "",
        ))
    return [_with_trace_costs(r, hw) for r in rows]


def _with_trace_costs(row: Joined, hw: Hardware) -> Joined:
    """An op known only as a lower bound (an opaque kernel) whose trace states its FLOPs or bytes:
    its expectation takes them in, so it is judged on max(bytes / memory roof, FLOPs / peak)."""
    cost = row.cost
    if cost is None or not cost.lower_bound or (row.trace_flops is None and row.trace_bytes is None):
        return row
    stated = []
    if cost.flops is None and row.trace_flops is not None:
        cost = replace(cost, flops=row.trace_flops)
        stated.append("FLOPs")
    if row.trace_bytes is not None and (cost.bytes is None or row.trace_bytes > cost.bytes):
        cost = replace(cost, bytes_read=row.trace_bytes, bytes_written=0.0)
        stated.append("bytes accessed")
    if not stated:
        return row
    cost = replace(cost, notes=cost.notes + (f"{' and '.join(stated)} stated by the trace",))
    return replace(row, cost=cost, expectation=expect(cost, hw))


# The fields that tell one op from another doing the same work: a prediction judges each distinct
# op once and stamps these onto the copies (optable.predicted).
IDENTITY = ("key", "program_id", "module", "name", "category", "framework_op", "source", "shape",
            "fingerprint", "position", "custom_call_target", "devices")


class StaticIdentity:
    """The `IDENTITY` fields of a module's ops, in that order; what copies of an op share (their
    shape, metadata and kind, one object each in an unrolled program) is worked out once."""

    def __init__(self, module: Module, pid: int, devices: int):
        self.module, self.pid, self.devices = module, pid, devices
        self.shared: dict[tuple[int, int, str, str], tuple[Any, ...]] = {}
        self.positions: dict[str, dict[str, float]] = {}  # per computation, as `Module.position` gives them

    def __call__(self, name: str, instr: Instruction, comp: Computation) -> tuple[Any, ...]:
        meta, shape = instr.metadata, instr.shape
        key = (id(shape), id(meta), instr.opcode, instr.fusion_kind)
        part = self.shared.get(key)
        if part is None:  # the objects are kept with their strings, so that no other takes their id
            part = self.shared[key] = (category(instr), meta.op_name, meta.source, str(shape), meta, shape)
        positions = self.positions.get(comp.name)
        if positions is None:
            order = self.module.sequence(comp.name)
            positions = self.positions[comp.name] = {i.name: n / max(len(order) - 1, 1) for n, i in enumerate(order)}
        return (f"{self.pid}/{name}", self.pid, self.module.name, name, part[0], part[1], part[2], part[3],
                fingerprint(self.module, instr, comp), positions.get(name), instr.custom_call_target, self.devices)


def static_row(ident: tuple[Any, ...], instr: Instruction, cost: OpCost,
               expectation: Expectation | None) -> Joined:
    """The joined row of an op with no measurement (`ident`: its `StaticIdentity`), one execution
    per trip."""
    return Joined(**dict(zip(IDENTITY, ident)), instr_found=True, opcode=instr.opcode,
                  occurrences=float(cost.trip_count if cost.trip_count is not None else 1),
                  measured_s=None, measured_s_max=None, self_s=None, cost=cost, expectation=expectation)


def join_static(module: Module, pid: int, costs: dict[str, OpCost],
                expectations: dict[tuple[int, str], Expectation], devices: int = 0) -> list[Joined]:
    """Rows for an HLO module with no measurement: every costed op, one execution each."""
    ident = StaticIdentity(module, pid, devices)
    rows = []
    for name, cost in costs.items():
        found = module.find(name)
        if found is not None:
            comp, instr = found
            rows.append(static_row(ident(name, instr, comp), instr, cost, expectations.get((pid, name))))
    return rows
