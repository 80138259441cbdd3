"""This machine's CPU measured for the `cpu` hardware entry, and the record kept.

The measurement runs in a child process (`audit.child.calibrate`); the record goes to the user's
cache, or with `calibrate_install` to the install's own folder, where the catalog reads it
(`audit.costmodel.chips.calibration`). Commands that price on this machine's CPU pass
`cpu_hardware` to the catalog and to detection, so the CPU is measured on first use when no
record exists.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..costmodel.chips import calibration
from ..costmodel.chips.hardware import Hardware
from ..base.errors import AuditError
from ..base import user_cache

_PROBES = "audit.child.calibrate"
_TIMEOUT_S = 120
_EXIT_S = 10
_waiting: subprocess.Popen[str] | None = None  # a measurement started ahead (start_ahead), not yet timed


def cpu_hardware(refresh: bool = False) -> Hardware:
    """This machine's CPU as a Hardware value, measured once and then read from the cache.

    **Arguments:**
    - `refresh`: measure again even when the cache holds this machine's numbers.

    **Returns:** a Hardware with `source="calibrated"`; each Quantity's note states the method.
    """
    key = calibration.machine_key()
    record = None if refresh else calibration.cached_record(key)
    if record is None:
        record = measure()
        _store(key, record)
    return calibration.hardware_from_record(record)


def calibrate_install() -> Path:
    """Measure this machine now and keep the record with the install, where every user and a
    fresh home directory find it; the path written."""
    directory = user_cache.install_dir("calibration")
    _store(calibration.machine_key(), measure(), directory)
    return directory / calibration.CACHE_FILE


def start_ahead() -> bool:
    """Start measuring this machine now, when nothing is cached for it: the probe process compiles
    its kernels (seconds of XLA compile, beside the caller's own reading of a profile) and times
    them only when `measure` asks, so the timing does not share the cores with the caller's work.
    Whether one was started; one never asked for is stopped when this process exits."""
    global _waiting
    if _waiting is not None or calibration.cached_record(calibration.machine_key()) is not None:
        return False
    _waiting = _probe_process(wait=True)
    atexit.register(_stop_waiting)
    return True


def _probe_process(wait: bool) -> subprocess.Popen[str]:
    # A fresh CPU-only process: no accelerator backend starts and this process's JAX state is left alone.
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    errors = tempfile.TemporaryFile("w+")  # read on failure; a pipe nobody reads could fill and block it
    return subprocess.Popen([sys.executable, "-m", _PROBES] + (["--wait"] if wait else []), env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)


def _stop_waiting() -> None:
    global _waiting
    if _waiting is not None:
        _waiting.kill()
        _waiting.wait()
        _waiting = None


def measure() -> dict[str, Any]:
    """Measure this machine (a few seconds; under one beyond the compile for a measurement started
    ahead with `start_ahead`), in a process of its own (`audit.child.calibrate`). The record is
    taken as soon as it is printed: the process's own exit (JAX's teardown, a sixth of a second)
    is waited for only when this one exits."""
    global _waiting
    proc, _waiting = (_waiting, None) if _waiting is not None else (_probe_process(wait=False), None)
    atexit.register(_reap, proc)
    try:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.close()
    except OSError:  # the probe already exited: its error is read below
        pass
    line = _record_line(proc)
    try:
        record = json.loads(line) if line else None
    except ValueError:
        record = None
    if not isinstance(record, dict) or not calibration.valid_record(record):
        proc.wait()
        raise AuditError(f"CPU calibration failed: {_last_error_line(proc)}",
                         hint="name catalog hardware with --hardware to skip calibration")
    return record


def _reap(proc: subprocess.Popen[str]) -> None:
    """Wait for a probe that has printed its record to exit (it does at once); stop one that does not."""
    try:
        proc.wait(_EXIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _record_line(proc: subprocess.Popen[str]) -> str | None:
    """The probe's record (its JSON line), or None where it ended without one. **Raises:**
    `AuditError` (the probe stopped) when none came in `_TIMEOUT_S`."""
    found: list[str | None] = []

    def read() -> None:
        assert proc.stdout is not None
        found.append(next((line for line in proc.stdout if line.startswith("{")), None))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(_TIMEOUT_S)
    if reader.is_alive():
        proc.kill()
        proc.wait()
        raise AuditError(f"CPU calibration took over {_TIMEOUT_S} s",
                         hint="the machine is overloaded; retry, or name catalog hardware with --hardware")
    return found[0]


def _last_error_line(proc: subprocess.Popen[str]) -> str:
    errors = proc.stderr
    if errors is None:
        return "no output"
    errors.seek(0)
    return (errors.read().strip().splitlines() or ["no output"])[-1]


def _store(key: str, record: dict[str, Any], directory: Path | None = None) -> None:
    """Write the cache (in `directory`, default the user's) atomically; a read-only home only costs
    a re-measurement next time."""
    directory = directory or calibration.cache_dir()
    data = calibration.read_cache(directory) or {"schema": calibration.CACHE_SCHEMA, "entries": {}}
    data.setdefault("entries", {})[key] = record
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{calibration.CACHE_FILE}.", dir=directory)
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, directory / calibration.CACHE_FILE)
    except OSError:
        pass
