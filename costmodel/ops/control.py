"""Handlers for control ops: while, call, conditional, and async wrappers.

while, call and conditional cost nothing themselves: the ops of their bodies
are costed one by one (with the loop's trip count), so the totals never count
a body twice. An `async-start` is different: the trace shows the start op, not
the ops of the computation it wraps, so the start carries the cost of
everything it wraps, and those wrapped ops are marked as costed on it.
"""

from __future__ import annotations

from ...parsers.hlo.model import Computation, Instruction
from .base import (CostContext, cost_instruction, first_dtype, handles,
                          unknown_cost, unmodeled_opcode, zero_cost)
from .loops import trip_count
from ..costs import OpCost

@handles("while")
def while_(instr: Instruction, ctx: CostContext) -> OpCost:
    trips, source = trip_count(ctx.module, instr)
    stated = f"{trips} iterations ({source})" if trips is not None else "an unknown number of iterations"
    return zero_cost(f"while: body and condition are costed separately, {stated}", first_dtype(instr.shape))


@handles("call")
def call(instr: Instruction, ctx: CostContext) -> OpCost:
    return zero_cost("call: the called computation is costed separately", first_dtype(instr.shape))


@handles("conditional")
def conditional(instr: Instruction, ctx: CostContext) -> OpCost:
    return zero_cost("conditional: branches are costed separately; which one runs is known only at run time",
                     first_dtype(instr.shape))


def _wrapped_ops(comp: Computation, ctx: CostContext) -> dict[str, tuple[Instruction, OpCost, int]]:
    """Every op a computation runs with its cost and how often it runs per run of `comp`, following
    calls into their bodies; a body called from several places is costed once."""
    key = ("wrapped", comp.name)
    if key in ctx.memo:
        found: dict[str, tuple[Instruction, OpCost, int]] = ctx.memo[key]
        return found
    inner = ctx.within(comp)
    out: dict[str, tuple[Instruction, OpCost, int]] = {}
    for instr in comp.instructions:
        body = inner.called(instr, "to_apply", 0) if instr.opcode == "call" else None
        if body is None:
            out[instr.name] = (instr, cost_instruction(instr, inner), 1)
            continue
        for name, (op, c, times) in _wrapped_ops(body, ctx).items():
            out[name] = (op, c, out.get(name, (op, c, 0))[2] + times)
    ctx.memo[key] = out
    return out


def wrapped_cost(comp: Computation, ctx: CostContext) -> OpCost:
    """The summed cost of everything a computation runs (what an async-start carries)."""
    total = {"flops": 0.0, "transcendentals": 0.0, "bytes_read": 0.0, "bytes_written": 0.0, "comm_bytes": 0.0,
             "host_bytes": 0.0}
    collective = None
    working: list[str] = []
    for instr, c, times in _wrapped_ops(comp, ctx).values():
        if not c.modeled:
            return unknown_cost(f"wraps {instr.name}: {c.reason}", c.dtype)
        for key in total:
            total[key] += (getattr(c, key) or 0.0) * times
        collective = collective or c.collective
        if c.flops or c.bytes or c.comm_bytes or c.host_bytes:
            working.append(f"{instr.name} ({instr.opcode})")
    dtype = first_dtype(comp.root_instruction.shape) if comp.instructions else ""
    return OpCost(flops=total["flops"], transcendentals=total["transcendentals"], bytes_read=total["bytes_read"],
                  bytes_written=total["bytes_written"], comm_bytes=total["comm_bytes"], dtype=dtype, collective=collective,
                  notes=(f"async: carries the cost of the wrapped {', '.join(working) or 'ops'}",))


@handles("async-start")
def async_start(instr: Instruction, ctx: CostContext) -> OpCost:
    comp = ctx.called(instr, "calls", 0)
    if comp is None:
        return unknown_cost("async-start without its wrapped computation", first_dtype(instr.shape))
    return wrapped_cost(comp, ctx)


unmodeled_opcode("collective-reduce", "collective-reduce: reduction to a root device is not modeled")
