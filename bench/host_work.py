"""The bundled transformer step with extra host-side work inside each step: a runtime-only slowdown.

    audit run bench/host_work.py -- --host-work-ms 5 [transformer options...]

Each step first spins the host for `--host-work-ms` milliseconds, then dispatches the
same jitted step. The spin is inside the step's trace annotation, so the measured step
time grows by about that much while the compiled program (ops, FLOPs, bytes,
collectives) stays byte for byte the same: what `audit diff` can only catch by timing.
"""

from __future__ import annotations

import argparse
import time

from audit import Context, Workload, workload
from audit.workloads import transformer


class _WithHostWork:
    """Calls the jitted step after `seconds` of busy host work; compiles exactly as the step does."""

    def __init__(self, step, seconds: float):
        self._step, self._seconds = step, seconds

    def lower(self, *args, **kwargs):
        return self._step.lower(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        end = time.perf_counter() + self._seconds
        while time.perf_counter() < end:  # busy, not sleep: it occupies the host like real Python work
            pass
        return self._step(*args, **kwargs)


@workload
def build(ctx: Context) -> Workload:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-work-ms", type=float, default=0.0, help="busy host time added to each step")
    ours, rest = parser.parse_known_args(ctx.argv)
    wl = transformer.build(Context(argv=rest, devices=ctx.devices, aot=ctx.aot))
    if ours.host_work_ms > 0:
        wl.step = _WithHostWork(wl.jitted(), ours.host_work_ms / 1000.0)
        wl.config = {**wl.config, "host_work_ms": ours.host_work_ms}
    return wl
