"""`audit diff BASE HEAD`: what changed in the program, and whether it got slower beyond noise."""

from __future__ import annotations

import glob
from pathlib import Path

import click

from typing import Any

from ..analyses.diffing import Gates, diff_reports
from ..errors import ExitCode, GateError, InputError, UsageError


def _percent(value: str | None) -> float | None:
    if value is None:
        return None
    text = value.strip().rstrip("%")
    try:
        number = float(text)
    except ValueError:
        raise UsageError(f"--fail-on expects a percentage like 5%, got {value!r}") from None
    if number < 0:
        raise UsageError("--fail-on must not be negative")
    return number / 100.0


def load_side(path: Path, hardware: str | None) -> dict[str, Any]:
    """One run, as the JSON report `audit diff` compares: a report this tool wrote, or anything
    `audit inspect` accepts, analysed now. (The diff reads the JSON contract, so a report written
    by an earlier version compares the same.)"""
    from ..parsers.inputs import open_input

    opened = open_input(path)
    if opened.report is not None:
        return {**opened.report, "run_source": str(path)}
    from ..orchestration.pipeline import analyse_hlo, analyse_profile

    if opened.module is not None:
        return analyse_hlo(path, hardware=hardware, module=opened.module).to_json()
    return analyse_profile(path, hardware=hardware).attach("run_source", str(path)).to_json()


def side_paths(spec: str) -> list[Path]:
    """One side's runs: a file or profile, a directory of JSON reports, a glob, or several joined by commas."""
    paths: list[Path] = []
    for part in (p for p in spec.split(",") if p):
        path = Path(part)
        if any(ch in part for ch in "*?[") and not path.exists():
            found = sorted(Path(m) for m in glob.glob(part))
            if not found:
                raise InputError("no file matches this pattern", path=part)
            paths += found
        elif path.is_dir() and sorted(path.glob("*.json")):
            paths += sorted(path.glob("*.json"))  # repeated runs' reports; a profile directory has none
        else:
            paths.append(path)
    if not paths:
        raise UsageError(f"no runs given in {spec!r}")
    return paths


def load_runs(spec: str, hardware: str | None) -> list[dict[str, Any]]:
    return [load_side(p, hardware) for p in side_paths(spec)]


@click.command("diff")
@click.argument("base")
@click.argument("head")
@click.option("--json", "json_path", metavar="FILE|-", help="Write the diff as JSON (schema audit.diff/v1).")
@click.option("--markdown", "markdown_path", metavar="FILE|-", help="Write a markdown PR comment.")
@click.option("--html", "html_path", metavar="FILE", help="Write the diff as a self-contained HTML page.")
@click.option("--fail-on", "fail_on", metavar="PCT",
              help="Step-time change that counts: exit 1 when the whole interval is above it [default: 5%].")
@click.option("--strict", is_flag=True, help="Also exit 1 when the step-time verdict is inconclusive.")
@click.option("--fail-on-flops", is_flag=True, help="Exit 1 if FLOPs per step increased.")
@click.option("--fail-on-comm-bytes", is_flag=True, help="Exit 1 if communicated bytes per step increased.")
@click.option("--hardware", metavar="NAME[:TOPOLOGY]", help="Chip for sides that are profiles, not reports.")
@click.option("--quiet", "-q", is_flag=True, help="No terminal summary.")
def command(base: str, head: str, json_path: str | None, markdown_path: str | None, html_path: str | None,
            fail_on: str | None, strict: bool, fail_on_flops: bool, fail_on_comm_bytes: bool, hardware: str | None,
            quiet: bool) -> int:
    """Compare BASE and HEAD (JSON reports, profiles or HLO dumps). Exit 1 on a regression.

    Each side may hold repeated runs of the same code: a directory of JSON reports, a glob,
    comma-separated paths, or a combined report from `audit run --repeat N`. With two or more
    runs a side, the step-time interval covers run-to-run variance; with one, it is widened by
    a fixed floor and labelled weak. Verdicts: regression (exit 1), improvement, no change,
    inconclusive (exit 0 unless --strict).
    """
    from ..outputs import check_outputs, write_outputs
    from ..reports.render import DiffRenderer

    check_outputs(json_path, markdown_path)
    gates = Gates(fail_on=_percent(fail_on), fail_on_flops=fail_on_flops, fail_on_comm_bytes=fail_on_comm_bytes,
                  strict=strict)
    diff = diff_reports(load_runs(base, hardware), load_runs(head, hardware), gates)
    write_outputs(DiffRenderer(diff), json_path=json_path, markdown_path=markdown_path, html_path=html_path,
                  top=10, quiet=quiet)
    if diff["regression"]:
        raise GateError("; ".join(diff["gates"]["tripped"]))
    return ExitCode.OK
