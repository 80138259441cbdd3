"""The fusion handler: the flops of the fused ops, the bytes that cross the fusion boundary.

Inside a fusion intermediate values stay in registers or on-chip memory, so
only the fusion's inputs and outputs touch HBM, and each input only as far as
the fused code uses it (XLA's operand utilization): an input that is sliced,
dynamic-sliced or gathered, directly or after elementwise ops, costs the part
selected; a broadcast input is read once. An output that is a
dynamic-update-slice or scatter into an input is updated in place, so that
input is not read and only the update is written.
"""

from __future__ import annotations

from dataclasses import replace

from ...parsers.hlo_model import Computation, Instruction, Shape
from ...parsers.hlo_opcodes import COLLECTIVES, ELEMENTWISE
from .base import (CostContext, computation_flops, cost, cost_instruction, first_dtype, handles,
                          nbytes, on_chip_note, unknown_cost, zero_cost)
from ..records import OpCost
from .compute import asked_precision, convolution_problem, dot_problem

_SLICING = ("slice", "dynamic-slice", "gather")
_IN_PLACE = ("dynamic-update-slice", "scatter")
_PASS_THROUGH = ("bitcast",)
# Ops whose output element i needs only operand element i (or a same-size rearrangement of
# them): the fraction of the output that is used is the fraction of each operand that is read.
_PROPORTIONAL = ELEMENTWISE | {"bitcast", "reshape", "copy", "transpose", "reverse", "tuple",
                               "get-tuple-element"}


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


def _outputs(comp: Computation) -> list[Instruction | None]:
    root = comp.root_instruction
    return [comp.get(n) for n in root.operands] if root.opcode == "tuple" else [root]


def _in_place_updates(comp: Computation) -> dict[int, tuple[str, float]]:
    """Output index -> (aliased parameter name, bytes written) for outputs that update a fused
    input in place: a dynamic-update-slice writes its update, a scatter its updates."""
    found: dict[int, tuple[str, float]] = {}
    for index, out in enumerate(_outputs(comp)):
        if out is None or out.opcode not in _IN_PLACE or len(out.operands) < 2:
            continue
        target = comp.get(_through_bitcasts(out.operands[0], comp))
        if out.opcode == "dynamic-update-slice":
            names = [out.operands[1]]
        else:  # scatter(operand, indices, update): the single-operand form fusions hold
            names = list(out.operands[len(out.operands) // 2 + 1:])
        updates = [u for u in (comp.get(n) for n in names) if u is not None]
        if target is not None and target.opcode == "parameter" and updates and len(updates) == len(names):
            found[index] = (target.name, float(sum(nbytes(u.shape) for u in updates)))
    return found


def _ratio(part: Shape, whole: Shape) -> float:
    return part.elements / whole.elements if whole.elements else 1.0


def utilization(comp: Computation, ctx: CostContext, in_place: frozenset[str] = frozenset()) -> dict[str, float]:
    """Fraction of each value of a fused computation that the fusion's outputs need, walked
    from the root back: a slice, dynamic-slice or gather needs the part it selects, an
    elementwise op what its users need, a broadcast its operand once, any other op its whole
    operands. Uses add up (capped at 1). `in_place` names root updates (dynamic-update-slice,
    scatter) whose target buffer is updated in place and so not read."""
    util: dict[str, float] = {comp.root_instruction.name: 1.0}
    for instr in reversed(comp.instructions):
        used = min(util.get(instr.name, 0.0), 1.0)
        if used <= 0.0:
            continue
        for position, name in enumerate(instr.operands):
            operand = comp.get(name)
            if operand is not None:
                share = _operand_share(instr, position, operand, used, ctx, in_place)
                util[name] = util.get(name, 0.0) + share
    return util


def _operand_share(instr: Instruction, position: int, operand: Instruction, used: float,
                   ctx: CostContext, in_place: frozenset[str]) -> float:
    """Fraction of `operand` that `instr` reads when `used` of its output is needed."""
    opcode = instr.opcode
    if opcode in _IN_PLACE and instr.name in in_place and position == 0:
        return 0.0
    if opcode in _SLICING:
        return min(1.0, used * _ratio(instr.shape, operand.shape)) if position == 0 else 1.0
    if opcode == "broadcast":
        return min(1.0, used * _ratio(instr.shape, operand.shape))
    if opcode in _PROPORTIONAL and not operand.shape.is_tuple and not instr.shape.is_tuple:
        return used
    if opcode == "fusion":
        inner = ctx.called(instr, "calls", 0)
        params = parameters_by_index(inner) if inner is not None else {}
        if inner is not None and position in params:
            return min(1.0, utilization(inner, ctx).get(params[position].name, 0.0))
    return 1.0


def fusion_bytes(instr: Instruction, comp: Computation, ctx: CostContext) -> tuple[float, float]:
    """(bytes read, bytes written) across the boundary of one fusion: each input by the
    fraction of it the fused code uses, each output whole unless it updates an input in place."""
    in_place = _in_place_updates(comp)
    outputs = _outputs(comp)
    util = utilization(comp, ctx, frozenset(o.name for i in in_place if (o := outputs[i]) is not None))
    params = parameters_by_index(comp)
    read = sum(nbytes(shape) * (min(util.get(params[i].name, 0.0), 1.0) if i in params else 1.0)
               for i, shape in enumerate(ctx.operand_shapes(instr)))
    # An in-place scatter combines each update with the element it replaces, so reads that too.
    read += sum(b for i, (_, b) in in_place.items() if (o := outputs[i]) is not None and o.opcode == "scatter")
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
    shapes = ctx.operand_shapes(instr)
    key = (comp.name, instr.shape, *shapes)
    known = ctx.fusions.get(key)
    if known is not None:
        return known
    flops, trans = computation_flops(comp, ctx)
    if flops is None or trans is None:
        return unknown_cost(f"fusion {instr.name} contains an unmodeled op", first_dtype(instr.shape))
    read, written = fusion_bytes(instr, comp, ctx)
    notes = on_chip_note(shapes + [instr.shape])
    out = cost(flops, read, written, transcendentals=trans, dtype=_dominant_dtype(comp, instr), notes=notes)
    ctx.fusions[key] = out = _as_matmul(out, comp, ctx)
    return out


def _as_matmul(out: OpCost, comp: Computation, ctx: CostContext) -> OpCost:
    """A fusion built around dots or convolutions (a Triton or cuBLAS GEMM fusion, a TPU matmul
    fusion, a dot with its epilogue) runs on the matrix units like them: the first one's precision
    prices it, and a single dot's problem (batch, M, N, K) sets its tile quantization."""
    convs = [i for i in comp.instructions if i.opcode == "convolution"]
    if len(convs) == 1 and len(convs[0].operands) >= 2 and (kernel := comp.get(convs[0].operands[1])) is not None:
        out = replace(out, convolution=convolution_problem(convs[0], kernel.shape, convs[0].shape))
    contractions = [i for i in comp.instructions if i.opcode in ("dot", "convolution")]
    if not contractions:
        return out
    first = contractions[0]
    gemm = None
    if len(contractions) == 1 and first.opcode == "dot":
        operands = [comp.get(name) for name in first.operands]
        shapes = [o.shape for o in operands if o is not None]
        gemm = dot_problem(first, shapes) if len(shapes) == len(operands) else None
    return replace(out, precision=asked_precision(first), gemm=gemm)


def _dominant_dtype(comp: Computation, instr: Instruction) -> str:
    """The operand dtype of a fused dot or convolution (what sets the peak), else the output dtype."""
    for inner in comp.instructions:
        if inner.opcode in ("dot", "convolution") and inner.operands:
            operand = comp.get(inner.operands[0])
            if operand is not None:
                return first_dtype(operand.shape)
    return first_dtype(instr.shape)


def _tpu_async_collective(instr: Instruction, comp: Computation, ctx: CostContext) -> OpCost | None:
    """TPU wraps an async collective in a pair of custom fusions: the start fusion holds the
    collective and an `AsyncCollectiveStart` custom call, the done fusion repeats it next to
    `AsyncCollectiveDone`. Cost the collective on the start; the done only completes it."""
    targets = {i.custom_call_target for i in comp.instructions if i.opcode == "custom-call"}
    inner = next((i for i in comp.instructions if i.opcode in COLLECTIVES), None)
    if inner is None or not targets & {"AsyncCollectiveStart", "AsyncCollectiveDone"}:
        return None
    if "AsyncCollectiveDone" in targets:
        return zero_cost(f"completes the async {inner.opcode} started earlier (costed on its start)",
                         first_dtype(inner.shape))
    started = cost_instruction(inner, ctx)
    return replace(started, notes=started.notes + (
        f"TPU async {inner.opcode}: costed as the collective its start fusion wraps",))
