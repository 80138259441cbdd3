"""Microbenchmarks captured under jax.profiler on one real GPU: a bf16 GEMM sweep (128^3 to 8192^3 and
four transformer-shaped GEMMs), streaming f32 elementwise kernels from 4 kB to 1 GB, and cuDNN fused
attention (BSHD, B=4 S=2048 H=16 D=128, causal and not, forward and backward).

Usage: python microbench.py OUT_DIR   (writes OUT_DIR/profile/plugins/profile/<run>/ and wall_timing.json)
Run with XLA_FLAGS=--xla_dump_to=... to keep the HLO dumps (and each module's gpu_target_config.pbtxt).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
from timing import capture
import jax.numpy as jnp

SQUARE = (128, 256, 512, 1024, 2048, 4096, 8192)
RECTANGULAR = ((4096, 4096, 14336), (16384, 4096, 4096), (256, 8192, 8192), (8192, 8192, 256))
ATTENTION = (4, 2048, 16, 128)  # batch, sequence, heads, head dim


def matmul(x: jax.Array, y: jax.Array) -> jax.Array:
    return x @ y


def stream(v: jax.Array) -> jax.Array:
    return v * 2 + 1


def attention(causal: bool) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def forward(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation="cudnn")

    def loss(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return forward(q, k, v).astype(jnp.float32).sum()

    return jax.jit(forward), jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def cases() -> dict[str, tuple[Callable[..., Any], tuple[jax.Array, ...]]]:
    key = jax.random.PRNGKey(0)
    out: dict[str, tuple[Callable[..., Any], tuple[jax.Array, ...]]] = {}
    for m, k, n in [(s, s, s) for s in SQUARE] + list(RECTANGULAR):
        a = jax.random.normal(key, (m, k), jnp.bfloat16)
        b = jax.random.normal(key, (k, n), jnp.bfloat16)
        out[f"gemm{m}x{k}x{n}"] = (jax.jit(matmul), (a, b))
    for e in range(10, 29, 2):
        out[f"stream{2 ** e}"] = (jax.jit(stream), (jnp.ones((2 ** e,), jnp.float32),))
    q = jax.random.normal(key, ATTENTION, jnp.bfloat16)
    for causal in (False, True):
        forward, backward = attention(causal)
        out[f"attn_fwd_causal{causal}"] = (forward, (q, q, q))
        out[f"attn_bwd_causal{causal}"] = (backward, (q, q, q))
    return out


def main(out: str) -> None:
    print(jax.__version__, jax.devices(), flush=True)
    capture(cases(), out)


if __name__ == "__main__":
    main(sys.argv[1])
