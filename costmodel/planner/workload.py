"""The plan for one workload step, to print beside its profile: FLOPs, bytes and time lower bounds.

A workload describes itself with a config dict (layers, d_model, d_ff, heads, kv_heads,
head_dim, vocab, batch sequences of seq tokens, dtype, sharding, mesh; optional `kind` (or
`mode`): train, forward or decode). Collectives follow the book's per-layer table (ch. 5.2, kept in
`parallelism`), applied to every weight and to both blocks (attention, MLP) of each layer, and timed by the
auditor's own collective model on the hardware's topology, so plan and audit agree.
"""

from __future__ import annotations

from typing import Any

import math

from ...base.errors import InputError
from ..chips.hardware import Hardware
from ..network.collectives import bytes_sent, collective_time
from .chip_numbers import chip_numbers
from .parallelism import data_parallel, pipeline_parallel, tensor_parallel
from ..network.mesh_layout import mesh_group, parse_mesh
from .transformer import (ModelConfig, dtype_bytes, forward_flops_per_token, kv_bytes_per_token,
                          param_breakdown, training_flops_per_token)

KINDS = ("train", "forward", "decode")
SHARDINGS = ("none", "dp", "fsdp", "tp", "fsdp+tp", "pp")
_TP_AXIS_NAMES = ("model", "tensor", "tp", "mp", "y")
# Weight-sized passes over HBM per step: forward read; + backward read and gradient write.
_WEIGHT_PASSES = {"train": 3, "forward": 1, "decode": 1}


def split_degrees(sharding: str, mesh: dict[str, int]) -> tuple[int, int]:
    """(data degree X, tensor degree Y) for a sharding over a mesh."""
    devices = math.prod(mesh.values()) if mesh else 1
    if sharding in ("none", "dp", "fsdp", "pp"):
        return (1 if sharding in ("none", "pp") else devices), 1
    if sharding == "tp":
        return 1, devices
    y = math.prod(v for k, v in mesh.items() if k.lower() in _TP_AXIS_NAMES) or 1
    return devices // y, y


def _model(config: dict[str, Any]) -> ModelConfig:
    keys = ("layers", "d_model", "d_ff", "heads", "kv_heads", "head_dim", "vocab")
    missing = [k for k in keys if k not in config]
    if missing:
        raise InputError(f"workload config lacks {', '.join(missing)}")
    return ModelConfig(layers=int(config["layers"]), d_model=int(config["d_model"]), d_ff=int(config["d_ff"]),
                       heads=int(config["heads"]), kv_heads=int(config["kv_heads"]),
                       head_dim=int(config["head_dim"]), vocab=int(config["vocab"]),
                       name=str(config.get("name", "workload")))


def _axes_for(sharding: str, mesh: dict[str, int]) -> tuple[list[str], list[str]]:
    """(data axes, tensor axes) of the mesh, by sharding; only axes longer than 1."""
    live = [k for k, v in mesh.items() if v > 1]
    if sharding in ("dp", "fsdp", "pp"):
        return live, []
    if sharding == "tp":
        return [], live
    if sharding == "fsdp+tp":
        tp = [k for k in live if k.lower() in _TP_AXIS_NAMES]
        return [k for k in live if k not in tp], tp
    return [], []


def collectives(kind: str, sharding: str, weights: float, block_act: float, x: int, y: int,
                layers: int) -> list[tuple[str, float, int, str]]:
    """(collective, volume V in bytes, count per step, "data" or "tensor" axes) for one step:
    `parallelism`'s table (book ch. 5) for DP (ZeRO 0), FSDP (ZeRO 3, each device gathering
    the 1/Y of the weights TP leaves it) and TP, applied to every weight and to both blocks
    (attention, MLP) of each layer."""
    train = kind == "train"
    out: list[tuple[str, float, int, str]] = []
    if sharding == "dp":
        out += [(name, weights, count, "data") for name, count in data_parallel(0, train)]
    if sharding in ("fsdp", "fsdp+tp"):
        w = weights / y
        out += [(name, w, count, "data") for name, count in data_parallel(3, train)]
    if sharding in ("tp", "fsdp+tp"):
        out += [(name, block_act, count, "tensor") for name, count in tensor_parallel(layers, train)]
    return out


def step_kind(config: dict[str, Any]) -> str:
    """train, forward or decode: the config's `kind`, else its `mode` (what the reference workloads write)."""
    return str(config.get("kind", config.get("mode", "train")))


def pipeline(config: dict[str, Any], stages: int) -> dict[str, Any]:
    """The book's pipeline (ch. 5) as a loop of M + S - 1 ticks: every stage runs its layers on
    the microbatch it holds, then hands it on; GPipe runs the loop forward, then backward."""
    m = int(config.get("microbatches") or 1)
    ticks = m + stages - 1
    train = step_kind(config) == "train"
    return {"stages": stages, "microbatches": m, "schedule": str(config.get("schedule", "gpipe")), "ticks": ticks,
            "collective_permutes": sum(n for _, n in pipeline_parallel(ticks - 1, train)) if stages > 1 else 0,
            "bubble_fraction": (stages - 1) / m, "idle_fraction_of_step": (stages - 1) / ticks}


def _collective_seconds(todo: list[tuple[str, float, int, str]], mesh: dict[str, int], sharding: str,
                        hw: Hardware) -> tuple[float, float, list[dict[str, Any]]]:
    data_axes, tensor_axes = _axes_for(sharding, mesh)
    total_s = total_bytes = 0.0
    rows = []
    for name, volume, count, which in todo:
        axes = data_axes if which == "data" else tensor_axes
        if not axes:
            continue
        group = mesh_group(mesh, axes, hw)
        t = collective_time(name, volume, group, hw)
        total_s += count * t.time_s
        # what each device sends, as the cost model counts an op's bytes (not the links' or memory's traffic)
        total_bytes += count * bytes_sent(name, volume, group.group_size)
        rows.append({"kind": name, "bytes": volume, "count": count, "axes": axes, "time_s": t.time_s,
                     "bound_by": t.bound_by, "link": t.link})
    return total_s, total_bytes, rows


def plan_for_config(config: dict[str, Any], hw: Hardware) -> dict[str, Any]:
    """Predicted FLOPs and bytes per step and the step-time lower bounds, per device, in SI units."""
    cfg = _model(config)
    kind = step_kind(config)
    sharding = str(config.get("sharding") or "none").lower()
    if kind not in KINDS or sharding not in SHARDINGS:
        raise InputError(f"workload config: kind {kind!r} / sharding {sharding!r} not understood",
                         hint=f"kinds {KINDS}, shardings {SHARDINGS}")
    mesh = parse_mesh(config.get("mesh"), error=InputError)
    devices = math.prod(mesh.values()) if mesh else 1
    x, y = split_degrees(sharding, mesh)
    batch, seq, dtype = int(config["batch"]), int(config["seq"]), str(config.get("dtype", "bf16"))
    tokens = batch if kind == "decode" else batch * seq
    per_token = training_flops_per_token(cfg, seq) if kind == "train" else forward_flops_per_token(cfg, seq)
    flops = per_token * tokens
    n_params = param_breakdown(cfg)["total"]
    weights = n_params * dtype_bytes(dtype)
    chips = chip_numbers(hw, dtype)
    # FSDP gathers whole weights before each matmul; TP keeps 1/Y of them.
    mem_bytes = _WEIGHT_PASSES[kind] * weights / y
    if kind == "decode":
        mem_bytes += batch * seq * kv_bytes_per_token(cfg, dtype) / (x * y)
    # Activations entering a block: tokens on this data shard x D, gathered over the TP axes.
    block_act = (tokens / x) * cfg.d_model * dtype_bytes(dtype)
    todo = collectives(kind, sharding, weights, block_act, x, y, cfg.layers) if devices > 1 else []
    pipe = pipeline(config, devices) if sharding == "pp" else None
    if pipe is not None:  # each stage holds 1/S of the weights and runs 1/S of the layers
        mem_bytes /= devices
        micro_act = tokens / pipe["microbatches"] * cfg.d_model * dtype_bytes(dtype)
        hand_offs = pipe["ticks"] - 1
        todo = [(name, micro_act, count, "data") for name, count in pipeline_parallel(hand_offs, kind == "train")
                ] if devices > 1 else []
    comm_s, comm_bytes, comm_rows = _collective_seconds(todo, mesh, sharding, hw)
    # Unsharded ("none") work is replicated: every device does all of it.
    per_device = flops / (devices if pipe is not None else x * y)
    bounds = {"compute": per_device / chips.flops_per_s.value,
              "memory": mem_bytes / chips.hbm_bytes_per_s.value, "collective": comm_s}
    bound_by = max(bounds, key=lambda k: bounds[k])
    total = bounds[bound_by]
    extra: dict[str, Any] = {}
    if pipe is not None:  # the work of M ticks spread over M + S - 1: idle for the rest
        pipe["bubble_s"] = total * pipe["bubble_fraction"]
        extra["pipeline"] = pipe
        bounds["bubble"] = pipe["bubble_s"]
        total += pipe["bubble_s"]
    return {**extra,"source": "plan", "kind": kind, "sharding": sharding, "devices": devices,
            "degrees": {"data": x, "tensor": y}, "params": n_params, "param_bytes": weights,
            "tokens_per_step": tokens, "flops_per_step": flops, "flops_per_step_per_device": per_device,
            "hbm_bytes_per_device": mem_bytes, "collective_bytes_per_device": comm_bytes,
            "collectives": comm_rows, "step_time_lower_bound_s": {**bounds, "total": total},
            "bound_by": bound_by, "hardware": chips.to_json()}
