"""`audit plan model|train|serve`: the book's transformer math (ch. 4-8) before any profiling."""

from __future__ import annotations

import json
from typing import Any, Callable

import click

from ..costmodel.planner.layout import parse_layout
from ..costmodel.planner.calibrate import Calibration, from_report
from ..costmodel.planner.remat import canonical, kept_by_policy, stated
from ..costmodel.planner.step_ops import MATMUL_FORMATS
from ..costmodel.planner.serve import ServeSetup, plan_serve
from ..costmodel.planner.train import TrainSetup, plan_train
from ..costmodel.planner.transformer import MODELS, ModelConfig, lookup_model, model_summary
from ..base.errors import UsageError
from ..hardware_options import Pairs, hardware_options, resolve_hardware
from ..base.options import DEFAULTS
from ..outputs import write_result
from ..reports.plan_text import model_text, serve_text, train_text

_SHAPE_FLAGS = ("layers", "d_model", "d_ff", "heads", "kv_heads", "head_dim", "vocab")
_DTYPES = click.Choice(["f32", "bf16", "f16", "fp8", "int8", "int4"])


def _model_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--model NAME plus explicit architecture flags that override or replace it."""
    opts = [click.option("--model", "model_name", metavar="NAME",
                         help=f"Named architecture: {', '.join(MODELS)}.")]
    opts += [click.option(f"--{n.replace('_', '-')}", n, type=click.IntRange(min=1), default=None)
             for n in _SHAPE_FLAGS]
    opts += [click.option("--gated-mlp/--no-gated-mlp", default=None, help="Three MLP matrices (default) or two."),
             click.option("--tied-embeddings/--untied-embeddings", default=None),
             click.option("--experts", type=click.IntRange(min=0), default=None, help="Routed experts (MoE)."),
             click.option("--experts-per-token", type=click.IntRange(min=0), default=None),
             click.option("--shared-experts", type=click.IntRange(min=0), default=None,
                          help="Always-active experts per MoE layer."),
             click.option("--moe-d-ff", type=click.IntRange(min=1), default=None, help="Each expert's width (default d_ff)."),
             click.option("--first-dense-layers", type=click.IntRange(min=0), default=None,
                          help="Leading layers with a dense MLP of width d_ff before the MoE layers."),
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


def _hardware(spec: str, chips: int | None, overrides: Pairs = ()) -> tuple[Any, int]:
    hw = resolve_hardware(spec, overrides)
    n = chips
    if n is None:
        if not hw.topology:
            raise UsageError(f"--hardware {spec} names no topology", hint="add :TOPOLOGY (e.g. tpu-v5e:4x4) or --chips N")
        n = 1
        for d in hw.topology:
            n *= d
    return hw, n


@click.group("plan")
def command() -> None:
    """Predict parameters, FLOPs, memory and step times of a transformer (book ch. 4-8)."""


@command.command("model")
@_model_options
@click.option("--seq", type=click.IntRange(min=1), default=4096, show_default=True, help="Sequence length.")
@click.option("--dtype", type=_DTYPES, default="bf16", show_default=True, help="KV cache and activation dtype.")
@click.option("--checkpoints-per-layer", type=click.FloatRange(min=0), default=DEFAULTS.plan_checkpoints_per_layer,
              show_default=True, help="D-sized activations saved per layer per token (1: block remat).")
def model_cmd(json_path: str | None, **params: Any) -> None:
    """Parameters, FLOPs per token, KV cache and activation bytes."""
    write_result(model_doc(**params), json_path, model_text)


def model_doc(model_name: str | None, seq: int, dtype: str, checkpoints_per_layer: float, **flags: Any) -> dict[str, Any]:
    """What `audit plan model --json` writes (the MCP plan tool calls it too)."""
    cfg = build_model(model_name, **flags)
    summary = model_summary(cfg, seq, dtype, checkpoints_per_layer)
    summary["activation_bytes_per_token"]["by_policy"] = kept_by_policy(cfg, dtype)
    return summary


def _calibration(path: str | None) -> Calibration | None:
    """The measured factors of the user's own inspect JSON report (exit 2 when it is not one)."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read --calibrate {path}: {str(exc).splitlines()[0][:200]}",
                         hint="give the JSON report of audit inspect (--json FILE)") from None
    return from_report(report, path)


@command.command("train")
@_model_options
@click.option("--tokens", type=click.FloatRange(min=0, min_open=True), required=True, help="Training tokens.")
@click.option("--batch-tokens", type=click.FloatRange(min=0, min_open=True), required=True, help="Tokens per step.")
@hardware_options(required=True, help="Chip and topology, NAME[:TOPOLOGY] or FILE.toml[:TOPOLOGY].")
@click.option("--chips", type=click.IntRange(min=1), default=None, help="Chips (default: the topology's).")
@click.option("--mfu", type=click.FloatRange(min=0, max=1, min_open=True), default=0.4, show_default=True,
              help="MFU assumed for the total training time (the layouts bound it instead).")
@click.option("--remat", default="auto", show_default=True, callback=lambda _c, _p, v: canonical(v),
              help="Remat policy: what each layer keeps and what it re-runs (none, minimal: save the matmul "
                   "outputs, selective: Megatron's, full, offload: minimal's tensors to host; MaxText's names such as "
                   "minimal_offloaded too); auto: the bound re-runs nothing, the estimate takes the least re-run that fits.")
@click.option("--checkpoints-per-layer", type=click.FloatRange(min=0), default=None,
              help="Old single knob: D-sized activations saved per layer per token; the forward is "
                   "recomputed in proportion to the rest of 20. Prefer --remat.")
@click.option("--seq", type=click.IntRange(min=1), default=4096, show_default=True, help="Sequence length in tokens.")
@click.option("--layout", "layout_text",
              metavar="dp=N,tp=N,pp=N[,ep=,cp=,zero=,replicas=,microbatches=,schedule=,v=,flushes=]",
              help="Evaluate this parallel layout (dp fills the chips when left out; v: interleaved chunks per chip).")
@click.option("--top", type=click.IntRange(min=1), default=DEFAULTS.plan_top, show_default=True, help="Layouts to list.")
@click.option("--capacity-factor", type=click.FloatRange(min=1), default=1.0, show_default=True,
              help="MoE expert capacity over an even split of the tokens.")
@click.option("--expert-imbalance", type=click.FloatRange(min=1), default=1.0, show_default=True,
              help="MoE: tokens of the busiest expert over the mean (the EP group waits for it; a capacity "
                   "factor caps it where tokens are dropped).")
@click.option("--moe-dispatch", type=click.Choice(["all-to-all", "all-gather"]), default="all-to-all",
              show_default=True, help="MoE: tokens sent to their experts' chips, or gathered over the EP group "
                                      "and the outputs reduce-scattered back.")
@click.option("--compute-dtype", "matmul_format", type=click.Choice(list(MATMUL_FORMATS)), default="bf16",
              show_default=True, help="The GEMMs' format: bf16, fp8 (per-tensor scales), mxfp8, nvfp4 (block scales).")
@click.option("--sliding-window", type=click.IntRange(min=0), default=0,
              help="Sliding-window attention: keys each query sees (0: the model's own window, if it has one).")
@click.option("--attention-chunk", type=click.IntRange(min=0), default=0,
              help="Chunked attention: queries see the keys of their own block of this many tokens (Llama 4).")
@click.option("--sliding-window-share", type=click.FloatRange(min=0, max=1), default=1.0, show_default=True,
              help="Share of the layers with the sliding window or chunked attention (0.5: every other layer, "
                   "as GPT-OSS).")
@click.option("--offload-optimizer", is_flag=True, help="Optimizer state and master weights in host memory "
              "(read and written back over the host link for each update).")
@click.option("--offload-params", is_flag=True, help="Weights in host memory, brought in over the host link for "
              "each microbatch's forward and backward.")
@click.option("--calibrate", "calibrate_path", metavar="REPORT.json",
              help="Price ops and collectives at the rates measured in your own `audit inspect` JSON report.")
def train_cmd(json_path: str | None, **params: Any) -> None:
    """Training FLOPs, time, memory and the parallelism to use."""
    write_result(train_doc(**params), json_path, train_text)


def train_doc(model_name: str | None, tokens: float, batch_tokens: float, hardware: str, mfu: float, remat: str,
              seq: int, top: int, capacity_factor: float, matmul_format: str, sliding_window: int,
              attention_chunk: int, sliding_window_share: float, expert_imbalance: float, moe_dispatch: str,
              offload_optimizer: bool = False, offload_params: bool = False, overrides: Pairs = (),
              chips: int | None = None,
              checkpoints_per_layer: float | None = None, layout_text: str | None = None,
              calibrate_path: str | None = None, **flags: Any) -> dict[str, Any]:
    """What `audit plan train --json` writes (the MCP plan tool calls it too); an unrunnable layout is bad input."""
    cfg = build_model(model_name, **flags)
    hw, n = _hardware(hardware, chips, overrides)
    layout = None if layout_text is None else parse_layout(layout_text, n)
    stated(remat, checkpoints_per_layer)  # one of the two, not both
    if sliding_window and attention_chunk:
        raise UsageError("give --sliding-window or --attention-chunk, not both")
    dtype = MATMUL_FORMATS[matmul_format][0]
    if dtype not in hw.peak_flops:
        raise UsageError(f"{hw.name} states no {dtype} matmul rate: it has no {matmul_format} tensor cores in the catalog",
                         hint=f"its matmul dtypes: {', '.join(hw.peak_flops)}")
    setup = TrainSetup(tokens, batch_tokens, n, seq=seq, mfu=mfu, checkpoints_per_layer=checkpoints_per_layer,
                       remat=remat, capacity_factor=capacity_factor, compute_dtype=dtype, matmul_format=matmul_format,
                       window=sliding_window or attention_chunk, window_share=sliding_window_share,
                       chunked=bool(attention_chunk),
                       calibration=_calibration(calibrate_path), offload_optimizer=offload_optimizer,
                       expert_imbalance=expert_imbalance, moe_dispatch=moe_dispatch,
                       offload_params=offload_params)
    result = plan_train(cfg, setup, hw, layout=layout, top=top)
    _refuse_unrunnable(result.get("layout"), layout_text)
    return result


def _refuse_unrunnable(evaluated: dict[str, Any] | None, text: str | None) -> None:
    """A layout the user gave that cannot run is bad input: exit 2 with why, not a plan."""
    if evaluated is not None and not evaluated["valid"]:
        raise UsageError(f"layout {text} cannot run: {'; '.join(evaluated['problems'])}")


@command.command("serve")
@_model_options
@click.option("--batch", type=click.IntRange(min=1), required=True, help="Sequences decoded together.")
@click.option("--context", type=click.IntRange(min=1), required=True, help="KV cache length in tokens.")
@hardware_options(required=True, help="Chip and topology, NAME[:TOPOLOGY] or FILE.toml[:TOPOLOGY].")
@click.option("--chips", type=click.IntRange(min=1), default=None, help="Chips (default: the topology's).")
@click.option("--param-dtype", type=_DTYPES, default="bf16", show_default=True)
@click.option("--kv-dtype", type=_DTYPES, default="bf16", show_default=True)
@click.option("--compute-dtype", type=_DTYPES, default="bf16", show_default=True)
@click.option("--prefill-tokens", type=click.IntRange(min=0), default=0, help="Prompt length to time.")
@click.option("--mfu", type=click.FloatRange(min=0, max=1, min_open=True), default=0.4, show_default=True,
              help="MFU of prefill (prompt tokens are compute-bound); sizes prefill servers.")
@click.option("--layout", "layout_text", metavar="tp=N,pp=N[,dp=N,ep=N]",
              help="Evaluate a serving layout (dp fills the chips when left out).")
@click.option("--requests-per-s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Size prefill and decode servers for this traffic.")
@click.option("--output-tokens", type=click.IntRange(min=1), default=None, help="Tokens generated per request.")
@click.option("--calibrate", "calibrate_path", metavar="REPORT.json",
              help="Also time decode and prefill at the rates measured in your own `audit inspect` JSON report.")
def serve_cmd(json_path: str | None, **params: Any) -> None:
    """Serving memory, decode latency and throughput, prefill time; layouts and prefill/decode servers."""
    write_result(serve_doc(**params), json_path, serve_text)


def serve_doc(model_name: str | None, batch: int, context: int, hardware: str, param_dtype: str, kv_dtype: str,
              compute_dtype: str, prefill_tokens: int, mfu: float, overrides: Pairs = (), chips: int | None = None,
              layout_text: str | None = None, requests_per_s: float | None = None, output_tokens: int | None = None,
              calibrate_path: str | None = None, **flags: Any) -> dict[str, Any]:
    """What `audit plan serve --json` writes (the MCP plan tool calls it too)."""
    cfg = build_model(model_name, **flags)
    hw, n = _hardware(hardware, chips, overrides)
    setup = ServeSetup(batch, context, n, param_dtype, kv_dtype, compute_dtype, prefill_tokens, mfu)
    layout = None if layout_text is None else parse_layout(layout_text, n)
    result = plan_serve(cfg, setup, hw, layout, requests_per_s, output_tokens or 0, _calibration(calibrate_path))
    _refuse_unrunnable(result.get("layout"), layout_text)
    return result
