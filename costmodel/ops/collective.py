"""Handlers for collectives: the volume V each one moves and the bytes each device sends.

`CollectiveInfo.bytes` is V as the book defines it (the gathered result for
all-gather, the input for reduce-scatter and all-reduce, the local array for
all-to-all, the sent buffer for collective-permute). `comm_bytes` is what
one device sends over its links with a ring (or direct) algorithm among n
devices: V(n-1)/n for all-gather, reduce-scatter and all-to-all, 2V(n-1)/n
for all-reduce (a reduce-scatter then an all-gather), V for a permute.

Differences from XLA's HloCostAnalysis, on purpose: XLA gives all-gather,
reduce-scatter, all-to-all and collective-permute no cost at all and prices an
all-reduce's flops as if there were 2 replicas (one combine per element). Here
the reduction flops are (n-1)/n combines per element per device, which is what
a ring reduce-scatter does on each device, and every collective carries bytes.
"""

from __future__ import annotations

import re
from dataclasses import replace
from ...parsers.hlo_model import Instruction, Shape
from .base import (CostContext, computation_flops, cost, first_dtype, handles, nbytes,
                          unknown_cost, zero_cost)
from ..records import CollectiveInfo, OpCost


def _groups(instr: Instruction, ctx: CostContext) -> tuple[tuple[tuple[int, ...], ...], int | None]:
    """The device groups and their size; no groups means all devices of the program."""
    if instr.replica_groups:
        return instr.replica_groups, len(instr.replica_groups[0])
    if ctx.num_devices:
        return (tuple(range(ctx.num_devices)),), ctx.num_devices
    return (), None


# Starts whose shape is (operands, output, contexts...): all-gather-start and
# collective-permute-start, and XLA's sugar for an async-start wrapping one collective
# (`all-to-all-start` is `async-start(calls=)` of an all-to-all, shape ((operands), output)).
_TUPLE_STARTS = {"all-gather-start", "collective-permute-start", "reduce-scatter-start", "all-to-all-start",
                 "collective-broadcast-start", "ragged-all-to-all-start"}


def _split_start_shape(instr: Instruction, ctx: CostContext) -> tuple[list[Shape], list[Shape]]:
    """Inputs and outputs of a collective; all-reduce-start's shape is its output."""
    inputs = ctx.operand_shapes(instr)
    shape = instr.shape
    if instr.opcode in _TUPLE_STARTS and shape.is_tuple and len(shape.tuple_shapes) >= 2:
        return inputs, [shape.tuple_shapes[1]]
    return inputs, list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _reducer_flops(instr: Instruction, ctx: CostContext) -> tuple[float | None, float | None]:
    comp = ctx.called(instr, "to_apply", 0)
    return computation_flops(comp, ctx) if comp else (1.0, 0.0)


def _collective_cost(instr: Instruction, ctx: CostContext, kind: str) -> OpCost:
    groups, n = _groups(instr, ctx)
    dtype = first_dtype(instr.shape)
    if n is None:
        return unknown_cost(f"{kind} over all devices, but the device count is unknown "
                            "(pass num_partitions)", dtype)
    inputs, outputs = _split_start_shape(instr, ctx)
    read = sum(nbytes(s) for s in inputs)
    written = sum(nbytes(s) for s in outputs)
    # What crosses the links is the logical array, wherever its buffer lives (HBM or VMEM).
    wire_in = sum(s.byte_size for s in inputs)
    wire_out = sum(s.byte_size for s in outputs)
    share = (n - 1) / n
    flops = trans = 0.0
    if kind == "all-gather":
        volume, sent = wire_out, wire_out * share
    elif kind == "all-reduce":
        volume, sent = wire_in, 2 * wire_in * share
    else:
        volume, sent = wire_in, wire_in * share
    if kind in ("all-reduce", "reduce-scatter"):
        per, per_t = _reducer_flops(instr, ctx)
        if per is None or per_t is None:
            return unknown_cost(f"{kind}: its reducer has an unmodeled op", dtype)
        combines = sum(s.elements for s in inputs) * share
        flops, trans = combines * per, combines * per_t
    info = CollectiveInfo(kind=kind, bytes=float(volume), group_size=n, groups=groups,
                          note=f"per device sends {sent:.0f} bytes ({_RULE[kind]})")
    out = cost(flops, read, written, transcendentals=trans, dtype=dtype)
    return replace(out, comm_bytes=float(sent), collective=info)


_RULE = {
    "all-gather": "V(n-1)/n, V = gathered result",
    "reduce-scatter": "V(n-1)/n, V = input",
    "all-reduce": "2V(n-1)/n, V = input",
    "all-to-all": "V(n-1)/n, V = local array",
    "ragged-all-to-all": "V(n-1)/n, V = local input",
}


@handles("all-gather", "all-gather-start")
def all_gather(instr: Instruction, ctx: CostContext) -> OpCost:
    return _collective_cost(instr, ctx, "all-gather")


@handles("all-reduce", "all-reduce-start")
def all_reduce(instr: Instruction, ctx: CostContext) -> OpCost:
    return _collective_cost(instr, ctx, "all-reduce")


@handles("reduce-scatter", "reduce-scatter-start")
def reduce_scatter(instr: Instruction, ctx: CostContext) -> OpCost:
    return _collective_cost(instr, ctx, "reduce-scatter")


@handles("all-to-all", "all-to-all-start")
def all_to_all(instr: Instruction, ctx: CostContext) -> OpCost:
    return _collective_cost(instr, ctx, "all-to-all")


@handles("ragged-all-to-all", "ragged-all-to-all-start")
def ragged_all_to_all(instr: Instruction, ctx: CostContext) -> OpCost:
    # Operands: input, output, offsets and sizes; only the input is sent.
    groups, n = _groups(instr, ctx)
    if n is None:
        return unknown_cost("ragged-all-to-all over all devices, but the device count is unknown")
    data = nbytes(ctx.operand_shapes(instr)[0])
    sent = data * (n - 1) / n
    info = CollectiveInfo(kind="all-to-all", bytes=float(data), group_size=n, groups=groups,
                          note="ragged: assumes the input is spread evenly over the group")
    _, outputs = _split_start_shape(instr, ctx)
    out = cost(0, data, sum(nbytes(s) for s in outputs), dtype=first_dtype(outputs[0]))
    return replace(out, comm_bytes=float(sent), collective=info)


@handles("collective-permute", "collective-permute-start")
def collective_permute(instr: Instruction, ctx: CostContext) -> OpCost:
    inputs, outputs = _split_start_shape(instr, ctx)
    data = nbytes(inputs[0]) if inputs else 0
    pairs = instr.source_target_pairs
    sent = data if pairs else 0
    info = CollectiveInfo(kind="collective-permute", bytes=float(data), group_size=2 if pairs else 1,
                          groups=tuple(tuple(p) for p in pairs),
                          note=f"{len(pairs)} source-target pairs; a sending device sends V once")
    out = cost(0, data, sum(nbytes(s) for s in outputs), dtype=first_dtype(outputs[0]) if outputs else "")
    return replace(out, comm_bytes=float(sent), collective=info)


@handles("collective-broadcast", "collective-broadcast-start")
def collective_broadcast(instr: Instruction, ctx: CostContext) -> OpCost:
    groups, n = _groups(instr, ctx)
    data = nbytes(ctx.operand_shapes(instr)[0])
    info = CollectiveInfo(kind="collective-broadcast", bytes=float(data), group_size=n or 0, groups=groups,
                          note="every device of the group receives V from the root")
    _, outputs = _split_start_shape(instr, ctx)
    out = cost(0, data, sum(nbytes(s) for s in outputs), dtype=first_dtype(outputs[0]))
    return replace(out, comm_bytes=float(data), collective=info)


_SEND_RECV_PAIRS = re.compile(r'_xla_send_recv_source_target_pairs="?\{((?:\{\d+,\d+\},?)*)\}')


def _send_recv_pairs(instr: Instruction) -> tuple[tuple[int, int], ...]:
    """The (source, target) pairs XLA states in a send's or recv's frontend attributes."""
    found = _SEND_RECV_PAIRS.search(instr.attr("frontend_attributes"))
    if found is None:
        return ()
    return tuple((int(a), int(b)) for a, b in re.findall(r"\{(\d+),(\d+)\}", found[1]))


@handles("send")
def send(instr: Instruction, ctx: CostContext) -> OpCost:
    # send/recv is a collective-permute spelled as two ops: the send carries the whole transfer
    # (reading the buffer, crossing the link, landing it in the peer's buffer: every device of an
    # SPMD program both sends and receives), the recv and both dones cost nothing.
    data = nbytes(ctx.operand_shapes(instr)[0])
    pairs = _send_recv_pairs(instr)
    info = CollectiveInfo(kind="collective-permute", bytes=float(data), group_size=2, groups=pairs or ((0, 1),),
                          note=(f"send/recv over {len(pairs)} source-target pairs" if pairs else
                                "send/recv: pairs not stated, priced as one neighbour transfer"))
    out = cost(0, data, data, dtype=first_dtype(ctx.operand_shapes(instr)[0]),
               notes=("send: point-to-point transfer; writes the matching recv's buffer",))
    return replace(out, comm_bytes=float(data), collective=info)


@handles("recv")
def recv(instr: Instruction, ctx: CostContext) -> OpCost:
    return zero_cost("recv: its matching send carries the transfer", first_dtype(instr.shape))


@handles("all-gather-done", "all-reduce-done", "collective-permute-done", "reduce-scatter-done",
         "all-to-all-done", "collective-broadcast-done", "ragged-all-to-all-done", "copy-done",
         "send-done", "recv-done", "async-done", "async-update")
def completion(instr: Instruction, ctx: CostContext) -> OpCost:
    start = instr.operands[0] if instr.operands else "its start op"
    return zero_cost(f"{instr.opcode}: completes {start}, which carries the cost", first_dtype(instr.shape))
