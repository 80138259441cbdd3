"""XLA:CPU thunk events on `/host:CPU` -> per-op rows, one per executed thunk per device.

Each executed thunk emits a producer event named after its HLO instruction, with
stats `hlo_op`, `hlo_module`, `program_id`, `run_id` and `device_ordinal`. One
device's thunks hop between pool threads, so rows are keyed by `device_ordinal`,
while nesting (for self time) is per (thread line, device_ordinal).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...base.errors import InputError
from . import xline as xline_decode
from ..profile.events import (NO_RUN, U64, HostExtraction, PlaneStats, assign_by_span, events_frame, int_or, launch_steps,
                     self_times, steps_frame, to_u64)
from ...base.ranges import MAX_DEVICE_ORDINAL
from ...base.timebase import PS_PER_NS

_SKIP, _OP, _STEP, _LAUNCH = 0, 1, 2, 3
_OP_STATS = ("hlo_op", "program_id", "run_id", "device_ordinal")
# From this many events on the plane, lines are decoded by the compiled reader (xline: C,
# else numba); the Python scan reads smaller planes, and every plane where neither runs.
COMPILED_MIN_EVENTS = 300_000


class _Columns:
    """Plain lists, one per column; appended in the hot loop, turned into arrays once.

    Ops are kept as small integer codes into `ops`; `line_runs` records how many rows each
    thread line added, so the line of every row is rebuilt with one np.repeat.
    """

    def __init__(self) -> None:
        self.code: list[int] = []
        self.device: list[int] = []
        self.program: list[int] = []
        self.start: list[int] = []
        self.dur: list[int] = []
        self.run: list[int] = []
        self.line_runs: list[tuple[int, int]] = []
        self.ops: dict[str, int] = {}

    def op_code(self, name: str) -> int:
        return self.ops.setdefault(name, len(self.ops))


def _classify(name: str, stats: dict[str, Any]) -> int:
    if "hlo_op" in stats:
        return _OP
    if "step_num" in stats:
        return _STEP
    if "run_id" in stats and "device_ordinal" not in stats and "Execute" in name:
        return _LAUNCH
    return _SKIP


def _read_slow(stats: Any, wanted: dict[int, int], ps: PlaneStats, base: list[Any]) -> list[Any]:
    """hlo_op, program_id, run_id, device_ordinal of one event over its metadata's values (`base`).

    Each stat's value is `PlaneStats.value` (the compiled reader takes the same, see xline):
    an hlo_op that is not a string reads as "", an id that is not an integer as 0; of several stats
    of one name, the last wins, as in `PlaneStats.to_dict`."""
    values = list(base)
    get = wanted.get
    for st in stats:
        slot = get(st.metadata_id)
        if slot is not None:
            if slot and not st.ref_value and not st.str_value:  # the common case: an integer id
                values[slot] = st.int64_value or st.uint64_value
                continue
            value = ps.value(st)
            if slot == 0:
                values[0] = value if isinstance(value, str) else ""
            else:
                values[slot] = value if isinstance(value, int) else 0
    return values


def _wanted(ps: PlaneStats) -> dict[int, int]:
    """Stat metadata id -> slot of `_OP_STATS`, for every id of those names (a plane may name two ids alike)."""
    return {sid: _OP_STATS.index(name) for sid, name in ps.names.items() if name in _OP_STATS}


def _scan(plane: Any, ps: PlaneStats, cols: _Columns, steps: list[tuple[int, int, int]],
          launches: dict[int, int], lines: range) -> None:
    wanted = _wanted(ps)
    kinds: dict[int, int] = {}
    meta_values: dict[int, list[Any]] = {}
    metadata = plane.event_metadata
    add_code, add_device, add_program = cols.code.append, cols.device.append, cols.program.append
    add_start, add_dur, add_run = cols.start.append, cols.dur.append, cols.run.append
    for line_index in lines:
        line = plane.lines[line_index]
        base = line.timestamp_ns * PS_PER_NS
        before = len(cols.code)
        for ev in line.events:
            mid = ev.metadata_id
            kind = kinds.get(mid)
            if kind is None:
                md = metadata[mid]
                kind = kinds[mid] = _classify(md.name, ps.merged(ev.stats, md.stats))
                meta_values[mid] = _read_slow(md.stats, wanted, ps, ["", 0, NO_RUN, 0])
            if kind == _SKIP:
                continue
            if kind == _OP:
                op, program, run, device = _read_slow(ev.stats, wanted, ps, meta_values[mid])
                add_code(cols.op_code(op or metadata[mid].name))
                add_program(program)
                add_run(run)
                add_device(device)
                add_start(base + ev.offset_ps)
                add_dur(ev.duration_ps)
            elif kind == _STEP:
                start = base + ev.offset_ps
                tags = ps.to_dict(ev.stats)
                steps.append((int_or(tags.get("step_num"), len(steps)), start, start + ev.duration_ps))
            else:
                run_id = ps.to_dict(ev.stats).get("run_id")
                if isinstance(run_id, int):
                    launches.setdefault(run_id, base + ev.offset_ps)
        if len(cols.code) > before:
            cols.line_runs.append((line_index, len(cols.code) - before))


def _program_ids(values: list[int]) -> np.ndarray:
    return _int64s(values).view(np.uint64)


def _int64s(values: list[int]) -> np.ndarray:
    """Stat integers as int64, a uint64 value above 2**63 by its bits (as the compiled reader keeps it)."""
    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError:  # uint64 values above 2**63
        return np.asarray([to_u64(v) for v in values], dtype=np.uint64).view(np.int64)


def _scan_arrays(plane: Any, lines: range) -> tuple[dict[str, Any], list[tuple[int, int, int]], dict[int, int]]:
    """Scan some lines of the plane into column arrays, step annotations and host launch times."""
    cols = _Columns()
    annotations: list[tuple[int, int, int]] = []
    launches: dict[int, int] = {}
    _scan(plane, PlaneStats(plane), cols, annotations, launches, lines)
    device, start = _int64s(cols.device), np.asarray(cols.start, dtype=np.int64)
    dur = np.asarray(cols.dur, dtype=np.int64)
    line = np.repeat(np.asarray([r[0] for r in cols.line_runs], dtype=np.int64),
                     np.asarray([r[1] for r in cols.line_runs], dtype=np.int64))
    # Nesting is per (thread line, device); lines are never split between workers.
    group = line * (1 << 32) + device
    op_names = sorted(cols.ops, key=cols.ops.__getitem__)
    arrays = {
        "device": device, "program_id": _program_ids(cols.program),
        # dtype=str even when empty: a worker whose lines hold no op must union with the others.
        "op": pd.Categorical.from_codes(np.asarray(cols.code, dtype=np.int32),
                                        categories=pd.Index(op_names, dtype=str)),
        "start_ps": start, "dur_ps": dur, "self_ps": self_times(group, start, dur),
        "run_id": _int64s(cols.run),
    }
    return arrays, annotations, launches


def _scan_compiled(plane: Any, using: str = "") -> tuple[dict[str, Any], list[tuple[int, int, int]], dict[int, int]]:
    """The same scan, each line decoded by one compiled pass over its bytes (events_cpu_fast);
    `using` names the decoder's build (default: the first that runs here)."""
    from .events_cpu_fast import scan_lines

    ps = PlaneStats(plane)
    wanted = _wanted(ps)
    return scan_lines(plane, range(len(plane.lines)), _classify,
                      lambda stats: _read_slow(stats, wanted, ps, ["", 0, NO_RUN, 0]), using)


def _scan_all(plane: Any) -> tuple[dict[str, Any], list[tuple[int, int, int]], dict[int, int]]:
    if hasattr(plane.lines, "encoded") and (xline_decode.forced() or _holds(plane, COMPILED_MIN_EVENTS)) and \
            xline_decode.available():
        return _scan_compiled(plane)
    return _scan_arrays(plane, range(len(plane.lines)))


def _holds(plane: Any, events: int) -> bool:
    """Whether the plane holds at least about `events` events: encoded bytes stand in for them
    (about 50 bytes an event), counted line by line only until there are enough."""
    total = 0
    for data in plane.lines.encoded():
        total += len(data)
        if total >= 50 * events:
            return True
    return False


def extract_cpu(plane: Any, host: str) -> HostExtraction:
    """Per-op rows from a `/host:CPU` plane (XLA:CPU thunks), with steps."""
    cols, annotations, launches = _scan_all(plane)
    device = cols["device"]
    bad = np.flatnonzero((device < 0) | (device > MAX_DEVICE_ORDINAL))
    if bad.size:
        raise InputError(f"plane {plane.name!r}: stat device_ordinal {int(device[bad[0]]) % U64} of a thunk event is "
                         f"out of range (0 to {MAX_DEVICE_ORDINAL:,})")
    frame = events_frame({
        "host": pd.Categorical.from_codes(np.zeros(len(device), dtype=np.int8), categories=pd.Index([host])), **cols})
    frame, step_rows, source = _steps(host, frame, annotations, launches)
    names = {int(d): f"CPU device_ordinal {int(d)}" for d in np.unique(device)}
    has_ordinal = "device_ordinal" in PlaneStats(plane).ids
    warnings = [] if len(frame) == 0 or has_ordinal else \
        ["CPU thunk events carry no device_ordinal (older XLA); all ops are counted on device 0"]
    return HostExtraction(frame, steps_frame(step_rows), source, names, warnings)


def _steps(host: str, frame: pd.DataFrame, annotations: list[tuple[int, int, int]],
           launches: dict[int, int]) -> tuple[pd.DataFrame, list[tuple[str, int, int, int, int]], str]:
    if not annotations or frame.empty:
        step, rows = launch_steps(host, frame)
        frame["step"] = step
        return frame, rows, "module launches" if rows else ""
    annotations.sort(key=lambda a: a[1])
    span_start = np.asarray([a[1] for a in annotations], dtype=np.int64)
    span_end = np.asarray([a[2] for a in annotations], dtype=np.int64)
    labels = np.asarray([a[0] for a in annotations], dtype=np.int64)
    # A launch belongs to the step whose host annotation contains its host Execute
    # event; ops may run after the annotation closes when the step does not block.
    first_op = frame.groupby("run_id")["start_ps"].min()
    run_time = {int(r): launches.get(int(r), int(t))
                for r, t in zip(first_op.index.to_numpy(dtype=np.int64), first_op.to_numpy(dtype=np.int64))
                if r != NO_RUN}
    by_run = dict(zip(run_time, assign_by_span(np.asarray(list(run_time.values()), dtype=np.int64),
                                               span_start, span_end, labels)))
    by_time = assign_by_span(frame["start_ps"].to_numpy(), span_start, span_end, labels)
    run_ids = frame["run_id"]
    step_of_run = run_ids.map(by_run).fillna(-1).to_numpy(dtype=np.int64)
    frame["step"] = np.where(run_ids.to_numpy() != NO_RUN, step_of_run, by_time)
    devices = sorted(int(d) for d in frame["device"].unique())
    rows = [(host, d, int(n), int(s), int(e)) for n, s, e in annotations for d in devices]
    return frame, rows, "StepTraceAnnotation"
