"""Handlers for ops that do arithmetic: elementwise, dot, convolution, reductions, sort.

Counting follows XLA's HloCostAnalysis so totals can be checked against it:
one flop per output element for elementwise ops, transcendental functions
counted separately, 2 flops per multiply-add in dot and convolution, and a
reduction's flops are the reducer's flops times the number of combines.
Bytes: an unfused op reads each operand and writes its output once.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ...parsers.hlo.model import Instruction, Shape
from ...parsers.hlo.opcodes import ARITHMETIC, TRANSCENDENTAL
from .base import (CostContext, computation_flops, first_dtype, handles, io_cost,
                          unknown_cost, unmodeled_opcode)
from .complex_flops import CONTRACTION_NOTE, complex_elementwise, contraction_factor, is_complex
from .window import conv_valid_positions, window_of
from ..costs import OpCost

@handles(*TRANSCENDENTAL)
def transcendental(instr: Instruction, ctx: CostContext) -> OpCost:
    if _complex_operand(instr, ctx):
        return _complex_elementwise(instr, ctx, transcendental=True)
    return io_cost(instr, ctx, transcendentals=instr.shape.elements)


@handles(*ARITHMETIC)
def elementwise(instr: Instruction, ctx: CostContext) -> OpCost:
    if _complex_operand(instr, ctx):
        return _complex_elementwise(instr, ctx, transcendental=False)
    return io_cost(instr, ctx, flops=instr.shape.elements)


def _complex_operand(instr: Instruction, ctx: CostContext) -> bool:
    shapes = ctx.operand_shapes(instr) if instr.operands else []
    return any(is_complex(s.dtype) for s in shapes[:1]) or (not shapes and is_complex(instr.shape.dtype))


def _complex_elementwise(instr: Instruction, ctx: CostContext, *, transcendental: bool) -> OpCost:
    flops, trans = complex_elementwise(instr.opcode, transcendental)
    out = io_cost(instr, ctx, flops=flops * instr.shape.elements, transcendentals=trans * instr.shape.elements)
    # Its arithmetic runs on the units of the parts' type, whatever the result's type (abs, real, imag).
    operand = ctx.operand_shapes(instr)[0].dtype if instr.operands else instr.shape.dtype
    return replace(out, dtype=operand)


def _product(values: list[int]) -> int:
    return math.prod(values) if values else 1


def dot_flops(lhs_dims: tuple[int, ...], lhs_contracting: tuple[int, ...], out_elements: int) -> int:
    """2 flops (multiply + add) per output element per contracted element."""
    return 2 * out_elements * _product([lhs_dims[d] for d in lhs_contracting])


def gemm_problem(lhs: tuple[int, ...], rhs: tuple[int, ...], lhs_batch: tuple[int, ...],
                 lhs_contracting: tuple[int, ...], rhs_batch: tuple[int, ...],
                 rhs_contracting: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of a dot from its operand dimensions and dimension numbers (None when
    the numbers do not fit the shapes)."""
    if any(d >= len(lhs) for d in lhs_batch + lhs_contracting) or \
            any(d >= len(rhs) for d in rhs_batch + rhs_contracting):
        return None
    batch = _product([lhs[d] for d in lhs_batch])
    k = _product([lhs[d] for d in lhs_contracting])
    m = _product([n for i, n in enumerate(lhs) if i not in lhs_batch and i not in lhs_contracting])
    n = _product([n for i, n in enumerate(rhs) if i not in rhs_batch and i not in rhs_contracting])
    return batch, m, n, k


def dot_problem(instr: Instruction, shapes: list[Shape]) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of an HLO dot whose operand shapes are `shapes`."""
    if instr.dot is None or len(shapes) < 2:
        return None
    d = instr.dot
    return gemm_problem(shapes[0].dims, shapes[1].dims, d.lhs_batch, d.lhs_contracting, d.rhs_batch,
                        d.rhs_contracting)


@handles("dot")
def dot(instr: Instruction, ctx: CostContext) -> OpCost:
    if instr.dot is None:
        return unknown_cost("dot without dimension numbers", first_dtype(instr.shape))
    shapes = ctx.operand_shapes(instr)
    lhs = shapes[0]
    flops = dot_flops(lhs.dims, instr.dot.lhs_contracting, instr.shape.elements) * contraction_factor(lhs.dtype)
    out = io_cost(instr, ctx, flops=flops, note=CONTRACTION_NOTE if is_complex(lhs.dtype) else "")
    return replace(out, dtype=lhs.dtype, precision=asked_precision(instr), gemm=dot_problem(instr, shapes))


def asked_precision(instr: Instruction) -> str:
    """What a dot or convolution asks of the matrix units: its `algorithm=`, else the highest of
    its `operand_precision={...}`, else `default` (chips.precision prices it)."""
    algorithm = instr.attr("algorithm")
    if algorithm:
        return algorithm.lower()
    asked = [p.strip().lower() for p in instr.attr("operand_precision").strip("{} ").split(",") if p.strip()]
    for level in ("highest", "high"):
        if level in asked:
            return level
    return "default"


@handles("ragged-dot")
def ragged_dot(instr: Instruction, ctx: CostContext) -> OpCost:
    # Each row of lhs meets exactly one group of rhs, so the work is that of lhs @ one group.
    lhs, rhs = ctx.operand_shapes(instr)[:2]
    contracting = lhs.dims[-1] if lhs.dims else 1
    out = io_cost(instr, ctx, flops=2 * instr.shape.elements * contracting * contraction_factor(lhs.dtype),
                  note="ragged-dot: each lhs row is multiplied by one rhs group")
    return replace(out, dtype=lhs.dtype)


def convolution_flops(instr: Instruction, lhs: Shape, rhs: Shape, out: Shape) -> int:
    """2 flops per multiply-add over window positions that land on real (unpadded) input."""
    conv = instr.conv
    if conv is None:
        raise ValueError("convolution without dimension numbers")
    windows = window_of(instr, lhs, out, rhs)
    valid = 1
    for i, w in enumerate(windows):
        valid *= conv_valid_positions(lhs.dims[conv.input_spatial[i]], out.dims[conv.output_spatial[i]], w)
    fma = (rhs.dims[conv.kernel_input_feature] * out.dims[conv.output_feature]
           * out.dims[conv.output_batch] * valid)
    return 2 * fma * contraction_factor(lhs.dtype)


def convolution_problem(instr: Instruction, rhs: Shape,
                        out: Shape) -> tuple[int, tuple[int, ...], int, int, tuple[int, ...]] | None:
    """(batch, output spatial sizes, input channels, output channels, kernel spatial sizes) of a
    convolution whose forward filter and output are `rhs` and `out` (None when the dimension numbers
    do not fit the shapes)."""
    conv = instr.conv
    dims = (conv.output_batch, conv.output_feature, *conv.output_spatial) if conv is not None else ()
    if conv is None or any(d >= len(out.dims) for d in dims) or \
            any(d >= len(rhs.dims) for d in (conv.kernel_input_feature, *conv.kernel_spatial)):
        return None
    return (out.dims[conv.output_batch], tuple(out.dims[d] for d in conv.output_spatial),
            rhs.dims[conv.kernel_input_feature], out.dims[conv.output_feature],
            tuple(rhs.dims[d] for d in conv.kernel_spatial))


@handles("convolution")
def convolution(instr: Instruction, ctx: CostContext) -> OpCost:
    lhs, rhs = ctx.operand_shapes(instr)[:2]
    out = io_cost(instr, ctx, flops=convolution_flops(instr, lhs, rhs, instr.shape))
    return replace(out, dtype=lhs.dtype, precision=asked_precision(instr),
                   convolution=convolution_problem(instr, rhs, instr.shape))


def _applied(instr: Instruction, ctx: CostContext) -> tuple[float | None, float | None]:
    comp = ctx.called(instr, "to_apply", 0)
    if comp is None:
        return 1.0, 0.0  # the reducer is not in the module: assume one flop per combine
    return computation_flops(comp, ctx)


def _scaled_by_reducer(instr: Instruction, ctx: CostContext, applications: int, what: str) -> OpCost:
    flops, trans = _applied(instr, ctx)
    if flops is None or trans is None:
        return unknown_cost(f"{what}: its applied computation has an unmodeled op", first_dtype(instr.shape))
    return io_cost(instr, ctx, flops=applications * flops, transcendentals=applications * trans)


@handles("reduce")
def reduce(instr: Instruction, ctx: CostContext) -> OpCost:
    inputs = ctx.operand_shapes(instr)
    out_elements = next(instr.shape.leaves()).elements
    return _scaled_by_reducer(instr, ctx, inputs[0].elements - out_elements, "reduce")


@handles("reduce-window")
def reduce_window(instr: Instruction, ctx: CostContext) -> OpCost:
    inputs = ctx.operand_shapes(instr)
    out = next(instr.shape.leaves())
    windows = window_of(instr, inputs[0], out)
    size = _product([w.size for w in windows])
    return _scaled_by_reducer(instr, ctx, out.elements * (size - 1), "reduce-window")


@handles("map")
def map_(instr: Instruction, ctx: CostContext) -> OpCost:
    return _scaled_by_reducer(instr, ctx, instr.shape.elements, "map")


@handles("select-and-scatter")
def select_and_scatter(instr: Instruction, ctx: CostContext) -> OpCost:
    # One select per window element of every source element, one scatter-combine per source element.
    operand, source = ctx.operand_shapes(instr)[:2]
    windows = window_of(instr, operand, source)
    size = _product([w.size for w in windows])
    select = ctx.called(instr, "select", 0)
    scatter = ctx.called(instr, "scatter", 1)
    sel_flops = computation_flops(select, ctx)[0] if select else 1.0
    sc_flops = computation_flops(scatter, ctx)[0] if scatter else 1.0
    if sel_flops is None or sc_flops is None:
        return unknown_cost("select-and-scatter: an applied computation has an unmodeled op")
    return io_cost(instr, ctx, flops=source.elements * ((size - 1) * sel_flops + sc_flops))


@handles("sort")
def sort(instr: Instruction, ctx: CostContext) -> OpCost:
    keys = ctx.operand_shapes(instr)[0]
    dim = instr.dimensions[0] if instr.dimensions else len(keys.dims) - 1
    n = keys.dims[dim] if keys.dims else 1
    comparisons = keys.elements * max(1, math.ceil(math.log2(n))) if n > 1 else 0
    comparator = ctx.called(instr, "to_apply", 0)
    per = computation_flops(comparator, ctx)[0] if comparator else 1.0
    if per is None:
        return unknown_cost("sort: comparator has an unmodeled op")
    return io_cost(instr, ctx, flops=comparisons * per,
                   note="n*log2(n) comparisons along the sort dimension (XLA uses log2 of all elements)")


@handles("topk")
def topk(instr: Instruction, ctx: CostContext) -> OpCost:
    operand = ctx.operand_shapes(instr)[0]
    k = next(instr.shape.leaves()).dims[-1] if operand.dims else 1
    return io_cost(instr, ctx, flops=operand.elements * max(1, math.ceil(math.log2(max(k, 2)))),
                   note="one pass over the input keeping a k-heap: n*log2(k) comparisons")


@handles("rng", "rng-bit-generator")
def rng(instr: Instruction, ctx: CostContext) -> OpCost:
    generated = sum(leaf.elements for leaf in instr.shape.leaves())
    return io_cost(instr, ctx, flops=generated, note="one flop per generated element")


def fft_lengths(instr: Instruction) -> tuple[int, ...]:
    """`fft_length={4096}` (the transform's sizes, innermost dimensions), from text or proto."""
    text = instr.attr("fft_length").strip("{} ")
    return tuple(int(v) for v in text.split(",") if v.strip()) if text else ()


@handles("fft")
def fft(instr: Instruction, ctx: CostContext) -> OpCost:
    # FFT/IFFT are complex to complex; RFFT (real in, N/2+1 complex out) and IRFFT (the
    # reverse) do about half the work, but are counted like a complex transform of length N,
    # as the usual 5 N log2 N rule (and XLA's own count) does.
    lengths = fft_lengths(instr)
    if not lengths:
        return unknown_cost("fft without fft_length", first_dtype(instr.shape))
    n = _product(list(lengths))
    kind = instr.attr("fft_type") or "FFT"
    # The side with N points per transform: the real input of an RFFT, else the output.
    full = ctx.operand_shapes(instr)[0] if kind == "RFFT" else instr.shape
    transforms = full.elements // n if n else 0
    flops = 5 * n * math.log2(n) * transforms if n > 1 else 0
    out = io_cost(instr, ctx, flops=flops,
                  note=f"{kind}: 5*N*log2(N) real flops per transform of length N={n}, {transforms} transforms")
    # The butterflies run on the units of the complex side's parts (c64: f32, c128: f64).
    side = ctx.operand_shapes(instr)[0] if kind != "RFFT" else instr.shape
    return replace(out, dtype=next((d for d in (side.dtype, full.dtype) if is_complex(d)), out.dtype))


@handles("cholesky")
def cholesky(instr: Instruction, ctx: CostContext) -> OpCost:
    n = instr.shape.dims[-1] if instr.shape.dims else 1
    batch = instr.shape.elements // (n * n) if n else 0
    return io_cost(instr, ctx, flops=batch * n ** 3 / 3, note="n^3/3 flops per n x n factorization")


@handles("triangular-solve")
def triangular_solve(instr: Instruction, ctx: CostContext) -> OpCost:
    a = ctx.operand_shapes(instr)[0]
    n = a.dims[-1] if a.dims else 1
    batch = a.elements // (n * n) if n else 0
    rhs_columns = instr.shape.elements // (batch * n) if batch and n else 0
    return io_cost(instr, ctx, flops=batch * n * n * rhs_columns,
                   note="n^2 flops per right-hand side of an n x n triangular system")


unmodeled_opcode("batch-norm-training", "batch norm ops are expanded into elementwise ops by XLA before codegen")
unmodeled_opcode("batch-norm-inference", "batch norm ops are expanded into elementwise ops by XLA before codegen")
unmodeled_opcode("batch-norm-grad", "batch norm ops are expanded into elementwise ops by XLA before codegen")
unmodeled_opcode("scaled-dot", "block-scaled dot: scale layout semantics are backend specific")
unmodeled_opcode("scan", "scan is lowered to a while loop before codegen; the loop is costed instead")
