"""`python -m audit.child.calibrate [--wait]`: this machine's CPU measured with JAX, printed as one
JSON record (run by `audit.orchestration.calibrate.measure`; the catalog reads the record back,
`audit.costmodel.chips.calibration`).

A CPU has no datasheet the tool could trust, so its ceilings are what this process achieves: a
jitted matmul for FLOP/s, an elementwise add over a large array for DRAM bytes/s, the same kind
of op looped over arrays that fit each cache level (sizes from /sys) for that level's bytes/s,
and a chain of tiny dots for the fixed cost of one op. Simulated JAX devices share the same
cores, so these are per-process numbers.

Each kernel is compiled and run once first (`prepare`: seconds of XLA compile), then timed
(`run`: well under a second on a quiet machine). Every figure is the best of several
repetitions, since other processes only ever slow a repetition down. With `--wait` the
process prepares, prints `ready`, and times only when a line `go` arrives on stdin (end of
input: it exits untimed), so an analysis can start it beside its own reading and have it
time the machine while the analysis itself waits. The record is the last line printed, JSON.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..costmodel.chips.calibration import cpu_model, usable_cores

_MATMUL_N = (512, 1024)  # larger sizes block better, smaller ones find quiet moments more often
_REPEATS = 5
_COPY_ELEMENTS = 1 << 24  # 64 MiB of f32: far beyond any last-level cache
_CHAIN = 32  # tiny dependent dots, to expose the per-op cost
_LAUNCHES = 200  # independent launches of each tiny program; their minimum is robust to a busy machine
_CACHE_BYTES_MOVED = 1e8  # per timed loop: long enough to time, ~1 ms at cache speed
_CACHE_REPEATS = 5
_CACHE_FILL = (8, 4)  # working sets of 1/8 and 1/4 of a level (two arrays of that size in flight)
_SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass
class Kernel:
    """A compiled, warmed kernel: `call()` runs it once to completion; `units` per call (FLOPs, bytes)."""

    call: Callable[[], Any]
    units: float
    repeats: int
    label: str

    def rate(self) -> float:
        best = math.inf
        for _ in range(self.repeats):
            start = time.perf_counter()
            self.call()
            best = min(best, time.perf_counter() - start)
        return self.units / best


def prepare(device: Any) -> dict[str, Any]:
    """Every kernel compiled and run once on `device`: matmuls by dtype, the DRAM copy, a loop per
    cache level and fill, the two chains that time the per-op cost. Inputs are numpy arrays put on
    the device: `jnp.ones` and friends would compile a program per shape."""
    import jax
    import numpy as np

    def ready(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        fn(*args).block_until_ready()  # compile and warm up outside the timing
        return lambda: fn(*args).block_until_ready()

    matmul = jax.jit(lambda a, b: a @ b)
    matmuls: dict[str, list[Kernel]] = {}
    for dtype in ("float32", "bfloat16"):
        for n in _MATMUL_N:
            a = jax.device_put(np.ones((n, n), dtype), device)  # numpy knows bfloat16 once JAX is imported
            matmuls.setdefault(dtype, []).append(
                Kernel(ready(matmul, a, a), 2.0 * n**3, _REPEATS * _MATMUL_N[-1] // n, f"{n}"))
    caches = [(level, [_cache_loop(device, level["capacity_bytes"], fill) for fill in _CACHE_FILL])
              for level in cache_levels()]
    chain = {length: _chain(length) for length in (_CHAIN, 1)}
    x = jax.device_put(np.eye(8, dtype=np.float32), device)
    return {"matmul": matmuls, "copy": _copy(device), "caches": caches,
            "chain": {length: ready(fn, x) for length, fn in chain.items()}}


def _copy(device: Any) -> Kernel:
    import jax
    import numpy as np

    # In place (the input donated): a fresh 64 MiB output per call would time the OS handing out and
    # zeroing new pages (about 1 GB/s on a busy machine), not DRAM.
    add = jax.jit(lambda x: x + 1.0, donate_argnums=0)
    held = [add(jax.device_put(np.zeros((_COPY_ELEMENTS,), np.float32), device))]
    held[0].block_until_ready()

    def call() -> None:
        held[0] = add(held[0])
        held[0].block_until_ready()

    return Kernel(call, 8.0 * _COPY_ELEMENTS, 2 * _REPEATS, f"f32[{_COPY_ELEMENTS}]")


def _cache_loop(device: Any, capacity: float, fill: int) -> Kernel:
    """y = a*y + b looped in one jitted while loop over arrays that fill `1/fill` of a level (one op
    call would time the dispatch, not the cache)."""
    import jax
    import numpy as np

    elements = max(int(capacity / fill / 4 / 2), 256)  # two f32 arrays (in, out) in flight
    trips = max(2, int(_CACHE_BYTES_MOVED / (8 * elements)))  # a level of hundreds of MB: twice over is enough
    loop = jax.jit(lambda y: jax.lax.fori_loop(0, trips, lambda i, v: v * 1.0001 + 1e-6, y))
    y = jax.device_put(np.ones((elements,), np.float32), device)
    loop(y).block_until_ready()
    return Kernel(lambda: loop(y).block_until_ready(), 8.0 * elements * trips, _CACHE_REPEATS, f"f32[{elements}]")


def _chain(length: int) -> Callable[[Any], Any]:
    import jax

    def run(x: Any) -> Any:
        for _ in range(length):
            x = x @ x
        return x
    return jax.jit(run)


def run(kernels: dict[str, Any]) -> dict[str, Any]:
    """Time the prepared kernels: the calibration record (see `calibrate.hardware_from_record`)."""
    import jax

    rates = {dtype: max(((k.rate(), k) for k in ks), key=lambda rk: rk[0]) for dtype, ks in kernels["matmul"].items()}
    copy = kernels["copy"]
    bandwidth = copy.rate()
    overhead = _op_overhead(kernels["chain"])
    caches = []
    for level, loops in kernels["caches"]:
        rate, best = max(((k.rate(), k) for k in loops), key=lambda rk: rk[0])
        caches.append(dict(level, bytes_per_s=rate, method=(
            f"best of {_CACHE_REPEATS}: jitted loop of y = a*y + b over {best.label} (1/8 or 1/4 of the level), "
            "(read + write) bytes / time")))
    # A smaller level is at least as fast as a larger one behind it (the loop's own overhead
    # weighs most on the smallest arrays), and every cache at least as fast as DRAM.
    floor = bandwidth
    for level in reversed(caches):
        if level["bytes_per_s"] < floor:
            level["bytes_per_s"] = floor
            level["method"] += "; raised to the next larger level's figure, which it cannot be slower than"
        floor = level["bytes_per_s"]
    (f32, f32_k), (bf16, bf16_k) = rates["float32"], rates["bfloat16"]
    sizes = f"N in {list(_MATMUL_N)}"
    return {
        "matmul_flops_per_s": f32,
        "matmul_bf16_flops_per_s": bf16,
        "copy_bytes_per_s": bandwidth,
        "op_overhead_s": overhead,
        "methods": {
            "matmul": f"best of {f32_k.repeats}, {sizes}: jitted f32[{f32_k.label},{f32_k.label}] @ "
                      f"f32[{f32_k.label},{f32_k.label}], 2*N^3 FLOPs / time",
            "matmul_bf16": f"best of {bf16_k.repeats}, {sizes}: jitted bf16[{bf16_k.label},{bf16_k.label}] @ "
                           f"bf16[{bf16_k.label},{bf16_k.label}], 2*N^3 FLOPs / time",
            "copy": f"best of {copy.repeats}: jitted x + 1 over {copy.label} in place (donated), "
                    f"(read + write) {int(copy.units)} bytes / time",
            "op_overhead": f"({_CHAIN} dependent f32[8,8] dots - 1 dot) / {_CHAIN - 1}, each the minimum over "
                           f"{_LAUNCHES} independent launches taken in turn",
        },
        "cpu_model": cpu_model(),
        "cores": usable_cores(),
        "jax_version": jax.__version__,
        "memory_bytes": _memory_bytes(),
        "last_level_cache_bytes": max((c["capacity_bytes"] for c in caches), default=None),
        "cache_levels": caches,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _op_overhead(chain: dict[int, Callable[[], Any]]) -> float:
    """Seconds each op of a program pays beyond its work: the difference between a chain of
    `_CHAIN` dependent tiny dots and one such dot, each the minimum over `_LAUNCHES` independent
    launches taken in turn (a busy machine only ever adds time to a launch, so the minimum of many
    is the unloaded time of each, and the two minima see the same machine)."""
    best = {length: math.inf for length in chain}
    for _ in range(_LAUNCHES):
        for length, call in chain.items():
            start = time.perf_counter()
            call()
            best[length] = min(best[length], time.perf_counter() - start)
    # A difference the clock cannot resolve charges nothing rather than a made-up floor.
    return max((best[_CHAIN] - best[1]) / (_CHAIN - 1), 0.0)


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


def _memory_bytes() -> float | None:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def main(argv: list[str]) -> int:
    import jax

    kernels = prepare(jax.devices("cpu")[0])
    if "--wait" in argv:
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            return 0
    print(json.dumps(run(kernels)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
