"""The predicted step with asynchronous work overlapped, per op and for the step.

`summary.expected_s` stays the no-overlap sum of every op's expected time; the schedule
walk (costmodel.schedule) says how much of each asynchronous op hides behind the compute
scheduled inside its window. Each op's hidden and exposed seconds are per device, summed
over its occurrences like every per-op quantity; the summary's figures are one step of
that, `expected_step_s = (expected_s - sum(hidden_s)) / steps`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..costmodel.costs import Expectation, OpCost
from ..costmodel.schedule import StepWalk, Window
from .record import OpRecord, Overlap, StepOverlap


def overlap_of(window: Window | None, expected_s: float, comm_bytes: float, occurrences: float,
               fused: tuple[float, float] | None = None) -> Overlap | None:
    """An op's place in the walk: its async window, a synchronous collective fully exposed, or a
    fusion that carries a collective beside its own work (`fused`: (its compute or memory time
    with its overhead, its collective's time), summed over occurrences), which exposes only the
    part of the transfer that outlasts that work."""
    if window is not None:
        return Overlap(window.exposed_s * occurrences, window.hidden_s * occurrences,
                       window.window_compute_s * occurrences)
    if comm_bytes and fused is not None:
        own_s, comm_s = fused
        exposed = max(0.0, expected_s - own_s)
        return Overlap(exposed, max(0.0, comm_s - exposed))
    if comm_bytes:
        return Overlap(expected_s, 0.0)
    return None


def fused_work(cost: OpCost | None, exp: Expectation | None, occurrences: float) -> tuple[float, float] | None:
    """(own compute or memory time with its overhead, collective time), summed over occurrences, of a
    fusion that carries a collective; None for any other op."""
    if cost is None or exp is None or cost.collective is None or not cost.collective.fused:
        return None
    own = max(exp.compute_s or 0.0, exp.memory_s or 0.0) + exp.overhead_s
    return own * occurrences, (exp.comm_s or 0.0) * occurrences


def step_overlap(ops: Iterable[OpRecord], walks: Mapping[int, StepWalk | None]) -> StepOverlap:
    """The step both ways from the ops' overlap: what hides, what stays exposed."""
    hidden = hidden_comm = exposed = expected = 0.0
    modeled = False
    for op in ops:
        if op.container or op.expected_s is None:
            continue
        modeled = True
        expected += op.expected_s
        if op.overlap is None:
            continue
        if op.overlap.window_compute_s is not None:
            hidden += op.overlap.hidden_s
        if op.comm_bytes:
            exposed += op.overlap.exposed_s
            hidden_comm += op.overlap.hidden_s
    unscheduled = tuple(sorted(str(pid) for pid, walk in walks.items() if walk is None))
    if unscheduled:
        return StepOverlap(None, None, None, None, unscheduled)
    if not modeled:  # no op has an expected time: the step's is unknown, not 0
        return StepOverlap(None, None, None, None, ())
    return StepOverlap(expected - hidden, exposed, hidden_comm, hidden, ())
