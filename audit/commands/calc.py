"""`audit calc`: napkin math (matmul rooflines, collectives) from the auditor's own cost model."""

from __future__ import annotations

import json

import click

from ..atomic import write_text
from ..costmodel.chips.catalog import lookup
from ..costmodel.network.collectives import WRAPAROUND_CHOICES, human
from ..costmodel.napkin import collective as collective_napkin
from ..costmodel.napkin import matmul as matmul_napkin
from ..costmodel.napkin import parse_axes
from ..costmodel.network.mesh_layout import parse_mesh

_HARDWARE_HELP = "Chip and topology, NAME[:TOPOLOGY], e.g. tpu-v5e:8x4 or h100:8."


@click.group(name="calc")
def command() -> None:
    """Napkin math from the same cost model the auditor uses."""


def _emit(result: dict, json_path: str | None, lines: list[str]) -> None:
    if json_path:
        write_text(json_path, json.dumps(result, indent=2, sort_keys=True))
        if json_path == "-":
            return
    click.echo("\n".join(lines))


@command.command("matmul")
@click.option("--m", "m", type=click.IntRange(min=1), required=True, help="Rows of the left operand (tokens).")
@click.option("--k", "k", type=click.IntRange(min=1), required=True, help="Contracting dimension.")
@click.option("--n", "n", type=click.IntRange(min=1), required=True, help="Columns of the right operand.")
@click.option("--dtype", default="bf16", show_default=True, help="Element type: bf16, f32, int8, fp8, ...")
@click.option("--hardware", "hardware", default="tpu-v5e", show_default=True, help=_HARDWARE_HELP)
@click.option("--json", "json_path", metavar="FILE|-", help="Write the result as JSON ('-' for stdout).")
def matmul(m: int, k: int, n: int, dtype: str, hardware: str, json_path: str | None) -> None:
    """Roofline of [M,K] x [K,N]: FLOPs, bytes, intensity, ridge, time and bound."""
    result = matmul_napkin(m, k, n, dtype, lookup(hardware))
    lines = [
        f"matmul {result['dtype']}[{m},{k}] x [{k},{n}] on {result['hardware']}",
        f"  FLOPs            {result['flops']:.4g} FLOP",
        f"  bytes            {result['bytes']:.4g} B (read + written)",
        f"  intensity        {result['intensity']:.4g} FLOP/B (ridge {result['ridge_intensity']:.4g} FLOP/B)",
        f"  compute time     {human(result['compute_s'], 's')} at {human(result['peak_flops_per_s'], 'FLOP/s')}",
        f"  memory time      {human(result['memory_s'], 's')} at {human(result['memory_bytes_per_s'], 'B/s')} "
        f"({result['memory_level']}, {result['memory_source']})",
        f"  expected time    {human(result['time_s'], 's')} ({result['bound_by']}-bound)",
    ]
    lines += [f"  note: {note}" for note in result["notes"]]
    _emit(result, json_path, lines)


@command.command("collective")
@click.option("--op", "op", required=True,
              help="all-gather, reduce-scatter, all-reduce, all-to-all or collective-permute.")
@click.option("--shape", "shape", required=True,
              help="The array as one device of the group sees it (volume V), e.g. bf16[2048,8192].")
@click.option("--mesh", "mesh", required=True, help="Logical mesh, e.g. X=8,Y=4.")
@click.option("--axes", "axes", required=True, help="Mesh axes the collective runs over, e.g. Y or X,Y.")
@click.option("--hardware", "hardware", default="tpu-v5e", show_default=True, help=_HARDWARE_HELP)
@click.option("--wraparound", type=click.Choice(WRAPAROUND_CHOICES), default="auto", show_default=True,
              help="auto decides from the chip's torus rules and the axis size.")
@click.option("--json", "json_path", metavar="FILE|-", help="Write the result as JSON ('-' for stdout).")
def collective(op: str, shape: str, mesh: str, axes: str, hardware: str, wraparound: str,
               json_path: str | None) -> None:
    """Time of one collective over mesh axes: bytes, hops, bandwidth and latency terms, bound."""
    result = collective_napkin(op, shape, parse_mesh(mesh), parse_axes(axes), lookup(hardware), wraparound)
    wrap = {True: " (with a wraparound)", False: " (without a wraparound)", None: ""}[result["wraparound"]]
    lines = [
        f"{result['op']} of {result['shape']} over {','.join(result['axes'])} "
        f"({result['group_size']} devices) on {result['hardware']}",
        f"  volume V         {human(result['bytes'], 'B')}",
        f"  bytes moved      {human(result['bytes_moved'], 'B')} through one device's links",
        f"  link             {result['link']}, {human(result['bandwidth_bytes_per_s'], 'B/s')}{wrap}",
        f"  hops             {result['hops']}",
        f"  bandwidth time   {human(result['bandwidth_s'], 's')}",
        f"  latency floor    {human(result['latency_s'], 's')}",
        f"  expected time    {human(result['time_s'], 's')} ({result['bound_by']}-bound)",
    ]
    lines += [f"  note: {note}" for note in result["notes"]]
    _emit(result, json_path, lines)
