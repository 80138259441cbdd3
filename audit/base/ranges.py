"""The ranges a number read from a profile or an HLO dump may take, checked where it enters.

A profiler writes times relative to the session start, in a session of minutes; XLA writes
shapes that fit a machine's memory and device ids of a real cluster. A value outside these
ranges is a damaged or crafted file, refused as `InputError` naming where it sits, before
any arithmetic or allocation it would size: int64 sums of picoseconds stay far from overflow,
and no array is sized by a number nobody checked.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import InputError

# Times: a profiling session of at most 2**55 ps (10 hours); line timestamps are relative to its
# start (the profiler normalises them), so start + offset + duration stays below 2**57.
MAX_PS = 1 << 55
MAX_TIMESTAMP_NS = MAX_PS // 1000
MAX_OCCURRENCES = 1 << 40  # aggregated events (TPU) of one op within a session
MAX_DEVICE_ORDINAL = 1 << 20  # devices of one host, or of the largest slice
# Shapes and device groups: beyond these nothing real exists (2**50 elements is a petabyte).
MAX_RANK = 64
MAX_ELEMENTS = 1 << 50
MAX_DEVICES = 1 << 20  # devices in one replica-group list or mesh
MAX_TRIP_COUNT = 1 << 40
MAX_TILE = 1 << 16  # a layout tile's side (TPU tiles are (8,128), (2,1), (4,128)...): past it, padding is nonsense
# An op run more often than this in one run of a program (the product of the trip counts of the
# loops around it) would take 13 days at a nanosecond a run: no real program does.
MAX_EXECUTIONS = 1 << 50
# Computations called inside computations (fusions, loops, branches, calls): real programs nest a
# handful of levels (the deepest real module here, a TPU training step, nests 5).
MAX_NESTING = 64
# Brackets nested inside one backend_config (XLA's JSON configs nest fewer than ten levels).
MAX_CONFIG_DEPTH = 64


def time_range(value: int, what: str, where: str, *, low: int = 0, high: int = MAX_PS) -> int:
    """`value` if `low <= value <= high`. **Raises:** `InputError` naming `where` and `what`."""
    if not low <= value <= high:
        raise InputError(f"{where}: {what} {value} is out of range ({low} to {high:,}, a 10-hour session)")
    return value


def check_line(line: Any, where: str) -> None:
    """The timestamp, offsets, durations and occurrence counts of one decoded XLine."""
    time_range(line.timestamp_ns, "timestamp_ns", where, high=MAX_TIMESTAMP_NS)
    time_range(line.duration_ps, "duration_ps", where)
    for i, ev in enumerate(line.events):
        off, dur, occ = ev.offset_ps, ev.duration_ps, ev.num_occurrences
        if not (0 <= off <= MAX_PS and 0 <= dur <= MAX_PS and 0 <= occ <= MAX_OCCURRENCES):
            at = f"{where} event {i}"
            time_range(off, "offset_ps", at)
            time_range(dur, "duration_ps", at)
            time_range(occ, "num_occurrences", at, high=MAX_OCCURRENCES)


def check_columns(timestamp_ns: int, duration_ps: int, offset_ps: np.ndarray, event_duration_ps: np.ndarray,
                  occurrences: np.ndarray, where: str) -> None:
    """`check_line` for a line decoded into arrays (the same numbers, the first bad event named)."""
    time_range(timestamp_ns, "timestamp_ns", where, high=MAX_TIMESTAMP_NS)
    time_range(duration_ps, "duration_ps", where)
    bad = np.flatnonzero((offset_ps < 0) | (offset_ps > MAX_PS) | (event_duration_ps < 0) |
                         (event_duration_ps > MAX_PS) | (occurrences < 0) | (occurrences > MAX_OCCURRENCES))
    if bad.size:
        i = int(bad[0])
        at = f"{where} event {i}"
        time_range(int(offset_ps[i]), "offset_ps", at)
        time_range(int(event_duration_ps[i]), "duration_ps", at)
        time_range(int(occurrences[i]), "num_occurrences", at, high=MAX_OCCURRENCES)


def stat_int(value: Any, what: str, where: str, *, low: int, high: int) -> int:
    """An integer stat (an int, or a float holding one) within `low..high`.

    **Raises:** `InputError` for another type, a non-finite or fractional number, or one out of range.
    """
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: stat {what} is {_show(value)}, not an integer")
    if not low <= value <= high:
        raise InputError(f"{where}: stat {what} {value} is out of range ({low} to {high:,})")
    return value


def whole_int64(values: np.ndarray) -> np.ndarray:
    """Which of `values` (floats) are whole numbers an int64 holds."""
    ok: np.ndarray = np.isfinite(values)
    ok[ok] = (np.abs(values[ok]) < 2.0**63) & (values[ok] % 1 == 0)
    return ok


def finite_or_nan(value: Any) -> float:
    """A count stat (FLOPs, bytes) as a float: NaN (unknown) unless a finite, non-negative number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    number = float(value) if abs(value) < 1e300 else math.inf
    return number if math.isfinite(number) and number >= 0 else math.nan


def ordinal(text: str, where: str) -> int:
    """A device ordinal from a plane name (`/device:GPU:3`)."""
    value = int(text) if len(text) <= 12 else MAX_DEVICE_ORDINAL + 1
    if value > MAX_DEVICE_ORDINAL:
        raise InputError(f"{where}: device ordinal {text[:24]} is out of range (0 to {MAX_DEVICE_ORDINAL:,})")
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
