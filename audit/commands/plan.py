"""`audit plan model|train|serve`: the book's transformer math (ch. 4-8) before any profiling."""

from __future__ import annotations

import json
from typing import Any, Callable

import click

from ..atomic import write_text
from ..costmodel.chips.catalog import lookup
from ..costmodel.planner.serve import ServeSetup, plan_serve
from ..costmodel.planner.train import TrainSetup, plan_train
from ..costmodel.planner.transformer import MODELS, ModelConfig, lookup_model, model_summary
from ..errors import UsageError
from ..reports.humanize import nbytes, seconds

_SHAPE_FLAGS = ("layers", "d_model", "d_ff", "heads", "kv_heads", "head_dim", "vocab")
_DTYPES = click.Choice(["f32", "bf16", "f16", "fp8", "int8", "int4"])


def _model_options(f: Callable) -> Callable:
    """--model NAME plus explicit architecture flags that override or replace it."""
    opts = [click.option("--model", "model_name", metavar="NAME",
                         help=f"Named architecture: {', '.join(MODELS)}.")]
    opts += [click.option(f"--{n.replace('_', '-')}", n, type=click.IntRange(min=1), default=None)
             for n in _SHAPE_FLAGS]
    opts += [click.option("--gated-mlp/--no-gated-mlp", default=None, help="Three MLP matrices (default) or two."),
             click.option("--tied-embeddings/--untied-embeddings", default=None),
             click.option("--experts", type=click.IntRange(min=0), default=None, help="Routed experts (MoE)."),
             click.option("--experts-per-token", type=click.IntRange(min=0), default=None),
             click.option("--json", "json_path", metavar="FILE|-", help="Write the plan as JSON.")]
    for opt in reversed(opts):
        f = opt(f)
    return f


def build_model(model_name: str | None, **flags: Any) -> ModelConfig:
    """A named model with flags overriding its fields, or a model from flags alone."""
    given = {k: v for k, v in flags.items() if v is not None}
    if model_name:
        base = lookup_model(model_name).to_json()
        base.update(given)
        if given:
            base["name"] = f"{base['name']} (modified)"
        return ModelConfig(**base)
    missing = [f"--{n.replace('_', '-')}" for n in _SHAPE_FLAGS if n not in given]
    if missing:
        raise UsageError(f"give --model NAME or all of the shape flags; missing {', '.join(missing)}")
    return ModelConfig(**given)


def _hardware(spec: str, chips: int | None) -> tuple[Any, int]:
    hw = lookup(spec)
    n = chips
    if n is None:
        if not hw.topology:
            raise UsageError(f"--hardware {spec} names no topology", hint="add :TOPOLOGY (e.g. tpu-v5e:4x4) or --chips N")
        n = 1
        for d in hw.topology:
            n *= d
    return hw, n


def _emit(result: dict, json_path: str | None, text: Callable[[dict], list[str]]) -> None:
    if json_path:
        write_text(json_path, json.dumps(result, indent=2, sort_keys=True))
        if json_path != "-":
            click.echo(f"Wrote {json_path}", err=True)
        return
    click.echo("\n".join(text(result)))


def _g(value: float) -> str:
    return f"{value:.3g}"


def model_text(r: dict) -> list[str]:
    p = r["params"]
    act = r["activation_bytes_per_token"]
    lines = [f"model {r['config']['name']}: {_g(p['total'])} parameters ({_g(p['active'])} active per token)"]
    lines += [f"  {k:<11}{_g(p[k]):>10}  {100 * p[k] / p['total']:5.1f}%" for k in ("attention", "mlp", "embeddings", "norms")]
    lines += [f"FLOPs per token at seq {r['seq']}: forward {_g(r['forward_flops_per_token'])} FLOP, "
              f"training {_g(r['training_flops_per_token'])} FLOP (6N = {_g(r['six_n_flops_per_token'])})",
              f"attention FLOPs overtake the matmuls beyond seq {r['attention_crossover_seq']:.0f} tokens",
              f"KV cache: {nbytes(r['kv_bytes_per_token'])} per token in {r['kv_dtype']}",
              f"saved activations per token: {nbytes(act['no_remat'])} without remat, "
              f"{nbytes(act['remat'])} with {act['checkpoints_per_layer']:g} checkpoint(s) per layer"]
    return lines


def train_text(r: dict) -> list[str]:
    s, m = r["setup"], r["memory_bytes"]
    lines = [f"train {r['model']['name']} on {s['chips']} x {r['hardware']['name']}: "
             f"{_g(s['tokens'])} tokens, {_g(s['batch_tokens'])} tokens per batch",
             f"total {_g(r['total_flops'])} FLOP; {r['time_s'] / 86400:.1f} days ({seconds(r['time_s'])}) "
             f"at {100 * s['mfu']:.0f}% MFU",
             f"memory: params {nbytes(m['params'])}, optimizer {nbytes(m['optimizer'])}, activations "
             f"{nbytes(m['activations'])} = {nbytes(m['total'])}; at least {r['min_chips_by_memory']} chips",
             f"{'strategy':<9}{'degrees':<26}{'T_math/T_comms':>15}{'crit. tok/chip':>15}{'mem/chip':>11}  bound"]
    for row in r["strategies"]:
        deg = ",".join(f"{k}={v}" for k, v in row["degrees"].items())
        crit = "-" if row["critical_batch_per_chip"] is None else f"{row['critical_batch_per_chip']:.0f}"
        fits = "" if row["fits"] else " (does not fit)"
        if not row.get("feasible", True):
            fits += " (degrees not allowed for this model)"
        lines.append(f"{row['strategy']:<9}{deg:<26}{row['ratio']:>15.2f}{crit:>15}"
                     f"{nbytes(row['memory_per_chip_bytes']):>11}  {row['bound']}{fits}")
    lines.append(f"batch per chip {r['strategies'][0]['batch_per_chip']:.0f} tokens")
    lines.append(f"recommendation: {r['recommendation']['reason']}")
    return lines


def serve_text(r: dict) -> list[str]:
    s, m, d = r["setup"], r["memory_bytes"], r["decode"]
    fit = "fits" if r["fits"] else "does NOT fit"
    lines = [f"serve {r['model']['name']} on {s['chips']} x {r['hardware']['name']}: batch {s['batch']}, "
             f"context {s['context']}, params {s['param_dtype']}, KV {s['kv_dtype']}",
             f"memory: params {nbytes(m['params'])} + KV {nbytes(m['kv_cache'])} = {nbytes(m['total'])} "
             f"of {nbytes(r['hbm_bytes'])}: {fit}; largest batch {r['max_batch']}; smallest slice "
             f"{r['smallest_slice']['topology']} ({r['smallest_slice']['chips']} chips)",
             f"decode step >= {seconds(d['step_s'])} (KV {seconds(d['kv_load_s'])} + max(weights "
             f"{seconds(d['weight_load_s'])}, FLOPs {seconds(d['flops_s'])})), {d['bound_by']}-bound; "
             f"{d['tokens_per_s']:.0f} tokens/s, {d['tokens_per_s_per_chip']:.1f} tokens/s/chip"]
    mp = r["model_parallel"]
    if mp:
        lines.append(f"model parallel {mp['model_parallel_degree']}-way: ICI-bound beyond "
                     f"{mp['max_degree_compute_bound']:.0f} (compute-bound) / {mp['max_degree_memory_bound']:.0f} "
                     f"(memory-bound) ways; {'ICI-bound' if mp['ici_bound'] else 'not ICI-bound'} here")
        if mp.get("degree_note"):
            lines.append(f"  {mp['degree_note']}")
    if r["prefill"]:
        p = r["prefill"]
        lines.append(f"prefill {p['tokens']} tokens at {100 * s['mfu']:.0f}% MFU: {seconds(p['time_s'])} "
                     f"(matmuls alone {seconds(p['matmul_s'])})")
    lines.append(f"{'batch':>6}{'memory':>11}{'step':>11}{'tokens/s':>11}{'tok/s/chip':>12}  bound")
    for row in r["latency_table"]:
        mark = "" if row["fits"] else "  (does not fit)"
        lines.append(f"{row['batch']:>6}{nbytes(row['memory_bytes']):>11}{seconds(row['step_s']):>11}"
                     f"{row['tokens_per_s']:>11.0f}{row['tokens_per_s_per_chip']:>12.1f}  {row['bound_by']}{mark}")
    return lines


@click.group("plan")
def command() -> None:
    """Predict parameters, FLOPs, memory and step times of a transformer (book ch. 4-8)."""


@command.command("model")
@_model_options
@click.option("--seq", type=click.IntRange(min=1), default=4096, show_default=True, help="Sequence length.")
@click.option("--dtype", type=_DTYPES, default="bf16", show_default=True, help="KV cache and activation dtype.")
@click.option("--checkpoints-per-layer", type=click.FloatRange(min=0), default=1.0, show_default=True)
def model_cmd(model_name: str | None, json_path: str | None, seq: int, dtype: str,
              checkpoints_per_layer: float, **flags: Any) -> None:
    """Parameters, FLOPs per token, KV cache and activation bytes."""
    cfg = build_model(model_name, **flags)
    _emit(model_summary(cfg, seq, dtype, checkpoints_per_layer), json_path, model_text)


@command.command("train")
@_model_options
@click.option("--tokens", type=click.FloatRange(min=0, min_open=True), required=True, help="Training tokens.")
@click.option("--batch-tokens", type=click.FloatRange(min=0, min_open=True), required=True, help="Tokens per step.")
@click.option("--hardware", "hardware", required=True, metavar="HW[:TOPOLOGY]")
@click.option("--chips", type=click.IntRange(min=1), default=None, help="Chips (default: the topology's).")
@click.option("--mfu", type=click.FloatRange(min=0, max=1, min_open=True), default=0.4, show_default=True)
@click.option("--checkpoints-per-layer", type=click.FloatRange(min=0), default=4.0, show_default=True)
@click.option("--seq", type=click.IntRange(min=1), default=4096, show_default=True)
def train_cmd(model_name: str | None, json_path: str | None, tokens: float, batch_tokens: float, hardware: str,
              chips: int | None, mfu: float, checkpoints_per_layer: float, seq: int, **flags: Any) -> None:
    """Training FLOPs, time, memory and the parallelism to use."""
    cfg = build_model(model_name, **flags)
    hw, n = _hardware(hardware, chips)
    setup = TrainSetup(tokens, batch_tokens, n, seq=seq, mfu=mfu, checkpoints_per_layer=checkpoints_per_layer)
    _emit(plan_train(cfg, setup, hw), json_path, train_text)


@command.command("serve")
@_model_options
@click.option("--batch", type=click.IntRange(min=1), required=True, help="Sequences decoded together.")
@click.option("--context", type=click.IntRange(min=1), required=True, help="KV cache length in tokens.")
@click.option("--hardware", "hardware", required=True, metavar="HW[:TOPOLOGY]")
@click.option("--chips", type=click.IntRange(min=1), default=None, help="Chips (default: the topology's).")
@click.option("--param-dtype", type=_DTYPES, default="bf16", show_default=True)
@click.option("--kv-dtype", type=_DTYPES, default="bf16", show_default=True)
@click.option("--compute-dtype", type=_DTYPES, default="bf16", show_default=True)
@click.option("--prefill-tokens", type=click.IntRange(min=0), default=0, help="Prompt length to time.")
@click.option("--mfu", type=click.FloatRange(min=0, max=1, min_open=True), default=0.4, show_default=True)
def serve_cmd(model_name: str | None, json_path: str | None, batch: int, context: int, hardware: str,
              chips: int | None, param_dtype: str, kv_dtype: str, compute_dtype: str, prefill_tokens: int,
              mfu: float, **flags: Any) -> None:
    """Serving memory, decode latency and throughput, prefill time."""
    cfg = build_model(model_name, **flags)
    hw, n = _hardware(hardware, chips)
    setup = ServeSetup(batch, context, n, param_dtype, kv_dtype, compute_dtype, prefill_tokens, mfu)
    _emit(plan_serve(cfg, setup, hw), json_path, serve_text)
