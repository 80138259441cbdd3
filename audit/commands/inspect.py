"""`audit inspect PATH`: analyse an existing profile (TPU, GPU or CPU) or an HLO dump."""

from __future__ import annotations

from typing import Any

import click

from ..invocation import command_line
from ..outputs import check_outputs, emit, output_options


@click.command("inspect")
@click.argument("path")
@click.option("--run", "run_name", metavar="NAME", help="Run to read from a TensorBoard logdir (default: latest).")
@click.option("--cache", metavar="DIR",
              help="Keep per-host summaries (Parquet) here for fast re-analysis "
                   "(default: the user cache, $XDG_CACHE_HOME/audit/summaries or ~/.cache/audit/summaries, "
                   "moved by $AUDIT_CACHE; '' turns it off). Nothing is written beside the profile.")
@click.option("--scheduler", metavar="ADDRESS",
              help="Read hosts on this Dask cluster, e.g. tcp://10.0.0.1:8786 (default: $AUDIT_DASK_SCHEDULER, "
                   "else a local cluster for two or more hosts).")
@click.option("--workers", type=click.IntRange(min=1), metavar="N",
              help="Local Dask workers at most (default: one per core).")
@click.option("--skip-bad-hosts", is_flag=True,
              help="Analyse the readable hosts when some host files cannot be read, with a warning (default: exit 2).")
@click.option("--hlo", "hlo_dir", metavar="DIR",
              help="The HLO dump folder (--xla_dump_to) of an Nsight Systems SQLite export, which holds no HLO.")
@output_options
def command(path: str, run_name: str | None, cache: str | None, scheduler: str | None, workers: int | None,
            skip_bad_hosts: bool, hlo_dir: str | None, **kwargs: Any) -> int:
    """Analyse PATH: a .xplane.pb, a profile run directory, a TensorBoard logdir, an nsys-jax archive
    (.zip or its folder; a folder of them is one multi-process profile), an Nsight Systems SQLite
    export (with --hlo DIR), or an HLO dump (.hlo.pb, .txt, .hlo). PATH may be a URL that fsspec
    reads (gs://, s3://, file://)."""
    from ..library import inspect

    check_outputs(**kwargs, inputs=[path])
    report = inspect(path, kwargs["hardware"], run=run_name, min_efficiency=kwargs["min_efficiency"],
                     min_share=kwargs["min_share"], allow_smaller=kwargs["allow_smaller"], cache=cache,
                     scheduler=scheduler, workers=workers, skip_bad_hosts=skip_bad_hosts,
                     progress=not kwargs.get("quiet"), command=command_line(),
                     overrides=dict(kwargs.get("overrides") or ()), hlo=hlo_dir)
    return emit(report.model, **kwargs)
