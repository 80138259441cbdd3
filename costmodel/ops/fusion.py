"""The fusion handler: the flops of the fused ops, the bytes that cross the fusion boundary
(`ops.fusion_io`), and the collective a fusion carries (`ops.fused_collective`).
"""

from __future__ import annotations

from dataclasses import replace

from ...parsers.hlo.model import Computation, Instruction
from .base import CostContext, computation_flops, cost, first_dtype, handles, on_chip_note, unknown_cost
from ..costs import OpCost
from .compute import asked_precision, convolution_problem, dot_problem
from .fused_collective import carried
from .fusion_io import fusion_bytes, passed_through
from .memory import scatter_atomics


@handles("fusion")
def fusion(instr: Instruction, ctx: CostContext) -> OpCost:
    comp = ctx.called(instr, "calls", 0)
    if comp is None:
        return unknown_cost("fusion without its fused computation", first_dtype(instr.shape))
    carry = carried(instr, comp, ctx)
    if carry is not None and carry.whole is not None:
        return carry.whole
    shapes = ctx.operand_shapes(instr)
    # A fusion without a collective costs what its computation's content and its shapes do.
    key = (comp.name if comp.content is None else comp.content, instr.shape, *shapes)
    known = ctx.fusions.get(key) if carry is None else None
    if known is not None:
        return known
    flops, trans = computation_flops(comp, ctx)
    if flops is None or trans is None:
        return unknown_cost(f"fusion {instr.name} contains an unmodeled op", first_dtype(instr.shape))
    read, written = fusion_bytes(instr, comp, ctx, passed_through(comp) if carry is not None else frozenset())
    notes = on_chip_note(shapes + [instr.shape])
    out = cost(flops, read, written, transcendentals=trans, dtype=_dominant_dtype(comp, instr), notes=notes)
    out = _as_matmul(out, comp, ctx)
    out = replace(out, outputs=len(instr.shape.tuple_shapes) if instr.shape.is_tuple else 1,
                  atomics=_atomics(comp, ctx), serial_reduce=_serial_reduce(instr, comp))
    if carry is not None:
        return carry.onto(out)
    ctx.fusions[key] = out
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


def _atomics(comp: Computation, ctx: CostContext) -> tuple[str, float] | None:
    """The atomic updates of the scatters with a combiner the fusion runs, by the first one's type."""
    found: list[tuple[str, float]] = []
    for inner in comp.instructions:
        if inner.opcode != "scatter":
            continue
        operands = [comp.get(name) for name in inner.operands]
        combiner = ctx.called(inner, "to_apply", 0)
        per = computation_flops(combiner, ctx)[0] if combiner is not None else 1.0
        n = len(operands) // 2
        updates = [o.shape for o in operands[n + 1:] if o is not None]
        atomics = scatter_atomics(inner, updates, per or 0.0)
        found += [atomics] if atomics is not None else []
    return (found[0][0], sum(count for _, count in found)) if found else None


def _serial_reduce(instr: Instruction, comp: Computation) -> int:
    """In a loop fusion (not a reduction fusion, whose emitter splits the reduce over threads), each
    output element of a reduce is one thread's loop over the elements it reduces: the longest chain."""
    if instr.fusion_kind != "kLoop":
        return 0
    longest = 0
    for inner in comp.instructions:
        operand = comp.get(inner.operands[0]) if inner.opcode == "reduce" and inner.operands else None
        if operand is None or operand.shape.is_tuple or inner.shape.is_tuple:
            continue
        longest = max(longest, operand.shape.elements // max(inner.shape.elements, 1))
    return longest


def _dominant_dtype(comp: Computation, instr: Instruction) -> str:
    """The operand dtype of a fused dot or convolution (what sets the peak), else the output dtype."""
    for inner in comp.instructions:
        if inner.opcode in ("dot", "convolution") and inner.operands:
            operand = comp.get(inner.operands[0])
            if operand is not None:
                return first_dtype(operand.shape)
    return first_dtype(instr.shape)


