"""The `/host:CPU` scan of `events_cpu`, one compiled pass per thread line instead of a Python loop per event.

Same rows, steps and launches as `events_cpu._scan` (a test compares the two on real traces):
each line's events are decoded straight from its bytes (`xline`), each event metadata
id is classified once from its first event (as `_scan` does), and the op rows are taken with
array operations. Lines are decoded on two threads (the compiled decoder releases the GIL),
so neither a worker process nor a Python object per event is needed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import numpy as np
import pandas as pd

from ...base.errors import InputError
from . import xline as xd
from ..profile.events import PlaneStats, int_or
from ...base.ranges import check_columns
from ...base.timebase import PS_PER_NS

# Stats the scan reads, by slot: the op stats of `_scan` in its order, then what classifies steps.
SLOTS = ("hlo_op", "program_id", "run_id", "device_ordinal", "step_num")
_MAX_STAT_ID = 1 << 24  # stat metadata ids are small and dense; the decoder indexes an array by them
_OP, _STEP, _LAUNCH = 1, 2, 3  # events_cpu's kinds (0 skips)


def scan_lines(plane: Any, lines: range, classify: Any, read_meta: Any, using: str = "",
               ) -> tuple[dict[str, Any], list[tuple[int, int, int]], dict[int, int]]:
    """Column arrays of the op rows, step annotations and host launch times, as `events_cpu._scan_arrays`.

    `classify(name, stats)` and `read_meta(metadata_stats)` are `events_cpu`'s own rules, so the
    two scans cannot drift apart. `using` names the decoder's build (`xline_decode.BUILDS`).
    """
    ps = PlaneStats(plane)
    wanted = {sid: SLOTS.index(name) for sid, name in ps.names.items() if name in SLOTS}
    if any(not 0 <= sid < _MAX_STAT_ID for sid in wanted):
        raise InputError(f"plane {plane.name!r}: a stat metadata id is out of range (0 to {_MAX_STAT_ID:,})",
                         path=plane.lines.origin)
    slot_of = np.full(max(wanted, default=0) + 1, -1, np.int64)  # sized by the few stats read, checked above
    for sid, slot in wanted.items():
        slot_of[sid] = slot
    state = _State(plane, ps, classify, read_meta)
    for line_index, data, decoded in _decoded(plane, lines, slot_of, using):
        state.add_line(line_index, decoded, data)
    return state.arrays(), state.steps, state.launches


def _decoded(plane: Any, lines: range, slot_of: np.ndarray,
             using: str) -> Iterator[tuple[int, Any, xd.DecodedLine]]:
    """Each line's bytes and events, in order, two at a time on threads (the decoder releases the GIL)."""
    encoded = plane.lines.encoded()

    def submit(i: int) -> tuple[int, bytes | memoryview, Any]:
        data = encoded[i]
        return i, data, pool.submit(xd.decode_line, data, slot_of, len(SLOTS), using)

    with ThreadPoolExecutor(max_workers=2) as pool:
        pending = [submit(i) for i in lines[:2]]
        for n in range(len(lines)):
            i, data, future = pending.pop(0)
            if n + 2 < len(lines):  # at most two decoded lines wait in memory
                pending.append(submit(lines[n + 2]))
            try:
                decoded = future.result()
            except ValueError:
                raise InputError(f"line {i} of a plane is truncated or corrupt (protobuf decode failed)",
                                 path=plane.lines.origin) from None
            try:
                check_columns(decoded.timestamp_ns, decoded.line_duration_ps, decoded.offset_ps, decoded.duration_ps,
                              decoded.occurrences, f"plane {plane.name!r} line {i}")
            except InputError as exc:
                raise InputError(exc.message, path=plane.lines.origin) from None
            yield i, data, decoded


class _State:
    """What the scan has seen so far: kinds per metadata id, op codes, rows, steps, launches."""

    def __init__(self, plane: Any, ps: PlaneStats, classify: Any, read_meta: Any) -> None:
        self.plane, self.ps, self.classify, self.read_meta = plane, ps, classify, read_meta
        self.kinds: dict[int, int] = {}
        self.meta: dict[int, list[Any]] = {}
        self.ops: dict[str, int] = {}
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in ("code", "device", "program", "start", "dur",
                                                                     "run", "line")}
        self.steps: list[tuple[int, int, int]] = []
        self.launches: dict[int, int] = {}

    def add_line(self, line_index: int, d: xd.DecodedLine, data: bytes | memoryview) -> None:
        if d.metadata_id.size == 0:
            return
        inverse, uniq = pd.factorize(d.metadata_id)  # ids in order of first appearance
        first = np.full(uniq.size, d.metadata_id.size, np.int64)
        np.minimum.at(first, inverse, np.arange(inverse.size))
        for k in range(uniq.size):  # classify new ids from their first event, in event order
            self._learn(int(uniq[k]), d, int(first[k]))
        kind = np.fromiter((self.kinds[int(m)] for m in uniq), np.int64, uniq.size)[inverse]
        start = d.timestamp_ns * PS_PER_NS + d.offset_ps
        for j in np.flatnonzero((kind == _STEP) | (kind == _LAUNCH)):
            self._step_or_launch(int(kind[j]), d, int(j), int(start[j]), data)
        rows = np.flatnonzero(kind == _OP)
        if rows.size:
            self._ops(line_index, d, rows, start, data)

    def _learn(self, mid: int, d: xd.DecodedLine, j: int) -> None:
        if mid in self.kinds:
            return
        md = self.plane.event_metadata[mid]
        present = {SLOTS[s]: True for s in range(len(SLOTS)) if d.kind[j, s] != xd.ABSENT}
        merged = {**self.ps.to_dict(md.stats), **present}
        self.kinds[mid] = self.classify(md.name, merged)
        self.meta[mid] = self.read_meta(md.stats)

    def _value(self, d: xd.DecodedLine, j: int, s: int, data: bytes | memoryview) -> Any:
        """A stat's value as `PlaneStats.value` reads it (ref -> its name, ints as ints)."""
        k, v = int(d.kind[j, s]), int(d.value[j, s])
        if k == xd.REF:
            return self.ps.names.get(v, "") if v else 0
        if k == xd.STRING and d.length[j, s]:
            return str(data[v:v + int(d.length[j, s])], "utf-8", "replace")
        if k == xd.UINT64:
            return v % (1 << 64)
        if k == xd.INT64:
            return v
        if k == xd.DOUBLE:
            return float(np.int64(v).view(np.float64))
        if k == xd.BYTES:
            return bytes(data[v:v + int(d.length[j, s])])
        return 0

    def _step_or_launch(self, kind: int, d: xd.DecodedLine, j: int, start: int, data: bytes | memoryview) -> None:
        if kind == _STEP:
            step = self._value(d, j, 4, data) if d.kind[j, 4] != xd.ABSENT else len(self.steps)
            self.steps.append((int_or(step, len(self.steps)), start, start + int(d.duration_ps[j])))
            return
        run_id = self._value(d, j, 2, data) if d.kind[j, 2] in (xd.INT64, xd.UINT64) else None
        if run_id is not None:
            self.launches.setdefault(run_id, start)

    def _ints(self, d: xd.DecodedLine, rows: np.ndarray, which: np.ndarray, uniq: np.ndarray, s: int) -> np.ndarray:
        """A slot's integer per op row: the event's own (int64 or uint64 bits), else its metadata's
        (`uniq[which]` is each row's metadata id)."""
        kinds = d.kind[rows, s]
        own = np.where((kinds == xd.INT64) | (kinds == xd.UINT64), d.value[rows, s], 0)
        # Python ints as 64-bit two's complement: uint64 program ids above 2**63 keep their bits.
        meta = np.array([int(self.meta[int(m)][s]) % (1 << 64) for m in uniq], np.uint64).view(np.int64)[which]
        return np.where(kinds != xd.ABSENT, own, meta)

    def _ops(self, line_index: int, d: xd.DecodedLine, rows: np.ndarray, start: np.ndarray, data: bytes | memoryview) -> None:
        mids = d.metadata_id[rows]
        which, uniq = pd.factorize(mids)
        self.parts["program"].append(self._ints(d, rows, which, uniq, 1))
        self.parts["run"].append(self._ints(d, rows, which, uniq, 2))
        self.parts["device"].append(self._ints(d, rows, which, uniq, 3))
        self.parts["code"].append(self._codes(d, rows, mids, data))
        self.parts["start"].append(start[rows])
        self.parts["dur"].append(d.duration_ps[rows])
        self.parts["line"].append(np.full(rows.size, line_index, np.int64))

    def _codes(self, d: xd.DecodedLine, rows: np.ndarray, mids: np.ndarray, data: bytes | memoryview) -> np.ndarray:
        """Op codes in order of first appearance: the event's hlo_op, else its metadata's, else the event name."""
        kinds, values = d.kind[rows, 0], d.value[rows, 0]
        # One key per distinct (metadata id, hlo_op ref); any other hlo_op (a string, a number: rare, or
        # crafted) gets a key of its own row, so each row is named by its own stat.
        refs = (kinds == xd.REF) & (values >= 0) & (values < 1 << 31)
        keys = np.where(refs, values, -1)
        others = np.flatnonzero(~refs & (kinds != xd.ABSENT))
        keys[others] = -2 - others
        if mids.size and (mids.min() < 0 or mids.max() >= 1 << 31 or keys.max() >= 1 << 31):
            inverse, pairs = pd.factorize(pd.MultiIndex.from_arrays([mids, keys]))
            found = [(int(m), i) for m, i in pairs]
        else:  # both fit 32 bits: one int64 key, factorized in order of first appearance
            inverse, packed = pd.factorize(mids * (1 << 32) + (keys & 0xFFFFFFFF))
            found = [(int(p) >> 32, 0) for p in packed]
        first = np.full(len(found), mids.size, np.int64)
        np.minimum.at(first, inverse, np.arange(inverse.size))
        codes = np.fromiter((self._code(self._op_name(d, int(rows[first[k]]), found[k][0], data))
                             for k in range(len(found))), np.int64, len(found))
        return codes[inverse]

    def _op_name(self, d: xd.DecodedLine, j: int, mid: int, data: bytes | memoryview) -> str:
        """The hlo_op of event `j` as `events_cpu._read_slow` reads it, else the event's own name."""
        kind, value = int(d.kind[j, 0]), int(d.value[j, 0])
        if kind == xd.ABSENT:
            op = self.meta[mid][0]
        elif kind == xd.REF:
            op = self.ps.names.get(value, "")
        elif kind == xd.STRING:
            op = str(data[value:value + int(d.length[j, 0])], "utf-8", "replace")
        else:
            op = ""
        return str(op or self.plane.event_metadata[mid].name)

    def _code(self, name: str) -> int:
        return self.ops.setdefault(name, len(self.ops))

    def arrays(self) -> dict[str, Any]:
        from ..profile.events import self_times

        def cat(name: str, dtype: Any) -> np.ndarray:
            parts = self.parts.pop(name, [])  # each line's pieces freed as its column is built
            return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

        device, start, dur = cat("device", np.int64), cat("start", np.int64), cat("dur", np.int64)
        line = cat("line", np.int64)
        group = line * (1 << 32) + device
        names = sorted(self.ops, key=self.ops.__getitem__)
        return {
            "device": device, "program_id": cat("program", np.int64).view(np.uint64),
            "op": pd.Categorical.from_codes(cat("code", np.int32), categories=pd.Index(names, dtype=str)),
            "start_ps": start, "dur_ps": dur, "self_ps": self_times(group, start, dur),
            "run_id": cat("run", np.int64),
        }
