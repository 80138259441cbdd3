"""Training plan (book ch. 5-6): total FLOPs, time at an MFU, memory, and the parallelism to use."""

from __future__ import annotations

from typing import Any

import math
from dataclasses import asdict, dataclass

from ...base.errors import InputError
from ...base.options import DEFAULTS
from ..chips.hardware import Hardware
from ..units import figure, whole
from .chip_numbers import ChipNumbers, chip_numbers, mesh_axes, require_hbm
from .degrees import tp_degrees
from .layout import Layout
from .layout_memory import TrainBytes
from .layout_step import RunSpec, evaluate_layout
from .search import compare, search
from .calibrate import Calibration
from .remat import POLICIES, policy
from .step_ops import MATMUL_FORMATS
from .parallel import STRATEGIES, Parallel, StrategyVerdict, all_strategies
from .transformer import (ModelConfig, activation_bytes_per_token, dtype_bytes, param_breakdown,
                          training_flops_per_token)

# Adam keeps two f32 moments: 8 bytes per parameter (book ch. 5.1.1 footnote).
ADAM_BYTES_PER_PARAM = 8.0
# The simplest strategy that works wins (STRATEGIES is in that order): less code, fewer collectives.
PREFERENCE = STRATEGIES


@dataclass(frozen=True)
class TrainSetup:
    """A training run: `tokens` in total, `batch_tokens` per step, on `chips` chips."""

    tokens: float
    batch_tokens: float
    chips: int
    seq: int = 4096
    mfu: float = 0.4
    checkpoints_per_layer: float | None = None  # the old single knob; None: `remat` says
    remat: str = "auto"  # a policy of `remat.POLICIES`
    param_dtype: str = "bf16"
    compute_dtype: str = "bf16"
    optimizer_bytes_per_param: float = ADAM_BYTES_PER_PARAM
    master_bytes_per_param: float = 4.0  # f32 master weights beside bf16 ones (layouts only)
    capacity_factor: float = 1.0  # MoE expert capacity over an even split of the tokens
    matmul_format: str = "bf16"  # bf16, fp8, mxfp8 or nvfp4 (step_ops.MATMUL_FORMATS)
    window: int = 0  # sliding-window attention: keys per query (0: full causal attention)
    window_share: float = 1.0  # share of the layers with the sliding window (GPT-OSS: every other, 0.5)
    calibration: Calibration | None = None  # measured factors from the user's inspect report
    expert_imbalance: float = 1.0  # MoE: tokens of the busiest expert over the mean
    moe_dispatch: str = "all-to-all"  # MoE: how tokens reach their experts (or "all-gather")
    chunked: bool = False  # the window is chunked attention (causal within blocks of `window`)
    offload_optimizer: bool = False  # optimizer state and master weights in host memory
    offload_params: bool = False  # weights in host memory, streamed in per layer

    def __post_init__(self) -> None:
        if self.tokens <= 0 or self.batch_tokens <= 0 or self.chips <= 0 or self.seq <= 0:
            raise InputError("tokens, batch tokens, chips and sequence length must be positive")
        if not 0 < self.mfu <= 1:
            raise InputError(f"MFU must be in (0, 1], got {self.mfu}")
        if self.matmul_format not in MATMUL_FORMATS:
            raise InputError(f"unknown matmul format {self.matmul_format!r}", hint=", ".join(MATMUL_FORMATS))
        if self.window < 0 or not 0 <= self.window_share <= 1:
            raise InputError("a sliding window is a positive key count, its share of the layers in [0, 1]")
        if self.remat not in POLICIES:
            raise InputError(f"unknown remat policy {self.remat!r}", hint=", ".join(POLICIES))
        if self.moe_dispatch not in ("all-to-all", "all-gather"):
            raise InputError(f"unknown MoE dispatch {self.moe_dispatch!r}", hint="all-to-all or all-gather")
        if self.expert_imbalance < 1:
            raise InputError(f"expert imbalance is the busiest expert's tokens over the mean, at least 1, "
                             f"got {self.expert_imbalance}")
        if self.capacity_factor < 1:
            raise InputError(f"capacity factor must be at least 1, got {self.capacity_factor}")

    def closed_form_checkpoints(self, cfg: ModelConfig) -> float:
        """D-sized activations per layer per token for the book's closed forms: the old knob, the
        stated policy's on-chip share, or (unstated) the shared default, block remat."""
        if self.checkpoints_per_layer is not None:
            return self.checkpoints_per_layer
        if self.remat == "auto":
            return DEFAULTS.plan_checkpoints_per_layer
        return policy(self.remat, cfg).kept / cfg.d_model

    def run_spec(self) -> RunSpec:
        """The facts a parallel layout is evaluated against."""
        sizes = TrainBytes(param=dtype_bytes(self.param_dtype), optimizer=self.optimizer_bytes_per_param,
                           master=self.master_bytes_per_param, activation=dtype_bytes(self.param_dtype),
                           checkpoints_per_layer=self.checkpoints_per_layer, remat=self.remat,
                           offload_optimizer=self.offload_optimizer, offload_params=self.offload_params)
        return RunSpec(self.batch_tokens, self.seq, self.chips, sizes, compute_dtype=self.compute_dtype,
                       capacity_factor=self.capacity_factor, window=self.window, matmul_format=self.matmul_format,
                       window_share=self.window_share, chunked=self.chunked, calibration=self.calibration,
                       expert_imbalance=self.expert_imbalance, moe_dispatch=self.moe_dispatch)


def total_flops(cfg: ModelConfig, setup: TrainSetup) -> float:
    """Training FLOPs for the whole run: (6N + attention) per token times tokens."""
    return training_flops_per_token(cfg, setup.seq) * setup.tokens


def time_at_mfu(flops: float, chips: int, flops_per_s: float, mfu: float) -> float:
    """Seconds to do `flops` on `chips` chips running at `mfu` of their peak."""
    return flops / (chips * flops_per_s * mfu)


def memory_totals(cfg: ModelConfig, setup: TrainSetup) -> dict[str, float]:
    """Bytes across all chips: parameters, optimizer state and saved activations of one batch."""
    n = param_breakdown(cfg)["total"]
    act = setup.batch_tokens * activation_bytes_per_token(cfg, setup.closed_form_checkpoints(cfg), setup.param_dtype)
    out = {"params": n * dtype_bytes(setup.param_dtype), "optimizer": n * setup.optimizer_bytes_per_param,
           "activations": act}
    out["total"] = sum(out.values())
    return out


def min_chips_by_memory(total_bytes: float, hbm_bytes: float) -> int:
    return max(1, math.ceil(total_bytes / hbm_bytes - 1e-9))


def pods_of(setup: TrainSetup, chips: ChipNumbers) -> tuple[int, int]:
    """(pods, chips per pod): more chips than the named slice means whole slices over DCN."""
    per_slice = chips.slice_chips
    if per_slice is None or setup.chips <= per_slice:
        return 1, setup.chips
    if setup.chips % per_slice:
        raise InputError(f"--chips {setup.chips} is not a whole number of {per_slice}-chip slices",
                         hint="use a multiple of the topology's chip count, or name a larger topology")
    return setup.chips // per_slice, per_slice


def parallel_inputs(cfg: ModelConfig, setup: TrainSetup, chips: ChipNumbers) -> Parallel:
    if chips.alpha is None:
        raise InputError(f"hardware {chips.name} has no chip-to-chip bandwidth in the catalog",
                         hint="parallelism needs an interconnect; pick a TPU or GPU")
    pods, per_pod = pods_of(setup, chips)
    dcn = chips.dcn_bytes_per_s
    tp = tp_degrees(cfg, chips, per_pod)
    return Parallel(batch_per_pod=setup.batch_tokens / pods, chips_per_pod=per_pod, pods=pods,
                    d_ff=cfg.d_ff, alpha=chips.alpha, axes=mesh_axes(chips),
                    dcn_alpha=None if dcn is None else chips.flops_per_s.value / dcn.value,
                    tp_allowed=tp.allowed, tp_rule=tp.rule)


def _memory_per_chip(v: StrategyVerdict, mem: dict[str, float], p: Parallel) -> float:
    state = mem["params"] + mem["optimizer"]
    # DP replicates weights and optimizer; the others shard them over the pod.
    weights = state if v.strategy == "dp" else state / p.chips_per_pod
    return weights + mem["activations"] / (p.chips_per_pod * p.pods)


def strategy_rows(cfg: ModelConfig, setup: TrainSetup, chips: ChipNumbers, mem: dict[str, float]) -> list[dict[str, Any]]:
    p = parallel_inputs(cfg, setup, chips)
    hbm = require_hbm(chips)
    step_math = training_flops_per_token(cfg, setup.seq) * setup.batch_tokens / (setup.chips * chips.flops_per_s.value)
    rows = []
    for v in all_strategies(p):
        per_chip = _memory_per_chip(v, mem, p)
        sequences = setup.batch_tokens / setup.seq
        data_degree = v.degrees.get("dp", v.degrees.get("fsdp", 1)) * p.pods
        if cfg.experts:
            v.notes.append("MoE: the closed forms use the dense d_ff; the layout search models expert parallelism")
        if data_degree > sequences:
            v.notes.append(f"{data_degree}-way data sharding of {whole(sequences)} sequences needs sequence parallelism")
        row = asdict(v)
        row.update(ratio=v.ratio, bound=v.bound, batch_per_chip=setup.batch_tokens / setup.chips,
                   memory_per_chip_bytes=per_chip, fits=per_chip <= hbm,
                   step_math_s=step_math, step_lower_bound_s=step_math / min(v.ratio, 1.0))
        rows.append(row)
    return rows


def recommend(rows: list[dict[str, Any]], min_chips: int) -> dict[str, Any]:
    """The simplest strategy that fits and is compute-bound, else the best ratio that fits."""
    by_name = {r["strategy"]: r for r in rows}
    fitting = [by_name[s] for s in PREFERENCE if by_name[s]["fits"] and by_name[s]["feasible"]]
    if not fitting and any(r["fits"] for r in rows):
        notes = [n for r in rows if r["fits"] for n in r["notes"] if "not allowed" in n]
        return {"strategy": None, "degrees": None,
                "reason": "no strategy that fits in memory can shard this model on this slice: "
                          + (notes[0] if notes else "degrees not allowed")}
    if not fitting:
        return {"strategy": None, "degrees": None,
                "reason": f"nothing fits in memory: needs at least {min_chips} chips, more "
                          f"remat (--remat full or offload) or a smaller batch per step (gradient accumulation)"}
    good = [r for r in fitting if r["bound"] == "compute"]
    if good:
        r = good[0]
        why = f"simplest strategy that fits and is compute-bound (T_math/T_comms = {figure(r['ratio'])})"
    else:
        r = max(fitting, key=lambda row: row["ratio"])
        why = (f"every strategy that fits is communication-bound; this one comes closest "
               f"(T_math/T_comms = {figure(r['ratio'])}); raise the batch or use fewer chips")
    degrees = ", ".join(f"{k}={v}" for k, v in r["degrees"].items() if v > 1) or "single chip"
    return {"strategy": r["strategy"], "degrees": r["degrees"], "reason": f"{r['strategy']} ({degrees}): {why}"}


def with_layouts(recommendation: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    """The closed forms' recommendation, plus the best layout of the search and why."""
    best = found["best"]
    out = dict(recommendation, layout=None if best is None else best["layout"], layout_reason=found["why"])
    if best is not None and recommendation["strategy"] is None:
        out["reason"] = (f"the book's closed forms (no pipeline, experts or context parallelism) find no "
                         f"plan: {recommendation['reason']}; the layout search finds {best['layout']['label']}")
    elif best is not None:
        # two answers in one output: say whose each is, and which one weighs every axis
        out["reason"] = (f"the book's closed forms (no pipeline, experts or context parallelism) pick "
                         f"{recommendation['reason']}; the layout search, which weighs those too, finds "
                         f"{best['layout']['label']}")
    return out


def plan_train(cfg: ModelConfig, setup: TrainSetup, hw: Hardware, layout: Layout | None = None,
               top: int = DEFAULTS.plan_top, layouts: bool = True) -> dict[str, Any]:
    """Everything `audit plan train` reports, in SI units (FLOPs, seconds, bytes, tokens).

    `layouts`: also search the DP/TP/PP/EP/CP layouts; `layout`: evaluate this one too.
    """
    chips = chip_numbers(hw, setup.compute_dtype)
    flops = total_flops(cfg, setup)
    mem = memory_totals(cfg, setup)
    hbm = require_hbm(chips)
    min_chips = min_chips_by_memory(mem["total"], hbm)
    rows = strategy_rows(cfg, setup, chips, mem)
    recommendation = recommend(rows, min_chips)
    extra: dict[str, Any] = {}
    if layouts:
        found = search(cfg, setup.run_spec(), hw, top=top)
        recommendation = with_layouts(recommendation, found)
        extra["layout_search"] = found
    if layout is not None:
        extra["layout"] = mine = evaluate_layout(cfg, setup.run_spec(), hw, layout)
        best = extra.get("layout_search", {}).get("best")
        if best is not None and mine["valid"]:
            mine["versus_best"] = compare(best, mine)
    return {**extra,
        "model": cfg.to_json(),
        "setup": asdict(setup),
        "hardware": chips.to_json(),
        "flops_per_token": training_flops_per_token(cfg, setup.seq),
        "total_flops": flops,
        "time_s": time_at_mfu(flops, setup.chips, chips.flops_per_s.value, setup.mfu),
        "memory_bytes": mem,
        "memory_per_chip_bytes_fully_sharded": mem["total"] / setup.chips,
        "min_chips_by_memory": min_chips,
        "strategies": rows,
        "recommendation": recommendation,
    }
