"""`audit inspect PATH`: analyse an existing profile (TPU, GPU or CPU) or an HLO dump."""

from __future__ import annotations

from pathlib import Path

import click

from ..invocation import command_line
from ..outputs import analysis_options, check_outputs, emit, output_options
from ..errors import InputError


@click.command("inspect")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--run", "run_name", metavar="NAME", help="Run to read from a TensorBoard logdir (default: latest).")
@output_options
def command(path: Path, run_name: str | None, **kwargs) -> int:
    """Analyse PATH: a .xplane.pb, a profile run directory, a TensorBoard logdir, or an HLO dump
    (.hlo.pb, .txt, .hlo)."""
    from ..orchestration.pipeline import analyse_profile

    check_outputs(**kwargs)
    if not path.exists():
        raise InputError("no such file or directory", path=path)
    report = analyse_profile(path, run=run_name, hardware=kwargs["hardware"],
                             source={"command": command_line()}, options=analysis_options(kwargs))
    return emit(report, **kwargs)
