"""The fusion handler: the flops of the fused ops, the bytes that cross the fusion boundary.

Inside a fusion intermediate values stay in registers or on-chip memory, so
only the fusion's inputs and outputs touch HBM. An input that the fused code
only slices (slice, dynamic-slice, gather) costs the slices, not the whole
array; an output that is a dynamic-update-slice of an input is updated in
place, so that input is not read and only the update is written.
"""

from __future__ import annotations

from ...parsers.hlo_model import Computation, Instruction
from .base import (CostContext, computation_flops, cost, cost_instruction, first_dtype, handles,
                          nbytes, on_chip_note, unknown_cost, zero_cost)
from ..records import OpCost

_SLICING = ("slice", "dynamic-slice", "gather")
_PASS_THROUGH = ("bitcast",)


def parameters_by_index(comp: Computation) -> dict[int, Instruction]:
    """Parameters keyed by parameter number (stated by the reader, else order of appearance)."""
    params = [i for i in comp.instructions if i.opcode == "parameter"]
    out: dict[int, Instruction] = {}
    for position, p in enumerate(params):
        stated = p.attr("parameter_number")
        out[int(stated) if stated.isdigit() else position] = p
    return out


def _through_bitcasts(name: str, comp: Computation) -> str:
    instr = comp.get(name)
    while instr is not None and instr.opcode in _PASS_THROUGH and instr.operands:
        name = instr.operands[0]
        instr = comp.get(name)
    return name


def _in_place_updates(comp: Computation) -> dict[int, tuple[str, float]]:
    """Output index -> (aliased parameter name, update bytes) for in-place dynamic-update-slices."""
    root = comp.root_instruction
    outputs = [comp.get(n) for n in root.operands] if root.opcode == "tuple" else [root]
    found: dict[int, tuple[str, float]] = {}
    for index, out in enumerate(outputs):
        if out is None or out.opcode != "dynamic-update-slice":
            continue
        target = comp.get(_through_bitcasts(out.operands[0], comp))
        update = comp.get(out.operands[1])
        if target is not None and target.opcode == "parameter" and update is not None:
            found[index] = (target.name, float(nbytes(update.shape)))
    return found


def _sliced_bytes(param: Instruction, comp: Computation, ctx: CostContext) -> float | None:
    """Bytes read of a fused input that is only sliced (directly or inside a nested fusion);
    None when some use needs the whole input."""
    uses = [u for u in comp.instructions if param.name in u.operands]
    if not uses:
        return None
    total = 0.0
    for use in uses:
        if use.opcode in _SLICING and use.operands[0] == param.name and param.name not in use.operands[1:]:
            total += nbytes(use.shape)
            continue
        inner = ctx.called(use, "calls", 0) if use.opcode == "fusion" else None
        if inner is None:
            return None
        inner_params = parameters_by_index(inner)
        for index, name in enumerate(use.operands):
            if name != param.name:
                continue
            sliced = _sliced_bytes(inner_params[index], inner, ctx) if index in inner_params else None
            if sliced is None:
                return None
            total += sliced
    return total


def fusion_bytes(instr: Instruction, comp: Computation, ctx: CostContext) -> tuple[float, float]:
    """(bytes read, bytes written) across the boundary of one fusion."""
    in_place = _in_place_updates(comp)
    aliased = {name for name, _ in in_place.values()}
    params = parameters_by_index(comp)
    read = 0.0
    for index, shape in enumerate(ctx.operand_shapes(instr)):
        param = params.get(index)
        if param is None:
            read += nbytes(shape)
        elif param.name not in aliased:
            sliced = _sliced_bytes(param, comp, ctx)
            read += nbytes(shape) if sliced is None else min(float(nbytes(shape)), sliced)
    leaves = list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]
    written = sum(in_place[i][1] if i in in_place else float(nbytes(leaf)) for i, leaf in enumerate(leaves))
    return read, written


@handles("fusion")
def fusion(instr: Instruction, ctx: CostContext) -> OpCost:
    comp = ctx.called(instr, "calls", 0)
    if comp is None:
        return unknown_cost("fusion without its fused computation", first_dtype(instr.shape))
    async_cost = _tpu_async_collective(instr, comp, ctx)
    if async_cost is not None:
        return async_cost
    flops, trans = computation_flops(comp, ctx)
    if flops is None or trans is None:
        return unknown_cost(f"fusion {instr.name} contains an unmodeled op", first_dtype(instr.shape))
    read, written = fusion_bytes(instr, comp, ctx)
    notes = on_chip_note(ctx.operand_shapes(instr) + [instr.shape])
    return cost(flops, read, written, transcendentals=trans, dtype=_dominant_dtype(comp, instr), notes=notes)


def _dominant_dtype(comp: Computation, instr: Instruction) -> str:
    """The operand dtype of a fused dot or convolution (what sets the peak), else the output dtype."""
    for inner in comp.instructions:
        if inner.opcode in ("dot", "convolution") and inner.operands:
            operand = comp.get(inner.operands[0])
            if operand is not None:
                return first_dtype(operand.shape)
    return first_dtype(instr.shape)


_COLLECTIVES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")


def _tpu_async_collective(instr: Instruction, comp: Computation, ctx: CostContext) -> OpCost | None:
    """TPU wraps an async collective in a pair of custom fusions: the start fusion holds the
    collective and an `AsyncCollectiveStart` custom call, the done fusion repeats it next to
    `AsyncCollectiveDone`. Cost the collective on the start; the done only completes it."""
    targets = {i.custom_call_target for i in comp.instructions if i.opcode == "custom-call"}
    inner = next((i for i in comp.instructions if i.opcode in _COLLECTIVES), None)
    if inner is None or not targets & {"AsyncCollectiveStart", "AsyncCollectiveDone"}:
        return None
    if "AsyncCollectiveDone" in targets:
        return zero_cost(f"completes the async {inner.opcode} started earlier (costed on its start)",
                         first_dtype(inner.shape))
    started = cost_instruction(inner, ctx)
    return OpCost(**{**started.__dict__, "notes": started.notes + (
        f"TPU async {inner.opcode}: costed as the collective its start fusion wraps",)})
