"""The plan tool: `audit plan model|train|serve --json`, through the functions the plan command
calls, with the command's own defaults for what the call leaves out."""

from __future__ import annotations

from typing import Any, Literal

import click

from ..commands import plan as plan_command
from ..costmodel.planner.layout import parse_layout
from ..costmodel.planner.serve import ServeSetup, plan_serve
from ..costmodel.planner.train import TrainSetup, plan_train
from ..costmodel.planner.transformer import model_summary
from ..errors import UsageError

JSON = dict[str, Any]
PlanKind = Literal["model", "train", "serve"]
_COMMANDS = {"model": "model_cmd", "train": "train_cmd", "serve": "serve_cmd"}


def command_defaults(kind: PlanKind) -> JSON:
    """The defaults `audit plan KIND` gives its options (so the tool follows the command's)."""
    command: click.Command = getattr(plan_command, _COMMANDS[kind])
    return {p.name: p.default for p in command.params
            if p.name and isinstance(p.default, (bool, int, float, str)) and not p.multiple}


def plan_doc(kind: PlanKind, model: str | None, architecture: JSON, hardware: str | None, options: JSON) -> JSON:
    """The plan of `kind` for a model (named and/or shaped by `architecture`) on `hardware`."""
    given = {k: v for k, v in options.items() if v is not None}
    o = {**command_defaults(kind), **given}
    cfg = plan_command.build_model(model, **architecture)
    if kind == "model":
        return model_summary(cfg, o["seq"], o["dtype"], o["checkpoints_per_layer"])
    if hardware is None:
        raise UsageError(f"audit plan {kind} needs --hardware NAME[:TOPOLOGY]")
    hw, chips = plan_command._hardware(hardware, o.get("chips"))
    layout = None if o.get("layout_text") is None else parse_layout(o["layout_text"], chips)
    if kind == "train":
        for needed in ("tokens", "batch_tokens"):
            if needed not in o:
                raise UsageError(f"audit plan train needs --{needed.replace('_', '-')}")
        setup = TrainSetup(o["tokens"], o["batch_tokens"], chips, seq=o["seq"], mfu=o["mfu"],
                           checkpoints_per_layer=o["checkpoints_per_layer"], capacity_factor=o["capacity_factor"])
        return plan_train(cfg, setup, hw, layout=layout, top=o["top"])
    for needed in ("batch", "context"):
        if needed not in o:
            raise UsageError(f"audit plan serve needs --{needed}")
    serve = ServeSetup(o["batch"], o["context"], chips, o["param_dtype"], o["kv_dtype"], o["compute_dtype"],
                       o["prefill_tokens"], o["mfu"])
    return plan_serve(cfg, serve, hw, layout, o.get("requests_per_s"), o.get("output_tokens") or 0)
