"""What the host's Python thread did, from its line of `/host:CPU`: one row per event.

JAX's Python tracer (on by default in `jax.profiler`) writes each Python call as an event named
`$file.py:line function` (a builtin as `$module function`) on the line named `python`, beside the
TraceMe annotations the thread opened there (`train` of a `StepTraceAnnotation`, `PjitFunction(f)`,
`DevicePut`, `CommonPjRtBuffer::Await`, ...). The step diagnosis reads this line to say what the
host was doing while the devices idled. The thread-pool lines that hold the ops are not decoded
again: each line's name is read from its first bytes (XLine serialises `name`, field 2, before its
events), and only the other lines are decoded, by the compiled line decoder where one runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...base.errors import InputError
from ...base.timebase import PS_PER_NS
from . import xline as xline_decode
from ..wire.protowire import varint
from ...base.ranges import check_columns

# Thread-pool lines (the ops run there) and the profiler's own lines hold no Python; the host thread
# is named after its process (`python`, `python3.11`), so it is found by what it holds instead:
# JAX's launches, else the most Python tracer events.
_POOL_LINES = ("tf_", "Grpc", "Host Threads")
_LAUNCHES = ("PjitFunction", "CommonPjRtLoadedExecutable::Execute")


def empty_host_events() -> pd.DataFrame:
    """The frame `python_events` returns: `name` (`$file.py:line function`, `$module function` or a
    TraceMe name), `start_ps` and `end_ps` (ps from the profile's start)."""
    return pd.DataFrame({"name": pd.Categorical([], categories=pd.Index([], dtype=str)),
                         "start_ps": np.zeros(0, np.int64), "end_ps": np.zeros(0, np.int64)})


def line_name(data: bytes | memoryview) -> str:
    """The `name` of an encoded XLine, read from its leading fields only ("" where it has none
    before its events, or where the bytes are not well formed)."""
    view = memoryview(data)
    pos, end = 0, len(view)
    try:
        while pos < end:
            tag, pos = varint(view, pos, end)
            field, wire = tag >> 3, tag & 7
            if field == 4:  # the events: a name is serialised before them
                return ""
            if wire == 0:
                _, pos = varint(view, pos, end)
            elif wire == 2:
                size, pos = varint(view, pos, end)
                if field == 2:
                    return str(view[pos:pos + size], "utf-8", "replace")
                pos += size
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:
                return ""
    except ValueError:
        return ""
    return ""


def python_events(plane: Any) -> pd.DataFrame:
    """The events of the thread that launched the programs (else the one with the most Python
    calls), sorted by start (longest first on ties)."""
    if plane is None:
        return empty_host_events()
    lines = plane.lines
    encoded = lines.encoded() if hasattr(lines, "encoded") else None
    metadata = plane.event_metadata
    best: tuple[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
    for index in range(len(lines)):
        name = line_name(encoded[index]) if encoded is not None else lines[index].name
        if name.startswith(_POOL_LINES):
            continue
        if encoded is not None and xline_decode.available():
            part = _decoded(plane, encoded[index])
        else:
            part = _parsed(lines[index])
        names = [metadata[int(m)].name if int(m) in metadata else "" for m in np.unique(part[0])]
        score = (sum(1 for n in names if n.startswith(_LAUNCHES)), sum(1 for n in names if n.startswith("$")))
        if score > (0, 0) and (best is None or score > best[0]):
            best = (score, part)
    if best is None:
        return empty_host_events()
    mid, start, dur = best[1]
    order = np.lexsort((-dur, start))
    mid, start, dur = mid[order], start[order], dur[order]
    codes, ids = pd.factorize(mid)
    names = [metadata[int(m)].name if int(m) in metadata else "" for m in ids]
    # Distinct metadata ids may share a name; categories must be unique.
    categories, code_of = np.unique(np.asarray(names, dtype=object), return_inverse=True) if names else \
        (np.zeros(0, object), np.zeros(0, np.int64))
    return pd.DataFrame({
        "name": pd.Categorical.from_codes(np.asarray(code_of, np.int64)[codes].astype(np.int32),
                                          categories=pd.Index([str(c) for c in categories], dtype=str)),
        "start_ps": start, "end_ps": start + dur})


def _decoded(plane: Any, data: bytes | memoryview) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    try:
        d = xline_decode.decode_line(data, np.full(1, -1, np.int64), 1)
    except ValueError:
        raise InputError(f"a host thread line of plane {plane.name!r} is truncated or corrupt "
                         "(protobuf decode failed)", path=plane.lines.origin) from None
    try:
        check_columns(d.timestamp_ns, d.line_duration_ps, d.offset_ps, d.duration_ps, d.occurrences,
                      f"plane {plane.name!r} (a host thread line)")
    except InputError as exc:
        raise InputError(exc.message, path=plane.lines.origin) from None
    return d.metadata_id, d.timestamp_ns * PS_PER_NS + d.offset_ps, d.duration_ps


def _parsed(line: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(line.events)
    mid, off, dur = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    for i, ev in enumerate(line.events):
        mid[i], off[i], dur[i] = ev.metadata_id, ev.offset_ps, max(ev.duration_ps, 0)
    return mid, line.timestamp_ns * PS_PER_NS + off, dur
