"""The `cpu` hardware entry, read from its calibration record: this machine measured once with JAX
(at install by `python -m audit.prepare`, else on first use or by `audit hardware show cpu
--recalibrate`) and kept as JSON. Reading the record is the catalog's; measuring is not.

A CPU has no datasheet the tool could trust, so its ceilings are what a process here achieved,
and the record says how each was measured. Records are kept per machine (`machine_key`: CPU
model, usable cores, JAX version, methods) in the user's cache and in the install's own folder;
the newer of the two is read.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from ...base import user_cache
from .hardware import Achievable, Hardware, Interconnect, MemoryLevel, Quantity

CACHE_SCHEMA = "audit.cpu-calibration/v1"
CACHE_FILE = "cpu-calibration.json"
METHODS_VERSION = 3  # of the measurement: a record an older method wrote is measured again


def cache_dir() -> Path:
    """$AUDIT_CACHE_DIR, else the `calibration` folder of the user cache (audit.base.user_cache)."""
    env = os.environ.get("AUDIT_CACHE_DIR")
    return Path(env) if env else user_cache.cache_dir("calibration")


def machine_key() -> str:
    """What the measurement depends on: CPU model, usable cores, JAX version, and the methods (figures
    an earlier method measured, such as copies into fresh pages, are measured again)."""
    return f"{cpu_model()}|cores={usable_cores()}|jax={_jax_version()}|methods={METHODS_VERSION}"


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
        entry = read_cache(directory).get("entries", {}).get(key)
        if isinstance(entry, dict) and valid_record(entry):
            found.append(entry)
    # ISO 8601 UTC stamps of one format order as text; max() keeps the first (the user's) on a tie.
    return max(found, key=lambda e: str(e["measured_at"]), default=None)


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


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what Python's platform module says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip() or "unknown CPU"
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _cal(value: float, unit: str, note: str) -> Quantity:
    """A figure measured on (or read from) this machine."""
    return Quantity(float(value), unit, "calibrated", note, "measured")


def valid_record(entry: dict[str, Any]) -> bool:
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


def read_cache(directory: Path | None = None) -> dict[str, Any]:
    try:
        data = json.loads(((directory or cache_dir()) / CACHE_FILE).read_text())
    except (OSError, ValueError):
        return {}  # missing or corrupt: measure again and rewrite it
    return data if isinstance(data, dict) and data.get("schema") == CACHE_SCHEMA else {}


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _jax_version() -> str:
    """The installed JAX version, read without importing JAX (which takes a second)."""
    try:
        return metadata.version("jax")
    except metadata.PackageNotFoundError:
        return "none"


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
