"""Serving plan (book ch. 7-8): memory and fit, decode step lower bound, throughput, prefill.

Decode step (book ch. 7.1.5, eq. 4): attention always reads the whole KV cache from HBM;
the matmuls take the longer of reading the weights and doing 2 FLOPs per parameter per
token. Everything is spread evenly over the slice's chips (model parallelism); a layout's own
step is `serve_layout`'s.

Disaggregated serving (book ch. 7): prefill is compute-bound and decode memory-bound, so they
run on separate servers; prefill servers are sized by prompt tokens per second at an MFU,
decode servers by tokens per second at the batch that fits; each prompt's KV cache moves
from one to the other over the scale-out network.
"""

from __future__ import annotations

from typing import Any

import math
from dataclasses import asdict

from ...base.errors import InputError
from ..chips.hardware import LINK_NAMES, Hardware
from ..units import number, seconds, whole_percent
from .calibrate import Calibration
from .chip_numbers import ChipNumbers, chip_numbers, format_shape, mesh_axes, require_hbm, slice_shape
from .degrees import tp_degrees
from .layout import Layout
from .serve_layout import search_serve, serve_layout
from .serve_setup import ServeSetup as ServeSetup
from .transformer import (ModelConfig, dtype_bytes, kv_bytes_per_token, matmul_params, param_breakdown,
                          params_read_per_step)

TABLE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def memory(cfg: ModelConfig, s: ServeSetup) -> dict[str, float]:
    """Bytes of parameters and of the batch's KV caches (activations are negligible, ch. 7.1.6)."""
    params = param_breakdown(cfg)["total"] * dtype_bytes(s.param_dtype)
    kv = s.batch * s.context * kv_bytes_per_token(cfg, s.kv_dtype)
    return {"params": params, "kv_cache": kv, "kv_per_sequence": kv / s.batch, "total": params + kv}


def smallest_slice(total_bytes: float, chips: ChipNumbers) -> dict[str, Any]:
    """Fewest chips, a power of two as slices come, whose HBM holds `total_bytes` (ch. 8.1.1)."""
    hbm = require_hbm(chips)
    n = 2 ** max(0, math.ceil(math.log2(total_bytes / hbm) - 1e-9))
    shape = slice_shape(n, chips.torus_axes)
    return {"chips": n, "topology": format_shape(shape), "min_chips_exact": total_bytes / hbm}


def decode_step_time(batch: int, kv_bytes_per_seq: float, param_bytes: float, param_count: float,
                     chips: int, flops_per_s: float, hbm_bytes_per_s: float) -> dict[str, float]:
    """Book ch. 7.1.5 eq. 4: B*KV/BW + max(2*B*params/FLOPs, param bytes/BW), slice-wide (s)."""
    kv_s = batch * kv_bytes_per_seq / (chips * hbm_bytes_per_s)
    weights_s = param_bytes / (chips * hbm_bytes_per_s)
    flops_s = 2.0 * batch * param_count / (chips * flops_per_s)
    return {"step_s": kv_s + max(weights_s, flops_s), "kv_load_s": kv_s, "weight_load_s": weights_s,
            "flops_s": flops_s}


def decode_step(cfg: ModelConfig, s: ServeSetup, chips: ChipNumbers) -> dict[str, Any]:
    """Lower bound on one decode step, split into KV loading, weight loading and FLOPs (seconds)."""
    mem = memory(cfg, s)
    # An MoE step reads only the experts its tokens route to.
    read = params_read_per_step(cfg, s.batch) * dtype_bytes(s.param_dtype)
    out: dict[str, Any] = decode_step_time(s.batch, mem["kv_per_sequence"], read, matmul_params(cfg), s.chips,
                                 chips.flops_per_s.value, chips.hbm_bytes_per_s.value)
    kv_s, weights_s, flops_s = out["kv_load_s"], out["weight_load_s"], out["flops_s"]
    out["bound_by"] = "compute" if flops_s > max(weights_s, kv_s) else (
        "memory (KV cache)" if kv_s > weights_s else "memory (weights)")
    out["tokens_per_s"] = s.batch / out["step_s"]
    out["tokens_per_s_per_chip"] = out["tokens_per_s"] / s.chips
    # Batch where the matmuls turn compute-bound: C * bytes per weight / (2 * W_hbm) (ch. 8.1.1).
    out["critical_batch"] = chips.flops_per_s.value * dtype_bytes(s.param_dtype) / (2.0 * chips.hbm_bytes_per_s.value)
    return out


def model_parallel_limit(cfg: ModelConfig, s: ServeSetup, chips: ChipNumbers) -> dict[str, Any] | None:
    """Where model sharding over the slice becomes ICI-bound (book ch. 7.3.2, 8.1.1).

    Per matmul: T_ici = 2 B D / W_ici, T_hbm = D F bytes / (Y W_hbm), T_math = 2 B D F / (Y C).
    Compute-bound serving allows Y < n F / alpha; memory-bound decode allows Y < F / (B beta)
    with beta = W_hbm / W_ici, counting weight bytes.
    """
    if chips.ici_axis_bytes_per_s is None or chips.alpha is None:
        return None
    w_ici, y, b = chips.ici_axis_bytes_per_s.value, s.chips, s.batch
    d, f, wb = cfg.d_model, cfg.d_ff, dtype_bytes(s.param_dtype)
    beta = chips.hbm_bytes_per_s.value / w_ici
    t_ici = 2.0 * b * d / w_ici
    t_hbm = d * f * wb / (y * chips.hbm_bytes_per_s.value)
    t_math = 2.0 * b * d * f / (y * chips.flops_per_s.value)
    allowed = tp_degrees(cfg, chips, y, one_axis=False)
    note = "" if y in allowed.allowed else (f"{y}-way model parallelism does not shard whole heads: "
                                            f"{allowed.rule}")
    if not note and y > cfg.kv_heads:
        note = (f"{y}-way model parallelism replicates each of the {cfg.kv_heads} KV heads on {y // cfg.kv_heads} "
                f"chips: the KV cache per chip is {y // cfg.kv_heads}x the even split the step time assumes")
    link = LINK_NAMES.get(chips.link_kind, "interconnect")
    domain = chips.domain_chips
    if chips.kind != "tpu" and 1 < domain < y:
        note = "; ".join(filter(None, [note, (
            f"{y}-way model parallelism spans {math.ceil(y / domain)} {link} domains of {domain}: this closed "
            f"form prices every byte at {link} bandwidth, the layout search prices the inter-node part")]))
    return {"model_parallel_degree": y, "degree_allowed": y in allowed.allowed, "link": link,
            "degree_note": note, "axes": mesh_axes(chips), "beta": beta,
            "max_degree_compute_bound": mesh_axes(chips) * f / chips.alpha,
            "max_degree_memory_bound": f * wb / (2.0 * b * beta),
            "matmul_ici_s": t_ici, "matmul_hbm_s": t_hbm, "matmul_math_s": t_math,
            "ici_bound": t_ici > max(t_hbm, t_math)}


def prefill(cfg: ModelConfig, s: ServeSetup, chips: ChipNumbers) -> dict[str, Any] | None:
    """Prefill time at MFU: 2 FLOPs per matmul parameter per token plus causal attention."""
    if not s.prefill_tokens:
        return None
    t = s.prefill_tokens
    matmul = 2.0 * matmul_params(cfg) * t
    # Causal prefill: QK^T and AV over the lower triangle, 2 * 2 * N * H * T^2 / 2 per layer.
    attention = 2.0 * cfg.heads * cfg.head_dim * t * t * cfg.layers
    rate = s.chips * chips.flops_per_s.value * s.mfu
    return {"tokens": t, "matmul_flops": matmul, "attention_flops": attention,
            "matmul_s": matmul / rate, "time_s": (matmul + attention) / rate}


def latency_table(cfg: ModelConfig, s: ServeSetup, chips: ChipNumbers) -> list[dict[str, Any]]:
    """Decode step and throughput for batch sizes up to what fits (and the requested one)."""
    hbm = require_hbm(chips) * s.chips
    rows = []
    for b in sorted(set(TABLE_BATCHES) | {s.batch}):
        setup = ServeSetup(**{**asdict(s), "batch": b})
        total = memory(cfg, setup)["total"]
        step = decode_step(cfg, setup, chips)
        rows.append({"batch": b, "memory_bytes": total, "fits": total <= hbm, "step_s": step["step_s"],
                     "tokens_per_s": step["tokens_per_s"], "tokens_per_s_per_chip": step["tokens_per_s_per_chip"],
                     "bound_by": step["bound_by"]})
    return rows


def max_batch(cfg: ModelConfig, s: ServeSetup, chips: ChipNumbers) -> int:
    """Largest batch whose KV caches fit beside the parameters in the slice's HBM."""
    free = require_hbm(chips) * s.chips - memory(cfg, s)["params"]
    per_seq = s.context * kv_bytes_per_token(cfg, s.kv_dtype)
    return max(0, int(free // per_seq))


def calibrated(decode: dict[str, Any], prefill_: dict[str, Any] | None, cal: Calibration, s: ServeSetup,
               chips: ChipNumbers) -> dict[str, Any]:
    """The decode step (and prefill) at the user's measured factors: the KV and weight loads at the
    memory-bound ops', the FLOPs at the compute-bound ops' (each the roofline where the report
    times none of that class)."""
    mem, comp = cal.factor("memory") or 1.0, cal.factor("compute") or 1.0
    step = decode["kv_load_s"] * mem + max(decode["weight_load_s"] * mem, decode["flops_s"] * comp)
    out: dict[str, Any] = {"decode_step_s": step, "tokens_per_s": s.batch / step, **cal.to_json()}
    if prefill_:  # its FLOPs at the peak, times the measured compute factor (no MFU assumed)
        peak = s.chips * chips.flops_per_s.value
        out["prefill_s"] = (prefill_["matmul_flops"] + prefill_["attention_flops"]) / peak * comp
    return out


def plan_serve(cfg: ModelConfig, s: ServeSetup, hw: Hardware, layout: Layout | None = None,
               requests_per_s: float | None = None, output_tokens: int = 0,
               calibration: Calibration | None = None) -> dict[str, Any]:
    """Everything `audit plan serve` reports, in SI units (seconds, bytes, tokens).

    `layout`: also evaluate this TP/PP/DP/EP layout; `requests_per_s`: also size prefill and
    decode servers for that traffic of `output_tokens` generated tokens per request.
    """
    chips = chip_numbers(hw, s.compute_dtype)
    mem = memory(cfg, s)
    hbm = require_hbm(chips)
    extra: dict[str, Any] = {}
    decode = decode_step(cfg, s, chips)
    if chips.ici_axis_bytes_per_s is not None and s.chips > 1:
        extra["layout_search"] = search_serve(cfg, s, hw)
    if layout is not None:
        extra["layout"] = serve_layout(cfg, s, hw, layout)
    if requests_per_s is not None:
        if not s.prefill_tokens or output_tokens <= 0:
            raise InputError("sizing prefill and decode servers needs --prefill-tokens and --output-tokens")
        extra["disaggregated"] = disaggregated(cfg, s, hw, _sizing_decode(decode, extra.get("layout")),
                                               requests_per_s, output_tokens)
    if calibration is not None:
        extra["calibrated"] = calibrated(decode, prefill(cfg, s, chips), calibration, s, chips)
    return {**extra,
        "model": cfg.to_json(), "setup": asdict(s), "hardware": chips.to_json(),
        "memory_bytes": mem, "hbm_bytes": hbm * s.chips, "fits": mem["total"] <= hbm * s.chips,
        "max_batch": max_batch(cfg, s, chips), "smallest_slice": smallest_slice(mem["total"], chips),
        "kv_bytes_per_token": kv_bytes_per_token(cfg, s.kv_dtype),
        "decode": decode, "model_parallel": model_parallel_limit(cfg, s, chips),
        "prefill": prefill(cfg, s, chips), "latency_table": latency_table(cfg, s, chips),
    }


def _sizing_decode(even: dict[str, Any], layout: dict[str, Any] | None) -> dict[str, Any]:
    """The decode step that sizes the decode servers: the layout's when it is valid (what would be
    deployed), else the book's even spread over the chips, each saying which it is."""
    if layout is not None and layout["valid"]:
        return {**layout["decode"], "on": f"layout {layout['layout']['label']}"}
    why = f"; layout {layout['layout']['label']} is not valid" if layout is not None else ""
    return {**even, "on": f"even spread over the chips{why}"}


def disaggregated(cfg: ModelConfig, s: ServeSetup, hw: Hardware, decode: dict[str, Any], requests_per_s: float,
                  output_tokens: int) -> dict[str, Any]:
    """Prefill and decode servers (each of `s.chips` chips) for `requests_per_s` requests of
    `s.prefill_tokens` prompt tokens and `output_tokens` generated tokens, decoding at `decode`'s step
    (its `on` says which layout that step is of)."""
    chips = chip_numbers(hw, s.compute_dtype)
    pre = prefill(cfg, s, chips)
    prefill_rps = 1.0 / pre["time_s"] if pre else math.inf
    decode_rps = decode["tokens_per_s"] / output_tokens
    n_prefill = math.ceil(requests_per_s / prefill_rps - 1e-9) if pre else 0
    n_decode = math.ceil(requests_per_s / decode_rps - 1e-9)
    kv_bytes = s.prefill_tokens * 2 * cfg.layers * cfg.kv_heads * cfg.head_dim * dtype_bytes(s.kv_dtype)
    link = hw.interconnect.dcn_bytes_per_s
    transfer = None if link is None else kv_bytes / (link.value * s.chips)
    return {"requests_per_s": requests_per_s, "prompt_tokens": s.prefill_tokens, "output_tokens": output_tokens,
            "chips_per_server": s.chips, "prefill_requests_per_s_per_server": prefill_rps,
            "decode_requests_per_s_per_server": decode_rps, "prefill_servers": n_prefill,
            "decode_servers": n_decode, "total_chips": (n_prefill + n_decode) * s.chips,
            "decode_per_prefill": (n_decode / n_prefill) if n_prefill else None,
            "kv_transfer_bytes_per_request": kv_bytes, "kv_transfer_s": transfer,
            "decode_step_s": decode["step_s"], "decode_on": decode["on"],
            "note": (f"prefill at {whole_percent(s.mfu)} MFU ({seconds(pre['time_s'])} per prompt); " if pre else "")
            + f"decode ({decode['on']}) at batch {s.batch}: {number(decode['tokens_per_s'])} tokens/s per server"}
