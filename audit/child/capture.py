"""The child process of `audit run`: runs a workload under `jax.profiler` and writes the capture.

    python -P -m audit.child.capture SCRIPT --out DIR [--steps N] [--warmup N] [--devices N]
                               [--platform NAME] [--quiet] [-- ARGS...]

The environment (simulated device count, CPU backend) is set before JAX is
imported, and the script is parsed with `ast` first, so a missing file or a
syntax error fails in milliseconds. The profile lands in TensorBoard layout,
DIR/plugins/profile/<run>/<host>.xplane.pb, with `audit_run.json` beside it.

Exit codes: 0 captured; 2 bad input; 3 the workload raised (its traceback is
printed, the profile captured so far is kept); 130 interrupted (what was
captured is kept).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Iterator, Sequence, TextIO

from ..costmodel.units import seconds
from ..base.errors import AuditError, ExitCode, InputError
from .environment import added_gpu_flags, configure_environment

__all__ = ["SIDECAR_NAME", "Progress", "configure_environment", "script_kind"]

SIDECAR_NAME = "audit_run.json"
_AUDIT_DIR = str(Path(__file__).resolve().parents[1]) + os.sep  # the whole `audit` package


def script_kind(path: str | Path) -> str:
    """"workload" if the file defines an `@workload` function, else "script"; parsed, never run."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("workload file not found", path=path, hint="give the path of a .py file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read workload file: {exc}", path=path) from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise InputError(f"syntax error at line {exc.lineno}: {exc.msg}", path=path,
                         hint="the workload must be valid Python") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_names_workload(d) for d in node.decorator_list):
                return "workload"
    return "script"


def _names_workload(decorator: ast.expr) -> bool:
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    if isinstance(decorator, ast.Attribute):
        return decorator.attr == "workload"
    return isinstance(decorator, ast.Name) and decorator.id == "workload"


class Progress:
    """Progress lines on stderr for phases that last more than `delay` seconds; silent when quiet."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None, delay: float = 1.0):
        self.quiet, self.stream, self.delay = quiet, stream, delay
        self._announced = False

    def say(self, text: str) -> None:
        if not self.quiet:
            stream = self.stream or sys.stderr
            stream.write(f"audit: {text}\n")
            stream.flush()

    @contextlib.contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """Announce `label` once it has run `delay` seconds; then say how long it took."""
        self._announced = False
        start = time.perf_counter()

        def announce() -> None:
            self._announced = True
            self.say(f"{label} ...")

        timer = threading.Timer(self.delay, announce)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            if self._announced:
                self.say(f"{label}: done in {seconds(time.perf_counter() - start)}")

    def tick(self, text: str) -> None:
        """A line within a phase, shown only once the phase has been announced."""
        if self._announced:
            self.say(text)


def workload_traceback(exc: BaseException) -> str:
    """The exception's traceback without the frames of `audit` itself or of `runpy`."""
    te = traceback.TracebackException.from_exception(exc)
    seen: set[int] = set()
    pending = [te]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        kept = [f for f in current.stack if not f.filename.startswith(_AUDIT_DIR)
                and not f.filename.endswith(f"{os.sep}runpy.py") and f.filename != "<frozen runpy>"]
        current.stack = traceback.StackSummary.from_list(kept)
        pending += [c for c in (current.__cause__, current.__context__) if c is not None]
    return "".join(te.format())


def _run_dirs(out: Path) -> set[Path]:
    root = out / "plugins" / "profile"
    return {p for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()


@contextlib.contextmanager
def profiled(out: Path, record: dict[str, Any]) -> Iterator[None]:
    """`jax.profiler.trace` into `out`; records the new run directory and its files in `record`."""
    import jax

    before = _run_dirs(out)
    try:
        with jax.profiler.trace(str(out)):
            yield
    finally:
        new = sorted(_run_dirs(out) - before, key=lambda p: p.stat().st_mtime)
        if new:
            record["run_dir"] = str(new[-1])
            record["xplanes"] = sorted(str(p) for p in new[-1].glob("*.xplane.pb"))


def capture_workload(args: argparse.Namespace, record: dict[str, Any], progress: Progress) -> None:
    """Build, compile, warm up, then profile `args.steps` annotated steps of a structured workload."""
    from ..workload_api import load_workload

    record["phase"] = "build"
    with progress.phase(f"building {args.script.name}"):
        wl, ctx = load_workload(args.script, args.args)
    record.update(workload=wl.name, config=_jsonable(wl.config), mesh=wl.describe_mesh())
    record["phase"] = "compile"
    with progress.phase(f"compiling {wl.name}"):
        record["compile_s"] = wl.compile()
    record["phase"] = "warmup"
    with progress.phase(f"warming up ({args.warmup} steps)"):
        record["warmup_times_s"] = wl.run(args.warmup, first_step=-args.warmup,
                                          on_step=lambda i, t: _stop_if_interrupted())
    record["phase"] = "steps"
    times: list[float] = record.setdefault("step_times_s", [])

    def on_step(i: int, t: float) -> None:
        times.append(t)
        progress.tick(f"step {i + 1}/{args.steps}: {seconds(t)}")
        _stop_if_interrupted()

    with progress.phase(f"profiling {args.steps} steps"), profiled(args.out, record):
        wl.run(args.steps, annotate=True, on_step=on_step)


def capture_script(args: argparse.Namespace, record: dict[str, Any], progress: Progress) -> None:
    """Profile a plain script as a whole, run as `__main__` with its own argv."""
    import runpy

    record.update(workload=args.script.stem, phase="script")
    sys.argv = [str(args.script), *args.args]
    sys.path.insert(0, str(args.script.resolve().parent))
    start = time.perf_counter()
    try:
        with progress.phase(f"profiling {args.script.name}"), profiled(args.out, record):
            runpy.run_path(str(args.script), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise RuntimeError(f"{args.script.name} exited with status {exc.code}") from None
    finally:
        record["wall_s"] = time.perf_counter() - start


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def write_sidecar(out: Path, record: dict[str, Any]) -> Path:
    """Write the run's facts as JSON next to the profile (in `out` if no profile was written)."""
    target = Path(record["run_dir"]) if record.get("run_dir") else out
    target.mkdir(parents=True, exist_ok=True)
    path = target / SIDECAR_NAME
    path.write_text(json.dumps(_jsonable(record), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _device_facts(record: dict[str, Any]) -> None:
    if "jax" not in sys.modules:
        return
    import jax

    with contextlib.suppress(Exception):
        devices = jax.devices()
        record.update(jax_version=jax.__version__, platform=devices[0].platform,
                      devices=[str(d) for d in devices], device_count=len(devices))


_interrupted = False


def _interrupt_once(signum: int, frame: Any) -> None:
    # A second Ctrl-C must not cut short the profiler writing what was captured.
    global _interrupted
    _interrupted = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _stop_if_interrupted() -> None:
    """Raise the interrupt again after a step: raised inside library code (a destructor, a
    callback JAX runs for us), the first one can be swallowed, and the run would go on."""
    if _interrupted:
        raise KeyboardInterrupt


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="python -m audit.child.capture", description=__doc__.split("\n\n")[0])
    parser.add_argument("script", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--devices", type=int, default=None)
    parser.add_argument("--platform", default=None)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv[:split])
    args.args = argv[split + 1:]
    args.out = args.out.resolve()
    return args


def capture(args: argparse.Namespace) -> int:
    """Run the capture described by `args` in this process; return the exit code."""
    progress = Progress(args.quiet)
    kind = script_kind(args.script)
    added = added_gpu_flags(dict(os.environ), args.platform)
    os.environ.update(configure_environment(dict(os.environ), args.devices, args.platform))
    record: dict[str, Any] = {"schema": "audit.run/v1", "kind": kind, "script": str(args.script),
                              "argv": list(args.args), "steps_requested": args.steps,
                              "warmup_requested": args.warmup, "status": "ok"}
    if added:
        record["xla_flags_added"] = added
    code = ExitCode.OK
    try:
        (capture_workload if kind == "workload" else capture_script)(args, record, progress)
    except AuditError:
        raise
    except SystemExit as exc:  # e.g. the workload's argparse: --help, or a bad argument
        if exc.code not in (None, 0):
            raise
        record["status"] = "exited"
    except KeyboardInterrupt:
        record["status"], code = "interrupted", ExitCode.INTERRUPTED
        progress.say("interrupted; keeping what was captured")
    except Exception as exc:  # the workload's own failure: show its traceback, keep the capture
        record.update(status="raised", error=f"{type(exc).__name__}: {exc}")
        sys.stderr.write(workload_traceback(exc))
        code = ExitCode.WORKLOAD
    _device_facts(record)
    write_sidecar(args.out, record)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGINT, _interrupt_once)
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.steps < 1 or args.warmup < 0:
        sys.stderr.write("audit: error: --steps must be at least 1 and --warmup at least 0\n")
        return ExitCode.INPUT
    try:
        return capture(args)
    except AuditError as exc:
        sys.stderr.write(f"audit: error: {exc}\n")
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
