"""One training step as the ops a framework runs, each priced by the cost model that judges profiles.

Per microbatch, on the busiest pipeline stage's chip, every layer runs (shapes per chip under the
layout: TP splits heads, d_ff and the vocabulary; sequence parallelism splits the norms and
residuals over TP; CP splits the queries; EP places experts/ep per chip):
- forward: norm, the QKV GEMM, rotary, the attention kernel (flash-attention style: scores,
  masking and softmax inside one kernel, causal or within a sliding window), the output GEMM, the
  residual add, norm, the MLP's up GEMM, its activation, its down GEMM, the residual add; a
  mixture-of-experts layer runs instead the router GEMM, softmax and top-k, the permute of the
  routed tokens, the grouped GEMMs at their per-expert token count (capacity factor included), the
  unpermute and the weighted combine, and its shared experts' GEMMs;
- backward: each GEMM's two GEMMs (input gradient, weight gradient), the attention backward
  kernel, and each memory-bound op's gradient (its bytes twice);
- the re-run of the remat policy (`remat`): the forward ops it re-runs;
- once per step or microbatch: the embedding gather (first stage), the logits GEMM and the
  cross-entropy in f32 (last stage, chunked: never the whole microbatch's logits at once), and
  the optimizer update over the chip's parameter shard (Adam: weights, gradient, two moments and
  the f32 master copy read, all but the gradient written).
Each op is an `OpCost` priced with `roofline.expect` and `achievable.achievable_time`: GEMM rates
with tile, wave or MXU shape effects, the attention kernels' rates, memory-bound ops at the
streaming rate, and the shortest op's fixed cost. The sum is an estimate, not a bound.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

from ..achievable import achievable_time
from ..attention import flops as attention_flops
from ..chips.hardware import Hardware
from ..costs import AttentionProblem, OpCost
from ..roofline import expect
from ...parsers.hlo.dtypes import element_bytes
from .calibrate import Calibration
from .layout import Layout
from .layout_memory import kv_heads_per_chip
from .remat import RematPolicy
from .transformer import ModelConfig

CLASSES = ("matmul", "quantize", "attention", "elementwise", "moe routing", "embedding", "logits and loss", "optimizer")
# Training matmul formats: (the dtype the GEMMs run in, scale bytes per operand element): FP8 with
# per-tensor scales (Transformer Engine), MXFP8 (one 8-bit scale per 32 elements, OCP MX spec),
# NVFP4 (one FP8 scale per 16 elements, NVIDIA Blackwell)
MATMUL_FORMATS = {"bf16": ("bf16", 0.0), "fp8": ("fp8", 0.0), "mxfp8": ("fp8", 1 / 32), "nvfp4": ("fp4", 1 / 16)}
LOSS_BYTES = 4.0  # the cross-entropy's logits in f32
OPTIMIZER_BYTES_PER_PARAM = 2 + 2 + 4 + 4 + 4 + 2 + 4 + 4 + 4  # read w, g, m, v, master; write w, m, v, master


@dataclass(frozen=True)
class StepShape:
    """What one chip runs per microbatch: tokens on its CP shard, sequences, and the run's knobs."""

    tokens: float  # tokens of the microbatch on this chip's CP shard (TP ranks share them)
    sequences: float  # sequences in the microbatch
    seq: int
    act_bytes: float = 2.0
    dtype: str = "bf16"  # activations, norms, attention
    capacity_factor: float = 1.0
    window: int = 0  # sliding-window attention: keys per query (0: causal over the whole sequence)
    window_share: float = 1.0  # share of the layers whose attention is windowed (the rest: full causal)
    chunked: bool = False  # the window is chunked attention: causal within blocks of `window` tokens
    matmul_dtype: str = "bf16"  # the GEMMs' operands: bf16, or fp8 / fp4 (FP8, MXFP8, NVFP4 training)
    scale_bytes: float = 0.0  # block scales per operand element (MXFP8 1/32, NVFP4 1/16 + ...)
    expert_imbalance: float = 1.0  # tokens of the busiest expert over the mean: every EP rank waits for it


@dataclass
class _Ledger:
    """Seconds by op class and by op name, with the figures' sources."""

    hw: Hardware
    by_class: dict[str, float]
    by_op: dict[str, float]
    sources: set[str]
    calibration: Calibration | None = None

    def price(self, cls: str, name: str, cost: OpCost, count: float) -> float:
        if count <= 0:
            return 0.0
        seconds, source = _priced(self.hw, cost, self.calibration)
        if source:
            self.sources.update(s.strip() for s in source.split(";") if s.strip())
        self.by_class[cls] = self.by_class.get(cls, 0.0) + seconds * count
        self.by_op[name] = self.by_op.get(name, 0.0) + seconds * count
        return seconds * count

    def gemm(self, name: str, m: float, n: float, k: float, count: float, dtype: str, act: float,
             groups: float = 1, cls: str = "matmul", backward: bool = True, scale_bytes: float = 0.0) -> None:
        """A (grouped) GEMM [m, k] x [k, n] per group, and its two backward GEMMs. Below bf16 the
        activation operands are quantized first (read in bf16, written in `dtype` with their scales):
        the input once forward, the output gradient once backward (the weight-gradient GEMM reuses
        both, as Transformer Engine does; weights are cast once per step, not counted)."""
        b, mi, ni, ki = max(int(groups), 1), max(int(round(m)), 1), max(int(round(n)), 1), max(int(round(k)), 1)
        size = element_bytes(dtype) or act
        for label, shape in (("", (mi, ni, ki)), (" dgrad", (mi, ki, ni)), (" wgrad", (ki, ni, mi))):
            if label and not backward:
                continue
            x, y, z = shape
            cost = OpCost(2.0 * b * x * y * z, size * b * (x * z + z * y), act * b * x * y, dtype=dtype,
                          gemm=(b, x, y, z))
            self.price(cls, name + label, cost, count)
            if size < act and label != " wgrad":
                operand = b * x * z  # the forward's input [m, k], or the output gradient [m, n]
                self.price("quantize", "quantize " + name + label,
                           OpCost(2.0 * operand, act * operand, (size + scale_bytes) * operand, dtype="bf16"),
                           count)

    def stream(self, cls: str, name: str, read: float, written: float, count: float, dtype: str,
               flops: float = 0.0, backward: bool = True) -> None:
        """A memory-bound op moving `read` + `written` bytes, and its gradient (twice the bytes)."""
        self.price(cls, name, OpCost(flops, read, written, dtype=dtype), count)
        if backward:
            self.price(cls, name + " backward", OpCost(2 * flops, 2 * read, 2 * written, dtype=dtype), count)


@functools.lru_cache(maxsize=256)
def _unit_flops(p: AttentionProblem) -> float:
    """One sequence's, one head's attention FLOPs (counting its pairs walks every query)."""
    return attention_flops(p)


_PRICED: dict[tuple[int, int, OpCost], tuple[float, str, Hardware]] = {}
_PRICED_MOST = 50_000  # a search prices a few thousand layouts of a few dozen shapes each


def _priced(hw: Hardware, cost: OpCost, calibration: Calibration | None = None) -> tuple[float, str]:
    """(achievable seconds, the figures' sources) of one op: at the catalog's achievable rates, or
    at its roofline times the user's measured factor for its bound class; layouts of one search
    share shapes."""
    key = (id(hw), id(calibration), cost)
    hit = _PRICED.get(key)
    if hit is not None and hit[2] is hw:
        return hit[0], hit[1]
    exp = expect(cost, hw)
    factor = None if calibration is None or exp.expected_s is None else calibration.factor(exp.bound_by)
    if factor is not None and exp.expected_s is not None:
        seconds, source = exp.expected_s * factor, f"{calibration.source if calibration else ''} ({exp.bound_by})"
    else:
        ach = achievable_time(cost, exp, hw)
        seconds, source = (ach.seconds if ach.seconds is not None else (exp.expected_s or 0.0)), ach.source
    if len(_PRICED) >= _PRICED_MOST:
        _PRICED.clear()
    _PRICED[key] = (seconds, source, hw)
    return seconds, source


def _attention(led: _Ledger, cfg: ModelConfig, layout: Layout, s: StepShape, count: float, rerun: bool,
               window_keys: int = 0) -> None:
    heads = max(cfg.heads // layout.tp, 1)
    kv = max(int(round(kv_heads_per_chip(cfg, layout.tp))), 1)
    # CP's balanced chunks give each rank 1/cp of the causal pairs: the whole problem, 1/cp of the time
    q_len = s.seq
    window = (window_keys, 0) if window_keys else (-1, -1)
    batch = max(int(math.ceil(s.sequences)), 1)
    if window_keys and s.chunked:  # independent causal blocks: seq / chunk problems of chunk tokens each
        q_len, window = window_keys, (-1, -1)
        batch = max(int(math.ceil(s.sequences * s.seq / window_keys)), 1)
    for kernel, times in (("forward", 1 + (1 if rerun else 0)), ("backward", 1)):
        p = AttentionProblem(batch, heads, kv, q_len, q_len, cfg.head_dim, cfg.head_dim, kernel=kernel,
                             causal=True, window=window)
        fl = _unit_flops(dataclasses.replace(p, batch=1, heads=1, kv_heads=1)) * batch * heads
        io = s.act_bytes * batch * q_len * (2 * heads + 2 * kv) * cfg.head_dim * (2 if kernel == "backward" else 1)
        led.price("attention", f"attention {kernel}", OpCost(fl, io, io / 2, dtype=s.dtype, attention=p),
                  count * times / layout.cp)


def price_step(cfg: ModelConfig, layout: Layout, hw: Hardware, s: StepShape, layers: int, moe_layers: int,
               microbatches: int, remat: RematPolicy, params_on_chip: float, first_stage: bool = True,
               last_stage: bool = True, calibration: Calibration | None = None) -> dict[str, Any]:
    """Seconds per step on one chip by op class and by op, with the sources of the rates used."""
    led = _Ledger(hw, {}, {}, set(), calibration)
    tp, d, h, act, dt = layout.tp, cfg.d_model, cfg.head_dim, s.act_bytes, s.dtype
    t, t_sp = s.tokens, s.tokens / tp  # tokens a GEMM sees; tokens a norm sees under sequence parallelism
    m = microbatches
    dense_layers = layers - moe_layers
    full = remat.rerun_matmuls >= 1.0
    elementwise_runs = 1 + (1 if remat.rerun_elementwise else 0)
    fwd_gemm_runs = 1 + (1 if full else 0)

    def gemm(name: str, rows: float, n: float, k: float, count: float, groups: float = 1,
             cls: str = "matmul") -> None:
        led.gemm(name, rows, n, k, count, s.matmul_dtype, act, groups, cls, scale_bytes=s.scale_bytes)
        if full:  # the forward GEMM again
            led.gemm(name + " (re-run)", rows, n, k, count, s.matmul_dtype, act, groups, cls, backward=False,
                     scale_bytes=s.scale_bytes)

    per_layer = layers * m
    qkv = (cfg.heads + 2 * kv_heads_per_chip(cfg, tp) * tp) * h / tp
    led.stream("elementwise", "norm", t_sp * d * act, t_sp * d * act, 2 * per_layer * elementwise_runs, dt,
               flops=4 * t_sp * d)
    gemm("QKV projection", t, qkv, d, per_layer)
    led.stream("elementwise", "rotary", 2 * t * (cfg.heads / tp + kv_heads_per_chip(cfg, tp)) * h * act / 2,
               t * (cfg.heads / tp + kv_heads_per_chip(cfg, tp)) * h * act, per_layer * elementwise_runs, dt)
    windowed = s.window_share if 0 < s.window < s.seq else 0.0
    if windowed:
        _attention(led, cfg, layout, s, per_layer * windowed, remat.rerun_attention, s.window)
    if windowed < 1:
        _attention(led, cfg, layout, s, per_layer * (1 - windowed), remat.rerun_attention)
    gemm("attention output projection", t, d, cfg.heads * h / tp, per_layer)
    led.stream("elementwise", "residual add", 2 * t_sp * d * act, t_sp * d * act, 2 * per_layer, dt, flops=t_sp * d)
    if dense_layers:
        up = (cfg.mlp_matrices - 1) * cfg.d_ff / tp
        gemm("MLP up projection", t, up, d, dense_layers * m)
        led.stream("elementwise", "MLP activation", t * up * act, t * cfg.d_ff / tp * act,
                   dense_layers * m * elementwise_runs, dt, flops=4 * t * cfg.d_ff / tp)
        gemm("MLP down projection", t, d, cfg.d_ff / tp, dense_layers * m)
    if moe_layers:
        _moe(led, gemm, cfg, layout, s, moe_layers * m, elementwise_runs)
    if first_stage:
        led.stream("embedding", "embedding gather", t_sp * d * act + t_sp * 4, t_sp * d * act, m, dt)
    if last_stage:
        led.stream("elementwise", "final norm", t_sp * d * act, t_sp * d * act, m, dt, flops=4 * t_sp * d)
        led.gemm("logits", t, cfg.vocab / tp, d, m, dt, act, cls="logits and loss")
        logits = t * cfg.vocab / tp * LOSS_BYTES
        led.stream("logits and loss", "softmax cross-entropy (chunked)", logits, logits, m, dt,
                   flops=5 * t * cfg.vocab / tp)
    led.stream("optimizer", "optimizer update (Adam)", params_on_chip * OPTIMIZER_BYTES_PER_PARAM * 0.5,
               params_on_chip * OPTIMIZER_BYTES_PER_PARAM * 0.5, 1, "f32", flops=12 * params_on_chip,
               backward=False)
    total = sum(led.by_class.values())
    return {"total_s": total, "by_class_s": {k: led.by_class[k] for k in CLASSES if k in led.by_class},
            "by_op_s": dict(sorted(led.by_op.items(), key=lambda kv: -kv[1])),
            "sources": sorted(led.sources), "forward_gemm_runs": fwd_gemm_runs}


def _moe(led: _Ledger, gemm: Any, cfg: ModelConfig, layout: Layout, s: StepShape, count: float,
         elementwise_runs: int) -> None:
    """Router, top-k, permute, grouped expert GEMMs at their per-expert rows, unpermute, shared experts."""
    tp, d, act, dt = layout.tp, cfg.d_model, s.act_bytes, s.dtype
    t_own = s.tokens / tp  # distinct tokens this chip routes (sequence parallel over TP)
    k, e, ep = cfg.experts_per_token, cfg.experts, max(layout.ep, 1)
    gemm("router", t_own, e, d, count, cls="moe routing")
    led.stream("moe routing", "router softmax and top-k", t_own * e * 4, t_own * (e + 2 * k) * 4, count, dt,
               flops=6 * t_own * e)
    routed = t_own * k * s.capacity_factor  # token copies this chip sends to experts and takes back
    led.stream("moe routing", "permute tokens", routed * d * act + t_own * d * act, routed * d * act, count, dt)
    experts_here = max(e // ep, 1)
    # tokens each local expert receives from its EP group: padded to its capacity when there is one
    # (tokens beyond it dropped), else the busiest expert's, which the rest of the group waits for
    rows = t_own * k * ep / e * (s.capacity_factor if s.capacity_factor > 1 else s.expert_imbalance)
    w = cfg.expert_width
    gemm("expert up projection (grouped)", rows, (cfg.mlp_matrices - 1) * w, d, count, groups=experts_here)
    led.stream("elementwise", "expert activation", rows * experts_here * (cfg.mlp_matrices - 1) * w * act,
               rows * experts_here * w * act, count * elementwise_runs, dt, flops=4 * rows * experts_here * w)
    gemm("expert down projection (grouped)", rows, d, w, count, groups=experts_here)
    led.stream("moe routing", "unpermute and combine", routed * d * act + routed * 4, t_own * d * act, count, dt,
               flops=2 * routed * d)
    if cfg.shared_experts:
        sw = cfg.shared_experts * w / tp
        gemm("shared expert up projection", s.tokens, (cfg.mlp_matrices - 1) * sw, d, count)
        led.stream("elementwise", "shared expert activation", s.tokens * (cfg.mlp_matrices - 1) * sw * act,
                   s.tokens * sw * act, count * elementwise_runs, dt, flops=4 * s.tokens * sw)
        gemm("shared expert down projection", s.tokens, d, sw, count)
