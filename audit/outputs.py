"""Output options shared by `audit run` and `audit inspect`, and writing every requested output."""

from __future__ import annotations

import sys
from typing import Any, Callable

import click

from .atomic import write_text
from .errors import UsageError

F = Callable[..., Any]


def output_options(f: F) -> F:
    """Add --json/--csv/--html/--markdown/--top/--hardware/--quiet and the flagging thresholds."""
    options = [
        click.option("--json", "json_path", metavar="FILE|-", help="Write the JSON report (schema audit.report/v1); - for stdout."),
        click.option("--csv", "csv_path", metavar="FILE", help="Write the per-op table as CSV."),
        click.option("--html", "html_path", metavar="FILE", help="Write a self-contained HTML report."),
        click.option("--markdown", "markdown_path", metavar="FILE|-", help="Write a markdown summary for a PR comment."),
        click.option("--top", default=15, show_default=True, type=click.IntRange(min=1), help="Ops shown in the terminal summary."),
        click.option("--hardware", metavar="NAME[:TOPOLOGY]", help="Chip to audit against (default: detected from the trace)."),
        click.option("--allow-smaller", is_flag=True,
                     help="Accept a --hardware topology with fewer devices than the program: the rest are priced "
                          "as further slices/nodes (default: exit 2)."),
        click.option("--min-efficiency", default=0.5, show_default=True, type=click.FloatRange(0, 1),
                     help="Flag ops whose expected/measured time is below this..."),
        click.option("--min-share", default=0.01, show_default=True, type=click.FloatRange(0, 1),
                     help="...and whose share of op time is above this."),
        click.option("--fail-on", "fail_on", type=click.IntRange(min=0), metavar="N",
                     help="Exit 1 when more than N ops are flagged."),
        click.option("--quiet", "-q", is_flag=True, help="No terminal summary or progress."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def analysis_options(kwargs: dict) -> dict:
    return {"min_efficiency": kwargs.get("min_efficiency", 0.5), "min_share": kwargs.get("min_share", 0.01),
            "allow_smaller": kwargs.get("allow_smaller", False)}


def check_outputs(json_path: str | None, markdown_path: str | None, **_: Any) -> None:
    """Fail before the expensive part when two outputs both claim stdout."""
    if json_path == "-" and markdown_path == "-":
        raise UsageError("--json - and --markdown - cannot both write to stdout")


def emit(report: dict, *, json_path: str | None = None, csv_path: str | None = None,
         html_path: str | None = None, markdown_path: str | None = None, top: int = 15,
         quiet: bool = False, fail_on: int | None = None, **_: Any) -> int:
    """Write every requested output atomically, print the summary, and return the exit code."""
    from .reports.json_report import render_json

    if html_path:
        from .reports.html import render_html

        write_text(html_path, render_html(report))
    if markdown_path:
        from .reports.markdown import render_markdown

        write_text(markdown_path, render_markdown(report, html_path=html_path))
    if csv_path:
        from .reports.csv_report import render_csv

        write_text(csv_path, render_csv(report))
    if json_path:
        write_text(json_path, render_json(report))
    if not quiet:
        from .reports.terminal import render_terminal

        to_stderr = json_path == "-" or markdown_path == "-"
        click.echo(render_terminal(report, top=top), nl=False, err=to_stderr)
        for label, path in (("HTML", html_path), ("markdown", markdown_path), ("CSV", csv_path), ("JSON", json_path)):
            if path and path != "-":
                click.echo(f"Wrote {label} report to {path}", err=True)
    if fail_on is not None and report["summary"]["flagged_ops"] > fail_on:
        print(f"audit: {report['summary']['flagged_ops']} flagged ops exceed --fail-on {fail_on}", file=sys.stderr)
        return 1
    return 0
