"""The parent side of `audit run`: spawn the capture child, relay its output, analyse what it captured.

The workload runs in a child process (`audit.child.capture`) because the simulated
device count and the backend must be fixed before JAX starts, and so a
crashing or hanging workload cannot take the analysis down with it. The
child's stdout and stderr (the workload's own prints, its traceback,
progress lines) are relayed to our stderr, keeping stdout for `--json -`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

from ..child.capture import SIDECAR_NAME, Progress
from ..base.errors import ExitCode, WorkloadError
from ..reports.model.report import ReportModel
from .pipeline import analyse_profile
from .analysis import DEFAULT_OPTIONS, Options


@dataclass
class RunRequest:
    """What to run and how: the workload file and its arguments, step counts, devices, output dir."""

    script: Path
    args: list[str] = field(default_factory=list)
    out: Path = Path(".")
    steps: int = 5
    warmup: int = 2
    devices: int | None = None
    platform: str | None = None
    quiet: bool = False


@dataclass
class Capture:
    """What the child left behind: its exit code, the profile run directory, and the sidecar record."""

    returncode: int
    run_dir: Path | None
    record: dict[str, Any]

    @property
    def xplanes(self) -> list[Path]:
        return sorted(self.run_dir.glob("*.xplane.pb")) if self.run_dir else []

    @property
    def captured(self) -> bool:
        return bool(self.xplanes)


def child_command(req: RunRequest) -> list[str]:
    """The child's command line; `-P` keeps the current directory off sys.path (a local jax.py cannot shadow JAX)."""
    cmd = [sys.executable, "-P", "-m", "audit.child.capture", str(req.script), "--out", str(req.out),
           "--steps", str(req.steps), "--warmup", str(req.warmup)]
    if req.devices is not None:
        cmd += ["--devices", str(req.devices)]
    if req.platform:
        cmd += ["--platform", req.platform]
    if req.quiet:
        cmd.append("--quiet")
    return [*cmd, "--", *req.args]


def _relay(stream: IO[bytes], sink: IO[str]) -> None:
    for line in iter(stream.readline, b""):
        sink.write(line.decode("utf-8", errors="replace"))
        sink.flush()


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM (a CI timeout, `kill`) like Ctrl-C, so the child is never left running alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_child(req: RunRequest, sink: IO[str] | None = None) -> int:
    """Run the capture child to completion, relaying its output; Ctrl-C or SIGTERM stops it gracefully."""
    sink = sink or sys.stderr
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with _terminate_as_interrupt():
        proc = subprocess.Popen(child_command(req), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        return _supervise(proc, sink)


def _supervise(proc: subprocess.Popen[bytes], sink: IO[str]) -> int:
    assert proc.stdout is not None
    try:
        _relay(proc.stdout, sink)
    except KeyboardInterrupt:
        # The child stops its trace and writes what it captured; it ignores a repeated SIGINT.
        proc.send_signal(signal.SIGINT)
        try:
            _relay(proc.stdout, sink)
        except KeyboardInterrupt:
            proc.kill()
        proc.wait()
        return ExitCode.INTERRUPTED
    return proc.wait()


def read_capture(out: Path, returncode: int, since: float = 0.0) -> Capture:
    """Find the run the child recorded under `out` (the newest sidecar written after `since`)."""
    candidates = [out / SIDECAR_NAME, *(out / "plugins" / "profile").glob(f"*/{SIDECAR_NAME}")]
    # An older run kept in the same --out must never pass for this one.
    existing = [p for p in candidates if p.is_file() and p.stat().st_mtime >= since]
    if not existing:
        return Capture(returncode, None, {})
    newest = max(existing, key=lambda p: p.stat().st_mtime)
    try:
        record = json.loads(newest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    run_dir = Path(record["run_dir"]) if record.get("run_dir") else None
    return Capture(returncode, run_dir if run_dir and run_dir.is_dir() else None, record)


def capture(req: RunRequest, sink: IO[str] | None = None) -> Capture:
    """Profile the workload in a child process; return what it captured (possibly partial)."""
    req.out.mkdir(parents=True, exist_ok=True)
    started = time.time() - 0.05  # file times come from a coarser clock than time.time()
    code = run_child(req, sink)
    return read_capture(req.out, code, since=started)


def reproduce_command(req: RunRequest, *, default_workload: bool, keep_out: bool,
                      extra: list[str] | None = None) -> str:
    """The `audit run` command line that repeats this run."""
    words = ["audit", "run"] + ([] if default_workload else [str(req.script)])
    words += ["--steps", str(req.steps), "--warmup", str(req.warmup)]
    if req.devices is not None:
        words += ["--devices", str(req.devices)]
    if req.platform:
        words += ["--platform", req.platform]
    if keep_out:
        words += ["--out", str(req.out)]
    words += extra or []
    if req.args:
        words += ["--", *req.args]
    return shlex.join(words)


def run_source(cap: Capture, req: RunRequest, command: str, keep_out: bool) -> dict[str, Any]:
    """The report's `source` block for a run: what ran, how to repeat it, and the host-side timings."""
    rec = cap.record
    return {
        "kind": "run", "paths": [str(p) for p in cap.xplanes], "workload": rec.get("workload"),
        "command": command, "argv": list(req.args), "script": str(req.script),
        "profile_kept": keep_out, "run_dir": str(cap.run_dir) if keep_out and cap.run_dir else None,
        "jax_version": rec.get("jax_version"), "config": rec.get("config") or {}, "mesh": rec.get("mesh"),
        "compile_s": rec.get("compile_s"), "host_step_time_s": rec.get("step_times_s"),
        "warmup_steps": req.warmup, "status": rec.get("status"),
        **({"xla_flags_added": rec["xla_flags_added"]} if rec.get("xla_flags_added") else {}),
    }


def analyse_capture(cap: Capture, req: RunRequest, *, hardware: str | None, command: str, keep_out: bool,
                    options: Options = DEFAULT_OPTIONS) -> ReportModel:
    """Analyse the captured profile with the shared pipeline; the report records how to repeat the run."""

    if cap.run_dir is None:
        raise WorkloadError("the workload left no profile to analyse", hint="check its output above")
    with Progress(req.quiet).phase("analysing the profile"):
        report = analyse_profile(cap.run_dir, hardware=hardware, options=options,
                                 source=run_source(cap, req, command, keep_out))
    if cap.returncode != ExitCode.OK:
        report = report.warn(f"the workload did not finish ({cap.record.get('status', 'failed')}); "
                             "this report covers only the steps captured before it stopped")
    return report


def check_outcome(cap: Capture) -> None:
    """Raise for a run that left nothing to analyse, with the reason."""
    if cap.captured:
        return
    if cap.returncode == ExitCode.OK and cap.record.get("status") == "exited":
        return  # the workload ended itself before its first step (e.g. its --help)
    if cap.returncode == ExitCode.OK:
        raise WorkloadError("the run finished but wrote no profile", hint="is the JAX profiler available?")
    if cap.returncode in (ExitCode.INPUT, ExitCode.WORKLOAD, ExitCode.INTERRUPTED):
        return  # the child has already said why; the caller returns its code
    raise WorkloadError(f"the workload process ended with status {cap.returncode} before a profile was written",
                        hint="a negative status is the signal that killed it")
