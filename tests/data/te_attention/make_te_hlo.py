"""Writes the TransformerEngine fused attention HLO text the tests read, as XLA prints it.

TransformerEngine's JAX extension lowers its fused attention with `jax.ffi.ffi_lowering` (its
cpp_extensions/attention.py, FusedAttnFwdPrimitive / FusedAttnBwdPrimitive): the operands Q, K, V,
bias, softmax offset, seed or softmax stats, then sequence lengths, offsets and segment ids; the
config as typed FFI attributes. This script makes the same calls with the same operands, attribute
names and types through `jax.ffi.ffi_call` (the same lowering), so XLA prints them exactly as in a
TE program's dump; only TE's own library, which needs a GPU, is left out. The shapes of the
results follow TE's abstract evaluation (cuDNN 9.6 or later).

    python tests/data/te_attention/make_te_hlo.py    (rewrites the *.hlo.txt files beside it)
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).parent
LAYOUTS = {"BS3HD": 5, "BSHD_BS2HD": 7, "BSHD_BSHD_BSHD": 9, "SBHD_SBHD_SBHD": 4, "THD_THD_THD": 14}
MASKS = {"no_mask": 0, "padding": 1, "causal": 2, "padding_causal": 3, "causal_bottom_right": 4}


def _i(x: int) -> np.int64:
    return np.int64(x)


def attributes(b: int, sq: int, skv: int, h: int, g: int, d: int, layout: str, mask: str, segments: int,
               window: tuple[int, int], legacy: bool) -> dict[str, object]:
    """The FFI attributes TE passes (newest release; `legacy`: the 1.x releases' single head_dim)."""
    dims = {"head_dim": _i(d)} if legacy else {"qk_head_dim": _i(d), "v_head_dim": _i(d)}
    out: dict[str, object] = dict(
        input_batch=_i(b), bias_batch=_i(0), q_max_seqlen=_i(sq), kv_max_seqlen=_i(skv), attn_heads=_i(h),
        num_gqa_groups=_i(g), bias_heads=_i(0), **dims, max_segments_per_seq=_i(segments),
        scaling_factor=float(d) ** -0.5, dropout_probability=0.0, bias_type=_i(0), mask_type=_i(MASKS[mask]),
        qkv_layout=_i(LAYOUTS[layout]), is_training=True, deterministic=False,
        window_size_left=_i(window[0]), window_size_right=_i(window[1]))
    if not legacy:
        out.update(bottom_right_diagonal=mask.endswith("bottom_right"), softmax_type=_i(0))
    return out


def program(b: int, sq: int, skv: int, h: int, g: int, d: int, layout: str, mask: str, *, segments: int = 1,
            window: tuple[int, int] = (-1, -1), legacy: bool = False) -> str:
    sb = layout.startswith("SB")
    bsq, bskv = ((sq, b) if sb else (b, sq)), ((skv, b) if sb else (b, skv))
    bf16, f32 = jnp.bfloat16, jnp.float32
    if layout == "BS3HD":
        qkv = (jax.ShapeDtypeStruct((*bsq, 3, h, d), bf16), jax.ShapeDtypeStruct((0,), bf16),
               jax.ShapeDtypeStruct((0,), bf16))
    elif layout == "BSHD_BS2HD":
        qkv = (jax.ShapeDtypeStruct((*bsq, h, d), bf16), jax.ShapeDtypeStruct((*bskv, 2, g, d), bf16),
               jax.ShapeDtypeStruct((0,), bf16))
    else:
        qkv = (jax.ShapeDtypeStruct((*bsq, h, d), bf16), jax.ShapeDtypeStruct((*bskv, g, d), bf16),
               jax.ShapeDtypeStruct((*bskv, g, d), bf16))
    out = jax.ShapeDtypeStruct((*bsq, h, d), bf16)
    stats = jax.ShapeDtypeStruct((b, sq, h, 1) if layout.startswith("T") else (b, h, sq, 1), f32)
    seqlens = jax.ShapeDtypeStruct((b * segments + 1,), jnp.int32)
    segment_ids = jax.ShapeDtypeStruct((b, sq) if segments > 1 else (0,), jnp.int32)
    attrs = attributes(b, sq, skv, h, g, d, layout, mask, segments, window, legacy)

    def step(q, k, v, seed, lens, ids, dout):
        empty, offset = jnp.zeros((0,), bf16), jnp.zeros((0,), f32)
        sequence = (lens, lens, lens, lens, ids, ids, ids, ids)
        o, aux, _, rng, _ = jax.ffi.ffi_call(
            "te_fused_attn_forward_ffi",
            (out, stats, jax.ShapeDtypeStruct((0,), f32), jax.ShapeDtypeStruct((2, 4), jnp.uint32),
             jax.ShapeDtypeStruct((1024,), jnp.uint8)))(q, k, v, empty, offset, seed, *sequence, **attrs)
        grads = jax.ffi.ffi_call(
            "te_fused_attn_backward_ffi",
            (*(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k, v, empty, offset)),
             jax.ShapeDtypeStruct((4096,), jnp.uint8)))(q, k, v, empty, offset, aux, rng, o, dout, *sequence, **attrs)
        return o, grads[:3]

    args = (*qkv, jax.ShapeDtypeStruct((2,), jnp.uint32), seqlens, segment_ids, out)
    return jax.jit(step).lower(*args).compiler_ir("hlo").as_hlo_text()


CASES = {
    "bs3hd_causal": dict(b=2, sq=2048, skv=2048, h=16, g=16, d=128, layout="BS3HD", mask="causal"),
    "bs3hd_no_mask_legacy": dict(b=2, sq=2048, skv=2048, h=16, g=16, d=128, layout="BS3HD", mask="no_mask",
                                 legacy=True),
    "bshd_bs2hd_padding": dict(b=2, sq=1024, skv=4096, h=16, g=16, d=128, layout="BSHD_BS2HD", mask="padding"),
    "bshd_gqa_padding_causal": dict(b=2, sq=2048, skv=2048, h=32, g=8, d=128, layout="BSHD_BSHD_BSHD",
                                    mask="padding_causal"),
    "bshd_causal_bottom_right": dict(b=2, sq=512, skv=2048, h=16, g=16, d=128, layout="BSHD_BSHD_BSHD",
                                     mask="causal_bottom_right"),
    "bshd_window": dict(b=2, sq=2048, skv=2048, h=16, g=16, d=128, layout="BSHD_BSHD_BSHD", mask="causal",
                        window=(255, 0)),
    "sbhd_no_mask": dict(b=2, sq=2048, skv=2048, h=16, g=16, d=128, layout="SBHD_SBHD_SBHD", mask="no_mask"),
    "thd_padding_causal": dict(b=2, sq=4096, skv=4096, h=16, g=16, d=128, layout="THD_THD_THD",
                               mask="padding_causal", segments=8),
}


def main() -> None:
    for name, case in CASES.items():
        (HERE / f"{name}.hlo.txt").write_text(program(**case))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
