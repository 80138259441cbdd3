"""Per-op cost of an HLO module: flops, transcendentals, HBM bytes and communicated bytes.

`cost_module` gives an `OpCost` for every op that can run as an op of its own
(the entry, while bodies and conditions, called and async-wrapped
computations), per execution on one device. Ops inside loops carry the
loop's trip count, so that module totals are sum(cost x trip_count).

Where this differs from XLA's HloCostAnalysis (`compiled.cost_analysis()`):
- while loops: XLA counts one iteration of body and condition; here body ops
  carry the trip count and condition ops trip count + 1 (the condition runs
  once more than the body). The count is `known_trip_count`, or inferred for a
  canonical counted loop (see `ops.loops`), else None (unknown).
- collectives: XLA gives all-gather, reduce-scatter, all-to-all and permutes
  no cost and an all-reduce one combine per element; see `ops.collective`.
- custom calls: XLA gives -1; see `ops.custom`.
- sort: n*log2(n) comparisons along the sorted dimension, not over all elements.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

from ...base.errors import InputError
from ...parsers.hlo.model import Computation, Instruction, Module
from ...parsers.hlo.opcodes import RUNS_OTHERS
from ...base.gc_pause import collector_paused
from ...base.ranges import MAX_EXECUTIONS
from . import collective, compute, control, custom, fusion, memory  # noqa: F401 (registers the handlers)
from .base import HANDLERS, UNMODELED, CostContext, cost_instruction, zero_cost
from .loops import trip_count, while_parts
from ..costs import OpCost
from ..units import count

__all__ = ["HANDLERS", "UNMODELED", "cost_module", "module_totals", "unmodeled_ops", "device_count",
           "unknown_trip_loops"]


def _times(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a * b


def _running_others(comp: Computation) -> list[Instruction]:
    """The computation's instructions that run computations as ops of their own."""
    return [instr for instr in comp.instructions if instr.opcode in RUNS_OTHERS]


def _callees(module: Module, instr: Instruction, trips: int | None) -> Iterator[tuple[Computation, int | None]]:
    """Computations whose ops run as ops of their own (`Module.run_by`), with how often per execution
    of `instr`: a loop's body its trip count, its condition one more, a branch unknown (which one runs
    is decided at run time), what a call or an async start runs once."""
    if instr.opcode == "while":
        n = trip_count(module, instr)[0]
        body, cond = while_parts(module, instr)
        if body is not None:
            yield body, _times(trips, n)
        if cond is not None:
            yield cond, _times(trips, None if n is None else n + 1)
        return
    runs = None if instr.opcode == "conditional" else trips
    for comp in module.run_by(instr):
        yield comp, runs


def execution_plan(module: Module) -> dict[str, tuple[int | None, str]]:
    """Computation name -> (executions per run of the module, async-start that wraps it or "").

    **Raises:** `InputError` naming the loop or call through which a computation would run more
    than `MAX_EXECUTIONS` times per run (nested trip counts multiplied).
    """
    check_executions(module)
    plan: dict[str, tuple[int | None, str]] = {module.entry: (1, "")}
    pending = [module.entry]
    while pending:
        comp = module.computations[pending.pop()]
        trips, wrapper = plan[comp.name]
        for instr in _running_others(comp):
            for callee, n in _callees(module, instr, trips):
                if callee.name in plan or callee.is_fusion:
                    continue
                inner_wrapper = wrapper or (instr.name if instr.opcode == "async-start" else "")
                plan[callee.name] = (n, inner_wrapper)
                pending.append(callee.name)
    return plan


def check_executions(module: Module) -> None:
    """Refuse a module in which some computation runs more than `MAX_EXECUTIONS` times per run:
    over every path from the entry (a loop's body its trip count, its condition one more, an
    unknown count or a branch once), counted in call order, each computation once."""
    runs = {module.entry: 1}
    for name in _callers_first(module):
        for instr in _running_others(module.computations[name]):
            for callee, n in _callees(module, instr, runs.get(name, 0)):
                if callee.is_fusion:
                    continue
                total = runs.get(callee.name, 0) + (n if n is not None else runs.get(name, 0))
                if total > MAX_EXECUTIONS:
                    raise InputError(f"HLO instruction {instr.name!r} in computation {name!r} runs {callee.name!r} "
                                     f"more than {count(MAX_EXECUTIONS)} times per run of the program (the trip counts "
                                     "of the loops around it multiplied, over every call that leads there): no "
                                     "program runs so long")
                runs[callee.name] = total


def _callers_first(module: Module) -> list[str]:
    """The computations the entry runs (fusions left out), each after every computation that runs it."""
    order: list[str] = []
    state: dict[str, int] = {}
    stack = [(module.entry, False)]
    while stack:
        name, done = stack.pop()
        if done:
            state[name] = 2
            order.append(name)
            continue
        if state.get(name):
            continue
        state[name] = 1
        stack.append((name, True))
        for instr in _running_others(module.computations[name]):
            stack += [(c.name, False) for c, _ in _callees(module, instr, None) if not c.is_fusion
                      and not state.get(c.name)]
    return order[::-1]


def unknown_trip_loops(module: Module) -> list[tuple[str, int]]:
    """(while op, ops it runs) for every loop whose trip count is unknown: such ops are counted once."""
    out = []
    for name, _ in execution_plan(module).items():
        for instr in module.computations[name].instructions:
            if instr.opcode != "while" or trip_count(module, instr)[0] is not None:
                continue
            seen: set[str] = set()
            pending = [c.name for c in while_parts(module, instr) if c is not None]
            while pending:
                comp = module.computations[pending.pop()]
                if comp.name in seen:
                    continue
                seen.add(comp.name)
                for inner in _running_others(comp):
                    pending += [c.name for c, _ in _callees(module, inner, None) if not c.is_fusion]
            out.append((instr.name, sum(len(module.computations[c].instructions) for c in seen)))
    return out


def device_count(module: Module) -> int | None:
    """Devices the program spans, as far as its collectives' device ids tell (largest id + 1)."""
    largest = -1
    for _, i in module.instructions():
        if i.replica_groups:
            largest = max(largest, *(d for g in i.replica_groups for d in g))
        if i.source_target_pairs:
            largest = max(largest, *(d for pair in i.source_target_pairs for d in pair))
    return largest + 1 if largest >= 0 else None


def cost_module(module: Module, *, num_partitions: int | None = None) -> dict[str, OpCost]:
    """An OpCost for every op that runs on its own, keyed by instruction name, per execution."""
    with collector_paused():
        return _cost_module(module, num_partitions)


def _cost_module(module: Module, num_partitions: int | None) -> dict[str, OpCost]:
    devices = num_partitions or device_count(module)
    costs: dict[str, OpCost] = {}
    memo: dict[tuple[str, str], Any] = {}
    fusions: dict[tuple[Any, ...], OpCost] = {}  # shared by every computation's context
    for name, (trips, wrapper) in execution_plan(module).items():
        comp = module.computations[name]
        ctx = CostContext(module, comp, devices, memo, fusions)
        for instr in comp.instructions:
            if wrapper:
                c = zero_cost(f"costed on {wrapper}, the async-start that wraps it")
            else:
                c = cost_instruction(instr, ctx)
            if trips is None:
                c = replace(c, trip_count=None, notes=c.notes + (_UNKNOWN_TRIPS,))
            elif c.trip_count != trips:
                c = replace(c, trip_count=trips)
            costs[instr.name] = c
    return costs


_UNKNOWN_TRIPS = "runs an unknown number of times (while without known_trip_count, or a conditional branch)"


def module_totals(module: Module, costs: dict[str, OpCost]) -> dict[str, Any]:
    """Totals over one run of the module: sum of cost x trip_count, with what could not be counted."""
    totals: dict[str, Any] = {"flops": 0.0, "transcendentals": 0.0, "bytes_read": 0.0, "bytes_written": 0.0,
                              "comm_bytes": 0.0}
    unmodeled = unknown_trips = 0
    for c in costs.values():
        if not c.modeled:
            unmodeled += 1
            continue
        unmodeled += 1 if c.lower_bound else 0  # its bytes count, its FLOPs are unknown
        if c.trip_count is None:
            unknown_trips += 1 if (c.flops or c.bytes or c.comm_bytes) else 0
            continue
        for key in totals:
            totals[key] += (getattr(c, key) or 0.0) * c.trip_count
    totals["bytes"] = totals["bytes_read"] + totals["bytes_written"]
    totals.update(module=module.name, ops=len(costs), unmodeled_ops=unmodeled,
                  unknown_trip_count_ops=unknown_trips,
                  units={"flops": "FLOP", "transcendentals": "count", "bytes": "B", "comm_bytes": "B"})
    return totals


def unmodeled_ops(costs: dict[str, OpCost]) -> dict[str, str]:
    """Name -> reason for every op without a cost model of its own: unknown, or known only as a
    lower bound from its operand and result bytes (opaque custom calls and the like)."""
    return {name: c.reason or c.lower_bound for name, c in costs.items() if not c.modeled or c.lower_bound}
