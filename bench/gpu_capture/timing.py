"""What the GPU capture scripts share: run each case once (a configuration the GPU's libraries do
not take is skipped, with why), time the rest by wall clock, then trace them under jax.profiler."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import jax

Case = tuple[Callable[..., Any], tuple[Any, ...]]


def capture(cases: Mapping[str, Case], out: str, *, repeats: int = 10, traced: int = 5) -> None:
    """Writes OUT/profile/plugins/profile/<run>/ and OUT/wall_timing.json (seconds per call)."""
    os.makedirs(out, exist_ok=True)
    runnable: dict[str, Case] = {}
    for name, (fn, args) in cases.items():
        try:
            jax.block_until_ready(fn(*args))
            runnable[name] = (fn, args)
        except Exception as e:  # a configuration this GPU, cuDNN or XLA does not take
            print(f"{name} skipped: {type(e).__name__}: {str(e)[:300]}", flush=True)
    timing = {}
    for name, (fn, args) in runnable.items():
        start = time.perf_counter()
        for _ in range(repeats):
            result = fn(*args)
        jax.block_until_ready(result)
        timing[name] = (time.perf_counter() - start) / repeats
    with jax.profiler.trace(os.path.join(out, "profile")):
        for _ in range(traced):
            for fn, args in runnable.values():
                jax.block_until_ready(fn(*args))
    with open(os.path.join(out, "wall_timing.json"), "w") as f:
        json.dump(timing, f, indent=1)
