"""Handlers for ops that only move data: copies, layout changes, slicing, gather/scatter.

Slicing ops read only the slice they produce, and in-place updates
(dynamic-update-slice, scatter) touch only the updated region, because that is
the HBM traffic they cause; metadata ops (bitcast, get-tuple-element, tuple,
parameter, constant) cost nothing at run time.
"""

from __future__ import annotations

from dataclasses import replace

from ...parsers.hlo.model import Instruction, Shape
from .base import (CostContext, computation_flops, cost, first_dtype, handles, io_cost,
                          nbytes, on_chip_note, unknown_cost, unmodeled_opcode, with_host_bytes, zero_cost)
from ..costs import OpCost
from .layout import HBM_MEMORY_SPACE, leaf_bytes

_METADATA = {
    "parameter": "parameter: names an input buffer, no work",
    "constant": "constant: a literal baked into the executable, no work",
    "get-tuple-element": "get-tuple-element: selects a tuple member, no data moved",
    "tuple": "tuple: groups buffers, no data moved",
    "bitcast": "bitcast: reinterprets a buffer in place, no data moved",
    "after-all": "after-all: joins ordering tokens, no work",
    "add-dependency": "add-dependency: an ordering edge, no work",
    "opt-barrier": "opt-barrier: blocks reordering, no work",
    "domain": "domain: a sharding annotation, no work",
    "partition-id": "partition-id: reads one register",
    "replica-id": "replica-id: reads one register",
    "get-dimension-size": "get-dimension-size: a shape query",
    "set-dimension-size": "set-dimension-size: updates dynamic shape metadata",
}


@handles(*_METADATA)
def metadata_op(instr: Instruction, ctx: CostContext) -> OpCost:
    return zero_cost(_METADATA[instr.opcode], first_dtype(instr.shape))


@handles("copy", "transpose", "reshape", "broadcast", "reverse", "concatenate", "pad",
         "bitcast-convert", "dynamic-reshape")
def data_movement(instr: Instruction, ctx: CostContext) -> OpCost:
    return io_cost(instr, ctx)


@handles("iota")
def iota(instr: Instruction, ctx: CostContext) -> OpCost:
    return cost(0, 0, nbytes(instr.shape), dtype=first_dtype(instr.shape),
                notes=on_chip_note([instr.shape]) + ("iota: writes its output, reads nothing",))


def _small_operands_bytes(instr: Instruction, ctx: CostContext, skip: int) -> int:
    """Bytes of the operands after the first `skip` (start indices and the like)."""
    return sum(nbytes(s) for s in ctx.operand_shapes(instr)[skip:])


@handles("slice")
def slice_(instr: Instruction, ctx: CostContext) -> OpCost:
    out = nbytes(instr.shape)
    return cost(0, out, out, dtype=first_dtype(instr.shape), notes=("reads only the slice",))


@handles("dynamic-slice")
def dynamic_slice(instr: Instruction, ctx: CostContext) -> OpCost:
    out = nbytes(instr.shape)
    return cost(0, out + _small_operands_bytes(instr, ctx, 1), out,
                dtype=first_dtype(instr.shape), notes=("reads only the slice and its start indices",))


@handles("dynamic-update-slice")
def dynamic_update_slice(instr: Instruction, ctx: CostContext) -> OpCost:
    update = nbytes(ctx.operand_shapes(instr)[1])
    return cost(0, update + _small_operands_bytes(instr, ctx, 2), update, dtype=first_dtype(instr.shape),
                notes=("updates in place: reads the update, writes the updated region",))


@handles("gather")
def gather(instr: Instruction, ctx: CostContext) -> OpCost:
    out = nbytes(instr.shape)
    indices = _small_operands_bytes(instr, ctx, 1)
    # Rows gathered more than once are read once: never more than the whole operand.
    rows = min(out, nbytes(ctx.operand_shapes(instr)[0]))
    return cost(0, rows + indices, out, dtype=first_dtype(instr.shape),
                notes=("reads the gathered rows (each at most once) and the indices",))


@handles("scatter")
def scatter(instr: Instruction, ctx: CostContext) -> OpCost:
    shapes = ctx.operand_shapes(instr)
    n = len(shapes) // 2  # operands..., indices, updates... (as many updates as operands)
    updates = shapes[n + 1:]
    update_elements = sum(s.elements for s in updates)
    comp = ctx.called(instr, "to_apply", 0)
    per = computation_flops(comp, ctx) if comp else (1.0, 0.0)
    if per[0] is None or per[1] is None:
        return unknown_cost("scatter: its combiner has an unmodeled op", first_dtype(instr.shape))
    touched = sum(nbytes(s) for s in updates)
    read = nbytes(shapes[n]) + 2 * touched  # indices, updates, and the region they combine into
    out = cost(update_elements * per[0], read, touched, transcendentals=update_elements * per[1],
               dtype=first_dtype(instr.shape),
               notes=("updates in place: reads indices, updates and the touched region",))
    return replace(out, atomics=scatter_atomics(instr, updates, per[0]))


def scatter_atomics(instr: Instruction, updates: list[Shape], combiner_flops: float) -> tuple[str, float] | None:
    """(element type, updates) a scatter combines into its operand with read-modify-writes: a
    combiner that computes (scatter-add) over indices not declared unique runs as atomics on a GPU."""
    if combiner_flops <= 0 or instr.attr("unique_indices") == "true" or not updates:
        return None
    return first_dtype(updates[0]), float(sum(s.elements for s in updates))


@handles("copy-start")
def copy_start(instr: Instruction, ctx: CostContext) -> OpCost:
    # Shape is (destination, source, context): the copy reads the operand, writes the destination.
    source = ctx.operand_shapes(instr)[0]
    dest = instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape
    out = cost(0, nbytes(source), nbytes(dest), dtype=first_dtype(dest),
               notes=on_chip_note([source, dest]) + ("asynchronous copy; copy-done completes it",))
    return with_host_bytes(out, [source, dest])


@handles("slice-start")
def slice_start(instr: Instruction, ctx: CostContext) -> OpCost:
    # Shape is ((source,), slice, context), as TPU XLA writes an asynchronous slice (into VMEM, S(1),
    # to feed a windowed matmul): the slice is read where the source lies and written to its own space.
    dest = instr.shape.tuple_shapes[1] if instr.shape.is_tuple and len(instr.shape.tuple_shapes) > 1 else instr.shape
    source = ctx.operand_shapes(instr)[0] if instr.operands else dest
    read = leaf_bytes(dest) if source.memory_space == HBM_MEMORY_SPACE else 0
    return cost(0, read, nbytes(dest), dtype=first_dtype(dest),
                notes=on_chip_note([dest]) + ("asynchronous slice: reads only the slice; slice-done completes it",))


@handles("infeed")
def host_or_channel_in(instr: Instruction, ctx: CostContext) -> OpCost:
    data = instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape
    return cost(0, 0, nbytes(data), dtype=first_dtype(data),
                notes=(f"{instr.opcode}: writes the received buffer; transfer time is not HBM bound",))


@handles("outfeed")
def outfeed(instr: Instruction, ctx: CostContext) -> OpCost:
    data = ctx.operand_shapes(instr)[0]
    return cost(0, nbytes(data), 0, dtype=first_dtype(data),
                notes=("outfeed: reads the buffer sent to the host",))


unmodeled_opcode("shuffle", "shuffle: permutation semantics are backend specific")
unmodeled_opcode("rng-get-and-update-state", "rng-get-and-update-state: a runtime state update, no data model")
