"""The `cpu` hardware entry, measured on this machine with JAX once and cached as JSON.

A CPU has no datasheet the tool could trust (core counts, clocks, vector units and
memory channels vary too much), so its ceilings are what this process can achieve:
a jitted f32 matmul for FLOP/s, a jitted elementwise add over a large array for
DRAM bytes/s, the same kind of op looped over arrays that fit each cache level
(sizes from the OS, /sys/devices/system/cpu/cpu0/cache) for that level's bytes/s,
and a chain of tiny dots for the fixed cost of one op (the kernels: `cpu_probes`).
Every figure is the best of several repetitions: a roof is the fastest the machine
goes, and other processes only ever slow a repetition down. Simulated JAX
devices (`--xla_force_host_platform_device_count`) share the same cores, so these
are per-process numbers: each device gets at most this much, usually less.

An analysis that will need the figures and finds none cached starts the probes ahead
(`start_ahead`): their compile runs beside its reading, their timing when it asks.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from ...errors import AuditError
from ...parsers import user_cache
from .cpu_probes import cpu_model, usable_cores
from .hardware import Achievable, Hardware, Interconnect, MemoryLevel, Quantity

CACHE_SCHEMA = "audit.cpu-calibration/v1"
CACHE_FILE = "cpu-calibration.json"
_METHODS_VERSION = 3
_PROBES = "audit.costmodel.chips.cpu_probes"
_TIMEOUT_S = 120
_waiting: subprocess.Popen[str] | None = None  # a measurement started ahead (start_ahead), not yet timed


def cache_dir() -> Path:
    """$AUDIT_CACHE_DIR, else the `calibration` folder of the user cache (parsers.user_cache)."""
    env = os.environ.get("AUDIT_CACHE_DIR")
    return Path(env) if env else user_cache.cache_dir("calibration")


def machine_key() -> str:
    """What the measurement depends on: CPU model, usable cores, JAX version, and the methods (figures
    an earlier method measured, such as copies into fresh pages, are measured again)."""
    return f"{cpu_model()}|cores={usable_cores()}|jax={_jax_version()}|methods={_METHODS_VERSION}"


def _jax_version() -> str:
    """The installed JAX version, read without importing JAX (which takes a second)."""
    try:
        return metadata.version("jax")
    except metadata.PackageNotFoundError:
        return "none"


def cpu_hardware(refresh: bool = False) -> Hardware:
    """This machine's CPU as a Hardware value, measured once and then read from the cache.

    **Arguments:**
    - `refresh`: measure again even when the cache holds this machine's numbers.

    **Returns:** a Hardware with `source="calibrated"`; each Quantity's note states the method.
    """
    key = machine_key()
    record = None if refresh else cached_record(key)
    if record is None:
        record = measure()
        _store(key, record)
    return hardware_from_record(record)


def calibrate_install() -> Path:
    """Measure this machine now and keep the record with the install, where every user and a
    fresh home directory find it; the path written."""
    directory = user_cache.install_dir("calibration")
    _store(machine_key(), measure(), directory)
    return directory / CACHE_FILE


def cached_cpu_hardware() -> Hardware | None:
    """The cached calibration for this machine, or None without measuring."""
    record = cached_record(machine_key())
    return None if record is None else hardware_from_record(record)


def cached_record(key: str) -> dict[str, Any] | None:
    """This machine's newest record: the user's cache, or (unless $AUDIT_CACHE_DIR names the one
    place to look) the calibration its install made ahead (`python -m audit.prepare`); the user's
    on a tie. A reinstall measures again, so an old measurement (of a busier hour, an older JAX)
    left in the user's cache does not hide it."""
    places = [cache_dir()] + ([] if os.environ.get("AUDIT_CACHE_DIR") else [user_cache.install_dir("calibration")])
    found: list[dict[str, Any]] = []
    for directory in places:
        entry = _read_cache(directory).get("entries", {}).get(key)
        if isinstance(entry, dict) and _valid(entry):
            found.append(entry)
    # ISO 8601 UTC stamps of one format order as text; max() keeps the first (the user's) on a tie.
    return max(found, key=lambda e: str(e["measured_at"]), default=None)


def start_ahead() -> bool:
    """Start measuring this machine now, when nothing is cached for it: the probe process compiles
    its kernels (seconds of XLA compile, beside the caller's own reading of a profile) and times
    them only when `measure` asks, so the timing does not share the cores with the caller's work.
    Whether one was started; one never asked for is stopped when this process exits."""
    global _waiting
    if _waiting is not None or cached_record(machine_key()) is not None:
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
    ahead with `start_ahead`), in a process of its own (`cpu_probes`)."""
    global _waiting
    proc, _waiting = (_waiting, None) if _waiting is not None else (_probe_process(wait=False), None)
    try:
        out, _ = proc.communicate("go\n", timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AuditError(f"CPU calibration took over {_TIMEOUT_S} s",
                         hint="the machine is overloaded; retry, or name catalog hardware with --hardware") from None
    lines = out.strip().splitlines()
    try:
        record = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    except ValueError:
        record = None
    if not isinstance(record, dict) or not _valid(record):
        raise AuditError(f"CPU calibration failed: {_last_error_line(proc)}",
                         hint="name catalog hardware with --hardware to skip calibration")
    return record


def _last_error_line(proc: subprocess.Popen[str]) -> str:
    errors = proc.stderr
    if errors is None:
        return "no output"
    errors.seek(0)
    return (errors.read().strip().splitlines() or ["no output"])[-1]


def hardware_from_record(record: dict[str, Any]) -> Hardware:
    """Build the Hardware value from a measurement record (fresh or cached)."""
    methods = record["methods"]
    when = f"measured {record['measured_at']} on {record['cpu_model']}, {record['cores']} cores"
    shared = "per process: simulated JAX devices share these cores"
    mem = record.get("memory_bytes")
    llc = record.get("last_level_cache_bytes")
    bandwidth = _cal(record["copy_bytes_per_s"], "B/s", f"{methods['copy']}; {when}; {shared}")
    peaks = _peaks(record, when, shared)
    overhead = _cal(record["op_overhead_s"], "s", f"{methods['op_overhead']}; {when}")
    caches = tuple(MemoryLevel(level["name"], _cal(level["capacity_bytes"], "B", level["capacity_source"]),
                               _cal(level["bytes_per_s"], "B/s", f"{level['method']}; {when}; {shared}"))
                   for level in record["cache_levels"])
    # The calibration runs XLA's own kernels on this machine: what they reach is what good kernels
    # reach here, so the achievable figures are the measured ones.
    achievable = Achievable(matmul_flops_per_s=dict(peaks), memory_bytes_per_s=bandwidth,
                            cache_bytes_per_s={c.name: c.bytes_per_s for c in caches}, launch_s=overhead)
    return Hardware(
        name="cpu", kind="cpu", vendor=_vendor(record["cpu_model"]),
        peak_flops=peaks,
        hbm_bytes_per_s=bandwidth,
        hbm_bytes=None if not mem else _cal(mem, "B", "physical memory (sysconf)"),
        onchip_bytes=None if not llc else _cal(llc, "B", "last-level cache size (sysfs)"),
        interconnect=Interconnect(kind="host-memory", link_bytes_per_s=bandwidth, links_per_axis=1,
                                  domain_size=_cpu_device_count()),
        op_overhead_s=overhead, caches=caches, achievable=achievable,
        source="calibrated",
        notes=(f"calibrated: {when}, JAX {record['jax_version']}",
               "collectives between simulated devices are memory copies at the measured bandwidth",
               "bf16 dots are judged against the faster of the bf16 and f32 rates (CPUs with bf16 "
               "dot instructions run them faster, others convert to f32)"),
        aliases=("host",),
    )


def _peaks(record: dict[str, Any], when: str, shared: str) -> dict[str, Quantity]:
    methods = record["methods"]
    f32 = _cal(record["matmul_flops_per_s"], "FLOP/s", f"{methods['matmul']}; {when}; {shared}")
    bf16 = _cal(record["matmul_bf16_flops_per_s"], "FLOP/s", f"{methods['matmul_bf16']}; {when}; {shared}")
    return {"f32": f32, "bf16": bf16 if bf16.value > f32.value else f32}


def _cal(value: float, unit: str, note: str) -> Quantity:
    """A figure measured on (or read from) this machine."""
    return Quantity(float(value), unit, "calibrated", note, "measured")


def _valid(entry: dict[str, Any]) -> bool:
    try:
        numbers = (entry["matmul_flops_per_s"], entry["matmul_bf16_flops_per_s"], entry["copy_bytes_per_s"])
        overhead = float(entry["op_overhead_s"])
        described = all(k in entry for k in ("cpu_model", "cores", "jax_version", "measured_at"))
        methods = entry["methods"]
        caches = entry["cache_levels"]
        levels_ok = isinstance(caches, list) and all(
            isinstance(c, dict) and {"name", "capacity_source", "method"} <= set(c)
            and float(c["capacity_bytes"]) > 0 and float(c["bytes_per_s"]) > 0
            and math.isfinite(float(c["bytes_per_s"])) for c in caches)
        return (described and levels_ok
                and all(k in methods for k in ("matmul", "matmul_bf16", "copy", "op_overhead"))
                and all(float(v) > 0 and math.isfinite(float(v)) for v in numbers)
                and 0 <= overhead < 1e-3)
    except (KeyError, TypeError, ValueError):
        return False


def _read_cache(directory: Path | None = None) -> dict[str, Any]:
    try:
        data = json.loads(((directory or cache_dir()) / CACHE_FILE).read_text())
    except (OSError, ValueError):
        return {}  # missing or corrupt: measure again and rewrite it
    return data if isinstance(data, dict) and data.get("schema") == CACHE_SCHEMA else {}


def _store(key: str, record: dict[str, Any], directory: Path | None = None) -> None:
    """Write the cache (in `directory`, default the user's) atomically; a read-only home only costs
    a re-measurement next time."""
    directory = directory or cache_dir()
    data = _read_cache(directory) or {"schema": CACHE_SCHEMA, "entries": {}}
    data.setdefault("entries", {})[key] = record
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{CACHE_FILE}.", dir=directory)
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, directory / CACHE_FILE)
    except OSError:
        pass


def _cpu_device_count() -> int:
    """Simulated CPU devices this process is configured for (XLA_FLAGS or jax_num_cpu_devices)."""
    found = re.search(r"--xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", ""))
    if found:
        return max(1, int(found.group(1)))
    jax = sys.modules.get("jax")
    configured = getattr(getattr(jax, "config", None), "jax_num_cpu_devices", -1) if jax else -1
    return configured if isinstance(configured, int) and configured > 0 else 1


def _vendor(model: str) -> str:
    lowered = model.lower()
    for vendor in ("AMD", "Intel", "Apple", "Ampere", "ARM"):
        if vendor.lower() in lowered:
            return vendor
    return "unknown"


