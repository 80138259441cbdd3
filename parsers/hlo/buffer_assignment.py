"""A program's buffer assignment: the memory XLA laid out for it, read from the `xla.HloProto`
every JAX profile (and `--xla_dump_to` as `*.hlo.pb`) carries beside its module.

Only field 3 (`BufferAssignmentProto`) is decoded: the top level is walked with the wire reader,
which steps over the module (field 1, the bulk of the bytes) without reading it. The heap replay
follows the semantics of XProf's memory viewer, so the two agree on the same program: buffers of
indefinite lifetime (entry parameters, outputs that may live out, constants) count for the whole
program, thread-local ones (scalars of nested computations) in none; the heap simulator's trace of
the temporary allocation is replayed event by event (ALLOC adds a buffer, FREE removes it when its
last sharer is freed, SHARE_WITH counts the canonical buffer again when it was freed before), and
the peak is the largest replayed heap plus the indefinite bytes. Field numbers follow openxla/xla `xla/service/hlo.proto`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..wire.protobuild import DynamicMessage, FieldSpec, build_messages
from ..wire.protowire import varint

_MESSAGES: dict[str, list[FieldSpec]] = {
    "Location": [
        ("instruction_name", 2, "string"),
        ("shape_index", 3, "int64", "repeated"),
        ("instruction_id", 4, "int64"),
    ],
    "LogicalBufferProto": [
        ("id", 1, "int64"),
        ("size", 2, "int64"),
        ("defined_at", 3, "Location"),
        ("color", 4, "int64"),
    ],
    "Assigned": [
        ("logical_buffer_id", 1, "int64"),
        ("offset", 2, "int64"),
        ("size", 3, "int64"),
    ],
    "BufferAllocationProto": [
        ("index", 1, "int64"),
        ("size", 2, "int64"),
        ("is_thread_local", 3, "bool"),
        ("is_entry_computation_parameter", 5, "bool"),
        ("parameter_number", 6, "int64"),
        ("maybe_live_out", 7, "bool"),
        ("color", 8, "int64"),
        ("assigned", 9, "Assigned", "repeated"),
        ("is_tuple", 11, "bool"),
        ("is_constant", 12, "bool"),
    ],
    "Event": [
        ("kind", 1, "int32"),
        ("buffer_id", 2, "int64"),
        ("instruction_name", 4, "string"),
        ("share_with_canonical_id", 5, "int64"),
    ],
    "HeapSimulatorTrace": [
        ("events", 1, "Event", "repeated"),
    ],
    "BufferAssignmentProto": [
        ("logical_buffers", 1, "LogicalBufferProto", "repeated"),
        ("buffer_allocations", 3, "BufferAllocationProto", "repeated"),
        ("heap_simulator_traces", 4, "HeapSimulatorTrace", "repeated"),
    ],
}
_SCHEMA: dict[str, DynamicMessage] = build_messages("audit_buffer_assignment.proto", "xla", _MESSAGES)

ALLOC, FREE, SHARE_WITH = 0, 1, 2  # HeapSimulatorTrace.Event.Kind
DEVICE_MEMORY = 0  # the memory colour of the device's main memory (HBM); others are on-chip or host
_HLO_PROTO_FIELDS = {1, 3}  # xla.HloProto: hlo_module, buffer_assignment; a bare module has many more


@dataclass(frozen=True)
class LogicalBuffer:
    """One value XLA placed in memory: what defined it and its padded size."""

    id: int
    size: int
    instruction: str
    instruction_id: int
    shape_index: tuple[int, ...]
    color: int

    @property
    def label(self) -> str:
        """The defining instruction, with the tuple index of its value when it is one element."""
        index = ",".join(map(str, self.shape_index))
        return f"{self.instruction}{{{index}}}" if self.shape_index else self.instruction


@dataclass(frozen=True)
class Allocation:
    """One buffer allocation: a range of device memory that holds one or more logical buffers."""

    index: int
    size: int
    color: int
    parameter: bool
    live_out: bool
    constant: bool
    thread_local: bool
    is_tuple: bool
    buffers: tuple[int, ...]  # ids of the logical buffers assigned to it

    @property
    def indefinite(self) -> bool:
        """Held for the whole program (not freed and reused by the heap's schedule)."""
        return self.thread_local or self.parameter or self.constant or self.live_out

    @property
    def group(self) -> str:
        """What the memory viewer calls its kind."""
        return ("parameter" if self.parameter else "output" if self.live_out else
                "thread-local" if self.thread_local else "constant" if self.constant else "temporary")


@dataclass(frozen=True)
class HeapEvent:
    kind: int
    buffer: int
    instruction: str
    canonical: int = 0  # SHARE_WITH: the buffer whose memory it shares


@dataclass(frozen=True)
class BufferAssignment:
    buffers: dict[int, LogicalBuffer]
    allocations: tuple[Allocation, ...]
    traces: tuple[tuple[HeapEvent, ...], ...]
    traced: bool = True  # False: read from a text without the heap simulator's trace (hlo_buffer_assignment_text)

    def allocation_of(self) -> dict[int, Allocation]:
        """Logical buffer id -> the allocation holding it (ids the assignment does not describe left out)."""
        return {b: a for a in self.allocations for b in a.buffers if b in self.buffers}


@dataclass(frozen=True)
class MemoryUsage:
    """A program's memory in one memory colour, as the memory viewer computes it [buffer assignment]."""

    peak_bytes: int  # the heap simulator's peak plus every indefinite allocation
    indefinite_bytes: int
    parameter_bytes: int
    live_out_bytes: int
    temporary_bytes: int  # the replayed heap at its peak (temporaries live then)
    allocated_bytes: int  # every allocation of this colour, as XLA reserves them
    peak_event: int  # index of the heap event where the peak is reached (-1: no heap trace)
    events: int
    peak_instruction: str  # the instruction whose event reaches the peak
    live_at_peak: tuple[tuple[LogicalBuffer, str], ...]  # (buffer, its group), largest first


def hlo_proto_buffer_assignment(data: bytes) -> bytes | None:
    """Field 3 of a serialized `xla.HloProto`, found by stepping over the rest; None when the bytes
    carry none (a bare `HloModuleProto`, or an HloProto without a buffer assignment)."""
    view = memoryview(data)
    end, pos, found = len(view), 0, None
    try:
        while pos < end:
            tag, pos = varint(view, pos, end)
            number, wire = tag >> 3, tag & 7
            if number not in _HLO_PROTO_FIELDS or wire != 2:
                return None
            size, pos = varint(view, pos, end)
            if pos + size > end:
                return None
            if number == 3:
                found = view[pos:pos + size]
            pos += size
    except ValueError:
        return None
    return bytes(found) if found is not None else None


def read_buffer_assignment(data: bytes) -> BufferAssignment | None:
    """The buffer assignment a serialized HloProto carries, or None when it has none or it is unreadable."""
    raw = hlo_proto_buffer_assignment(data)
    if not raw:
        return None
    try:
        proto = _SCHEMA["BufferAssignmentProto"].FromString(raw)
    except Exception:  # noqa: BLE001 - protobuf's decode errors differ between its backends
        return None
    buffers = {int(b.id): LogicalBuffer(int(b.id), int(b.size), b.defined_at.instruction_name,
                                        int(b.defined_at.instruction_id), tuple(b.defined_at.shape_index),
                                        int(b.color))
               for b in proto.logical_buffers}
    allocations = tuple(Allocation(int(a.index), int(a.size), int(a.color), a.is_entry_computation_parameter,
                                   a.maybe_live_out, a.is_constant, a.is_thread_local, a.is_tuple,
                                   tuple(int(x.logical_buffer_id) for x in a.assigned))
                        for a in proto.buffer_allocations)
    if not allocations:
        return None
    traces = tuple(tuple(HeapEvent(int(e.kind), int(e.buffer_id), e.instruction_name, int(e.share_with_canonical_id))
                         for e in t.events)
                   for t in proto.heap_simulator_traces)
    return BufferAssignment(buffers, allocations, traces)


def _heap_trace(assignment: BufferAssignment, color: int, owner: dict[int, Allocation]) -> tuple[HeapEvent, ...]:
    """The trace of this colour's temporary allocation: the one whose first event's buffer lies in a
    reusable allocation (a trace's own allocation index is not trusted), else the trace with the most
    events of this colour."""
    for trace in assignment.traces:
        if trace and (a := owner.get(trace[0].buffer)) is not None and a.color == color and not a.indefinite:
            return trace
    best: tuple[HeapEvent, ...] = ()
    count = 0
    for trace in assignment.traces:
        n = sum(1 for e in trace if (b := assignment.buffers.get(e.buffer)) is not None and b.color == color)
        if n > count:
            best, count = trace, n
    return best


def memory_usage(assignment: BufferAssignment, color: int = DEVICE_MEMORY) -> MemoryUsage:
    """Replay the heap simulator's trace for one memory colour (the device's main memory by default).

    **Raises:** ValueError when the trace frees a buffer more often than it was allocated.
    """
    owner = assignment.allocation_of()
    # Thread-local allocations (scalars of nested computations) are not in the device's memory pool:
    # XProf's memory viewer leaves them out of every figure, and so does this.
    mine = [a for a in assignment.allocations if a.color == color and not a.thread_local]
    held = [(a, b) for a in mine if a.indefinite and (b := _largest_buffer(a, assignment)) is not None]
    trace = _heap_trace(assignment, color, owner)
    peak, peak_event, _ = _replay(assignment, owner, trace, None)
    _, _, live = _replay(assignment, owner, trace, peak_event)
    at_peak = [(b, a.group) for a, b in held] + [(assignment.buffers[b], owner[b].group) for b in live]
    if not assignment.traced:  # no trace: the temporaries' allocations at their reserved size stand in
        reserved = [a for a in mine if not a.indefinite]
        peak = sum(a.size for a in reserved)
        at_peak += [(LogicalBuffer(-a.index - 1, a.size, f"allocation {a.index}", -1, (), color), "temporary")
                    for a in reserved if a.size]
    at_peak.sort(key=lambda item: -item[0].size)
    indefinite_bytes = sum(a.size for a, _ in held)
    return MemoryUsage(
        peak_bytes=peak + indefinite_bytes, indefinite_bytes=indefinite_bytes,
        parameter_bytes=sum(a.size for a in mine if a.parameter),
        live_out_bytes=sum(a.size for a in mine if a.live_out),
        temporary_bytes=peak, allocated_bytes=sum(a.size for a in mine),
        peak_event=peak_event, events=len(trace),
        peak_instruction=trace[peak_event].instruction if peak_event >= 0 else "",
        live_at_peak=tuple(at_peak))


def _replay(assignment: BufferAssignment, owner: dict[int, Allocation], trace: tuple[HeapEvent, ...],
            stop: int | None) -> tuple[int, int, tuple[int, ...]]:
    """(peak heap, index of the event that first reaches it, canonical buffers live after event
    `stop`): the heap grows when a buffer is allocated, or when one shares a buffer freed before,
    and shrinks when the last holder of a buffer frees it."""
    refs: dict[int, int] = {}
    canonical_of: dict[int, int] = {}
    live: dict[int, None] = {}  # canonical buffers on the heap, in the order they came
    heap = peak = 0
    peak_event = -1

    def root(buffer: int) -> int:
        while buffer in canonical_of:
            buffer = canonical_of[buffer]
        return buffer

    for i, event in enumerate(trace):
        if event.buffer not in owner:
            continue
        grown = -1
        if event.kind == ALLOC:
            r = root(event.buffer)
            refs[r] = refs.get(r, 0) + 1
            grown = event.buffer
        elif event.kind == FREE:
            r = root(event.buffer)
            refs[r] = refs.get(r, 0) - 1
            if refs[r] < 0:
                raise ValueError(f"buffer {event.buffer} is freed more often than it was allocated")
            if refs[r] == 0:
                live.pop(r, None)
                heap -= assignment.buffers[r].size
        elif (event.kind == SHARE_WITH and event.canonical in owner and event.buffer not in canonical_of
              and (r := root(event.canonical)) != event.buffer):  # never a buffer shared with itself (a cycle)
            canonical_of[event.buffer] = event.canonical
            refs[r] = refs.get(r, 0) + 1
            if refs[r] == 1:  # shares a buffer freed before: its memory is taken again
                grown = r
        if grown >= 0:
            live[grown] = None
            heap += assignment.buffers[grown].size
            if heap > peak:
                peak, peak_event = heap, i
        if i == stop:
            break
    return peak, peak_event, tuple(live)


def _largest_buffer(allocation: Allocation, assignment: BufferAssignment) -> LogicalBuffer | None:
    """The allocation's largest logical buffer: the one that stands for it at the peak."""
    best: LogicalBuffer | None = None
    for b in allocation.buffers:
        buffer = assignment.buffers.get(b)
        if buffer is not None and buffer.size > (best.size if best is not None else 0):
            best = buffer
    return best
