"""Writing what a command produced: every requested format of a report or a diff (`run`,
`inspect`, `diff`), and the results of `calc` and `plan`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import click

from .atomic import is_stream, write_bytes, write_text
from .base.errors import ExitCode, GateError, UsageError
from .hardware_options import hardware_options
from .base.options import DEFAULTS

if TYPE_CHECKING:  # the analysis stack loads when a command runs, not when the CLI starts
    from .orchestration.analysis import Options
    from .reports.model.report import ReportModel
    from .reports.render import Renderer

F = Callable[..., Any]


def output_options(f: F) -> F:
    """Add --json/--csv/--html/--markdown/--top/--hardware/--set/--quiet and the flagging thresholds."""
    options = [
        click.option("--json", "json_path", metavar="FILE|-", help="Write the JSON report (schema audit.report/v1); - for stdout."),
        click.option("--csv", "csv_path", metavar="FILE", help="Write the per-op table as CSV."),
        click.option("--html", "html_path", metavar="FILE", help="Write a self-contained HTML report."),
        click.option("--markdown", "markdown_path", metavar="FILE|-", help="Write a markdown summary for a PR comment."),
        click.option("--trace", "trace_path", metavar="FILE.json[.gz]",
                     help="Write a trace-viewer file (Perfetto, chrome://tracing): measured ops per device beside "
                          "their expected times, flags and reasons."),
        click.option("--top", default=DEFAULTS.top, show_default=True, type=click.IntRange(min=1), help="Ops shown in the terminal summary."),
        click.option("--allow-smaller", is_flag=True,
                     help="Accept a --hardware topology with fewer devices than the program: the rest are priced "
                          "as further slices/nodes (default: exit 2)."),
        click.option("--min-efficiency", default=DEFAULTS.thresholds.min_efficiency, show_default=True, type=click.FloatRange(0, 1),
                     help="Flag ops whose achievable/measured time (what good kernels take on the chip) is below "
                          "this..."),
        click.option("--min-share", default=DEFAULTS.thresholds.min_share, show_default=True, type=click.FloatRange(0, 1),
                     help="...and whose share of op time is above this."),
        click.option("--fail-on", "fail_on", type=click.IntRange(min=0), metavar="N",
                     help="Exit 1 when more than N ops are flagged."),
        click.option("--quiet", "-q", is_flag=True, help="No terminal summary or progress."),
    ]
    for option in reversed(options):
        f = option(f)
    return hardware_options()(f)


def analysis_options(kwargs: dict[str, Any]) -> Options:
    """How the analysis judges ops, from --min-efficiency, --min-share and --allow-smaller."""
    from .orchestration.analysis import Options

    return Options.from_flags(kwargs)


def check_outputs(json_path: str | None, markdown_path: str | None, csv_path: str | None = None,
                  html_path: str | None = None, inputs: Sequence[str | Path] = (), trace_path: str | None = None,
                  **_: Any) -> None:
    """Fail before the expensive part when two outputs both claim stdout, an output is an input, or a
    trace file is misnamed.

    **Raises:** `UsageError` naming the option whose file is one of `inputs` (a profile, report,
    HLO dump or workload the command reads): writing there would destroy it.
    """
    if json_path == "-" and markdown_path == "-":
        raise UsageError("--json - and --markdown - cannot both write to stdout")
    if trace_path is not None:
        from .reports.trace_events import TRACE_SUFFIXES

        if not trace_path.endswith(TRACE_SUFFIXES):
            raise UsageError(f"--trace writes FILE.json or FILE.json.gz (gzip-compressed), got {trace_path!r}")
    named = {"--json": json_path, "--csv": csv_path, "--html": html_path, "--markdown": markdown_path,
             "--trace": trace_path}
    for option, out in named.items():
        if out and not is_stream(out):
            clash = _input_at(Path(out), inputs)
            if clash is not None:
                raise UsageError(f"{option} {out} would overwrite the input {clash}; name another output file")


# A profile directory's own files: an output written inside an input directory under one of these
# names would replace part of the input.
_INPUT_SUFFIXES = (".xplane.pb", ".hlo.pb")


def _input_at(out: Path, inputs: Sequence[str | Path]) -> str | None:
    """The input that `out` would overwrite, if any (the same file, or a profile file inside an input directory)."""
    if not out.exists():
        return None
    for given in inputs:
        if "://" in str(given):
            continue
        path = Path(given)
        try:
            if path.is_dir():
                inside = out.resolve().is_relative_to(path.resolve())
                if inside and out.name.endswith(_INPUT_SUFFIXES):
                    return str(given)
            elif path.exists() and os.path.samefile(out, path):
                return str(given)
        except OSError:
            continue
    return None


def write_outputs(doc: Renderer, *, json_path: str | None = None, csv_path: str | None = None,
                  html_path: str | None = None, markdown_path: str | None = None, trace_path: str | None = None,
                  top: int = DEFAULTS.top, quiet: bool = False, **_: Any) -> None:
    """Write every requested format of `doc` atomically ("-": stdout), then the terminal summary.

    The one output path of `run`, `inspect` and `diff`. The summary goes to stderr when
    stdout carries JSON or markdown; messages always go to stderr.
    """
    from .reports.render import Format
    from .reports.sections import RenderOptions

    opts = RenderOptions(top=top, html_path=html_path)
    # The trace first: a report it cannot be made from fails before any file is written.
    trace = doc.render(Format.TRACE, opts) if trace_path and Format.TRACE in doc.formats else None
    paths = {Format.HTML: html_path, Format.MARKDOWN: markdown_path, Format.CSV: csv_path, Format.JSON: json_path}
    for fmt, path in paths.items():
        if path and fmt in doc.formats:
            write_text(path, doc.render(fmt, opts))
    if trace is not None and trace_path:
        from .reports.trace_events import trace_file_bytes

        write_bytes(trace_path, trace_file_bytes(trace, trace_path))
    paths[Format.TRACE] = trace_path
    if quiet:
        return
    click.echo(doc.render(Format.TERMINAL, opts), nl=False, err=json_path == "-" or markdown_path == "-")
    for fmt, path in paths.items():
        if path and path != "-" and fmt in doc.formats:
            click.echo(f"Wrote {_LABEL[fmt.value]} report to {path}", err=True)
            for note in doc.notes(fmt):
                click.echo(f"warning: {note}", err=True)


_LABEL = {"html": "HTML", "markdown": "markdown", "csv": "CSV", "json": "JSON", "trace": "trace-viewer"}


def emit(report: ReportModel, *, fail_on: int | None = None, **outputs: Any) -> int:
    """Write a report's outputs, then check the `--fail-on N` gate (GateError: more ops flagged)."""
    from .reports.render import ReportRenderer

    write_outputs(ReportRenderer(report), **outputs)
    check_flagged(report, fail_on)
    return ExitCode.OK


def check_flagged(report: ReportModel, fail_on: int | None) -> None:
    """**Raises:** `GateError` when more ops are flagged than `--fail-on N` allows."""
    flagged = report.summary.flagged_ops
    if fail_on is not None and flagged > fail_on:
        raise GateError(f"{flagged} flagged ops exceed --fail-on {fail_on}")


def write_result(result: dict[str, Any], json_path: str | None, text: Callable[[dict[str, Any]], list[str]]) -> None:
    """`calc` and `plan`: the result as JSON to `json_path` ("-": stdout), else as text on stdout."""
    import json

    if json_path:
        write_text(json_path, json.dumps(result, indent=2, sort_keys=True) + "\n")
        if json_path != "-":
            click.echo(f"Wrote {json_path}", err=True)
        return
    click.echo("\n".join(text(result)))
