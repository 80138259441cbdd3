"""The `cpu` hardware entry, measured on this machine with JAX once and cached as JSON.

A CPU has no datasheet the tool could trust (core counts, clocks, vector units and
memory channels vary too much), so its ceilings are what this process can achieve:
a jitted f32 matmul for FLOP/s, a jitted elementwise add over a large array for
DRAM bytes/s, the same kind of op looped over arrays that fit each cache level
(sizes from the OS, /sys/devices/system/cpu/cpu0/cache) for that level's bytes/s,
and a chain of tiny dots for the fixed cost of one op. Every figure is the best of
several repetitions: a roof is the fastest the machine goes, and other processes
only ever slow a repetition down. Simulated JAX
devices (`--xla_force_host_platform_device_count`) share the same cores, so these
are per-process numbers: each device gets at most this much, usually less.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from ...errors import AuditError
from ...parsers import user_cache
from .hardware import Achievable, Hardware, Interconnect, MemoryLevel, Quantity

CACHE_SCHEMA = "audit.cpu-calibration/v1"
CACHE_FILE = "cpu-calibration.json"
_MATMUL_N = (512, 1024, 2048)
_COPY_ELEMENTS = 1 << 24  # 64 MiB of f32: far beyond any last-level cache
_CHAIN = 32  # tiny dependent dots, to expose the per-op cost
_REPEATS = 5
_METHODS_VERSION = 2
_LAUNCHES = 200  # independent launches of each tiny program; their minimum is robust to a busy machine
_CACHE_BYTES_MOVED = 2e8  # per timed loop: long enough to time, ~2 ms at cache speed
_CACHE_REPEATS = 7
_CACHE_FILL = (8, 4)  # working sets of 1/8 and 1/4 of a level (two arrays of that size in flight)
_SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
_TIMEOUT_S = 120


def cache_dir() -> Path:
    """$AUDIT_CACHE_DIR, else the `calibration` folder of the user cache (parsers.user_cache)."""
    env = os.environ.get("AUDIT_CACHE_DIR")
    return Path(env) if env else user_cache.cache_dir("calibration")


def machine_key() -> str:
    """What the measurement depends on: CPU model, usable cores, JAX version, and the methods (figures
    an earlier method measured, such as copies into fresh pages, are measured again)."""
    return f"{cpu_model()}|cores={_usable_cores()}|jax={_jax_version()}|methods={_METHODS_VERSION}"


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


def measure() -> dict[str, Any]:
    """Measure in a fresh CPU-only Python process, so no accelerator backend starts and this
    process's JAX state is left alone; a few seconds in all."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    try:
        done = subprocess.run([sys.executable, "-m", __name__], env=env, capture_output=True,
                              text=True, timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise AuditError(f"CPU calibration took over {_TIMEOUT_S} s",
                         hint="the machine is overloaded; retry, or name catalog hardware with --hardware") from None
    lines = done.stdout.strip().splitlines()
    try:
        record = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        record = None
    if not isinstance(record, dict) or not _valid(record):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise AuditError(f"CPU calibration failed: {last}",
                         hint="name catalog hardware with --hardware to skip calibration")
    return record


def measure_in_process() -> dict[str, Any]:
    """Time the three kernels on this process's first CPU device."""
    import jax

    device = jax.devices("cpu")[0]
    flops, n = _matmul_flops(device)
    bf16_flops, bf16_n = _matmul_flops(device, "bfloat16")
    bandwidth = _copy_bandwidth(device)
    overhead = _op_overhead(device)
    caches = [dict(level, **_cache_bandwidth(device, level["capacity_bytes"])) for level in cache_levels()]
    # A smaller level is at least as fast as a larger one behind it (the loop's own overhead
    # weighs most on the smallest arrays), and every cache at least as fast as DRAM.
    floor = bandwidth
    for level in reversed(caches):
        if level["bytes_per_s"] < floor:
            level["bytes_per_s"] = floor
            level["method"] += "; raised to the next larger level's figure, which it cannot be slower than"
        floor = level["bytes_per_s"]
    return {
        "matmul_flops_per_s": flops,
        "matmul_bf16_flops_per_s": bf16_flops,
        "copy_bytes_per_s": bandwidth,
        "op_overhead_s": overhead,
        "methods": {
            "matmul": f"best of {_REPEATS * _MATMUL_N[-1] // n}, N in {list(_MATMUL_N)}: jitted "
                      f"f32[{n},{n}] @ f32[{n},{n}], 2*N^3 FLOPs / time",
            "matmul_bf16": f"best of {_REPEATS * _MATMUL_N[-1] // bf16_n}, N in {list(_MATMUL_N)}: jitted "
                           f"bf16[{bf16_n},{bf16_n}] @ bf16[{bf16_n},{bf16_n}], 2*N^3 FLOPs / time",
            "copy": f"best of {2 * _REPEATS}: jitted x + 1 over f32[{_COPY_ELEMENTS}] in place (donated), "
                    f"(read + write) {8 * _COPY_ELEMENTS} bytes / time",
            "op_overhead": f"({_CHAIN} dependent f32[8,8] dots - 1 dot) / {_CHAIN - 1}, each the minimum over "
                           f"{_LAUNCHES} independent launches taken in turn",
        },
        "cpu_model": cpu_model(),
        "cores": _usable_cores(),
        "jax_version": jax.__version__,
        "memory_bytes": _memory_bytes(),
        "last_level_cache_bytes": _last_level_cache_bytes(),
        "cache_levels": caches,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


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


def _best_time(fn: Callable[[], Any], repeats: int = _REPEATS) -> float:
    fn().block_until_ready()  # compile and warm up outside the timing
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn().block_until_ready()
        best = min(best, time.perf_counter() - start)
    return best


def _matmul_flops(device: Any, dtype: str = "float32") -> tuple[float, int]:
    import jax
    import jax.numpy as jnp

    matmul = jax.jit(lambda a, b: a @ b)
    best, size = 0.0, 0
    for n in _MATMUL_N:  # larger sizes block better, smaller ones find quiet moments more often
        a = jax.device_put(jnp.ones((n, n), dtype), device)
        rate = 2.0 * n**3 / _best_time(partial(matmul, a, a), _REPEATS * _MATMUL_N[-1] // n)
        if rate > best:
            best, size = rate, n
    return best, size


def _copy_bandwidth(device: Any) -> float:
    import jax
    import jax.numpy as jnp

    # In place (the input donated): a fresh 64 MiB output per call would time the OS handing out and
    # zeroing new pages (about 1 GB/s on a busy machine), not DRAM.
    add = jax.jit(lambda x: x + 1.0, donate_argnums=0)
    x = add(jax.device_put(jnp.zeros((_COPY_ELEMENTS,), jnp.float32), device))
    x.block_until_ready()
    best = math.inf
    for _ in range(2 * _REPEATS):
        start = time.perf_counter()
        x = add(x)
        x.block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 8.0 * _COPY_ELEMENTS / best


def cache_levels() -> list[dict[str, Any]]:
    """Data caches of this CPU, smallest first, as the OS states them: {name, capacity_bytes,
    capacity_source}. Empty where the OS says nothing (the memory roof is then DRAM alone)."""
    levels: dict[int, tuple[int, str]] = {}
    for index in sorted(_SYSFS_CACHE.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text().strip())
            size = _size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size and level not in levels:
            levels[level] = (size, f"OS: {index}/size")
    return [{"name": f"L{level}", "capacity_bytes": float(size), "capacity_source": source}
            for level, (size, source) in sorted(levels.items())]


def _size_bytes(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else None


def _cache_bandwidth(device: Any, capacity: float) -> dict[str, Any]:
    """Bytes/s of an elementwise op whose arrays stay in a cache of `capacity` bytes: y = a*y + b
    looped in one jitted while loop (one op call would time the dispatch, not the cache); the
    best over working sets of 1/8 and 1/4 of the level, each the best of several loops."""
    import jax
    import jax.numpy as jnp

    best, how = 0.0, ""
    for fill in _CACHE_FILL:
        elements = max(int(capacity / fill / 4 / 2), 256)  # two f32 arrays (in, out) in flight
        trips = max(4, int(_CACHE_BYTES_MOVED / (8 * elements)))
        loop = jax.jit(lambda y, trips=trips: jax.lax.fori_loop(0, trips, lambda i, v: v * 1.0001 + 1e-6, y))
        y = jax.device_put(jnp.ones((elements,), jnp.float32), device)
        rate = 8.0 * elements * trips / _best_time(partial(loop, y), _CACHE_REPEATS)
        if rate > best:
            best, how = rate, f"f32[{elements}]"
    method = (f"best of {_CACHE_REPEATS}: jitted loop of y = a*y + b over {how} (1/8 or 1/4 of the level), "
              f"(read + write) bytes / time")
    return {"bytes_per_s": best, "method": method}


def _op_overhead(device: Any) -> float:
    """Seconds each op of a program pays beyond its work: the difference between a chain of
    `_CHAIN` dependent tiny dots and one such dot, each the minimum over `_LAUNCHES` independent
    launches taken in turn (a busy machine only ever adds time to a launch, so the minimum of many
    is the unloaded time of each, and the two minima see the same machine)."""
    import jax
    import jax.numpy as jnp

    def chain(length: int) -> Callable[[Any], Any]:
        def run(x: Any) -> Any:
            for _ in range(length):
                x = x @ x
            return x
        return jax.jit(run)

    x = jax.device_put(jnp.eye(8, dtype=jnp.float32), device)
    long, short = chain(_CHAIN), chain(1)
    long(x).block_until_ready()
    short(x).block_until_ready()
    best_long = best_short = math.inf
    for _ in range(_LAUNCHES):
        for fn, which in ((long, 0), (short, 1)):
            start = time.perf_counter()
            fn(x).block_until_ready()
            took = time.perf_counter() - start
            if which == 0:
                best_long = min(best_long, took)
            else:
                best_short = min(best_short, took)
    # A difference the clock cannot resolve charges nothing rather than a made-up floor.
    return max((best_long - best_short) / (_CHAIN - 1), 0.0)


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


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _memory_bytes() -> float | None:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def _last_level_cache_bytes() -> float | None:
    sizes = [level["capacity_bytes"] for level in cache_levels()]
    return max(sizes) if sizes else None


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


if __name__ == "__main__":
    print(json.dumps(measure_in_process()))
