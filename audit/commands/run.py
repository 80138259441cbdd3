"""`audit run [WORKLOAD.py] [-- ARGS...]`: profile a JAX workload end to end and audit it."""

from __future__ import annotations

from typing import Any

import tempfile
from pathlib import Path

import click

from ..child.capture import script_kind
from ..hardware_options import set_arguments
from ..outputs import analysis_options, check_flagged, check_outputs, emit, output_options, write_outputs
from ..child.capture import Progress
from ..base.errors import ExitCode, InputError, UsageError
from ..orchestration.runner import RunRequest, analyse_capture, capture, check_outcome, reproduce_command
from ..reports.model.report import ReportModel
from ..reports.render import ReportRenderer

DEFAULT_DEVICES = 8  # the bundled training step shards over 8 simulated devices


def bundled_workload() -> Path:
    """The default workload: the bundled transformer training step."""
    from importlib.resources import files

    # A file the child process runs, found where the package is installed; the CLI imports no workload.
    return Path(str(files("audit.workloads") / "transformer.py")).resolve()


@click.command("run", context_settings={"ignore_unknown_options": True})
@click.argument("workload", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--steps", default=5, show_default=True, type=click.IntRange(min=1), help="Steps to profile.")
@click.option("--warmup", default=2, show_default=True, type=click.IntRange(min=0),
              help="Steps run before profiling (compilation, caches); not in the report.")
@click.option("--devices", type=click.IntRange(min=1),
              help=f"Simulated CPU devices [default: {DEFAULT_DEVICES} for the bundled workload, else 1].")
@click.option("--platform", metavar="NAME",
              help="JAX platform to run on, e.g. tpu or cuda (default: cpu, even where a TPU or GPU plugin is "
                   "installed, so an unusable one cannot hang the run).")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False),
              help="Keep the raw profile here, in TensorBoard layout (DIR/plugins/profile/<run>/).")
@click.option("--target", metavar="tpu-CHIP:TOPOLOGY",
              help="Compile for this TPU slice ahead of time (e.g. tpu-v5e:4x4) and predict each op there; "
                   "nothing runs. Needs roofline-audit[tpu].")
@click.option("--compare-cpu", is_flag=True,
              help="With --target: also run the workload here on CPU and put the measured time of each "
                   "framework op next to its prediction on the target.")
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(min=1), metavar="N",
              help="Run the workload N times, each in a fresh process: one JSON report per run (FILE.runI.json "
                   "beside --json FILE) plus the combined one, whose runs `audit diff` compares run by run.")
@output_options
def command(workload: str | None, args: tuple[str, ...], steps: int, warmup: int, devices: int | None,
            platform: str | None, out: Path | None, target: str | None, compare_cpu: bool, repeat: int,
            **kwargs: Any) -> int:
    """Profile WORKLOAD.py (default: the bundled transformer training step on 8 simulated devices).

    A file with an @audit.workload function is run step by step: compiled, warmed up, then
    --steps steps are profiled, each marked and finished before the next. Any other script
    is profiled as a whole. Arguments after -- go to the workload.
    """
    if workload is not None and workload.startswith("-"):  # `audit run -- ARGS`: arguments for the default
        args, workload = (workload, *args), None
    _check_unmarked_options(args)
    check_outputs(**kwargs, inputs=[workload] if workload else [])
    script = Path(workload) if workload else bundled_workload()
    script_kind(script)  # a missing file or a syntax error fails here, before JAX starts
    if compare_cpu and not target:
        raise UsageError("--compare-cpu goes with --target")
    if repeat > 1 and (target or not kwargs.get("json_path") or kwargs["json_path"] == "-"):
        raise UsageError("--repeat N needs --json FILE (each run's report is written beside it) and no --target")
    if target and not compare_cpu:
        return _predict(script, list(args), target, out, kwargs)
    if out is not None and out.exists() and not out.is_dir():
        raise InputError("--out must be a directory", path=out)
    req = RunRequest(script=script, args=list(args), steps=steps, warmup=warmup, platform=platform,
                     devices=devices if devices or workload else DEFAULT_DEVICES, quiet=kwargs["quiet"])
    if kwargs.get("hardware") and req.devices:  # a topology too small for the run fails before it starts
        from ..hardware_options import resolve_hardware
        from ..orchestration.caveats import check_partitions

        check_partitions(resolve_hardware(kwargs["hardware"], kwargs.get("overrides") or ()), kwargs["hardware"],
                         req.devices, kwargs.get("allow_smaller", False))
    if target:
        from ..child.aot import check_target

        check_target(target)
    if repeat > 1:
        return _repeat(req, repeat, workload is None, out, kwargs)
    if out is not None:
        req.out = out
        return _run(req, workload is None, True, kwargs, target)
    with tempfile.TemporaryDirectory(prefix="audit-run-") as tmp:
        req.out = Path(tmp)
        return _run(req, workload is None, False, kwargs, target)


def _check_unmarked_options(args: tuple[str, ...]) -> None:
    """An option before `--` that `run` does not know is a typo, not the workload's (`--step 3`)."""
    from ..invocation import options_end_marked

    unknown = next((a for a in args if a.startswith("-") and a != "-"), None)
    if unknown is None or options_end_marked():
        return
    import difflib

    name = unknown.split("=", 1)[0]
    known = [o for p in command.params for o in p.opts if o.startswith("--")]
    close = difflib.get_close_matches(name, known, n=1)
    guess = f"did you mean {close[0]}? " if close else ""
    rest = " ".join(args[args.index(unknown):])
    raise UsageError(f"audit run has no option {name} ({guess}arguments for the workload go after --, "
                     f"e.g. audit run WORKLOAD.py -- {rest})")


def run_report_path(json_path: str, index: int) -> Path:
    """Where run `index` (1-based) of a --repeat writes its report: FILE.runI.json beside FILE.json."""
    path = Path(json_path)
    stem = path.name[:-len(".json")] if path.name.endswith(".json") else path.name
    return path.with_name(f"{stem}.run{index}.json")


def _repeat(req: RunRequest, repeat: int, default_workload: bool, out: Path | None, kwargs: dict[str, Any]) -> int:
    """Run the workload `repeat` times in fresh processes; write each run's report, then the combined one."""
    import statistics

    from ..atomic import write_text
    from ..reports.json_report import render_json

    quiet_kwargs = {**kwargs, "json_path": None, "csv_path": None, "html_path": None, "markdown_path": None,
                    "quiet": True, "fail_on": None}
    reports: list[tuple[Path, ReportModel]] = []
    code: int = ExitCode.OK
    with tempfile.TemporaryDirectory(prefix="audit-run-") as tmp:
        for i in range(1, repeat + 1):
            run_req = RunRequest(**{**vars(req), "out": (out or Path(tmp)) / f"run{i}"})
            if not kwargs["quiet"]:
                click.echo(f"audit: run {i} of {repeat}", err=True)
            report, run_code, _ = _capture_report(run_req, default_workload, out is not None, quiet_kwargs)
            if report is None:
                return run_code
            code = code or run_code
            path = run_report_path(kwargs["json_path"], i)
            write_text(path, render_json(report.attach("run_source", str(path)).to_json()))
            reports.append((path, report))
    medians = [statistics.median(s["time_s"] for s in r.steps) if r.steps else float("inf") for _, r in reports]
    middle = sorted(range(repeat), key=lambda i: medians[i])[(repeat - 1) // 2]
    combined = reports[middle][1].attach(
        "runs", [{"source": str(p), "steps": [s["time_s"] for s in r.steps]} for p, r in reports]).attach(
        "repeat", {"runs": repeat, "representative_run": middle + 1,
                   "note": "ops, steps and timeline are those of the representative run (the median "
                           "median step); `runs` lists every run's step times [trace]"})
    write_outputs(ReportRenderer(combined), **kwargs)
    if code != ExitCode.OK:
        return code
    check_flagged(combined, kwargs.get("fail_on"))
    return ExitCode.OK


def _run(req: RunRequest, default_workload: bool, keep_out: bool, kwargs: dict[str, Any],
         target: str | None = None) -> int:
    """Capture, analyse and write one run; its exit code."""
    report, code, run_dir = _capture_report(req, default_workload, keep_out, kwargs, target)
    if report is None:
        return code
    write_outputs(ReportRenderer(report), **kwargs)
    if keep_out and not kwargs["quiet"]:
        click.echo(f"Profile kept in {run_dir} (open with TensorBoard/XProf: --logdir {req.out})", err=True)
    if code != ExitCode.OK:
        return code  # the workload's own failure is the story, not a gate
    check_flagged(report, kwargs.get("fail_on"))
    return ExitCode.OK


def _capture_report(req: RunRequest, default_workload: bool, keep_out: bool, kwargs: dict[str, Any],
                    target: str | None = None) -> tuple[ReportModel | None, int, Path | None]:
    """Capture and analyse one run: its report (None when there is nothing to report), the
    workload's exit code, and the profile's run dir."""
    cap = capture(req)
    if cap.returncode == ExitCode.INPUT:
        return None, ExitCode.INPUT, None  # the child printed what is wrong
    check_outcome(cap)
    if not cap.captured:
        return None, cap.returncode, None
    extra = ["--hardware", kwargs["hardware"]] if kwargs.get("hardware") else []
    extra += set_arguments(kwargs.get("overrides") or ())
    command_line = reproduce_command(req, default_workload=default_workload, keep_out=keep_out, extra=extra)
    try:
        report = analyse_capture(cap, req, hardware=kwargs.get("hardware"), command=command_line,
                                 keep_out=keep_out, options=analysis_options(kwargs))
    except InputError as exc:
        if cap.returncode == ExitCode.OK:
            if not keep_out and req.out is not None and str(req.out) in str(exc):
                # The profile is in a folder the user never named (and that is gone): speak of the workload.
                raise InputError("ran no XLA program under the profiler, so there is nothing to audit",
                                 path=req.script, hint="audit run profiles a script that runs JAX") from None
            raise
        # The workload stopped before any XLA op ran: its own error (shown above) is the story.
        click.echo("audit: the workload stopped before running any XLA op; nothing to analyse", err=True)
        return None, cap.returncode, None
    if target:
        report = _with_target(report, req, target, kwargs)
    return report, cap.returncode, cap.run_dir


def _predict(script: Path, args: list[str], target: str, out: Path | None, kwargs: dict[str, Any]) -> int:
    """Ahead-of-time: compile for the target topology and write a predicted report."""
    from ..child.aot import check_target
    from ..invocation import command_line
    from ..orchestration.predict import predict_target

    check_target(target)
    if script_kind(script) != "workload":
        raise InputError("--target needs a structured workload (an @audit.workload function) to compile",
                         path=script)
    with Progress(kwargs["quiet"]).phase(f"compiling for {target} ahead of time"):
        report = predict_target(script, args, target, keep=out, options=analysis_options(kwargs),
                                command=command_line())
    return emit(report, **kwargs)


def _with_target(cpu_report: ReportModel, req: RunRequest, target: str, kwargs: dict[str, Any]) -> ReportModel:
    """The target's predicted report, with this CPU run's measurement beside it per framework op."""
    from ..analyses.compare_target import compare
    from ..invocation import command_line
    from ..orchestration.predict import predict_target

    with Progress(kwargs["quiet"]).phase(f"compiling for {target} ahead of time"):
        report = predict_target(req.script, req.args, target, options=analysis_options(kwargs),
                                command=command_line())
    return report.attach("cpu_comparison", compare(cpu_report, report))
