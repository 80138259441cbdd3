"""Offload traffic: data moved between device and host memory inside the program.

XLA's host offloading (activation offload, `memory_kind="pinned_host"`, optimizer state on the
host) places buffers in host memory (`S(5)` in a layout) and moves them with `copy-start`/`copy-done`
pairs or dynamic slices that read or write host memory; each crosses the host link (PCIe or the chip's
host interface), far slower than HBM. Such copies are what offloading is, not a mistake: the finding
says what the traffic costs per step, so it can be weighed against the memory it saves. Counted: the
time of the ops that read or write host memory (the cost model's `host_bytes`).
"""

from __future__ import annotations

from ...costmodel.units import human
from ...reports.model.findings import Finding
from .program import ProgramView, Timing, evidence, finding

CAUSE = "waste:offload"


def detect(view: ProgramView, timing: Timing) -> list[Finding]:
    if view.costs is None:
        return []
    moving = [instr for comp in view.running() for instr in comp.instructions
              if (cost := view.costs.get(instr.name)) is not None and cost.host_bytes > 0]
    seconds = timing.of_ops(view.program, (i.name for i in moving))
    if not moving or seconds <= 0:
        return []
    moved = sum(view.costs[i.name].host_bytes * (view.costs[i.name].trip_count or 1) for i in moving)
    return [finding(view, timing, cause=CAUSE, seconds=seconds,
                    what=f"offload traffic: {human(moved, 'B')} between device and host memory per run",
                    lines=evidence(moving),
                    action=("Where device memory allows, keep these buffers on the device (drop the offload "
                            "policy or memory_kind='pinned_host'); otherwise start each copy early enough that "
                            "compute hides it."))]
