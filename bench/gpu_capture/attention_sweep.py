"""cuDNN flash attention as JAX runs it (jax.nn.dot_product_attention, implementation="cudnn"), in the
configurations the microbenchmark does not hold: sequence lengths 512 to 8192 at 8192 tokens per batch
(the FlashAttention papers' sizes), causal and not, forward and backward; grouped-query heads; padding
masks with half the positions valid; a causal sliding window; head dim 64; a bias.

Usage: python attention_sweep.py OUT_DIR   (writes OUT_DIR/profile/plugins/profile/<run>/ and wall_timing.json)
Run with XLA_FLAGS=--xla_dump_to=... --xla_dump_hlo_as_text to keep the HLO of each program.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
from timing import capture
import jax.numpy as jnp
import numpy as np

TOKENS = 8192  # batch x sequence, as in the FlashAttention-3 paper's forward benchmarks
HEADS, HEAD_DIM = 16, 128


def attention(causal: bool, **options: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def forward(q: jax.Array, k: jax.Array, v: jax.Array, *extra: jax.Array) -> jax.Array:
        named = dict(zip(options.get("extra_names", ()), extra))
        window = options.get("window")
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation="cudnn",
                                            local_window_size=window, **named)

    def loss(q: jax.Array, k: jax.Array, v: jax.Array, *extra: jax.Array) -> jax.Array:
        return forward(q, k, v, *extra).astype(jnp.float32).sum()

    return jax.jit(forward), jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def _qkv(batch: int, seq: int, heads: int, kv_heads: int, dim: int) -> tuple[jax.Array, ...]:
    key = jax.random.PRNGKey(0)
    q = jax.random.normal(key, (batch, seq, heads, dim), jnp.bfloat16)
    kv = jax.random.normal(key, (batch, seq, kv_heads, dim), jnp.bfloat16)
    return q, kv, kv


def cases() -> dict[str, tuple[Callable[..., Any], tuple[jax.Array, ...]]]:
    out: dict[str, tuple[Callable[..., Any], tuple[jax.Array, ...]]] = {}

    def add(name: str, causal: bool, args: tuple[jax.Array, ...], **options: Any) -> None:
        forward, backward = attention(causal, **options)
        out[f"fwd_{name}_causal{causal}"] = (forward, args)
        out[f"bwd_{name}_causal{causal}"] = (backward, args)

    for seq in (512, 1024, 4096, 8192):
        for causal in (False, True):
            add(f"s{seq}", causal, _qkv(TOKENS // seq, seq, HEADS, HEADS, HEAD_DIM))
    for causal in (False, True):
        add("gqa32x8", causal, _qkv(4, 2048, 32, 8, HEAD_DIM))
        add("d64", causal, _qkv(4, 2048, HEADS, HEADS, 64))
        half = jnp.full((4,), 1024, jnp.int32)
        add("padhalf", causal, _qkv(4, 2048, HEADS, HEADS, HEAD_DIM) + (half, half),
            extra_names=("query_seq_lengths", "key_value_seq_lengths"))
    add("window256", True, _qkv(4, 2048, HEADS, HEADS, HEAD_DIM), window=(255, 0))
    bias = jnp.zeros((1, HEADS, 2048, 2048), jnp.bfloat16)
    add("bias", False, _qkv(4, 2048, HEADS, HEADS, HEAD_DIM) + (bias,), extra_names=("bias",))
    return out


def main(out: str) -> None:
    print(jax.__version__, jax.devices(), np.__version__, flush=True)
    capture(cases(), out)


if __name__ == "__main__":
    main(sys.argv[1])
