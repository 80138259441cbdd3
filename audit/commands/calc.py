"""`audit calc`: napkin math (matmul rooflines, collectives) from the auditor's own cost model."""

from __future__ import annotations

import click

from ..costmodel.network.collectives import WRAPAROUND_CHOICES
from ..costmodel.napkin import collective as collective_napkin
from ..costmodel.napkin import matmul as matmul_napkin
from ..costmodel.napkin import parse_axes
from ..costmodel.network.mesh_layout import parse_mesh
from ..hardware_options import Pairs, hardware_options, resolve_hardware
from ..outputs import write_result
from ..reports.napkin_text import collective_text, matmul_text

_HARDWARE_HELP = "Chip and topology, NAME[:TOPOLOGY] or FILE.toml[:TOPOLOGY], e.g. tpu-v5e:8x4 or h100:8."


@click.group(name="calc")
def command() -> None:
    """Napkin math from the same cost model the auditor uses."""


@command.command("matmul")
@click.option("--m", "m", type=click.IntRange(min=1), required=True, help="Rows of the left operand (tokens).")
@click.option("--k", "k", type=click.IntRange(min=1), required=True, help="Contracting dimension.")
@click.option("--n", "n", type=click.IntRange(min=1), required=True, help="Columns of the right operand.")
@click.option("--dtype", default="bf16", show_default=True, help="Element type: bf16, f32, int8, fp8, ...")
@click.option("--precision", default="default", show_default=True,
              help="What an f32 matmul asks of the matrix units, as a dot states it: default (what JAX runs: "
                   "TF32 on GPUs that have it, one bf16 pass on TPU), high, highest, or a dot algorithm "
                   "such as dot_bf16_bf16_f32_x3.")
@hardware_options(default="tpu-v5e", help=_HARDWARE_HELP)
@click.option("--json", "json_path", metavar="FILE|-", help="Write the result as JSON ('-' for stdout).")
def matmul(m: int, k: int, n: int, dtype: str, precision: str, hardware: str, overrides: Pairs,
           json_path: str | None) -> None:
    """Roofline and achievable time of [M,K] x [K,N]: FLOPs, bytes, intensity, ridge, both times and bound."""
    write_result(matmul_napkin(m, k, n, dtype, resolve_hardware(hardware, overrides), precision), json_path,
                 matmul_text)


@command.command("collective")
@click.option("--op", "op", required=True,
              help="all-gather, reduce-scatter, all-reduce, all-to-all or collective-permute.")
@click.option("--shape", "shape", required=True,
              help="The array as one device of the group sees it (volume V), e.g. bf16[2048,8192].")
@click.option("--mesh", "mesh", required=True, help="Logical mesh, e.g. X=8,Y=4.")
@click.option("--axes", "axes", required=True, help="Mesh axes the collective runs over, e.g. Y or X,Y.")
@hardware_options(default="tpu-v5e", help=_HARDWARE_HELP)
@click.option("--wraparound", type=click.Choice(WRAPAROUND_CHOICES), default="auto", show_default=True,
              help="auto decides from the chip's torus rules and the axis size.")
@click.option("--json", "json_path", metavar="FILE|-", help="Write the result as JSON ('-' for stdout).")
def collective(op: str, shape: str, mesh: str, axes: str, hardware: str, overrides: Pairs, wraparound: str,
               json_path: str | None) -> None:
    """Time of one collective over mesh axes: bytes, hops, bandwidth and latency terms, bound."""
    write_result(collective_napkin(op, shape, parse_mesh(mesh), parse_axes(axes), resolve_hardware(hardware, overrides),
                                   wraparound),
                 json_path, collective_text)
