"""One training step of one layout: compute, exposed communication per network level, bubble.

Compute is the step's executed FLOPs (the model's 6N plus attention, the forward recomputed
under remat, experts padded to the capacity factor) over the chips at peak, on the busiest
pipeline stage: a lower bound, the roofline. Communication per step per chip, each collective
priced on the levels it spans (`hierarchy`), with what real schedules hide behind compute:
- TP with sequence parallelism: an all-gather and a reduce-scatter of the block's activations
  around attention and around the MLP, forward and backward (Korthikanti et al. 2022);
  on the critical path.
- CP (all-gather ring attention, as Llama 3): keys and values gathered forward, gathered and
  their gradients reduce-scattered backward; hidden behind the attention math.
- EP: dispatch and combine all-to-alls, forward and backward, each token crossing the
  scale-out network once per remote domain it needs; exposed, except that DualPipe overlaps
  them with the other direction's compute.
- PP: activations forward and gradients backward between neighbouring stages; only the
  fill and drain chain (2 (pp - 1) sends) is exposed.
- DP/ZeRO: gradients all-reduced (ZeRO 0-1), reduce-scattered per microbatch (2), or weights
  gathered per microbatch forward and backward and gradients reduce-scattered (3); hidden
  behind the last microbatch's compute (ZeRO 0-2) or all of it (ZeRO 3).
The bubble is the schedule's idle fraction of the per-microbatch path (compute plus the
exposed TP and EP time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ..chips.hardware import Hardware
from ..units import ratio, stated, whole_percent
from .hierarchy import Network
from .calibrate import Calibration
from .layout import Layout
from .layout_achievable import achievable_step
from .parallelism import (across_replicas, context_parallel, data_parallel, expert_parallel, pipeline_parallel,
                          tensor_parallel)
from .layout_memory import TrainBytes, dp_groups, kv_heads_per_chip, memory_per_chip, stage_params, state_shards
from .step_ops import MATMUL_FORMATS, StepShape, price_step
from .pipeline import schedule_of, schedule_problem
from .remat import AUTO_ORDER, RematPolicy
from .transformer import (ModelConfig, attention_flops_per_token, forward_flops_per_token, matmul_params,
                          training_flops_per_token)

BATCH_SLACK = 0.05  # how far a layout may round the global batch to split it evenly over DP


@dataclass(frozen=True)
class RunSpec:
    """What the run fixes whatever the layout: the batch, the sequence, the bytes, the chips."""

    batch_tokens: float
    seq: int
    chips: int
    sizes: TrainBytes = TrainBytes()
    compute_dtype: str = "bf16"
    capacity_factor: float = 1.0
    window: int = 0  # sliding-window attention: keys per query (0: causal over the whole sequence)
    matmul_format: str = "bf16"  # a key of step_ops.MATMUL_FORMATS; compute_dtype is its dtype
    window_share: float = 1.0  # share of the layers whose attention is windowed
    chunked: bool = False  # the window is chunked attention (causal within blocks), not sliding
    calibration: Calibration | None = None  # the user's measured factors (calibrate.from_report)
    expert_imbalance: float = 1.0  # tokens of the busiest expert over the mean
    moe_dispatch: str = "all-to-all"  # or "all-gather": tokens gathered over EP, outputs reduce-scattered

    @property
    def sequences(self) -> int:
        return max(1, round(self.batch_tokens / self.seq))

    def per_replica(self, dp: int) -> int | None:
        """Sequences each of `dp` replicas runs per step: the batch rounded to a multiple of dp,
        if that moves it by at most BATCH_SLACK (16e6 tokens of 8k sequences on dp=128: 15 each)."""
        per = round(self.sequences / dp)
        if per < 1 or abs(per * dp - self.sequences) > BATCH_SLACK * self.sequences:
            return None
        return per


def network_for(hw: Hardware, layout: Layout) -> Network:
    ep = layout.ep_dp
    rep = max(layout.replicas, 1)
    dims = [("tp", layout.tp), ("cp", layout.cp), ("ep", ep), ("pp", layout.pp),
            ("dp", max(layout.dp // (ep * rep), 1)), ("rep", rep)]
    return Network(hw, dims, layout.chips)


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def problems(cfg: ModelConfig, run: RunSpec, layout: Layout, net: Network) -> list[str]:
    """Why the model cannot run this layout on these chips (empty when it can)."""
    out = []
    tp, ep, cp = layout.tp, layout.ep, layout.cp
    if layout.chips != run.chips:
        out.append(f"dp x tp x pp x cp = {layout.chips}, not the {run.chips} chips")
    if cfg.heads % tp or cfg.d_ff % tp or (cfg.kv_heads % tp and tp % cfg.kv_heads):
        out.append(f"tp={tp} must divide the query heads ({cfg.heads}) and d_ff ({cfg.d_ff}), and divide "
                   f"or be a multiple of the KV heads ({cfg.kv_heads}, replicated when fewer)")
    if net.hw.kind != "tpu" and net.domain % tp:
        out.append(f"tp={tp} does not fit the {net.domain}-GPU {net.fast} domain")
    if net.hw.kind == "tpu" and tp > 1 and not any(n % tp == 0 for n in net.shape):
        out.append(f"tp={tp} fits no axis of the {'x'.join(map(str, net.shape))} slice")
    if net.problem:
        out.append(net.problem)
    if layout.replicas > 1 and (layout.dp % (layout.replicas * layout.ep_dp) or layout.zero < 1):
        out.append(f"replicas={layout.replicas} must divide dp / ep ({layout.dp} / {ep}) and needs ZeRO 1 or more")
    if ep > 1 and not cfg.experts:
        out.append(f"ep={ep}: expert parallelism needs a mixture-of-experts model ({cfg.name} is dense)")
    elif ep > 1 and (cfg.experts % ep or (layout.dp % ep and not (layout.ep_over_tp and layout.dp % layout.ep_dp == 0))):
        out.append(f"ep={ep} must divide the experts ({cfg.experts}), and divide dp ({layout.dp}) or be "
                   f"tp x cp ({tp * cp}) times a divisor of dp")
    if cp > 1 and run.seq % (2 * cp):
        out.append(f"cp={cp}: sequence {run.seq} must split into 2 x cp balanced chunks")
    if run.per_replica(layout.dp) is None:
        out.append(f"{run.sequences} sequences per step do not split over dp={layout.dp} "
                   f"(within {whole_percent(BATCH_SLACK)} of the batch)")
    if layout.zero not in (0, 1, 2, 3):
        out.append(f"ZeRO stage {layout.zero} does not exist")
    return out


def _microbatch_choices(layout: Layout, per_replica: int, layers: int) -> list[int]:
    options = [m for m in divisors(per_replica) if not schedule_problem(layout, m, layers)]
    return options or [per_replica]


def _splits(layout: Layout, per_replica: int, layers: int) -> bool:
    """Whether `per_replica` sequences split into microbatches the layout's schedule can run."""
    m, f = layout.microbatches, layout.flushes
    if m:
        return per_replica % m == 0 and m % f == 0 and not schedule_problem(layout, m // f, layers)
    return per_replica % f == 0 and any(not schedule_problem(layout, k, layers) for k in divisors(per_replica // f))


def replica_sequences(run: RunSpec, layout: Layout, layers: int) -> int | None:
    """Sequences per replica: the batch rounded to a multiple of dp, moved (still within
    BATCH_SLACK of the batch, nearest first) to a count the pipeline schedule can split when the
    nearest cannot: 16e6 tokens of 8k sequences on dp=128 are 15 each, 16 for interleaved pp=16."""
    nearest = run.per_replica(layout.dp)
    if nearest is None or _splits(layout, nearest, layers):
        return nearest
    lo = max(1, math.ceil(run.sequences * (1 - BATCH_SLACK) / layout.dp))
    hi = math.floor(run.sequences * (1 + BATCH_SLACK) / layout.dp)
    near_first = sorted(range(lo, hi + 1), key=lambda n: (abs(n * layout.dp - run.sequences), n))
    return next((n for n in near_first if _splits(layout, n, layers)), nearest)


def _frugal(cfg: ModelConfig, run: RunSpec) -> RematPolicy:
    """The run's policy, or under `auto` the one of AUTO_ORDER that keeps least."""
    chosen = run.sizes.policy(cfg)
    return run.sizes.policy(cfg, AUTO_ORDER[-1]) if chosen.name == "auto" else chosen


def choose_remat(cfg: ModelConfig, run: RunSpec, layout: Layout, m: int, tokens_mb: float,
                 hbm: float) -> tuple[RematPolicy, RematPolicy, dict[str, float]]:
    """(policy the bound assumes, policy the estimate runs, memory under the latter). A stated
    policy is both; `auto` bounds with nothing re-run and estimates with the first of AUTO_ORDER
    that fits (the last when none does)."""
    stated = run.sizes.policy(cfg)
    if stated.name != "auto":
        return stated, stated, memory_per_chip(cfg, layout, m, tokens_mb, run.sizes, stated)
    for name in AUTO_ORDER:
        chosen = run.sizes.policy(cfg, name)
        memory = memory_per_chip(cfg, layout, m, tokens_mb, run.sizes, chosen)
        if memory["total"] <= hbm:
            break
    return stated, chosen, memory


def offload_seconds(cfg: ModelConfig, run: RunSpec, layout: Layout, remat: RematPolicy, hw: Hardware,
                    tokens_per_chip: float, layers: int) -> float:
    """Host-link seconds per step of an offloading policy: its tensors out in the forward pass and
    back in the backward pass, over the chip's host link."""
    link = hw.interconnect.pcie_bytes_per_s
    if not remat.offloaded or link is None or link.value <= 0:
        return 0.0
    moved = 2 * remat.offloaded * run.sizes.activation * tokens_per_chip * layers
    return moved / link.value


def state_offload_seconds(cfg: ModelConfig, run: RunSpec, layout: Layout, hw: Hardware, m: int) -> tuple[float, float]:
    """(host-link seconds after the backward: the optimizer state and master weights read and written
    back for the update; host-link seconds behind compute: offloaded weights brought in for each
    microbatch's forward and backward)."""
    link = hw.interconnect.pcie_bytes_per_s
    if link is None or link.value <= 0:
        return 0.0, 0.0
    opt_params, weights = state_shards(cfg, layout)
    sizes = run.sizes
    update = 2 * opt_params * (sizes.optimizer + sizes.master) if sizes.offload_optimizer else 0.0
    gathers = 2 * m * weights * sizes.param if sizes.offload_params else 0.0
    return update / link.value, gathers / link.value


def pick_microbatches(cfg: ModelConfig, run: RunSpec, layout: Layout, hbm: float) -> int:
    """A pipeline takes the most microbatches (smallest bubble and footprint); without one, the
    fewest gradient-accumulation steps that fit in `hbm` bytes (else the most)."""
    per_replica = replica_sequences(run, layout, cfg.layers) or 1
    if layout.flushes > 1:  # the most microbatches each flush can take
        return _microbatch_choices(layout, max(per_replica // layout.flushes, 1), cfg.layers)[-1] * layout.flushes
    options = _microbatch_choices(layout, per_replica, cfg.layers)
    if layout.pp > 1:
        return options[-1]
    for m in options:
        mem = memory_per_chip(cfg, layout, m, per_replica * run.seq / m, run.sizes, _frugal(cfg, run))
        if mem["total"] <= hbm:
            return m
    return options[-1]


def recompute_flops_per_token(cfg: ModelConfig, seq: int, remat: RematPolicy, pair_share: float = 0.5) -> float:
    """Forward FLOPs per token the policy re-runs: its share of the layers' matmuls (the old knob:
    of the whole forward, as it always priced it) and the attention core (`pair_share` of the
    score matrix: a causal kernel's half, less under a sliding window)."""
    if remat.name == "checkpoints":
        return remat.rerun_matmuls * forward_flops_per_token(cfg, seq)
    layers = 2.0 * (matmul_params(cfg) - cfg.vocab * cfg.d_model)
    core = attention_flops_per_token(cfg, seq) * pair_share
    return remat.rerun_matmuls * layers + (core if remat.rerun_attention else 0.0)


def with_window(cfg: ModelConfig, run: RunSpec) -> RunSpec:
    """The run's sliding window, or the model's when the run states none."""
    if run.window or not cfg.sliding_window:
        return run
    return replace(run, window=cfg.sliding_window, window_share=cfg.sliding_window_share)


def executed_pair_share(run: RunSpec) -> float:
    """Share of the T x T score matrix a causal kernel computes, windowed layers included."""
    if not 0 < run.window < run.seq:
        return 0.5
    w = run.window / run.seq
    windowed = w / 2 if run.chunked else w - w * w / 2
    return run.window_share * windowed + (1 - run.window_share) * 0.5


def _flops(cfg: ModelConfig, run: RunSpec, remat: RematPolicy) -> tuple[float, float, float]:
    """(model FLOPs, executed FLOPs, attention FLOPs) of one step over all chips under `remat`."""
    tokens = run.batch_tokens
    model = training_flops_per_token(cfg, run.seq) * tokens
    # a causal (flash-attention) kernel computes about half of the book's T x T score matrix, a
    # sliding window of w keys w/T - (w/T)^2/2 of it
    full = attention_flops_per_token(cfg, run.seq, training=True) * tokens
    executed = model - full + full * executed_pair_share(run)
    executed += recompute_flops_per_token(cfg, run.seq, remat, executed_pair_share(run)) * tokens
    if cfg.experts and run.capacity_factor > 1:
        routed = 6.0 * cfg.moe_layers * cfg.experts_per_token * cfg.mlp_matrices * cfg.d_model * cfg.expert_width
        executed += (run.capacity_factor - 1) * routed * tokens
    return model, executed, attention_flops_per_token(cfg, run.seq, training=True) * tokens


def _row(axis: str, kind: str, volume: float, count: float, priced_levels: dict[str, float]) -> dict[str, Any]:
    levels = {k: v * count for k, v in priced_levels.items()}
    return {"axis": axis, "collective": kind, "volume_bytes": volume, "count": count, "levels_s": levels,
            "time_s": sum(levels.values())}


def comm_rows(cfg: ModelConfig, run: RunSpec, layout: Layout, net: Network, m: int,
              tokens_mb: float) -> list[dict[str, Any]]:
    """Every collective of one step on one chip: axis, kind, volume V, count, seconds per level."""
    rows: list[dict[str, Any]] = []
    act = run.sizes.activation
    p = stage_params(cfg, layout)
    d, tokens = cfg.d_model, tokens_mb / layout.cp

    def add(axis: str, kind: str, volume: float, count: float, names: tuple[str, ...]) -> None:
        priced = net.price(kind, volume, names)
        if count and priced.seconds:
            rows.append(_row(axis, kind, volume, count, priced.seconds))

    block = tokens * d * act  # the block's activations, gathered over TP
    for kind, count in tensor_parallel(p.layers, microbatches=m):
        add("tp", kind, block, count, ("tp",))
    kv = 2 * tokens_mb * kv_heads_per_chip(cfg, layout.tp) * cfg.head_dim * act
    for kind, count in context_parallel(p.layers, microbatches=m):
        add("cp", kind, kv, count, ("cp",))
    # each token's activation, once; the busiest expert's chip receives `expert_imbalance` times its share
    per_copy = tokens / layout.tp * max(run.capacity_factor, run.expert_imbalance) * d * act
    ep_names = ("tp", "cp", "ep") if layout.ep_over_tp else ("ep",)
    if cfg.experts and run.moe_dispatch == "all-gather":
        # every chip gathers the EP group's tokens and keeps those its experts take; the outputs are
        # reduce-scattered back
        own = tokens / layout.tp * d * act
        for kind, count in expert_parallel(p.moe_layers, "all-gather", microbatches=m):
            add("ep", kind, own, count, ep_names)
    else:
        dispatch = net.price_dispatch(per_copy, cfg.experts_per_token, ep_names)
        if cfg.experts and dispatch.seconds:
            for kind, count in expert_parallel(p.moe_layers, microbatches=m):
                rows.append(_row("ep", kind, dispatch.volume_bytes, count, dispatch.seconds))
    for kind, count in pipeline_parallel(m * layout.virtual_stages):
        add("pp", kind, tokens / layout.tp * d * act, count, ("pp",))
    # Dense weights are replicated over the DP and CP ranks, routed experts over the DP ranks
    # outside their EP group; their gradients (and, under ZeRO 3, weights) move there.
    # With hybrid sharding, ZeRO runs within one replica and the sharded gradients are all-reduced
    # across the replicas once per step.
    expert_names = ("dp",) if layout.ep_over_tp else ("cp", "dp")
    for axis, count_params, names in (("dp", p.dense, ("cp", "ep", "dp")), ("dp-experts", p.experts, expert_names)):
        shard = count_params * run.sizes.param  # this chip's weights, or their gradients, in bytes
        for kind, count in data_parallel(layout.zero, microbatches=m):
            add(axis, kind, shard, count, (names + ("rep",)) if layout.zero <= 1 else names)
        for kind, count in across_replicas(layout.zero):
            add(axis, kind, shard / max(net.size(names), 1), count, ("rep",))
    return rows


def _exposed(rows: list[dict[str, Any]], layout: Layout, compute_s: float, attention_s: float,
             m: int, pp_send_s: float, bound: bool = True, flushes: int = 1) -> dict[str, float]:
    """Seconds of each axis' communication left on the critical path. The bound (`bound`) hides
    what any schedule could: TP behind the matmuls it feeds (collective matmul, book ch. 5), EP
    behind all compute under DualPipe. The estimate hides what the schedule does: TP on the
    critical path (Megatron-LM's sequence parallelism); DualPipe's all-to-all only behind the
    paired chunk's compute in the steady state, the (pp - 1) fill and drain microbatches exposed
    (DeepSeek-V3 report, sec. 3.2.1)."""
    by_axis: dict[str, float] = {}
    for r in rows:
        by_axis[r["axis"]] = by_axis.get(r["axis"], 0.0) + r["time_s"]
    out = dict(by_axis)
    if "cp" in out:
        out["cp"] = max(0.0, out["cp"] - attention_s)
    if bound and "tp" in out:
        out["tp"] = max(0.0, out["tp"] - compute_s)
    if "ep" in out and layout.schedule == "dualpipe" and layout.pp > 1:
        if bound:
            out["ep"] = max(0.0, out["ep"] - compute_s)
        else:
            per_flush = max(m // flushes, 1)
            steady = max(0, per_flush - (layout.pp - 1)) / per_flush
            out["ep"] = steady * max(0.0, out["ep"] - compute_s) + (1 - steady) * out["ep"]
    if "pp" in out:
        out["pp"] = min(out["pp"], 2 * (layout.pp - 1) * pp_send_s)
    window = compute_s if layout.zero >= 3 else (compute_s * 2 / 3 if layout.zero == 2 else compute_s / m)
    dp_total = out.pop("dp", 0.0) + out.pop("dp-experts", 0.0)
    if dp_total:
        out["dp"] = max(0.0, dp_total - window)
    return out


def evaluate_layout(cfg: ModelConfig, run: RunSpec, hw: Hardware, layout: Layout) -> dict[str, Any]:
    """Memory per chip and step time of `layout`, each part in SI units, or its problems."""
    net = network_for(hw, layout)
    run = with_window(cfg, run)
    issues = problems(cfg, run, layout, net)
    hbm = hw.hbm_bytes.value if hw.hbm_bytes is not None else math.inf
    peak = hw.peak(run.compute_dtype).value
    if issues:
        return {"layout": layout.to_json(), "valid": False, "problems": issues, "fits": False}
    per_replica = replica_sequences(run, layout, cfg.layers) or 1
    m = layout.microbatches or pick_microbatches(cfg, run, layout, hbm)
    layout = layout.with_microbatches(m)
    requested = run.batch_tokens
    run = replace(run, batch_tokens=float(per_replica * layout.dp * run.seq))
    flushes = layout.flushes
    mf = m // flushes  # microbatches per pipeline flush
    sched_issue = "" if m % flushes == 0 else f"{m} microbatches do not split into {flushes} flushes"
    sched_issue = sched_issue or schedule_problem(layout, mf, cfg.layers)
    if per_replica % m or sched_issue:
        why = sched_issue or f"{m} microbatches do not split the {per_replica} sequences per replica"
        return {"layout": layout.to_json(), "valid": False, "problems": [why], "fits": False}
    tokens_mb = per_replica * run.seq / m
    bound_remat, remat, memory = choose_remat(cfg, run, layout, mf, tokens_mb, hbm)
    model, executed, attention = _flops(cfg, run, bound_remat)
    rerun = recompute_flops_per_token(cfg, run.seq, remat, executed_pair_share(run)) * run.batch_tokens
    imbalance = stage_params(cfg, layout).layers / (cfg.layers / layout.pp)
    compute_s = executed / run.chips / peak * imbalance
    attention_s = attention / run.chips / peak
    rows = comm_rows(cfg, run, layout, net, m, tokens_mb)
    sends = [r for r in rows if r["axis"] == "pp"]
    pp_send = sends[0]["time_s"] / sends[0]["count"] if sends else 0.0
    exposed = _exposed(rows, layout, compute_s, attention_s, m, pp_send * flushes)
    host_s = offload_seconds(cfg, run, layout, remat, hw, per_replica * run.seq / (layout.tp * layout.cp),
                             stage_params(cfg, layout).layers)
    update_s, weights_s = state_offload_seconds(cfg, run, layout, hw, m)
    if host_s and remat is bound_remat:  # written behind the forward, read back behind the backward
        exposed["host"] = max(0.0, host_s - compute_s)
    if update_s or weights_s:  # the update waits for its state; weights stream in behind compute
        exposed["host"] = exposed.get("host", 0.0) + update_s + max(0.0, weights_s - compute_s)
    sched = schedule_of(layout, mf)
    bubble = sched.bubble_fraction(mf) * (compute_s + exposed.get("tp", 0.0) + exposed.get("ep", 0.0))
    step = compute_s + sum(exposed.values()) + bubble
    by_level = _by_level(rows, exposed)
    if "host" in exposed:
        by_level["host link"] = exposed["host"]
    ops = _ops(cfg, run, layout, hw, tokens_mb, per_replica / m, m, remat)
    exposed_est = _exposed(rows, layout, ops["total_s"], attention_s, m, pp_send * flushes, bound=False,
                           flushes=flushes)
    est_levels = _by_level(rows, exposed_est)
    if host_s or update_s or weights_s:
        est_levels["host link"] = (max(0.0, host_s - ops["total_s"]) + update_s
                                   + max(0.0, weights_s - ops["total_s"]))
    est_bubble = sched.bubble_fraction(mf) * (ops["total_s"] + exposed_est.get("tp", 0.0) + exposed_est.get("ep", 0.0))
    return {
        "layout": layout.to_json(), "valid": True, "problems": [],
        "source": "model: the planner's estimate from the model's shape and the hardware's figures",
        "fits": memory["total"] <= hbm, "hbm_bytes": hbm,
        "memory_per_chip_bytes": memory,
        "microbatches": m, "tokens_per_microbatch": tokens_mb, "sequences_per_replica": per_replica,
        "batch_tokens": run.batch_tokens,
        "notes": [] if run.batch_tokens == requested else [
            f"batch rounded to {per_replica} x dp={layout.dp} sequences: {stated(run.batch_tokens)} tokens "
            f"instead of {stated(requested)}"],
        "experts_per_chip": cfg.experts // layout.ep if cfg.experts else 0,
        "schedule": {"name": layout.schedule if layout.pp > 1 else "none", "note": sched.note,
                     "bubble_fraction": sched.bubble_fraction(mf), "in_flight_microbatches": sched.in_flight,
                     "flushes": flushes,
                     "weight_copies": sched.weight_copies},
        "step_time_s": {"compute": compute_s, "exposed_comm_by_axis": exposed,
                        "exposed_comm_by_level": by_level, "bubble": bubble, "total": step},
        "remat": {"bound": bound_remat.name, "estimate": remat.name,
                  "kept_elements_per_token_per_layer": remat.kept,
                  "offloaded_elements_per_token_per_layer": remat.offloaded,
                  "recompute_flops_per_step": rerun, "host_link_s": host_s,
                  "state_offload_s": {"optimizer_update": update_s, "weights": weights_s},
                  "note": _remat_note(bound_remat, remat, host_s)},
        **({"calibration": run.calibration.to_json()} if run.calibration is not None else {}),
        "ops_per_step": ops, "collectives": rows, "levels": {"fast": net.fast, "slow": net.slow, "domain_chips": net.domain},
        "model_flops_per_step": model, "executed_flops_per_step": executed,
        # model FLOPs count the book's whole T x T score matrix, a causal kernel executes half of it:
        # no bound on MFU is above 100%
        "mfu_upper_bound": min(1.0, model / run.chips / peak / step),
        "tokens_per_s": run.batch_tokens / step,
        **_at_achievable(hw, run, model, {"compute": ops["total_s"], "bubble": est_bubble,
                                          "exposed_comm_by_level": est_levels, "bound_levels": est_levels,
                                          "exposed_comm_by_axis": exposed_est}, net),
        "overlap": {"bound": "TP hidden behind the matmuls it feeds (collective matmul), CP behind attention, "
                             "DP/ZeRO behind the last microbatch (ZeRO 3: all of it), EP behind all compute "
                             "under DualPipe; only PP's fill and drain exposed",
                    "estimate": "TP on the critical path (sequence parallelism), CP behind attention, DP/ZeRO "
                                "as the bound, DualPipe's all-to-all behind the paired chunk's compute in the "
                                "steady state only (DeepSeek-V3 report, sec. 3.2.1), host-link offload behind "
                                "compute"},
    }


def _ops(cfg: ModelConfig, run: RunSpec, layout: Layout, hw: Hardware, tokens_mb: float, sequences: float,
         m: int, remat: RematPolicy) -> dict[str, Any]:
    """The busiest stage's ops per step (the last stage: its layers and the logits), each at the rate
    the inspect cost model gives it."""
    p = stage_params(cfg, layout)
    g_dense, g_exp = dp_groups(layout)
    shard = p.dense / (g_dense if layout.zero >= 1 else 1) + p.experts / (g_exp if layout.zero >= 1 else 1)
    matmul_dtype, scales = MATMUL_FORMATS.get(run.matmul_format, (run.compute_dtype, 0.0))
    shape = StepShape(tokens_mb / layout.cp, sequences, run.seq, run.sizes.activation,
                      "bf16" if run.sizes.activation == 2 else "f32", run.capacity_factor, run.window,
                      run.window_share, run.chunked, matmul_dtype, scales, run.expert_imbalance)
    out = price_step(cfg, layout, hw, shape, p.layers, p.moe_layers, m, remat, shard, first_stage=layout.pp == 1,
                     calibration=run.calibration)
    out["source"] = ("model: the step's ops per chip (the last pipeline stage's), each priced by the cost model "
                     "that judges profiles at the chip's achievable rates; an estimate")
    return out


def _remat_note(bound: RematPolicy, est: RematPolicy, host_s: float) -> str:
    if bound.name == "auto":
        why = (f"remat not stated: the bound re-runs nothing (a bound for every policy); the estimate "
               f"and the memory take '{est.name}', the least re-run that fits")
    else:
        why = f"remat '{est.name}' as stated: the bound and the estimate re-run what it re-runs"
    if host_s:
        why += "; its host-link traffic overlaps the compute, only the excess is exposed"
    return why


def _at_achievable(hw: Hardware, run: RunSpec, model_flops: float, step: dict[str, Any],
                   net: Network) -> dict[str, Any]:
    est = achievable_step(hw, run.compute_dtype, step, net.fast, net.slow)
    if est is None:
        return {}
    # compute and the bubble are already at achievable rates: the ops' own
    est["compute"], est["bubble"] = step["compute"], step["bubble"]
    cal = run.calibration.factor("collective") if run.calibration is not None else None
    if cal is not None:  # the user's collectives, measured against their roofline
        bound_levels = step["bound_levels"]
        est["exposed_comm_by_level"] = {k: v * cal if k != "host link" else est["exposed_comm_by_level"][k]
                                        for k, v in bound_levels.items()}
        est["figures"] = {k: v for k, v in est["figures"].items() if not k.startswith("collective_bytes")}
        est["figures"]["collectives"] = f"{run.calibration.source if run.calibration else ''}: {ratio(cal)} the roofline"
    est["total"] = est["compute"] + sum(est["exposed_comm_by_level"].values()) + est["bubble"]
    est["figures"] = {k: v for k, v in est["figures"].items() if not k.startswith("matmul_flops_per_s")}
    est["figures"]["ops"] = "each op at the inspect cost model's achievable rate (ops_per_step.sources)"
    return {"step_time_achievable_s": est,
            "mfu_at_achievable": model_flops / run.chips / hw.peak(run.compute_dtype).value / est["total"]}


def _by_level(rows: list[dict[str, Any]], exposed: dict[str, float]) -> dict[str, float]:
    """Exposed seconds split over network levels in proportion to each axis' time there."""
    totals: dict[str, dict[str, float]] = {}
    for r in rows:
        axis = "dp" if r["axis"].startswith("dp") else r["axis"]
        for level, s in r["levels_s"].items():
            totals.setdefault(axis, {}).setdefault(level, 0.0)
            totals[axis][level] += s
    out: dict[str, float] = {}
    for axis, levels in totals.items():
        whole = sum(levels.values())
        for level, s in levels.items():
            out[level] = out.get(level, 0.0) + (exposed.get(axis, 0.0) * s / whole if whole else 0.0)
    return out
