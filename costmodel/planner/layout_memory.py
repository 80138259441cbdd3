"""Bytes per chip for one layout: weights, gradients, optimizer state, activations in flight.

The busiest chip is costed: a pipeline stage holds ceil(L / pp) layers and one embedding
matrix (all of them without a pipeline). TP splits attention and dense MLP weights; K and V
are replicated when there are fewer KV heads than TP ranks. Routed experts split over EP
(experts / ep per chip) and are not split by TP. ZeRO shards over the data-parallel group:
stage 1 the optimizer state (Adam's two moments plus an f32 master copy), stage 2 also the
gradients, stage 3 also the weights (which it gathers two layers at a time). Saved activations
follow the remat policy (`remat`: the elements per layer per token it keeps), split over TP (sequence
parallelism) and CP, times the microbatches the pipeline schedule keeps in flight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .layout import Layout
from .pipeline import schedule_of
from .remat import RematPolicy, policy, saved_everything
from .transformer import ModelConfig



@dataclass(frozen=True)
class StageParams:
    """Parameters one chip holds (counts, not bytes): dense (TP-split) and routed experts."""

    dense: float
    experts: float
    dense_per_layer: float
    layers: int
    moe_layers: int

    @property
    def total(self) -> float:
        return self.dense + self.experts


def kv_heads_per_chip(cfg: ModelConfig, tp: int) -> float:
    """KV heads a TP rank holds: its share, or one replicated head when TP exceeds them."""
    return cfg.kv_heads / tp if tp <= cfg.kv_heads else 1.0


def stage_params(cfg: ModelConfig, layout: Layout) -> StageParams:
    tp = layout.tp
    d, h = cfg.d_model, cfg.head_dim
    attention = (2 * d * cfg.heads * h / tp + 2 * d * h * kv_heads_per_chip(cfg, tp)) + 2 * d
    dense_mlp = cfg.mlp_matrices * d * cfg.d_ff / tp
    expert = cfg.mlp_matrices * d * cfg.expert_width
    moe_dense = cfg.shared_experts * expert / tp + d * cfg.experts
    layers = math.ceil(cfg.layers / layout.pp)
    moe = min(layers, math.ceil(cfg.moe_layers / layout.pp)) if cfg.experts else 0
    embeddings = (1 if cfg.tied_embeddings else 2) if layout.pp == 1 else 1
    dense = layers * attention + (layers - moe) * dense_mlp + moe * moe_dense + embeddings * cfg.vocab * d / tp
    experts = moe * (cfg.experts / max(layout.ep, 1)) * expert if cfg.experts else 0.0
    return StageParams(dense, experts, attention + max(dense_mlp, moe_dense + expert * cfg.experts / layout.ep),
                       layers, moe)


@dataclass(frozen=True)
class TrainBytes:
    """What the run stores per parameter and per activation (bytes), and its remat policy."""

    param: float = 2.0
    optimizer: float = 8.0  # Adam's two f32 moments (book ch. 5.1.1)
    master: float = 4.0  # the f32 master weights of mixed-precision training
    activation: float = 2.0
    checkpoints_per_layer: float | None = None  # the old single knob; None: `remat` says
    remat: str = "auto"  # a policy of `remat.POLICIES`, or "checkpoints" for the old knob
    offload_optimizer: bool = False  # optimizer state and master weights in host memory
    offload_params: bool = False  # weights in host memory, brought in layer by layer

    def policy(self, cfg: ModelConfig, name: str | None = None) -> RematPolicy:
        legacy = self.checkpoints_per_layer is not None and self.remat == "auto"
        return policy(name or ("checkpoints" if legacy else self.remat), cfg, self.checkpoints_per_layer)


def dp_groups(layout: Layout) -> tuple[int, int]:
    """(dense, expert) ZeRO sharding group sizes: weights are replicated over DP and CP ranks,
    routed experts over the DP ranks that are not their EP group; with hybrid sharding, only
    within one of the `replicas`."""
    dense = layout.dp * layout.cp // max(layout.replicas, 1)
    holders = dense * layout.tp if layout.ep_over_tp else dense  # chips holding each expert, per replica
    return max(dense, 1), max(holders // max(layout.ep, 1), 1)


def state_shards(cfg: ModelConfig, layout: Layout) -> tuple[float, float]:
    """(parameters whose optimizer state one chip keeps, parameters whose weights it keeps) under its ZeRO stage."""
    p = stage_params(cfg, layout)
    g_dense, g_exp = dp_groups(layout)

    def sharded(stage: int) -> float:
        return (p.dense / (g_dense if layout.zero >= stage else 1)
                + p.experts / (g_exp if layout.zero >= stage else 1))

    return sharded(1), sharded(3)


def memory_per_chip(cfg: ModelConfig, layout: Layout, microbatches: int, tokens_per_microbatch: float,
                    sizes: TrainBytes, remat: RematPolicy | None = None) -> dict[str, float]:
    """Bytes per chip by part, and `total`, for `microbatches` of `tokens_per_microbatch` per replica,
    under `remat` (default: the run's policy)."""
    p = stage_params(cfg, layout)
    sched = schedule_of(layout, microbatches)
    g_dense, g_exp = dp_groups(layout)

    def sharded(stage: int) -> float:
        return (p.dense / (g_dense if layout.zero >= stage else 1)
                + p.experts / (g_exp if layout.zero >= stage else 1))

    copies = sched.weight_copies
    params = sharded(3) * sizes.param * copies
    if layout.zero >= 3:  # two layers gathered at a time (one in use, one prefetched)
        params += 2 * p.dense_per_layer * sizes.param
    if sizes.offload_params:  # in host memory; two layers on the chip at a time
        params = 2 * p.dense_per_layer * sizes.param * copies
    grads = sharded(2) * sizes.param * copies
    optimizer = 0.0 if sizes.offload_optimizer else sharded(1) * (sizes.optimizer + sizes.master)
    tokens = tokens_per_microbatch / layout.cp
    kept = (remat or sizes.policy(cfg)).kept
    per_layer = kept * sizes.activation * tokens / layout.tp
    activations = sched.in_flight * p.layers * per_layer
    # The layer being back-propagated holds all its intermediates, recomputed or not.
    working = saved_everything(cfg) * sizes.activation * tokens / layout.tp
    # the logits GEMM's output in the activation dtype; the loss's f32 softmax runs fused or in
    # chunks (Megatron-LM's vocab-parallel cross-entropy, MaxText's vocabulary tiling), not whole
    logits = tokens * cfg.vocab / layout.tp * sizes.activation
    out = {"params": params, "grads": grads, "optimizer": optimizer, "activations": activations,
           "working": working + logits}
    out["total"] = sum(out.values())
    return out
