"""Serving a large model on a layout: its memory per chip and decode step, and the search over layouts.

A serving layout uses the training one's axes: TP splits heads and MLP columns (KV heads
replicated when fewer), PP splits layers, DP ranks each decode their share of the batch with
their own KV caches (attention data parallelism), and EP, carved out of DP, splits the routed
experts. A decode step advances every sequence by one token; with PP the batch is cut into
`pp` microbatches kept in flight, so each stage reads its weights once per microbatch.
Per stage and microbatch: weights read (an MoE reads only the experts its tokens route to)
plus the KV cache, against 2 FLOPs per active parameter per token (book ch. 7, eq. 4), then
TP's two all-reduces of [B, D] per layer and EP's dispatch and combine per MoE layer, priced
on the network levels they span.
"""

from __future__ import annotations

import math
from typing import Any

from ...base.options import DEFAULTS
from ..chips.hardware import Hardware
from .hierarchy import Network
from .layout import Layout
from .layout_memory import kv_heads_per_chip, stage_params
from .layout_step import divisors, network_for
from .parallelism import expert_parallel, tensor_parallel
from .serve_setup import ServeSetup
from .transformer import ModelConfig, dtype_bytes, matmul_params


def _problems(cfg: ModelConfig, s: ServeSetup, layout: Layout, net: Network) -> list[str]:
    out = []
    tp = layout.tp
    if layout.chips != s.chips:
        out.append(f"dp x tp x pp x cp = {layout.chips}, not the {s.chips} chips")
    if cfg.heads % tp or cfg.d_ff % tp or (cfg.kv_heads % tp and tp % cfg.kv_heads):
        out.append(f"tp={tp} must divide the query heads ({cfg.heads}) and d_ff ({cfg.d_ff}) and divide or be a "
                   f"multiple of the KV heads ({cfg.kv_heads})")
    if layout.ep > 1 and (not cfg.experts or cfg.experts % layout.ep or layout.dp % layout.ep):
        out.append(f"ep={layout.ep} must divide the experts ({cfg.experts}) and dp ({layout.dp})")
    if layout.pp > cfg.layers:
        out.append(f"pp={layout.pp} stages for {cfg.layers} layers")
    if s.batch % (layout.dp * layout.pp):
        out.append(f"batch {s.batch} does not split into dp x pp = {layout.dp * layout.pp} microbatches")
    if net.problem:
        out.append(net.problem)
    return out


def serve_layout(cfg: ModelConfig, s: ServeSetup, hw: Hardware, layout: Layout) -> dict[str, Any]:
    """Memory per chip and the decode step of `layout`, each part in SI units, or its problems."""
    net = network_for(hw, layout)
    issues = _problems(cfg, s, layout, net)
    described = {**layout.to_json(), "label": layout.serving_label()}
    if issues:
        return {"layout": described, "valid": False, "problems": issues, "fits": False}
    hbm = hw.hbm_bytes.value if hw.hbm_bytes is not None else math.inf
    p = stage_params(cfg, layout)
    pbytes, kvb = dtype_bytes(s.param_dtype), dtype_bytes(s.kv_dtype)
    micro = s.batch // (layout.dp * layout.pp)  # sequences per DP rank per microbatch
    kv_token_chip = 2 * p.layers * kv_heads_per_chip(cfg, layout.tp) * cfg.head_dim * kvb
    kv_chip = micro * layout.pp * s.context * kv_token_chip
    memory = {"params": p.total * pbytes, "kv_cache": kv_chip}
    memory["total"] = sum(memory.values())
    weights_read = (p.dense + p.experts * experts_touched(cfg, micro * layout.ep)) * pbytes
    kv_read = micro * s.context * kv_token_chip
    active = matmul_params(cfg) / (layout.tp * layout.pp)
    peak = hw.peak(s.compute_dtype).value
    stage = {"weights_s": weights_read / hw.hbm_bytes_per_s.value, "kv_s": kv_read / hw.hbm_bytes_per_s.value,
             "flops_s": 2.0 * micro * active / peak}
    comm = _decode_comm(cfg, layout, net, micro, p.layers, p.moe_layers, dtype_bytes(s.compute_dtype))
    stage_s = stage["kv_s"] + max(stage["weights_s"], stage["flops_s"]) + sum(comm.values())
    send = net.price("collective-permute", micro * cfg.d_model * dtype_bytes(s.compute_dtype), ("pp",)).total_s
    step = layout.pp * stage_s + (layout.pp - 1) * send if layout.pp > 1 else stage_s
    bound = "compute" if stage["flops_s"] > max(stage["weights_s"], stage["kv_s"]) else (
        "memory (KV cache)" if stage["kv_s"] > stage["weights_s"] else "memory (weights)")
    return {"layout": described, "valid": True, "problems": [], "fits": memory["total"] <= hbm,
            "source": "model: the planner's estimate from the model's shape and the hardware's figures",
            "hbm_bytes": hbm, "memory_per_chip_bytes": memory, "sequences_per_microbatch": micro,
            "decode": {"step_s": step, "per_stage_microbatch_s": {**stage, **{f"{k}_comm_s": v for k, v in comm.items()}},
                       "pipeline_send_s": send if layout.pp > 1 else 0.0, "bound_by": bound,
                       "tokens_per_s": s.batch / step, "tokens_per_s_per_chip": s.batch / step / s.chips},
            "levels": {"fast": net.fast, "slow": net.slow, "domain_chips": net.domain}}


def experts_touched(cfg: ModelConfig, tokens: int) -> float:
    """Share of the routed experts some of `tokens` tokens go to, under uniform routing."""
    if not cfg.experts:
        return 1.0
    return 1.0 - (1.0 - cfg.experts_per_token / cfg.experts) ** max(tokens, 0)


def _decode_comm(cfg: ModelConfig, layout: Layout, net: Network, micro: int, layers: int, moe_layers: int,
                 act_bytes: float) -> dict[str, float]:
    """Seconds per stage and microbatch: TP's two all-reduces per layer, EP's all-to-alls per MoE layer."""
    out = {}
    act = micro * cfg.d_model * act_bytes
    tp = sum(net.price(kind, act, ("tp",)).total_s * count
             for kind, count in tensor_parallel(layers, train=False, sequence_parallel=False))
    if tp:
        out["tp"] = tp
    dispatch = net.price_dispatch(act, cfg.experts_per_token, ("ep",)).total_s
    ep = sum(dispatch * count for _, count in expert_parallel(moe_layers, train=False))
    if ep:
        out["ep"] = ep
    return out


def serve_candidates(cfg: ModelConfig, s: ServeSetup) -> list[Layout]:
    """Serving layouts of `s.chips` chips: TP x PP x DP with EP carved out of DP for an MoE."""
    out = []
    for tp in divisors(s.chips):
        if cfg.heads % tp or cfg.d_ff % tp or (cfg.kv_heads % tp and tp % cfg.kv_heads):
            continue
        for pp in (p for p in divisors(s.chips // tp) if p <= cfg.layers):
            dp = s.chips // (tp * pp)
            for ep in [e for e in divisors(dp) if cfg.experts and cfg.experts % e == 0] or [1]:
                out.append(Layout(dp=dp, tp=tp, pp=pp, ep=ep))
    return out


def search_serve(cfg: ModelConfig, s: ServeSetup, hw: Hardware, top: int = DEFAULTS.plan_top) -> dict[str, Any]:
    """Serving layouts that fit, fastest decode step first (the most tokens/s at this batch)."""
    results = [serve_layout(cfg, s, hw, lay) for lay in serve_candidates(cfg, s)]
    fitting = sorted((r for r in results if r["valid"] and r["fits"]), key=lambda r: r["decode"]["step_s"])
    return {"candidates": len(results), "fitting": len(fitting), "layouts": fitting[:top],
            "best": fitting[0] if fitting else None}
