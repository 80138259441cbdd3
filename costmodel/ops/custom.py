"""Custom calls: library GEMMs, cuDNN convolution and attention, Pallas/Mosaic kernels.

XLA's HloCostAnalysis gives every custom call -1 (unknown). Here a cuBLAS GEMM
is costed from its operands and the dot dimensions in its backend_config, a
cuDNN convolution from its convolution dimensions, fused attention (cuDNN's,
TransformerEngine's, Pallas flash/splash) by costmodel.ops.attention,
and a Mosaic `tpu_custom_call` from the cost estimate
the kernel author attached (provenance `xla`: stated in the program, not derived
here). Annotation targets cost nothing. Any other kernel is opaque, but it still has to
read its operands and write its results: it gets that memory time as a lower bound (FLOPs
unknown, or stated by the trace), marked `lower_bound` with the reason.
"""

from __future__ import annotations

import math
from dataclasses import replace
from ...parsers.hlo.model import Instruction, Shape
from .attention import (CUDNN_PREFIX, cudnn_attention_cost, is_te_attention, pallas_attention,
                        pallas_attention_cost, te_attention_cost)
from .base import (CostContext, backend_json, cost, first_dtype, handles, nbytes, unknown_cost,
                          zero_cost)
from .complex_flops import CONTRACTION_NOTE, contraction_factor, is_complex
from .compute import convolution_flops, convolution_problem, dot_flops, gemm_problem
from ..costs import OpCost

GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8", "__rocblas$gemm",
                "__hipblas$lt$matmul")
CONV_PREFIX = "__cudnn$conv"
# Targets that only annotate, alias or reserve buffers: no arithmetic, no HBM traffic of their own.
ANNOTATIONS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "AllocateBuffer", "Noop",
               "PrepareAsyncCallStart", "PrepareAsyncCallDone", "AssumeGatherIndicesInBound",
               "annotate_device_placement", "InspectSharding", "LayoutConstraint", "X64Combine",
               "X64SplitLow", "X64SplitHigh",
               # Memory space assignment's sliced prefetch lands its slices side by side; this names them as
               # one buffer (XLA's kConcatBitcastCustomCall).
               "ConcatBitcast")


def _ints(values: object) -> tuple[int, ...]:
    return tuple(int(v) for v in values) if isinstance(values, list) else ()


def _result(instr: Instruction) -> Shape:
    """The result array of a library call whose output is (result, workspace)."""
    return instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape


def gemm_cost(instr: Instruction, ctx: CostContext) -> OpCost:
    config = backend_json(instr).get("gemm_backend_config", {})
    dims = config.get("dot_dimension_numbers")
    if not isinstance(dims, dict):
        return unknown_cost(f"{instr.custom_call_target} without dot_dimension_numbers", first_dtype(_result(instr)))
    shapes = ctx.operand_shapes(instr)
    out = _result(instr)
    factor = contraction_factor(shapes[0].dtype)
    flops = dot_flops(shapes[0].dims, _ints(dims.get("lhs_contracting_dimensions", [])), out.elements) * factor
    read = nbytes(shapes[0]) + nbytes(shapes[1])
    notes = [f"{2 * factor}*M*N*K from operand shapes and gemm_backend_config dot dimensions"]
    if is_complex(shapes[0].dtype):
        notes.append(CONTRACTION_NOTE)
    if float(config.get("beta", 0) or 0) != 0 and len(shapes) > 2:
        read += nbytes(shapes[2])
        notes.append("beta != 0: also reads C; the M*N accumulate is not counted in flops")
    if config.get("epilogue", "DEFAULT") not in ("DEFAULT", ""):
        notes.append(f"epilogue {config['epilogue']} not counted in flops")
    problem = gemm_problem(shapes[0].dims, shapes[1].dims if len(shapes) > 1 else (),
                           _ints(dims.get("lhs_batch_dimensions", [])),
                           _ints(dims.get("lhs_contracting_dimensions", [])),
                           _ints(dims.get("rhs_batch_dimensions", [])),
                           _ints(dims.get("rhs_contracting_dimensions", [])))
    return replace(cost(flops, read, nbytes(out), dtype=shapes[0].dtype, notes=tuple(notes)),
                   precision=_gemm_precision(config.get("precision_config")), gemm=problem)


def _gemm_precision(config: object) -> str:
    """A GEMM's precision_config as a dot states it: `ALG_DOT_TF32_TF32_F32` -> `dot_tf32_tf32_f32`,
    else the highest operand precision, else `default`."""
    if not isinstance(config, dict):
        return "default"
    algorithm = str(config.get("algorithm", "") or "")
    if algorithm.startswith("ALG_") and algorithm != "ALG_UNSET":
        return algorithm[4:].lower()
    asked = [str(p).lower() for p in config.get("operand_precision", []) or []]
    return next((level for level in ("highest", "high") if level in asked), "default")


def conv_custom_cost(instr: Instruction, ctx: CostContext) -> OpCost:
    if instr.conv is None:
        return unknown_cost(f"{instr.custom_call_target} without convolution dimension numbers",
                            first_dtype(_result(instr)))
    shapes = ctx.operand_shapes(instr)
    out = _result(instr)
    target = instr.custom_call_target
    # The dimension numbers describe the forward convolution: input, filter -> output.
    if "BackwardInput" in target:
        fwd = (out, shapes[1], shapes[0])
    elif "BackwardFilter" in target:
        fwd = (shapes[0], out, shapes[1])
    else:
        fwd = (shapes[0], shapes[1], out)
    flops = convolution_flops(instr, fwd[0], fwd[1], fwd[2])
    read = sum(nbytes(x) for x in shapes)
    return replace(cost(flops, read, nbytes(out), dtype=shapes[0].dtype,
                        notes=(f"{target}: flops of the forward convolution its dimension numbers describe",)),
                   convolution=convolution_problem(instr, fwd[1], fwd[2]))


def opaque_bound(instr: Instruction, ctx: CostContext, why: str) -> OpCost:
    """A kernel without a cost model: the bytes of its operands and results, FLOPs unknown."""
    read = sum(nbytes(s) for s in ctx.operand_shapes(instr))
    written = nbytes(instr.shape)
    if not read and not written:
        return unknown_cost(why, first_dtype(instr.shape))
    return OpCost(flops=None, bytes_read=float(read), bytes_written=float(written), transcendentals=None,
                  dtype=first_dtype(instr.shape), lower_bound=why,
                  notes=(f"lower bound: {why}; only its operand and result bytes are counted",))


def mosaic_cost(instr: Instruction, ctx: CostContext) -> OpCost:
    """A Pallas kernel: the cost estimate its author attached; a flash or splash attention kernel
    without one is costed from its operand shapes; any other, only its bytes."""
    estimate = backend_json(instr).get("custom_call_config", {}).get("cost_estimate")
    problem = pallas_attention(instr, ctx)
    if not isinstance(estimate, dict) or "flops" not in estimate:
        if problem is not None:
            return pallas_attention_cost(problem, instr, ctx)
        return opaque_bound(instr, ctx, "opaque Mosaic kernel: tpu_custom_call without a cost estimate")
    accessed = float(estimate.get("bytes_accessed", 0))
    notes = ("cost estimate attached to the Pallas kernel; bytes_accessed counted as read",) + (
        (f"an attention kernel ({problem.kernel}, S_q={problem.q_len}, S_kv={problem.kv_len}): judged at the rate "
         "flash attention kernels reach, not a GEMM's",) if problem is not None else ())
    out = cost(float(estimate["flops"]), accessed, 0, transcendentals=float(estimate.get("transcendentals", 0)),
               dtype=first_dtype(instr.shape), provenance="xla", notes=notes)
    return replace(out, comm_bytes=float(estimate.get("remote_bytes_transferred", 0)), attention=problem)


# XLA's TopK custom calls: "TopK" (CPU, and the form jax.lax.top_k takes before the GPU
# specializer) and "__gpu$TopK" (GPU). Input [batch, n]; output (values, indices) [batch, k],
# plus a scratch buffer on GPU.
TOPK_TARGETS = ("TopK", "__gpu$TopK")


def topk_cost(instr: Instruction, ctx: CostContext) -> OpCost:
    data = ctx.operand_shapes(instr)[0]
    outputs = list(instr.shape.tuple_shapes[:2]) if instr.shape.is_tuple else [instr.shape]
    k = outputs[0].dims[-1] if outputs[0].dims else 1
    comparisons = data.elements * max(1, math.ceil(math.log2(max(k, 2))))
    return cost(comparisons, nbytes(data), sum(nbytes(o) for o in outputs), dtype=data.dtype,
                notes=(f"{instr.custom_call_target}: one pass over the input keeping a k-heap, "
                       f"n*log2(k) comparisons (k={k}), like the topk op",))


@handles("custom-call")
def custom_call(instr: Instruction, ctx: CostContext) -> OpCost:
    target = instr.custom_call_target
    if target in TOPK_TARGETS:
        return topk_cost(instr, ctx)
    if target in GEMM_TARGETS:
        return gemm_cost(instr, ctx)
    if target.startswith(CONV_PREFIX):
        return conv_custom_cost(instr, ctx)
    if target.startswith(CUDNN_PREFIX):
        return cudnn_attention_cost(instr, ctx, lambda why: opaque_bound(instr, ctx, why))
    if target == "tpu_custom_call":
        return mosaic_cost(instr, ctx)
    if is_te_attention(target):
        return te_attention_cost(instr, ctx, lambda why: opaque_bound(instr, ctx, why))
    if target in ANNOTATIONS:
        return zero_cost(f"custom call {target}: annotation or buffer bookkeeping, no work",
                         first_dtype(instr.shape))
    return opaque_bound(instr, ctx, f"opaque custom call {target or '(no target)'}: no cost model for this target")
