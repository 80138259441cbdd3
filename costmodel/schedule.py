"""The predicted step with asynchronous communication hidden behind compute.

A scheduled module (`is_scheduled=true`) fixes the order each computation runs its
instructions in. An asynchronous collective (`all-gather-start` ... `all-gather-done`,
`async-start(calls=...)` ... `async-done`, `copy-start`/`copy-done`, `send`/`recv`)
runs between its start and its done while the compute stream carries on with what
the scheduler placed in between; only the part that outlasts that compute is exposed.

The walk models what XLA's latency-hiding scheduler assumes: one compute stream
that runs every other op back to back, and collective streams. On TPU each kind of
asynchronous collective (all-gather, reduce-scatter, all-reduce, ...) is its own
resource, so two collectives of one kind queue behind each other while different kinds
overlap; on GPU every collective shares one stream (XLA's
`kGpuAsyncStreamCollectives`), with copies and send/recv on their own. A start launches its work at once on its stream (or when that
stream frees up); a done waits until the work is finished. Synchronous collectives
run on the compute stream, fully exposed. While bodies and called computations are
walked in place (a loop's body once per trip); conditionals count each branch once,
as the no-overlap sum does.

Every op's time is its roofline expectation per execution, so the overlapped step is
a lower bound like each op's time, and a tighter one than the no-overlap sum wherever
the schedule hides communication.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..parsers.hlo_model import Instruction, Module
from .ops.loops import trip_count, while_parts
from .costs import Expectation, OpCost

# Opcodes that launch work on a side stream besides every `X-start`, and their waits besides `X-done`.
_LAUNCHES = {"send", "recv"}
_WAITS = {"send-done", "recv-done"}


def launches(instr: Instruction) -> bool:
    """Whether the op starts asynchronous work that a later done waits for."""
    return instr.opcode in _LAUNCHES or instr.opcode.endswith("-start")


def waits(instr: Instruction) -> bool:
    """Whether the op waits for asynchronous work a start launched."""
    return instr.opcode in _WAITS or instr.opcode.endswith("-done")


@dataclass
class Window:
    """One asynchronous op as the walk saw it, per execution, in seconds."""

    start: str
    done: str
    kind: str
    computation: str
    duration_s: float
    window_compute_s: float = 0.0  # compute-stream time between the start and the done
    exposed_s: float = 0.0         # how long the compute stream waited at the done
    executions: int = 1            # times this window runs per run of the module

    @property
    def hidden_s(self) -> float:
        return self.duration_s - self.exposed_s


@dataclass
class StepWalk:
    """The module's predicted step both ways, per run of the module on one device."""

    no_overlap_s: float = 0.0
    step_s: float = 0.0
    sync_comm_s: float = 0.0
    windows: list[Window] = field(default_factory=list)

    @property
    def hidden_s(self) -> float:
        return sum(w.hidden_s * w.executions for w in self.windows)

    @property
    def exposed_comm_s(self) -> float:
        return self.sync_comm_s + sum(w.exposed_s * w.executions for w in self.windows)


@dataclass
class _Pending:
    window: Window
    begin_s: float
    end_s: float


# Streams of their own on GPU: host/device copies and point-to-point transfers.
_OWN_GPU_STREAM = {"copy", "send-recv", "async"}


class _Walker:
    def __init__(self, module: Module, expected: Mapping[str, float], collective: Mapping[str, str],
                 shared_stream: bool):
        self.module = module
        self.expected = expected
        self.collective = collective
        self.shared_stream = shared_stream
        self.result = StepWalk()

    def stream(self, kind: str) -> str:
        if self.shared_stream and kind not in _OWN_GPU_STREAM:
            return "collectives"
        return kind

    def seconds(self, name: str) -> float:
        return self.expected.get(name) or 0.0

    def wrapped_seconds(self, instr: Instruction) -> float:
        """Time of the ops an async-start wraps, wherever the cost model put it."""
        total = 0.0
        for name in instr.called:
            comp = self.module.computations.get(name.lstrip("%"))
            if comp is not None:
                total += sum(self.seconds(i.name) for i in comp.instructions)
        return total

    def kind(self, instr: Instruction) -> str:
        if instr.opcode == "async-start":
            for name in instr.called:
                comp = self.module.computations.get(name.lstrip("%"))
                if comp is not None and comp.instructions:
                    return comp.root_instruction.opcode
            return "async"
        if instr.opcode in ("send", "recv"):
            return "send-recv"
        return instr.opcode.removesuffix("-start")

    def walk(self, computation: str, executions: int) -> float:
        """Seconds one run of `computation` takes on the compute stream, stalls included."""
        t = 0.0
        streams: dict[str, float] = {}
        pending: dict[str, _Pending] = {}
        for instr in self.module.sequence(computation):
            if launches(instr):
                kind = self.kind(instr)
                stream = self.stream(kind)
                duration = self.seconds(instr.name) + self.wrapped_seconds(instr)
                begin = max(t, streams.get(stream, 0.0))
                window = Window(instr.name, "", kind, computation, duration, executions=executions)
                pending[instr.name] = _Pending(window, t, begin + duration)
                streams[stream] = begin + duration
                self.result.no_overlap_s += duration * executions
            elif waits(instr):
                start = self._start_of(instr, pending)
                # A done's own time (its launch overhead, if any) is spent on the compute stream.
                t += self._run(instr, executions)
                if start is None:
                    continue
                p = pending.pop(start)
                p.window.done = instr.name
                p.window.window_compute_s = t - p.begin_s
                p.window.exposed_s = max(0.0, p.end_s - t)
                t = max(t, p.end_s)
                self.result.windows.append(p.window)
            elif instr.opcode == "async-update":
                continue
            else:
                t += self._run(instr, executions)
        for p in pending.values():  # started and never waited for here: the computation ends after it
            p.window.window_compute_s = t - p.begin_s
            p.window.exposed_s = max(0.0, p.end_s - t)
            t = max(t, p.end_s)
            self.result.windows.append(p.window)
        return t

    def _start_of(self, done: Instruction, pending: dict[str, _Pending]) -> str | None:
        """The start a done waits for, through any async-update in between."""
        name = done.operands[0] if done.operands else ""
        found = self.module.find(name)
        while found is not None and found[1].opcode == "async-update" and found[1].operands:
            name = found[1].operands[0]
            found = self.module.find(name)
        return name if name in pending else None

    def _run(self, instr: Instruction, executions: int) -> float:
        """Compute-stream seconds of one execution of an op, nested computations walked in place."""
        if instr.opcode == "while":
            body, cond = while_parts(self.module, instr)
            n = trip_count(self.module, instr)[0]
            body_trips, cond_trips = (1, 1) if n is None else (n, n + 1)
            return ((self.walk(body.name, executions * body_trips) * body_trips if body else 0.0)
                    + (self.walk(cond.name, executions * cond_trips) * cond_trips if cond else 0.0))
        if instr.opcode in ("call", "conditional"):
            total = 0.0
            for name in instr.called:
                comp = self.module.computations.get(name.lstrip("%"))
                if comp is not None and not comp.is_fusion:
                    total += self.walk(comp.name, executions)
            return total
        seconds = self.seconds(instr.name)
        self.result.no_overlap_s += seconds * executions
        if instr.name in self.collective:
            self.result.sync_comm_s += seconds * executions
        return seconds


def walk_schedule(module: Module, expected: Mapping[str, float],
                  collective: Mapping[str, str] | None = None, *, shared_stream: bool = False) -> StepWalk:
    """Walk the entry computation in schedule order.

    **Arguments:** `expected`: instruction name -> expected seconds per execution (missing or
    None: 0); `collective`: names of synchronous communication ops -> their kind, so their
    time counts as exposed communication; `shared_stream`: all collectives on one stream (GPU)
    rather than one per kind (TPU).
    **Returns:** the no-overlap sum, the overlapped step and every asynchronous window.
    """
    walker = _Walker(module, expected, collective or {}, shared_stream)
    walker.result.step_s = walker.walk(module.entry, 1)
    return walker.result


def windows_by_op(modules: Mapping[int, Module], costs: Mapping[int, Mapping[str, OpCost]],
                  expectations: Mapping[tuple[int, str], Expectation], *,
                  shared_stream: bool = False) -> dict[int, StepWalk | None]:
    """The walk of every program: None for a program with asynchronous ops but no schedule.

    **Arguments:** `costs`: program -> op name -> OpCost; `expectations`: (program, op name) ->
    Expectation, whose `expected_s` is per execution.
    """
    out: dict[int, StepWalk | None] = {}
    for pid, module in modules.items():
        expected = {name: e.expected_s for (p, name), e in expectations.items()
                    if p == pid and e.expected_s is not None}
        sync = {name: c.collective.kind for name, c in costs.get(pid, {}).items()
                if c.collective is not None}
        if not module.is_scheduled and any(launches(i) for _, i in module.instructions()):
            out[pid] = None
            continue
        out[pid] = walk_schedule(module, expected, sync, shared_stream=shared_stream)
    return out
