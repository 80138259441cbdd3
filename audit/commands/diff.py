"""`audit diff BASE HEAD`: what changed in the program, and whether it got slower beyond noise."""

from __future__ import annotations

import click

from ..base.errors import ExitCode, GateError, UsageError
from ..hardware_options import Pairs, hardware_options
from ..base.options import DEFAULTS


DEPRECATED_FAIL_ON = ("audit diff --fail-on PCT is now --fail-on-slowdown PCT (--fail-on N counts flagged ops in "
                      "audit run and inspect); the old spelling still works for now")


def _percent(value: str | None, option: str) -> float | None:
    if value is None:
        return None
    text = value.strip().rstrip("%")
    try:
        number = float(text)
    except ValueError:
        raise UsageError(f"{option} expects a percentage like 5%, got {value!r}") from None
    if number < 0:
        raise UsageError(f"{option} must not be negative")
    return number / 100.0


def _slowdown(fail_on_slowdown: str | None, fail_on: str | None) -> float | None:
    """The step-time threshold as a fraction, from --fail-on-slowdown or its old spelling --fail-on."""
    if fail_on is None:
        return _percent(fail_on_slowdown, "--fail-on-slowdown")
    if fail_on_slowdown is not None:
        raise UsageError("give --fail-on-slowdown only (--fail-on is its old spelling)")
    click.echo(f"audit: warning: {DEPRECATED_FAIL_ON}", err=True)
    return _percent(fail_on, "--fail-on")


@click.command("diff")
@click.argument("base")
@click.argument("head")
@click.option("--json", "json_path", metavar="FILE|-", help="Write the diff as JSON (schema audit.diff/v1).")
@click.option("--markdown", "markdown_path", metavar="FILE|-", help="Write a markdown PR comment.")
@click.option("--html", "html_path", metavar="FILE", help="Write the diff as a self-contained HTML page.")
@click.option("--fail-on-slowdown", "fail_on_slowdown", metavar="PCT",
              help="Step-time change that counts: exit 1 when the whole interval is above it [default: 5%].")
@click.option("--fail-on", "fail_on", metavar="PCT", hidden=True, help="Old spelling of --fail-on-slowdown.")
@click.option("--strict", is_flag=True, help="Also exit 1 when the step-time verdict is inconclusive.")
@click.option("--fail-on-flops", is_flag=True, help="Exit 1 if FLOPs per step increased.")
@click.option("--fail-on-comm-bytes", is_flag=True, help="Exit 1 if communicated bytes per step increased.")
@hardware_options(help="Chip for sides that are profiles, not reports.")
@click.option("--quiet", "-q", is_flag=True, help="No terminal summary.")
def command(base: str, head: str, json_path: str | None, markdown_path: str | None, html_path: str | None,
            fail_on_slowdown: str | None, fail_on: str | None, strict: bool, fail_on_flops: bool,
            fail_on_comm_bytes: bool, hardware: str | None, overrides: Pairs, quiet: bool) -> int:
    """Compare BASE and HEAD (JSON reports, profiles or HLO dumps). Exit 1 on a regression.

    Each side may hold repeated runs of the same code: a directory of JSON reports, a glob,
    comma-separated paths, or a combined report from `audit run --repeat N`. With two or more
    runs a side, the step-time interval covers run-to-run variance; with one, it is widened by
    a fixed floor and labelled weak. Verdicts: regression (exit 1), improvement, no change,
    inconclusive (exit 0 unless --strict).
    """
    from ..library import diff
    from ..library.calls import side_paths
    from ..outputs import check_outputs, write_outputs
    from ..reports.render import DiffRenderer

    inputs = [p for spec in (base, head) for p in side_paths(spec)]
    check_outputs(json_path, markdown_path, html_path=html_path, inputs=inputs)
    result = diff(base, head, fail_on_slowdown=_slowdown(fail_on_slowdown, fail_on), strict=strict,
                  fail_on_flops=fail_on_flops, fail_on_comm_bytes=fail_on_comm_bytes, hardware=hardware,
                  overrides=dict(overrides))
    write_outputs(DiffRenderer(result.model), json_path=json_path, markdown_path=markdown_path, html_path=html_path,
                  top=DEFAULTS.diff_top, quiet=quiet)
    if result.regression:
        raise GateError("; ".join(result.tripped))
    return ExitCode.OK
