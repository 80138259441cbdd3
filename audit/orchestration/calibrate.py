"""This machine's CPU measured for the `cpu` hardware entry, and the record kept.

The measurement runs in a child process (`audit.child.calibrate`); the record goes to the user's
cache, or with `calibrate_install` to the install's own folder, where the catalog reads it
(`audit.costmodel.chips.calibration`). Commands that price on this machine's CPU pass
`cpu_hardware` to the catalog and to detection, so the CPU is measured on first use when no
record exists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..costmodel.chips import calibration
from ..costmodel.chips.hardware import Hardware
from ..errors import AuditError
from ..parsers import user_cache

_TIMEOUT_S = 120


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


def measure() -> dict[str, Any]:
    """Measure in a fresh CPU-only Python process (`audit.child.calibrate`), so no accelerator backend
    starts and this process's JAX state is left alone; a few seconds in all."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    try:
        done = subprocess.run([sys.executable, "-m", "audit.child.calibrate"], env=env, capture_output=True,
                              text=True, timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise AuditError(f"CPU calibration took over {_TIMEOUT_S} s",
                         hint="the machine is overloaded; retry, or name catalog hardware with --hardware") from None
    lines = done.stdout.strip().splitlines()
    try:
        record = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        record = None
    if not isinstance(record, dict) or not calibration.valid_record(record):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise AuditError(f"CPU calibration failed: {last}",
                         hint="name catalog hardware with --hardware to skip calibration")
    return record


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
