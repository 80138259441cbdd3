"""The plan tool: `audit plan model|train|serve --json`, through the functions the plan command
calls, with the command's own defaults for what the call leaves out."""

from __future__ import annotations

from typing import Any, Literal

import click

from ..commands import plan as plan_command
from ..base.errors import UsageError

JSON = dict[str, Any]
PlanKind = Literal["model", "train", "serve"]
_COMMANDS = {"model": "model_cmd", "train": "train_cmd", "serve": "serve_cmd"}


def command_defaults(kind: PlanKind) -> JSON:
    """The defaults `audit plan KIND` gives its options (so the tool follows the command's)."""
    command: click.Command = getattr(plan_command, _COMMANDS[kind])
    return {p.name: p.default for p in command.params
            if p.name and isinstance(p.default, (bool, int, float, str)) and not p.multiple}


def plan_doc(kind: PlanKind, model: str | None, architecture: JSON, hardware: str | None, options: JSON) -> JSON:
    """The plan of `kind` for a model (named and/or shaped by `architecture`) on `hardware`: the document
    `audit plan KIND --json` writes, made by the same function, with the command's defaults."""
    command: click.Command = getattr(plan_command, _COMMANDS[kind])
    names = {p.name for p in command.params}
    given = {k: v for k, v in {**options, **architecture}.items() if v is not None and k in names}
    params = {**command_defaults(kind), **given, "model_name": model}
    params.pop("json_path", None)
    if kind == "model":
        return plan_command.model_doc(**params)
    if hardware is None:
        raise UsageError(f"audit plan {kind} needs --hardware NAME[:TOPOLOGY]")
    required = ("tokens", "batch_tokens") if kind == "train" else ("batch", "context")
    for needed in required:
        if needed not in params:
            raise UsageError(f"audit plan {kind} needs --{needed.replace('_', '-')}")
    document = plan_command.train_doc if kind == "train" else plan_command.serve_doc
    return document(hardware=hardware, **params)
