"""`audit hardware list | show NAME`: the hardware catalog and users' own files, every number with unit and source."""

from __future__ import annotations

import json
from typing import Any

import click

from ..atomic import write_text
from ..costmodel.chips import hwfile
from ..costmodel.chips.calibration import cached_cpu_hardware
from ..costmodel.chips.hardware import Hardware
from ..costmodel.chips.catalog import SITE_PATH_VAR, canonical_name, chips, entries, spec_file
from ..base.errors import UsageError
from ..hardware_options import HARDWARE_METAVAR, Pairs, resolve_hardware, set_option
from ..orchestration.calibrate import cpu_hardware
from ..reports.hardware_text import catalog_table, describe


@click.group(name="hardware")
def command() -> None:
    """The hardware catalog: TPU, GPU and this machine's calibrated CPU, and your own hardware files."""


@command.command(name="list")
@click.option("--json", "json_out", is_flag=False, flag_value="-", default=None, metavar="FILE|-",
              help="Write every entry as Hardware JSON (each number with its unit and source) to FILE, or stdout.")
def list_hardware(json_out: str | None) -> None:
    """A table of every entry: peak bf16 FLOP/s, HBM, interconnect, and the file it comes from.

    Files in the directories AUDIT_HARDWARE_PATH names (separated like PATH) are listed too.
    """
    known = entries()
    files = {name: e.path for name, e in known.items() if e.site}
    cpu = cached_cpu_hardware()
    if json_out is None:
        click.echo(catalog_table(chips(), cpu, files))
        return
    listed = [*chips(), *([cpu] if cpu is not None else [])]
    payload = [{**hw.to_json(), "from": str(files[hw.name]) if hw.name in files else
                ("calibrated" if hw.kind == "cpu" else "catalog")} for hw in listed]
    write_text(json_out, json.dumps(payload, indent=2, sort_keys=True) + "\n")
    if json_out != "-":
        click.echo(f"Wrote {json_out}", err=True)


@command.command(name="show")
@click.argument("name", metavar=HARDWARE_METAVAR)
@click.option("--json", "json_out", is_flag=False, flag_value="-", default=None, metavar="FILE|-",
              help="Write Hardware JSON (with each number's unit and source) to FILE, or stdout.")
@click.option("--toml", "toml_out", is_flag=False, flag_value="-", default=None, metavar="FILE|-",
              help="Write the entry as a hardware file to FILE, or stdout: a starting point for your own.")
@click.option("--recalibrate", is_flag=True, help="For cpu: measure again instead of using the cache.")
@set_option
def show(name: str, json_out: str | None, toml_out: str | None, recalibrate: bool, overrides: Pairs) -> None:
    """Every number for NAME[:TOPOLOGY] (e.g. tpu-v5e:8x4, h100:8, cpu, my.toml), with unit and source."""
    if json_out is not None and toml_out is not None and "-" in (json_out, toml_out):
        raise UsageError("--json and --toml cannot both write to stdout")
    is_cpu = spec_file(name) is None and canonical_name(name.partition(":")[0]) == "cpu"
    if recalibrate and not is_cpu:
        raise UsageError("--recalibrate applies to cpu only; catalog entries are not measured",
                         hint=f"audit hardware show {name}")
    if is_cpu and (recalibrate or cached_cpu_hardware() is None):
        click.echo("measuring this machine's CPU (a few seconds; the result is cached)...", err=True)
        cpu_hardware(refresh=recalibrate)
    hw = resolve_hardware(name, overrides)
    if json_out is not None:
        write_text(json_out, json.dumps(show_json(hw), indent=2, sort_keys=True))
    if toml_out is not None:
        header = (f"{hw.name}: a hardware file for audit, written by `audit hardware show {name} --toml`.\n"
                  f"Edit any figure and use it with --hardware FILE.toml[:TOPOLOGY], or put it in a directory\n"
                  f"named in {SITE_PATH_VAR} to use it by name. Each number: value, unit, kind "
                  f"({', '.join(hwfile.KINDS)}), source.")
        write_text(toml_out, hwfile.dumps(hw, header=header))
        if toml_out != "-":
            click.echo(f"Wrote {toml_out}", err=True)
    if json_out is None and toml_out is None:
        origin = entries().get(hw.name)
        click.echo(describe(hw, spec_file(name) or (origin.path if origin and origin.site else None)))


def show_json(hw: Hardware) -> dict[str, Any]:
    """What `hardware show --json` writes: the entry, and each figure with its unit and source."""
    payload = hw.to_json()
    payload["quantities"] = {k: q.to_json() for k, q in hw.quantities().items()}
    return payload
