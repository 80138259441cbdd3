"""Fused attention custom calls: cuDNN's (XLA on NVIDIA), TransformerEngine's, Pallas flash/splash on TPU.

Each handler reads the attention problem (batch, heads, sequence lengths, head dims, mask, pass)
from what the call states, its config first and its operand shapes otherwise, and prices it
with costmodel.attention. The reasons name the config the problem was read from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace

from ...parsers.hlo.model import Instruction, Shape
from ..attention import describe, exponentials, flops, unreadable
from ..costs import AttentionProblem, OpCost
from ..units import stated
from .base import CostContext, backend_json, cost, nbytes
from .te_config import te_problem

# cuDNN fused attention as XLA emits it: __cudnn$fmhaSoftmax, ...ScaleBiasSoftmax, ...SoftmaxDropout,
# ...SoftmaxF8 and their ...Backward forms.
CUDNN_PREFIX = "__cudnn$fmha"


def is_te_attention(target: str) -> bool:
    """TransformerEngine's fused attention, typed FFI or not (te_fused_attn_forward_ffi,
    te_fused_attn_backward, and the older te_self_/te_cross_fused_attn_ names)."""
    return target.startswith("te_") and "fused_attn" in target


def written_bytes(instr: Instruction) -> int:
    """Bytes a library call writes: its results, less the trailing byte workspace."""
    leaves = list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]
    if len(leaves) > 1 and leaves[-1].dtype in ("u8", "s8"):
        leaves = leaves[:-1]
    return sum(nbytes(x) for x in leaves)


def priced(problem: AttentionProblem, instr: Instruction, ctx: CostContext, dtype: str,
           notes: tuple[str, ...] = ()) -> OpCost:
    shapes = ctx.operand_shapes(instr)
    out = cost(flops(problem), sum(nbytes(x) for x in shapes), written_bytes(instr),
               transcendentals=exponentials(problem), dtype=dtype, notes=describe(problem) + notes)
    return replace(out, attention=problem)


# --- cuDNN --------------------------------------------------------------------------------------

# Q.K^T as the call states it: bmm1 on the forward; on the backward bmm2_grad_gemm2 (dO.V^T), whose
# operands are laid out as Q and K are.
_QK_DIMS = ("bmm1_dot_dimension_numbers", "bmm2_grad_gemm2_dot_dimension_numbers")


def cudnn_attention_cost(instr: Instruction, ctx: CostContext, bound: Callable[[str], OpCost]) -> OpCost:
    problem = cudnn_attention(instr, ctx)
    if not isinstance(problem, str):
        problem = unreadable(problem) or problem
    if isinstance(problem, str):
        return bound(f"{instr.custom_call_target}: {problem}")
    return priced(problem, instr, ctx, ctx.operand_shapes(instr)[0].dtype, cudnn_notes(instr))


def cudnn_attention(instr: Instruction, ctx: CostContext) -> AttentionProblem | str:
    """The problem of a __cudnn$fmha call, or why it cannot be read."""
    config = backend_json(instr).get("cudnn_fmha_backend_config", {})
    if not isinstance(config, dict):
        return "its cudnn_fmha_backend_config is not an object"
    dims = next((config[k] for k in _QK_DIMS if isinstance(config.get(k), dict)), None)
    shapes = ctx.operand_shapes(instr)
    if not isinstance(config, dict) or dims is None or len(shapes) < 3:
        return "no Q.K^T dimension numbers in its cudnn_fmha_backend_config"
    if config.get("is_paged_attention") is True:
        return "paged attention: the key and value lengths are runtime page tables"
    sizes = _bmm_sizes(shapes[0], shapes[1], shapes[2], dims)
    if isinstance(sizes, str):
        return sizes
    batch, heads, kv_heads, q_len, kv_len, qk_dim, v_dim = sizes
    mask = str(config.get("mask_type", "NO_MASK")).upper()
    window, segments = _config_int(config, "sliding_window_length", 0), _config_int(config, "max_seg_per_batch", 1)
    if window is None or segments is None:
        return "a sliding_window_length or max_seg_per_batch that is not a whole number"
    said = [f"mask_type {mask}"] + ([f"sliding_window_length {window}"] if window > 0 else []) + (
        [f"max_seg_per_batch {segments}"] if segments > 1 else [])
    layouts = ", ".join(f"{n} {list(s.dims)}" for n, s in zip("QKV", shapes))
    return AttentionProblem(
        batch, heads, kv_heads, q_len, kv_len, qk_dim, v_dim,
        kernel="backward" if "Backward" in instr.custom_call_target else "forward",
        causal="CAUSAL" in mask, bottom_right="BOTTOM_RIGHT" in mask,
        window=(window - 1, 0) if window > 0 else (-1, -1), padded="PADDING" in mask or segments > 1,
        segments=segments,
        config=f"cudnn_fmha_backend_config ({', '.join(said)}) and its Q.K^T dimension numbers on {layouts}")


def _config_int(config: dict[str, object], key: str, default: int) -> int | None:
    """A whole number of the config (as a number or its text), `default` where unstated; None otherwise."""
    value = config.get(key) or default
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).lstrip("-").isdigit():
        return None
    return int(value) if len(str(value)) < 20 else None


def _product(shape: Shape, axes: object) -> int | None:
    if not isinstance(axes, list) or any(not str(a).isdigit() or int(a) >= len(shape.dims) for a in axes):
        return None
    return math.prod(shape.dims[int(a)] for a in axes)


def _bmm_sizes(q: Shape, k: Shape, v: Shape, dims: dict[str, object]
               ) -> tuple[int, int, int, int, int, int, int] | str:
    """(batch, heads, KV heads, S_q, S_kv, D, Dv) from the Q.K^T batch and contracting dimensions:
    Q's batch dimensions are (batch, heads), K's (batch, KV heads)."""
    q_batch, depth = _product(q, dims.get("lhs_batch_dimensions")), _product(q, dims.get("lhs_contracting_dimensions"))
    k_batch, k_depth = _product(k, dims.get("rhs_batch_dimensions")), _product(k, dims.get("rhs_contracting_dimensions"))
    axes = dims.get("lhs_batch_dimensions")
    if None in (q_batch, depth, k_batch, k_depth) or not isinstance(axes, list) or not axes:
        return "Q.K^T dimension numbers that do not fit Q and K"
    assert q_batch and depth and k_batch and k_depth
    batch = q.dims[int(axes[0])] if len(axes) > 1 else 1
    q_len, kv_len = q.elements // (q_batch * depth), k.elements // (k_batch * k_depth)
    if not batch or q_batch % batch or k_batch % batch or not kv_len or v.elements % (k_batch * kv_len):
        return "Q, K and V shapes that do not agree with its dimension numbers"
    return batch, q_batch // batch, k_batch // batch, q_len, kv_len, depth, v.elements // (k_batch * kv_len)


def cudnn_notes(instr: Instruction) -> tuple[str, ...]:
    config = backend_json(instr).get("cudnn_fmha_backend_config", {})
    config = config if isinstance(config, dict) else {}
    target = instr.custom_call_target
    notes = []
    if "Bias" in target:
        notes.append("bias added to the scores: its operand bytes are read, its adds not counted in FLOPs")
    try:
        dropout = float(config.get("dropout_rate", 0) or 0)
    except (TypeError, ValueError):  # not a number: no dropout is read
        dropout = 0.0
    if 0 < dropout <= 1:
        notes.append(f"dropout {stated(dropout)}: its random mask is drawn in the kernel, not counted in FLOPs")
    return tuple(notes)


# --- TransformerEngine ---------------------------------------------------------------------------


def te_attention_cost(instr: Instruction, ctx: CostContext, bound: Callable[[str], OpCost]) -> OpCost:
    found = te_problem(instr, ctx)
    if not isinstance(found, str):
        why = unreadable(found[0])
        found = f"{instr.custom_call_target}: {why}" if why else found
    if isinstance(found, str):
        return bound(found)
    problem, notes = found
    return priced(problem, instr, ctx, ctx.operand_shapes(instr)[0].dtype, notes)


# --- Pallas on TPU ------------------------------------------------------------------------------

_PALLAS_ATTENTION = re.compile(r"(flash|splash)_?\w*?(attention|mha|mqa|gqa)", re.IGNORECASE)


def pallas_attention(instr: Instruction, ctx: CostContext) -> AttentionProblem | None:
    """A Pallas flash or splash attention kernel's problem from its name and operand shapes: Q is the
    first 4-D floating operand [batch, heads, sequence, head dim], K and V the two after it of the
    same batch and fewer or as many heads. The mask is not in its shapes: counted as causal."""
    # The kernel's own name: the instruction's, and the scope the pallas_call sits in (the op_name's
    # last parts; earlier parts name the caller, "forward_backward" and the like).
    name = " ".join([instr.name, *instr.metadata.op_name.split("/")[-2:]])
    if not _PALLAS_ATTENTION.search(name) or "paged" in name.lower():
        return None
    arrays = [s for s in ctx.operand_shapes(instr) if len(s.dims) == 4 and s.dtype.startswith(("bf", "f"))]
    if len(arrays) < 3:
        return None
    q, k, v = arrays[:3]
    batch, heads, q_len, qk_dim = q.dims
    if k.dims[0] != batch or v.dims[:3] != k.dims[:3] or k.dims[3] != qk_dim or heads % max(k.dims[1], 1):
        return None
    kernel = _pallas_kernel(instr, name.lower())
    problem = AttentionProblem(batch, heads, k.dims[1], q_len, k.dims[2], qk_dim, v.dims[3], kernel=kernel,
                            causal=True, config=f"the kernel name {instr.name} and its operands Q {list(q.dims)}, "
                            f"K {list(k.dims)}, V {list(v.dims)} ([batch, heads, sequence, head dim]); no mask is "
                            "stated, so it is counted as causal, the least work of a causal or unmasked kernel")
    return None if unreadable(problem) else problem


def pallas_attention_cost(problem: AttentionProblem, instr: Instruction, ctx: CostContext) -> OpCost:
    q = next(s for s in ctx.operand_shapes(instr) if len(s.dims) == 4 and s.dtype.startswith(("bf", "f")))
    return priced(problem, instr, ctx, q.dtype)


def _pallas_kernel(instr: Instruction, name: str) -> str:
    if "dkv" in name:  # a fused backward returns dQ beside dK and dV
        results = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
        return "backward" if len(results) >= 3 else "backward dK dV"
    if "dq" in name:
        return "backward dQ"
    return "backward" if re.search(r"bwd|backward", name) else "forward"
