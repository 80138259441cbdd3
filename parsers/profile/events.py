"""What every platform's event extraction shares: stat lookup, columns, nesting, steps.

Extraction keeps no Python object per event: each platform module appends
plain values to `ColumnBuilder` lists (or numpy arrays) and builds one
DataFrame at the end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .model import EVENT_COLUMNS, STEP_COLUMNS

# Columns added to EVENT_COLUMNS by this reader.
EXTRA_COLUMNS: dict[str, str] = {
    "kernels": "GPU kernels (and memcpys) merged into this occurrence; 0 on TPU and CPU",
}

_INT_DTYPES = {
    "device": "int32", "start_ps": "int64", "dur_ps": "int64", "self_ps": "int64",
    "occurrences": "int64", "step": "int64", "run_id": "int64", "kernels": "int32",
}
_DEFAULTS = {"occurrences": 1, "step": -1, "run_id": -1}
_FLOAT_COLUMNS = ("trace_flops", "trace_model_flops", "trace_bytes")
_CATEGORICAL = ("host", "op", "trace_category")
U64 = 1 << 64
NO_RUN = -1  # run_id of events whose launch is unknown (real run ids may be any other int64)


@dataclass
class HostExtraction:
    """Op events, steps and facts found on one host's planes."""

    events: pd.DataFrame
    steps: pd.DataFrame
    step_source: str
    device_names: dict[int, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def to_u64(value: int) -> int:
    """A program id as unsigned 64-bit: negative int64 values are two's complement."""
    return value % U64


class PlaneStats:
    """Stat names of one plane: id -> name, name -> id, and value decoding with ref resolution."""

    def __init__(self, plane: Any) -> None:
        self.names: dict[int, str] = {k: v.name for k, v in plane.stat_metadata.items()}
        self.ids: dict[str, int] = {}
        for sid, name in self.names.items():
            self.ids.setdefault(name, sid)

    def value(self, stat: Any) -> Any:
        """The stat's value: a ref_value resolves to its interned string; ints come back as int."""
        ref = stat.ref_value
        if ref:
            return self.names.get(ref, "")
        text = stat.str_value
        if text:
            return text
        ivalue = stat.int64_value or stat.uint64_value
        if ivalue:
            return ivalue
        dvalue = stat.double_value
        if dvalue:
            return dvalue
        data = stat.bytes_value
        return data if data else 0

    def to_dict(self, stats: Iterable[Any]) -> dict[str, Any]:
        return {self.names.get(s.metadata_id, str(s.metadata_id)): self.value(s) for s in stats}

    def merged(self, event_stats: Iterable[Any], metadata_stats: Iterable[Any]) -> dict[str, Any]:
        """Metadata stats overlaid by event stats: the event's own value wins."""
        merged = self.to_dict(metadata_stats)
        merged.update(self.to_dict(event_stats))
        return merged


def int_or(value: Any, default: int, *, unsigned: bool = False) -> int:
    """`value` as an int when it is a number that fits 64 bits (signed, or either way with
    `unsigned` for ids read as uint64), else `default` (a stat of another type or a crafted value:
    NaN, infinity, beyond 64 bits)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    if isinstance(value, float) and not math.isfinite(value):
        return default
    number = int(value)
    return number if -(1 << 63) <= number < 1 << (64 if unsigned else 63) else default


def events_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """One DataFrame in EVENT_COLUMNS order (plus extras), with compact dtypes; missing columns get defaults."""
    n = len(next(iter(columns.values()))) if columns else 0
    data: dict[str, Any] = {}
    for name in (*EVENT_COLUMNS, *EXTRA_COLUMNS):
        values = columns.get(name)
        if name in _CATEGORICAL:
            data[name] = pd.Categorical([""] * n if values is None else values)
        elif name == "program_id":
            data[name] = np.zeros(n, dtype=np.uint64) if values is None else np.asarray(values, dtype=np.uint64)
        elif name in _FLOAT_COLUMNS:
            data[name] = np.full(n, np.nan) if values is None else np.asarray(values, dtype=np.float64)
        elif values is None:
            data[name] = np.full(n, _DEFAULTS.get(name, 0), dtype=_INT_DTYPES[name])
        else:
            data[name] = np.asarray(values, dtype=_INT_DTYPES[name])
    return pd.DataFrame(data, copy=False)  # the columns are fresh arrays: no second copy of a big table


def steps_frame(rows: list[tuple[str, int, int, int, int]]) -> pd.DataFrame:
    """STEP_COLUMNS rows (host, device, step, start_ps, end_ps), sorted by device then start."""
    frame = pd.DataFrame(rows, columns=list(STEP_COLUMNS))
    frame = frame.astype({"device": "int32", "step": "int64", "start_ps": "int64", "end_ps": "int64"})
    frame["host"] = pd.Categorical(frame["host"])
    return frame.sort_values(["device", "start_ps"], kind="stable").reset_index(drop=True)


def self_times(group: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Self time = duration minus the durations of direct children, per nesting group.

    Events nest when one's span contains the other's (inclusive at both ends) within
    the same group (a line, or a line and device). Inputs need not be sorted.
    """
    n = len(start)
    self_ps = dur.astype(np.int64, copy=True)
    if n < 2:
        return self_ps
    order = _nesting_order(group, start, dur)
    g, s, d = group[order], start[order], dur[order]
    end = s + d
    overlapping = (g[1:] == g[:-1]) & (s[1:] < end[:-1])
    if not overlapping.any():
        return self_ps
    nested_groups = np.unique(g[1:][overlapping])
    for grp in nested_groups:
        idx = np.nonzero(g == grp)[0]
        child_total = _stack_children(s[idx], end[idx])
        self_ps[order[idx]] -= child_total
    return self_ps


def _nesting_order(group: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Indices that sort events by (group, start, longest first). A trace's lines list their events
    in time order, so a stable sort on the group alone usually gives it (a radix sort, a fraction of
    the three-key sort); the three-key sort runs only when it does not."""
    order = np.argsort(group, kind="stable")
    g, s, d = group[order], start[order], dur[order]
    same = g[1:] == g[:-1]
    out_of_order = same & ((s[1:] < s[:-1]) | ((s[1:] == s[:-1]) & (d[1:] > d[:-1])))
    return order if not out_of_order.any() else np.lexsort((-dur, start, group))


def _stack_children(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The time direct children cover per event (their union: two children that overlap each other,
    as a damaged or crafted trace has them, are not counted twice, so no self time is negative), for
    events sorted by (start, -dur)."""
    children = np.zeros(len(start), dtype=np.int64)
    covered = start.tolist()  # per event: where the children counted so far end (none yet: its start)
    stack: list[int] = []
    starts, ends = start.tolist(), end.tolist()
    for i, (s, e) in enumerate(zip(starts, ends)):
        while stack and not (starts[stack[-1]] <= s and e <= ends[stack[-1]]):
            stack.pop()
        if stack:
            parent = stack[-1]
            since = max(s, covered[parent])
            if e > since:
                children[parent] += e - since
            covered[parent] = max(covered[parent], e)
        stack.append(i)
    return children


def assign_by_span(times: np.ndarray, span_start: np.ndarray, span_end: np.ndarray,
                   labels: np.ndarray, default: int = -1) -> np.ndarray:
    """For each time, the label of the span containing it (spans sorted by start, not overlapping)."""
    out = np.full(len(times), default, dtype=np.int64)
    if len(span_start) == 0 or len(times) == 0:
        return out
    pos = np.searchsorted(span_start, times, side="right") - 1
    ok = pos >= 0
    ok[ok] = times[ok] <= span_end[pos[ok]]
    out[ok] = labels[pos[ok]]
    return out


def launch_steps(host: str, events: pd.DataFrame) -> tuple[np.ndarray, list[tuple[str, int, int, int, int]]]:
    """One step per module launch, numbered by launch time on each device (a program launched once on
    8 GPUs is one step with 8 device spans, whether the devices share its run_id or each has its own);
    returns each event's step and the step rows."""
    if events.empty or (events["run_id"] == NO_RUN).all():
        return np.full(len(events), -1, dtype=np.int64), []
    launched = events[events["run_id"] != NO_RUN]
    first = launched.groupby(["device", "run_id"], observed=True)["start_ps"].min().reset_index()
    first = first.sort_values(["device", "start_ps"], kind="stable")
    first["step"] = first.groupby("device", observed=True).cumcount().astype(np.int64)
    keyed = events[["device", "run_id"]].merge(first[["device", "run_id", "step"]], on=["device", "run_id"],
                                               how="left")
    step = keyed["step"].fillna(-1).to_numpy(dtype=np.int64)
    spans = events.assign(step=step, end_ps=events["start_ps"] + events["dur_ps"])
    grouped = spans[spans["step"] >= 0].groupby(["device", "step"], observed=True)
    bounds = grouped.agg(start_ps=("start_ps", "min"), end_ps=("end_ps", "max")).reset_index()
    rows = [(host, int(d), int(s), int(a), int(b))
            for d, s, a, b in bounds[["device", "step", "start_ps", "end_ps"]].itertuples(index=False)]
    return step, rows
