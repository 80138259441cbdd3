"""Handlers for collectives: the volume V each one moves and the bytes each device sends.

`CollectiveInfo.bytes` is V as the book defines it (`VOLUME` says what it is for each
collective). `comm_bytes` is what one device sends over its links with a ring (or direct)
algorithm among n devices (`network.collectives.bytes_sent`): V(n-1)/n for all-gather,
reduce-scatter and all-to-all, 2V(n-1)/n for all-reduce (a reduce-scatter then an
all-gather), V for a permute or a broadcast. What crosses the links is the logical array, not
its tile-padded buffer, and wherever the buffer lives (HBM or on-chip VMEM); the HBM bytes
read and written are the buffers'.

Every spelling comes from `COLLECTIVES`: each collective, its `X-start` and its `X-done` are
registered from that one list.

Differences from XLA's HloCostAnalysis, on purpose: XLA gives all-gather,
reduce-scatter, all-to-all and collective-permute no cost at all and prices an
all-reduce's flops as if there were 2 replicas (one combine per element). Here
the reduction flops are (n-1)/n combines per element per device, which is what
a ring reduce-scatter does on each device, and every collective carries bytes.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ...parsers.hlo.model import Instruction, Shape
from ...parsers.hlo.opcodes import COLLECTIVES
from ..network.collectives import bytes_sent
from ..costs import CollectiveInfo, OpCost
from ..units import integral
from .base import (CostContext, computation_flops, cost, first_dtype, handles, nbytes,
                   unknown_cost, zero_cost)

# V of the book's formulas for each collective, as one device of the group sees it.
VOLUME: dict[str, str] = {
    "all-gather": "gathered result",
    "all-reduce": "input",
    "reduce-scatter": "input",
    "all-to-all": "local array",
    "collective-permute": "sent buffer",
    "collective-broadcast": "root's buffer",
    "ragged-all-to-all": "local input",
}
STARTS: dict[str, str] = {f"{kind}-start": kind for kind in COLLECTIVES}
DONES: tuple[str, ...] = tuple(f"{kind}-done" for kind in COLLECTIVES)
# Every start but all-reduce's (whose shape is its output) has the shape (operands, output,
# context...): all-gather's and collective-permute's by definition, the others as XLA's sugar
# for an async-start wrapping the collective.
_OUTPUT_SHAPED = ("all-reduce",)
# Collectives that send one buffer, their first operand (the others are indices or sizes).
_ONE_BUFFER = ("collective-permute", "collective-broadcast", "ragged-all-to-all")


def kind_of(opcode: str) -> str | None:
    """The collective an opcode runs (`all-gather-start` -> `all-gather`); None for any other op."""
    return opcode if opcode in COLLECTIVES else STARTS.get(opcode)


def _groups(instr: Instruction, ctx: CostContext) -> tuple[tuple[tuple[int, ...], ...], int | None]:
    """The device groups and their size; no groups means all devices of the program."""
    if instr.replica_groups:
        return instr.replica_groups, len(instr.replica_groups[0])
    if ctx.num_devices:
        return (tuple(range(ctx.num_devices)),), ctx.num_devices
    return (), None


def _split_start_shape(instr: Instruction, ctx: CostContext) -> tuple[list[Shape], list[Shape]]:
    """Inputs and outputs of a collective."""
    inputs = ctx.operand_shapes(instr)
    shape = instr.shape
    tuple_start = instr.opcode in STARTS and STARTS[instr.opcode] not in _OUTPUT_SHAPED
    if tuple_start and shape.is_tuple and len(shape.tuple_shapes) >= 2:
        return inputs, [shape.tuple_shapes[1]]
    return inputs, list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _volume(kind: str, inputs: list[Shape], outputs: list[Shape]) -> float:
    """V in logical bytes: what crosses the links, whatever the tile padding or memory space."""
    if kind == "all-gather":
        return float(sum(s.byte_size for s in outputs))
    if kind in _ONE_BUFFER:
        return float(inputs[0].byte_size) if inputs else 0.0
    return float(sum(s.byte_size for s in inputs))


def _hbm(kind: str, inputs: list[Shape], outputs: list[Shape]) -> tuple[float, float]:
    """(HBM bytes read, written): the buffers as laid out, on-chip ones left out."""
    read = inputs[:1] if kind in _ONE_BUFFER else inputs
    return float(sum(nbytes(s) for s in read)), float(sum(nbytes(s) for s in outputs))


def _reduction(kind: str, instr: Instruction, ctx: CostContext, inputs: list[Shape], n: int,
               ) -> tuple[float, float] | None:
    """(flops, transcendentals) of the combines one device does; None when the reducer is unmodeled."""
    if kind not in ("all-reduce", "reduce-scatter"):
        return 0.0, 0.0
    comp = ctx.called(instr, "to_apply", 0)
    per, per_t = computation_flops(comp, ctx) if comp else (1.0, 0.0)
    if per is None or per_t is None:
        return None
    combines = sum(s.elements for s in inputs) * (n - 1) / n
    return combines * per, combines * per_t


def _placed(instr: Instruction, ctx: CostContext, kind: str) -> tuple[tuple[tuple[int, ...], ...], int | None, str]:
    """(groups, group size, note) of a collective: the pairs of a permute, the replica groups else."""
    if kind == "collective-permute":
        pairs = instr.source_target_pairs
        return (tuple(tuple(p) for p in pairs), 2 if pairs else 1,
                f"{len(pairs)} source-target pairs; a sending device sends V once")
    groups, n = _groups(instr, ctx)
    if kind == "collective-broadcast":
        return groups, n or 0, "every device of the group receives V from the root"
    if kind == "ragged-all-to-all":
        return groups, n, "ragged: assumes the input is spread evenly over the group"
    return groups, n, ""


def price_collective(instr: Instruction, ctx: CostContext, kind: str) -> OpCost:
    """One collective priced as `kind` (its own, or what a fusion makes of it: an all-reduce of
    which each device keeps its 1/n is a reduce-scatter)."""
    dtype = first_dtype(instr.shape)
    groups, n, note = _placed(instr, ctx, kind)
    if n is None:
        return unknown_cost(f"{kind} over all devices, but the device count is unknown "
                            "(pass num_partitions)", dtype)
    inputs, outputs = _split_start_shape(instr, ctx)
    volume = _volume(kind, inputs, outputs)
    reduction = _reduction(kind, instr, ctx, inputs, max(n, 1))
    if reduction is None:
        return unknown_cost(f"{kind}: its reducer has an unmodeled op", dtype)
    sent = (volume if instr.source_target_pairs else 0.0) if kind == "collective-permute" \
        else bytes_sent(kind, volume, max(n, 1))
    info = CollectiveInfo(kind="all-to-all" if kind == "ragged-all-to-all" else kind, bytes=volume,
                          group_size=n, groups=groups,
                          note="; ".join(x for x in (note, f"V = the {VOLUME[kind]}; each device sends "
                                                          f"{integral(sent)} bytes") if x))
    read, written = _hbm(kind, inputs, outputs)
    out = cost(reduction[0], read, written, transcendentals=reduction[1],
               dtype=first_dtype(outputs[0]) if outputs else dtype)
    return replace(out, comm_bytes=float(sent), collective=info)


def collective(instr: Instruction, ctx: CostContext) -> OpCost:
    kind = kind_of(instr.opcode)
    if kind is None:
        return unknown_cost(f"{instr.opcode} is not a collective", first_dtype(instr.shape))
    return price_collective(instr, ctx, kind)


handles(*COLLECTIVES, *STARTS)(collective)


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
    buffer = ctx.operand_shapes(instr)[0]
    data, wire = nbytes(buffer), float(buffer.byte_size)
    pairs = _send_recv_pairs(instr)
    info = CollectiveInfo(kind="collective-permute", bytes=wire, group_size=2, groups=pairs or ((0, 1),),
                          note=(f"send/recv over {len(pairs)} source-target pairs" if pairs else
                                "send/recv: pairs not stated, priced as one neighbour transfer"))
    out = cost(0, data, data, dtype=first_dtype(buffer),
               notes=("send: point-to-point transfer; writes the matching recv's buffer",))
    return replace(out, comm_bytes=wire, collective=info)


@handles("recv")
def recv(instr: Instruction, ctx: CostContext) -> OpCost:
    return zero_cost("recv: its matching send carries the transfer", first_dtype(instr.shape))


def completion(instr: Instruction, ctx: CostContext) -> OpCost:
    start = instr.operands[0] if instr.operands else "its start op"
    return zero_cost(f"{instr.opcode}: completes {start}, which carries the cost", first_dtype(instr.shape))


handles(*DONES, "copy-done", "slice-done", "send-done", "recv-done", "async-done", "async-update")(completion)
