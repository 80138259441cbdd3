"""`audit hardware list | show NAME`: the hardware catalog, every number with unit and source."""

from __future__ import annotations

import json

import click

from ..atomic import write_text
from ..costmodel.chips.calibrate import cached_cpu_hardware, cpu_hardware
from ..costmodel.chips.catalog import CATALOG, canonical_name, lookup
from ..errors import UsageError
from ..reports.hardware_text import catalog_table, describe


@click.group(name="hardware")
def command() -> None:
    """The hardware catalog: TPU, GPU and this machine's calibrated CPU."""


@command.command(name="list")
def list_hardware() -> None:
    """A table of every catalog entry: peak bf16 FLOP/s, HBM, interconnect."""
    click.echo(catalog_table(list(CATALOG.values()), cached_cpu_hardware()))


@command.command(name="show")
@click.argument("name")
@click.option("--json", "json_out", is_flag=False, flag_value="-", default=None, metavar="FILE|-",
              help="Write Hardware JSON (with each number's unit and source) to FILE, or stdout.")
@click.option("--recalibrate", is_flag=True, help="For cpu: measure again instead of using the cache.")
def show(name: str, json_out: str | None, recalibrate: bool) -> None:
    """Every number for NAME[:TOPOLOGY] (e.g. tpu-v5e:8x4, h100:8, cpu), with unit and source."""
    is_cpu = canonical_name(name.partition(":")[0]) == "cpu"
    if recalibrate and not is_cpu:
        raise UsageError("--recalibrate applies to cpu only; catalog entries are not measured",
                         hint=f"audit hardware show {name}")
    if is_cpu and (recalibrate or cached_cpu_hardware() is None):
        click.echo("measuring this machine's CPU (a few seconds; the result is cached)...", err=True)
        cpu_hardware(refresh=recalibrate)
    hw = lookup(name)
    if json_out is not None:
        payload = hw.to_json()
        payload["quantities"] = {k: q.to_json() for k, q in hw.quantities().items()}
        write_text(json_out, json.dumps(payload, indent=2, sort_keys=True))
        return
    click.echo(describe(hw))
