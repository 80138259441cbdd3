"""TransformerEngine's fused attention call, read as its JAX extension emits it.

The typed-FFI targets (`te_fused_attn_forward_ffi`, `te_fused_attn_backward_ffi`) carry their
config as FFI attributes, which XLA prints as an MLIR dictionary in the backend_config:
`{attn_heads = 16 : i64, ..., mask_type = 2 : i64, qkv_layout = 5 : i64, ...}` with the
NVTE_QKV_Layout and NVTE_Mask_Type enums of transformer_engine/fused_attn.h. The older
custom-call targets (`te_fused_attn_forward`, `te_self_fused_attn_forward`, ...) pass a packed C
struct whose layout changed between releases; for them the problem is read from the operand
shapes: packed QKV `[..., s, 3, h, d]` (or `[..., s, h, 3, d]`), Q with packed KV `[..., s, 2, h, d]`,
or separate Q, K, V `[..., s, h, d]`, the batch leading as TE's JAX extension lays them out.
"""

from __future__ import annotations

import json
import math
import re

from ...parsers.hlo.model import Instruction, Shape
from ..costs import AttentionProblem
from ..units import stated
from .base import CostContext

# NVTE_QKV_Layout, by value.
LAYOUTS = ("SB3HD", "SBH3D", "SBHD_SB2HD", "SBHD_SBH2D", "SBHD_SBHD_SBHD", "BS3HD", "BSH3D", "BSHD_BS2HD",
           "BSHD_BSH2D", "BSHD_BSHD_BSHD", "T3HD", "TH3D", "THD_T2HD", "THD_TH2D", "THD_THD_THD",
           "SBHD_BSHD_BSHD", "BSHD_SBHD_SBHD", "THD_BSHD_BSHD", "THD_SBHD_SBHD", "Paged_KV_BSHD_BSHD_BSHD",
           "Paged_KV_BSHD_SBHD_SBHD", "Paged_KV_SBHD_BSHD_BSHD", "Paged_KV_SBHD_SBHD_SBHD",
           "Paged_KV_THD_BSHD_BSHD", "Paged_KV_THD_SBHD_SBHD")
# NVTE_Mask_Type, by value.
MASKS = ("NO_MASK", "PADDING", "CAUSAL", "PADDING_CAUSAL", "CAUSAL_BOTTOM_RIGHT", "PADDING_CAUSAL_BOTTOM_RIGHT")
BIASES = ("NO_BIAS", "PRE_SCALE_BIAS", "POST_SCALE_BIAS", "ALIBI")
_ENTRY = re.compile(r'(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,{}:]+?)\s*(?::\s*\w+\s*)?(?=,|}|$)')


def ffi_attributes(config: str) -> dict[str, str]:
    """The FFI attributes an MLIR dictionary (or a JSON object) states, as text by name."""
    text = config.strip()
    if not text.startswith("{"):
        return {}
    as_json = backend_json_text(text)
    if as_json:
        return as_json
    return {m.group(1): m.group(2).strip().strip('"') for m in _ENTRY.finditer(text[1:].rstrip("}"))}


def backend_json_text(text: str) -> dict[str, str]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()
            if isinstance(v, (int, float, str, bool))} if isinstance(value, dict) else {}


def _int(attrs: dict[str, str], key: str, default: int | None = None) -> int | None:
    try:
        return int(float(attrs[key]))
    except (KeyError, ValueError, OverflowError):
        return default


def te_problem(instr: Instruction, ctx: CostContext) -> tuple[AttentionProblem, tuple[str, ...]] | str:
    """The problem of a TransformerEngine fused attention call and notes on what it does besides
    (bias, dropout), or why it cannot be read."""
    shapes = ctx.operand_shapes(instr)
    target = instr.custom_call_target
    kernel = "backward" if "backward" in target or "bwd" in target else "forward"
    from_attrs = _from_attributes(ffi_attributes(instr.backend_config), shapes, target, kernel)
    if isinstance(from_attrs, tuple) or from_attrs.startswith("paged"):
        return from_attrs
    from_shapes = _from_shapes(shapes, target, kernel)
    if isinstance(from_shapes, str):
        return from_attrs or from_shapes
    note = f"{from_attrs}; " if from_attrs else ""
    return from_shapes, (note + f"{target} states no mask the model reads (an opaque descriptor): counted as "
                         "causal, half the score matrix, the least work of a causal or unmasked call; with no "
                         "mask it is twice this",)


def _from_attributes(attrs: dict[str, str], shapes: list[Shape], target: str, kernel: str
                     ) -> tuple[AttentionProblem, tuple[str, ...]] | str:
    """The problem its FFI attributes state ("" when they state none; why, when they cannot be used)."""
    size = [_int(attrs, k) for k in ("input_batch", "q_max_seqlen", "kv_max_seqlen", "attn_heads", "num_gqa_groups")]
    qk_dim = _int(attrs, "qk_head_dim", _int(attrs, "head_dim"))
    v_dim = _int(attrs, "v_head_dim", qk_dim)
    layout_code, mask_code = _int(attrs, "qkv_layout"), _int(attrs, "mask_type")
    if None in size or qk_dim is None or v_dim is None or layout_code is None or mask_code is None:
        return ""
    batch, q_len, kv_len, heads, kv_heads = (int(x or 0) for x in size)
    if not 0 <= layout_code < len(LAYOUTS) or not 0 <= mask_code < len(MASKS):
        return f"qkv_layout {layout_code} or mask_type {mask_code} is not one of TransformerEngine's"
    layout, mask = LAYOUTS[layout_code], MASKS[mask_code]
    if layout.startswith("Paged"):
        return f"paged attention ({layout}): the key and value lengths are runtime page tables"
    packed = 3 if layout_code in (0, 1, 5, 6, 10, 11) else 1
    if not shapes or shapes[0].elements != batch * q_len * heads * qk_dim * packed:
        q = list(shapes[0].dims) if shapes else []
        return f"its attributes (qkv_layout {layout}, {batch}x{q_len}x{heads}x{qk_dim}) do not match Q {q}"
    left, right = _int(attrs, "window_size_left", -1), _int(attrs, "window_size_right", -1)
    causal = "CAUSAL" in mask or right == 0
    window = (left if left is not None and left >= 0 else -1, right if not causal and right is not None else -1)
    segments = _int(attrs, "max_segments_per_seq", 1) or 1
    said = [f"qkv_layout {layout_code} ({layout})", f"mask_type {mask_code} ({mask})", f"input_batch {batch}",
            f"q_max_seqlen {q_len}", f"kv_max_seqlen {kv_len}", f"attn_heads {heads}", f"num_gqa_groups {kv_heads}"]
    said += [f"window_size ({left}, {right})"] if window != (-1, -1) else []
    said += [f"max_segments_per_seq {segments}"] if segments > 1 else []
    problem = AttentionProblem(
        batch, heads, kv_heads, q_len, kv_len, qk_dim, v_dim, kernel=kernel, causal=causal,
        bottom_right="BOTTOM_RIGHT" in mask or attrs.get("bottom_right_diagonal") == "true", window=window,
        padded="PADDING" in mask or layout.startswith("T") or segments > 1, segments=segments,
        config=f"the {target} attributes: {', '.join(said)}")
    return problem, _extras(attrs)


def _extras(attrs: dict[str, str]) -> tuple[str, ...]:
    notes = []
    bias = _int(attrs, "bias_type", 0) or 0
    if 0 < bias < len(BIASES):
        notes.append(f"bias_type {BIASES[bias]}: the bias is added to the scores (read as an operand, or computed "
                     "for ALiBi), its adds not counted in FLOPs")
    try:
        dropout = float(attrs.get("dropout_probability", "0"))
    except ValueError:
        dropout = 0.0
    if dropout > 0 and attrs.get("is_training", "true") != "false":
        notes.append(f"dropout_probability {stated(dropout)}: the random mask is drawn in the kernel, not counted in FLOPs")
    return tuple(notes)


def _from_shapes(shapes: list[Shape], target: str, kernel: str) -> AttentionProblem | str:
    """The problem TE's operand layouts imply: packed QKV, Q with packed KV, or separate Q, K, V."""
    if not shapes or len(shapes[0].dims) < 3:
        return f"{target}: Q is not a [batch, sequence, heads, head dim] operand"
    q = shapes[0]
    if len(q.dims) >= 5 and 3 in (q.dims[-3], q.dims[-2]):
        split = -3 if q.dims[-3] == 3 else -2
        heads = q.dims[-2] if split == -3 else q.dims[-3]
        layout = "BS3HD" if split == -3 else "BSH3D"
        return _problem(q, q.dims[:-4], q.dims[-4], heads, q.dims[-4], heads, q.dims[-1], q.dims[-1], layout, target,
                        kernel)
    k = shapes[1] if len(shapes) > 1 else None
    if k is None or len(k.dims) < 3 or len(q.dims) < 3:
        return f"{target}: Q, K, V are not [batch, sequence, heads, head dim] operands"
    if len(k.dims) >= 5 and 2 in (k.dims[-3], k.dims[-2]):
        kv_heads = k.dims[-2] if k.dims[-3] == 2 else k.dims[-3]
        layout = "BSHD_BS2HD" if k.dims[-3] == 2 else "BSHD_BSH2D"
        return _problem(q, q.dims[:-3], q.dims[-3], q.dims[-2], k.dims[-4], kv_heads, q.dims[-1], k.dims[-1],
                        layout, target, kernel)
    v = shapes[2] if len(shapes) > 2 else k
    if v.dims[:-1] != k.dims[:-1] or k.dims[-1] != q.dims[-1] or k.dims[:-3] != q.dims[:-3]:
        return f"{target}: Q, K, V shapes do not agree"
    return _problem(q, q.dims[:-3], q.dims[-3], q.dims[-2], k.dims[-3], k.dims[-2], q.dims[-1], v.dims[-1],
                    "BSHD_BSHD_BSHD", target, kernel)


def _problem(q: Shape, lead: tuple[int, ...], q_len: int, heads: int, kv_len: int, kv_heads: int, qk_dim: int,
             v_dim: int, layout: str, target: str, kernel: str) -> AttentionProblem:
    return AttentionProblem(math.prod(lead), heads, kv_heads, q_len, kv_len, qk_dim, v_dim, kernel=kernel,
                            causal=True, config=f"the operand shapes of {target} (Q {list(q.dims)}: {layout} "
                            "inferred, the batch leading as TE's JAX extension lays it out)")
