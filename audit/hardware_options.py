"""`--hardware NAME[:TOPOLOGY] | FILE.toml[:TOPOLOGY]` and `--set KEY=VALUE`, the same on every command
that judges or prices against a chip (inspect, run, diff, calc, plan)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import click

if TYPE_CHECKING:
    from .costmodel.chips.hardware import Hardware

F = Callable[..., Any]
Pairs = tuple[tuple[str, str], ...]

HARDWARE_METAVAR = "NAME[:TOPOLOGY]|FILE.toml[:TOPOLOGY]"
_SET_HELP = ("Change one figure of the chip for this run, e.g. scale_out_bytes_per_s=12.5e9, node_gpus=4, "
             "peak_flops.bf16=8e14 (repeatable; reports mark it 'user'; keys: docs/hardware.md).")


def _parse_sets(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> Pairs:
    from .costmodel.chips.overrides import parse_pairs

    return parse_pairs(value or ())


def set_option(f: F) -> F:
    """Add repeatable `--set KEY=VALUE` (keyword `overrides`: (key, value text) pairs)."""
    return click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", callback=_parse_sets,
                        help=_SET_HELP)(f)


def hardware_options(*, default: str | None = None, required: bool = False,
                     help: str = "Chip to audit against (default: detected from the trace).") -> Callable[[F], F]:
    """Add `--hardware` (keyword `hardware`) and `--set` (see `set_option`)."""
    def decorate(f: F) -> F:
        f = set_option(f)
        return click.option("--hardware", "hardware", default=default, required=required, show_default=default is not None,
                            metavar=HARDWARE_METAVAR, help=help)(f)
    return decorate


def resolve_hardware(spec: str, overrides: Pairs = ()) -> Hardware:
    """The chip `--hardware` names (a catalog or site name, or a file), with `--set` applied; `cpu` is
    this machine, measured first when it has no calibration record."""
    from .costmodel.chips.catalog import lookup
    from .costmodel.chips.overrides import apply
    from .orchestration.calibrate import cpu_hardware

    return apply(lookup(spec, cpu=cpu_hardware), overrides)


def set_arguments(overrides: Pairs) -> list[str]:
    """`--set` pairs as command-line arguments again, for the reproduce line of a report."""
    return [arg for key, value in overrides for arg in ("--set", f"{key}={value}")]
