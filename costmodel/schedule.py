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

from dataclasses import dataclass, field, replace
from typing import Mapping

from ..parsers.hlo.model import Instruction, Module
from ..parsers.hlo.opcodes import CONTROL_FLOW
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
        # Never below zero: an exposed time equal to the duration can come out a rounding error above it
        # (-1.7e-18 s), and a crafted time is none hidden.
        return max(0.0, self.duration_s - self.exposed_s)


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


@dataclass
class _Run:
    """What one run of a computation adds up: its compute-stream seconds, the no-overlap sum and
    synchronous communication in it, and its windows with how often each runs per run of it."""

    seconds: float = 0.0
    no_overlap_s: float = 0.0
    sync_comm_s: float = 0.0
    windows: dict[str, tuple[Window, int]] = field(default_factory=dict)

    def add(self, inner: "_Run", times: int) -> None:
        """Count `times` runs of a computation this one runs."""
        self.no_overlap_s += inner.no_overlap_s * times
        self.sync_comm_s += inner.sync_comm_s * times
        for start, (window, n) in inner.windows.items():
            self.windows[start] = (window, self.windows.get(start, (window, 0))[1] + n * times)


def _plain(instr: Instruction) -> bool:
    """Whether the walk just runs an op with this one's opcode on the compute stream: it neither
    launches, waits, nor runs other computations."""
    return not (launches(instr) or waits(instr)) and instr.opcode not in _NOT_PLAIN


# An async update only passes its start on to its done; control flow runs its computations in place.
_NOT_PLAIN = frozenset(CONTROL_FLOW + ("async-update",))

# Streams of their own on GPU: host/device copies and point-to-point transfers.
_OWN_GPU_STREAM = {"copy", "send-recv", "async"}


class _Walker:
    """Walks each computation once: a computation run from several places (a body two calls
    share) is the same run each time, so its result is reused, not walked again per path."""

    def __init__(self, module: Module, expected: Mapping[str, float], collective: Mapping[str, str],
                 shared_stream: bool):
        self.module = module
        self.expected = expected
        self.collective = collective
        self.shared_stream = shared_stream
        self.runs: dict[str, _Run] = {}
        self.plain: dict[str, bool] = {}  # opcode -> `_plain`, for the few dozen opcodes of a program

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

    def run(self, computation: str) -> _Run:
        """One run of `computation` on the compute stream, stalls included (walked once)."""
        found = self.runs.get(computation)
        if found is None:
            found = self.runs[computation] = self._walk(computation)
        return found

    def _walk(self, computation: str) -> _Run:
        out = _Run()
        t = 0.0
        streams: dict[str, float] = {}
        pending: dict[str, _Pending] = {}
        expected, collective, plain = self.expected, self.collective, self.plain
        for instr in self.module.sequence(computation):
            simple = plain.get(instr.opcode)
            if simple is None:
                simple = plain[instr.opcode] = _plain(instr)
            if simple and instr.name not in collective:
                # Most ops: their time on the compute stream (as `_run` adds it, in the same order).
                seconds = expected.get(instr.name) or 0.0
                out.no_overlap_s += seconds
                t += seconds
            elif launches(instr):
                kind = self.kind(instr)
                stream = self.stream(kind)
                duration = self.seconds(instr.name) + self.wrapped_seconds(instr)
                begin = max(t, streams.get(stream, 0.0))
                pending[instr.name] = _Pending(Window(instr.name, "", kind, computation, duration), t, begin + duration)
                streams[stream] = begin + duration
                out.no_overlap_s += duration
            elif waits(instr):
                start = self._start_of(instr, pending)
                # A done's own time (its launch overhead, if any) is spent on the compute stream.
                t += self._run(instr, out)
                if start is not None:
                    t = self._close(pending.pop(start), instr.name, t, out)
            elif instr.opcode != "async-update":
                t += self._run(instr, out)
        for p in pending.values():  # started and never waited for here: the computation ends after it
            t = self._close(p, "", t, out)
        out.seconds = t
        return out

    @staticmethod
    def _close(p: _Pending, done: str, t: float, out: _Run) -> float:
        """The window of `p` closed at compute-stream time `t`; returns when the stream goes on."""
        p.window.done = done
        p.window.window_compute_s = t - p.begin_s
        p.window.exposed_s = max(0.0, p.end_s - t)
        out.windows[p.window.start] = (p.window, 1)
        return max(t, p.end_s)

    def _start_of(self, done: Instruction, pending: dict[str, _Pending]) -> str | None:
        """The start a done waits for, through any async-update in between."""
        name = done.operands[0] if done.operands else ""
        found = self.module.find(name)
        while found is not None and found[1].opcode == "async-update" and found[1].operands:
            name = found[1].operands[0]
            found = self.module.find(name)
        return name if name in pending else None

    def _run(self, instr: Instruction, out: _Run) -> float:
        """Compute-stream seconds of one execution of an op, nested computations run in place."""
        if instr.opcode == "while":
            body, cond = while_parts(self.module, instr)
            n = trip_count(self.module, instr)[0]
            return self._nested(body.name if body else None, 1 if n is None else n, out) + \
                self._nested(cond.name if cond else None, 1 if n is None else n + 1, out)
        if instr.opcode in CONTROL_FLOW:
            total = 0.0
            for comp in self.module.run_by(instr):
                if not comp.is_fusion:
                    total += self._nested(comp.name, 1, out)
            return total
        seconds = self.seconds(instr.name)
        out.no_overlap_s += seconds
        if instr.name in self.collective:
            out.sync_comm_s += seconds
        return seconds

    def _nested(self, computation: str | None, times: int, out: _Run) -> float:
        if computation is None:
            return 0.0
        inner = self.run(computation)
        out.add(inner, times)
        return inner.seconds * times


def walk_schedule(module: Module, expected: Mapping[str, float],
                  collective: Mapping[str, str] | None = None, *, shared_stream: bool = False) -> StepWalk:
    """Walk the entry computation in schedule order.

    **Arguments:** `expected`: instruction name -> expected seconds per execution (missing or
    None: 0); `collective`: names of synchronous communication ops -> their kind, so their
    time counts as exposed communication; `shared_stream`: all collectives on one stream (GPU)
    rather than one per kind (TPU).
    **Returns:** the no-overlap sum, the overlapped step and every asynchronous window.
    """
    entry = _Walker(module, expected, collective or {}, shared_stream).run(module.entry)
    return StepWalk(no_overlap_s=entry.no_overlap_s, step_s=entry.seconds, sync_comm_s=entry.sync_comm_s,
                    windows=[replace(window, executions=n) for window, n in entry.windows.values()])


def windows_by_op(modules: Mapping[int, Module], costs: Mapping[int, Mapping[str, OpCost]],
                  expectations: Mapping[tuple[int, str], Expectation], *,
                  shared_stream: bool = False) -> dict[int, StepWalk | None]:
    """The walk of every program: None for a program with asynchronous ops but no schedule.

    **Arguments:** `costs`: program -> op name -> OpCost; `expectations`: (program, op name) ->
    Expectation, whose `expected_s` is per execution.
    """
    out: dict[int, StepWalk | None] = {}
    expected_by: dict[int, dict[str, float]] = {pid: {} for pid in modules}  # one pass, however many programs
    for (pid, name), e in expectations.items():
        if e.expected_s is not None and pid in expected_by:
            expected_by[pid][name] = e.expected_s
    for pid, module in modules.items():
        expected = expected_by[pid]
        sync = {name: c.collective.kind for name, c in costs.get(pid, {}).items()
                if c.collective is not None}
        if not module.is_scheduled and any(launches(i) for _, i in module.instructions()):
            out[pid] = None
            continue
        out[pid] = walk_schedule(module, expected, sync, shared_stream=shared_stream)
    return out
