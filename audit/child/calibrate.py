"""`python -m audit.child.calibrate`: this machine's CPU measured with JAX, printed as one JSON record.

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

It runs in a fresh CPU-only process (`audit.orchestration.calibrate.measure`), so no accelerator
backend starts and the caller's JAX state is left alone; the catalog reads the record back
(`audit.costmodel.chips.calibration`).
"""

from __future__ import annotations

import json
import math
import os
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable

from ..costmodel.chips.calibration import cpu_model, usable_cores

_MATMUL_N = (512, 1024, 2048)
_COPY_ELEMENTS = 1 << 24  # 64 MiB of f32: far beyond any last-level cache
_CHAIN = 32  # tiny dependent dots, to expose the per-op cost
_REPEATS = 5
_LAUNCHES = 200  # independent launches of each tiny program; their minimum is robust to a busy machine
_CACHE_BYTES_MOVED = 2e8  # per timed loop: long enough to time, ~2 ms at cache speed
_CACHE_REPEATS = 7
_CACHE_FILL = (8, 4)  # working sets of 1/8 and 1/4 of a level (two arrays of that size in flight)
_SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


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
        "cores": usable_cores(),
        "jax_version": jax.__version__,
        "memory_bytes": _memory_bytes(),
        "last_level_cache_bytes": _last_level_cache_bytes(),
        "cache_levels": caches,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


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


def _memory_bytes() -> float | None:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def _last_level_cache_bytes() -> float | None:
    sizes = [level["capacity_bytes"] for level in cache_levels()]
    return max(sizes) if sizes else None


if __name__ == "__main__":
    print(json.dumps(measure_in_process()))
