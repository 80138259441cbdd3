"""Decode an encoded XLine's events straight from its protobuf bytes into arrays, compiled.

A big CPU trace holds millions of thunk events; reading them through protobuf message
objects costs a few microseconds each in Python. Here one compiled pass over a line's
bytes (numba) writes, per event: its metadata id, offset and duration, and for the few
stats a caller asks about (by stat metadata id -> slot), whether the event carries it and
its value; and the line's timestamp and duration, each event's num_occurrences (what the range checks
read). Field numbers are those of `schema` (upstream `xplane.proto`):

    XLine:  2 name, 3 timestamp_ns, 4 events (repeated XEvent), 9 duration_ps, 11 display_name
    XEvent: 1 metadata_id, 2 offset_ps, 3 duration_ps, 4 stats (repeated XStat), 5 num_occurrences
    XStat:  1 metadata_id, 2 double_value, 3 uint64_value, 4 int64_value, 5 str_value,
            6 bytes_value, 7 ref_value

Every integer comes back as its raw 64 bits in an int64 (`.view(np.uint64)` for unsigned
fields). A string value comes back as its position and length in the line's bytes.

Two builds of the same pass: C (`_xline.c`, compiled by pip at install, nothing to compile at
run time) and, where the install had no C compiler and numba is installed (the `numba` extra),
numba (compiled on first use, then cached beside this module). `available()` is False where
neither runs; callers then read messages.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...base.errors import UsageError

# Value kinds of a stat, in `kind[event, slot]`.
ABSENT, INT64, UINT64, DOUBLE, STRING, BYTES, REF = 0, 1, 2, 3, 4, 5, 6
BUILDS = ("c", "numba")
_compiled: dict[str, Any] = {}
_loading = threading.Lock()  # lines are decoded on threads: the numba build is wrapped once
_MISSING = {"c": "this install has no C build of the trace decoder (pip found no C compiler)",
            "numba": "numba is not installed (pip install 'roofline-audit[numba]')"}


def build() -> str:
    """The build that decodes here: "c", else "numba", else "" (neither runs). $AUDIT_DECODER
    picks one ("c", "numba") or none ("python": every plane is read through protobuf messages).

    **Raises:** `UsageError` when $AUDIT_DECODER names a build that cannot run here, or no decoder
    at all (no other path is taken in its place: the variable is there to compare the paths)."""
    chosen = os.environ.get("AUDIT_DECODER", "")
    if chosen in BUILDS:
        if not _load(chosen):
            raise UsageError(f"AUDIT_DECODER={chosen}: {_MISSING[chosen]}")
        return chosen
    if chosen == "python":
        return ""
    if chosen:
        raise UsageError(f"AUDIT_DECODER={chosen}: not a decoder (c, numba or python)")
    return next((name for name in BUILDS if _load(name)), "")


def forced() -> bool:
    """Whether $AUDIT_DECODER names a compiled build: it then reads every plane it can, however small
    (so each path can be run on any trace, and compared)."""
    return os.environ.get("AUDIT_DECODER", "") in BUILDS


def available() -> bool:
    """Whether a compiled decoder can run here (the C extension, else numba)."""
    return bool(build())


def _load(name: str) -> bool:
    """Load one build (compiling the numba one on first use, once per install: numba caches it)."""
    if name in _compiled:
        return _compiled[name] is not None
    with _loading:
        return _load_once(name)


def _load_once(name: str) -> bool:
    if name in _compiled:
        return _compiled[name] is not None
    if name == "c":
        try:
            from . import _xline  # type: ignore[attr-defined]
        except ImportError:  # installed without a C compiler
            _compiled[name] = None
            return False
        _compiled[name] = (_xline.count_events, _xline.decode)
        return True
    try:
        from numba import njit
    except ImportError:  # numba is an extra: without it, planes are read through protobuf messages
        _compiled[name] = None
        return False
    # Later functions call earlier ones by their global names, so each is rebound as it is wrapped.
    for fn in ("_varint", "_skip", "_utf8", "_skip_string", "_stat", "_event"):
        globals()[fn] = njit(cache=True, nogil=True, inline="always")(globals()[fn])
    count, decode = (njit(cache=True, nogil=True)(globals()[fn]) for fn in ("_count_events", "_decode"))
    _compiled[name] = (count, lambda buf, *arrays: _numba_line(decode, np.frombuffer(buf, dtype=np.uint8), *arrays))
    return True


def _numba_line(decode: Any, buf: np.ndarray, *arrays: np.ndarray) -> tuple[int, int] | None:
    """The numba build called as the C build is: (timestamp_ns, duration_ps), or None for malformed bytes."""
    line = np.zeros(2, np.int64)
    return (int(line[0]), int(line[1])) if decode(buf, *arrays, line) else None


@dataclass(frozen=True)
class DecodedLine:
    """One line's events, column by column (n events, s slots)."""

    timestamp_ns: int
    metadata_id: np.ndarray  # int64[n]
    offset_ps: np.ndarray  # int64[n]
    duration_ps: np.ndarray  # int64[n]
    kind: np.ndarray  # uint8[n, s]: ABSENT, INT64, ...; the last value of the slot's stats wins
    value: np.ndarray  # int64[n, s]: raw bits of the int, ref id or double; position of a string
    length: np.ndarray  # int32[n, s]: byte length of a string or bytes value
    occurrences: np.ndarray  # int64[n]: num_occurrences
    line_duration_ps: int  # the line's own duration_ps


def decode_line(data: bytes | memoryview, slot_of: np.ndarray, slots: int, using: str = "") -> DecodedLine:
    """The events of one encoded XLine; `slot_of[stat_metadata_id]` is the slot, or -1 to skip.
    `using` names a build ("c", "numba"); by default the first that runs here.

    **Raises:** `ValueError` for bytes that are not a well-formed XLine.
    """
    name = using or build()
    if not name or not _load(name):
        raise RuntimeError(f"the {name or 'compiled'} XLine decoder cannot run here")
    count, decode = _compiled[name]
    n = count(data if name == "c" else np.frombuffer(data, dtype=np.uint8))
    if n < 0:
        raise ValueError("truncated or corrupt XLine")
    mid = np.zeros(n, np.int64)
    off = np.zeros(n, np.int64)
    dur = np.zeros(n, np.int64)
    occ = np.zeros(n, np.int64)
    kind = np.zeros((n, slots), np.uint8)
    value = np.empty((n, slots), np.int64)  # read only where `kind` says a value is there
    length = np.empty((n, slots), np.int32)
    line = decode(data, np.ascontiguousarray(slot_of, np.int64), mid, off, dur, occ, kind, value, length)
    if line is None:
        raise ValueError("truncated or corrupt XLine")
    return DecodedLine(int(line[0]), mid, off, dur, kind, value, length, occ, int(line[1]))


# The compiled functions work in int64 only (a varint's 64 bits wrap into it; the caller views
# them as unsigned where a field is): mixing numba's uint64 with ints would make floats.


def _varint(buf: Any, pos: int) -> tuple[Any, int]:
    """(value, next position) of the varint at `pos`; the caller checks positions against the end."""
    if pos >= len(buf):
        return np.int64(0), len(buf) + 1
    b = np.int64(buf[pos])
    pos += 1
    if b < 128:  # most tags, ids and sizes fit one byte
        return b, pos
    result = b & 127
    shift = 7
    while pos < len(buf) and shift < 64:
        b = np.int64(buf[pos])
        pos += 1
        result |= (b & 127) << shift
        if b < 128:
            return result, pos
        shift += 7
    return result, len(buf) + 1  # ran off the end: a position past it marks the bytes malformed


def _skip(buf: Any, pos: int, wire: int) -> int:
    """The position after a field of wire type `wire` whose value starts at `pos` (-1: unknown type)."""
    if wire == 0:
        _, pos = _varint(buf, pos)
        return pos
    if wire == 1:
        return pos + 8
    if wire == 2:
        size, pos = _varint(buf, pos)
        # A length past the end (or past 2^63, which wraps negative) marks the bytes malformed
        return pos + size if 0 <= size <= len(buf) - pos else len(buf) + 1
    if wire == 5:
        return pos + 4
    return len(buf) + 1


def _count_events(buf: Any) -> int:
    pos, end, n = 0, len(buf), 0
    while pos < end:
        tag, pos = _varint(buf, pos)
        if pos > end:
            return -1
        if tag == 34:  # field 4, length-delimited: an event
            n += 1
        pos = _skip_string(buf, pos, end) if tag == 18 or tag == 90 else _skip(buf, pos, tag & 7)
    return n if pos == end else -1


def _decode(buf: Any, slot_of: Any, mid: Any, off: Any, dur: Any, occ: Any, kind: Any, value: Any, length: Any,
            line: Any) -> bool:
    """Fill the arrays and line[0], line[1] (timestamp_ns, duration_ps); False for malformed bytes."""
    pos, end, i = 0, len(buf), 0
    while pos < end:
        tag, pos = _varint(buf, pos)
        if pos >= end:
            return False
        if tag == 24 or tag == 72:  # field 3 timestamp_ns, field 9 duration_ps
            v, pos = _varint(buf, pos)
            line[0 if tag == 24 else 1] = v
        elif tag == 34:  # field 4: an event
            size, pos = _varint(buf, pos)
            if size < 0 or size > end - pos or i >= len(mid):
                return False
            stop = pos + size
            if not _event(buf, pos, stop, i, slot_of, mid, off, dur, occ, kind, value, length):
                return False
            pos = stop
            i += 1
        elif tag == 18 or tag == 90:  # the line's name and display_name: strings protobuf checks
            pos = _skip_string(buf, pos, end)
        else:
            pos = _skip(buf, pos, tag & 7)
    return pos == end and i == len(mid)


def _event(buf: Any, pos: int, end: int, i: int, slot_of: Any, mid: Any, off: Any, dur: Any, occ: Any, kind: Any,
           value: Any, length: Any) -> bool:
    while pos < end:
        tag, pos = _varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0 and (field <= 3 or field == 5):
            v, pos = _varint(buf, pos)
            if field == 1:
                mid[i] = v
            elif field == 2:
                off[i] = v
            elif field == 3:
                dur[i] = v
            elif field == 5:
                occ[i] = v
        elif field == 4 and wire == 2:
            size, pos = _varint(buf, pos)
            if size < 0 or size > end - pos:
                return False
            stop = pos + size
            if not _stat(buf, pos, stop, i, slot_of, kind, value, length):
                return False
            pos = stop
        else:
            pos = _skip(buf, pos, wire)
    return pos == end


def _utf8(buf: Any, pos: int, n: int) -> bool:
    """Whether buf[pos:pos + n] is UTF-8 as protobuf requires of a string field (the C build's `utf8`)."""
    i, stop = pos, pos + n
    while i < stop:
        c = buf[i]
        if c < 0x80:
            i += 1
            continue
        more = 1 if 0xC2 <= c <= 0xDF else (2 if 0xE0 <= c <= 0xEF else (3 if 0xF0 <= c <= 0xF4 else -1))
        if more < 0 or stop - i <= more:
            return False
        lo, hi = 0x80, 0xBF
        if c == 0xE0:
            lo = 0xA0
        elif c == 0xED:
            hi = 0x9F
        elif c == 0xF0:
            lo = 0x90
        elif c == 0xF4:
            hi = 0x8F
        if buf[i + 1] < lo or buf[i + 1] > hi:
            return False
        for k in range(2, more + 1):
            if buf[i + k] < 0x80 or buf[i + k] > 0xBF:
                return False
        i += more + 1
    return True


def _skip_string(buf: Any, pos: int, end: int) -> int:
    """The position after a string field of the line (name, display_name), past `end` unless UTF-8."""
    size, pos = _varint(buf, pos)
    if size < 0 or size > end - pos or not _utf8(buf, pos, size):
        return end + 1
    return int(pos + size)


def _stat(buf: Any, pos: int, end: int, i: int, slot_of: Any, kind: Any, value: Any, length: Any) -> bool:
    """One stat's value as the Python reader takes it (the C build's `read_stat`): a non-zero ref, else a
    non-empty string, a non-zero int64, uint64, double, else non-empty bytes; none of them: INT64 0."""
    stat_id = 0  # protobuf's default
    i64, u64, ref, dbl = np.int64(0), np.int64(0), np.int64(0), np.int64(0)
    str_at, str_len, bytes_at, bytes_len = 0, 0, 0, 0
    while pos < end:
        tag, pos = _varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if field == 1 and wire == 0:
            stat_id, pos = _varint(buf, pos)
        elif field == 2 and wire == 1:  # double_value: its 8 little-endian bytes
            if pos + 8 > end:
                return False
            dbl = np.int64(0)
            for b in range(8):
                dbl |= np.int64(buf[pos + b]) << (8 * b)
            pos += 8
        elif wire == 0 and (field == 3 or field == 4 or field == 7):
            v, pos = _varint(buf, pos)
            if field == 3:
                u64 = v
            elif field == 4:
                i64 = v
            else:
                ref = v
        elif wire == 2 and (field == 5 or field == 6):
            size, pos = _varint(buf, pos)
            if size < 0 or size > end - pos:  # a length of 2^64-11 reads as -11: it would step back
                return False
            if field == 5:
                if not _utf8(buf, pos, size):
                    return False
                str_at, str_len = pos, size
            else:
                bytes_at, bytes_len = pos, size
            pos += size
        else:
            pos = _skip(buf, pos, wire)
    if pos != end:
        return False
    k, v, size = INT64, np.int64(0), 0
    if ref != 0:
        k, v = REF, ref
    elif str_len > 0:
        k, v, size = STRING, np.int64(str_at), str_len
    elif i64 != 0:
        k, v = INT64, i64
    elif u64 != 0:
        k, v = UINT64, u64
    elif (dbl << 1) != 0:  # -0.0 is zero, as Python's truth test has it
        k, v = DOUBLE, dbl
    elif bytes_len > 0:
        k, v, size = BYTES, np.int64(bytes_at), bytes_len
    if 0 <= stat_id < len(slot_of) and slot_of[stat_id] >= 0:
        s = slot_of[stat_id]
        kind[i, s] = k
        value[i, s] = v
        length[i, s] = size
    return True


def warm_up() -> str:
    """Make the decoder ready ahead of a first run: nothing to do for its C build (pip compiled it at
    install); the numba build is compiled now for the argument types real planes use. What was done."""
    from .schema import XLine

    using = build()
    if not using:
        return "trace decoder not compiled (no C build, no numba)"
    line = XLine()
    line.timestamp_ns = 1
    event = line.events.add()
    event.metadata_id, event.offset_ps, event.duration_ps = 1, 2, 3
    stat = event.stats.add()
    stat.metadata_id, stat.int64_value = 1, 4
    decoded = decode_line(line.SerializeToString(), np.full(2, 0, np.int64), 1, using)
    if decoded.duration_ps[0] != 3:
        return f"trace decoder ({using}) decoded a test line wrongly: not used ahead"
    return {"c": "trace decoder built in C at install", "numba": "trace decoder compiled (numba)"}.get(
        using, f"trace decoder ready ({using})")

