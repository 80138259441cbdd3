"""TPU TensorCore planes -> per-op rows from the `XLA Ops` line.

Op-level stats (program_id, symbol_id, hlo_category, flops, bytes_accessed) may
sit on the event metadata or on the event; both are merged, the event winning,
and decided once per metadata id. Device spans (`device_offset_ps`,
`device_duration_ps`) replace offset and duration when present. Control-flow
ops nest their body ops on the same line; self time subtracts direct children.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..profile.events import (NO_RUN, HostExtraction, PlaneStats, assign_by_span, events_frame, int_or, launch_steps, self_times,
                     steps_frame, to_u64)
from ...base.ranges import MAX_PS, finite_or_nan, stat_int
from ...base.timebase import PS_PER_NS
from .schema import CoreDetails

TPU_PLANE = re.compile(r"^/device:TPU:([0-9]+)$")
_OP_STATS = ("program_id", "symbol_id", "hlo_category", "flops", "model_flops", "bytes_accessed")
_EVENT_STATS = ("device_offset_ps", "device_duration_ps", "self_duration_ps", "run_id", *_OP_STATS)
_FLOAT_STATS = ("flops", "model_flops", "bytes_accessed")


def _span(base: int, ev: Any, stats: dict[str, Any], where: str = "") -> tuple[int, int]:
    if "device_offset_ps" in stats and "device_duration_ps" in stats:
        return (stat_int(stats["device_offset_ps"], "device_offset_ps", where, low=0, high=2 * MAX_PS),
                stat_int(stats["device_duration_ps"], "device_duration_ps", where, low=0, high=MAX_PS))
    return base + ev.offset_ps, ev.duration_ps


def _event_stats(ps: PlaneStats, ev: Any, wanted: dict[int, str]) -> dict[str, Any]:
    return {wanted[s.metadata_id]: ps.value(s) for s in ev.stats if s.metadata_id in wanted}


def _line_spans(plane: Any, ps: PlaneStats, line: Any, wanted: dict[int, str]) -> list[tuple[int, int, Any]]:
    """(start, end, name or run_id) of each event on a `Steps` or `XLA Modules` line."""
    base = line.timestamp_ns * PS_PER_NS
    spans = []
    for ev in line.events:
        stats = _event_stats(ps, ev, wanted)
        start, dur = _span(base, ev, stats, f"plane {plane.name!r} line {line.name!r}")
        label = stats.get("run_id", plane.event_metadata[ev.metadata_id].name)
        spans.append((start, start + dur, label))
    spans.sort(key=lambda s: s[0])
    return spans


def _scan_ops(plane: Any, ps: PlaneStats, line: Any, wanted: dict[int, str], out: dict[str, list[Any]]) -> None:
    base = line.timestamp_ns * PS_PER_NS
    per_metadata: dict[int, dict[str, Any]] = {}
    for ev in line.events:
        mid = ev.metadata_id
        meta = per_metadata.get(mid)
        if meta is None:
            md = plane.event_metadata[mid]
            meta = {wanted[s.metadata_id]: ps.value(s) for s in md.stats if s.metadata_id in wanted}
            meta["op"] = md.display_name or md.name
            per_metadata[mid] = meta
        stats = dict(meta)
        stats.update(_event_stats(ps, ev, wanted))
        start, dur = _span(base, ev, stats, f"plane {plane.name!r} line {line.name!r}")
        occurrences = ev.num_occurrences
        out["program_id"].append(to_u64(int_or(stats.get("program_id"), 0, unsigned=True)))
        out["op"].append(stats["op"])
        out["start_ps"].append(-1 if occurrences else start)
        out["dur_ps"].append(dur)
        # an aggregated op's self time is within its duration, whatever its stat says (a crafted one: -1)
        out["aggregated_self"].append(min(max(int_or(stats.get("self_duration_ps"), dur), 0), dur)
                                      if occurrences else -1)
        out["occurrences"].append(max(1, occurrences))
        for name in _FLOAT_STATS:
            value = stats.get(name)
            out[name].append(finite_or_nan(value))
        category = stats.get("hlo_category")
        out["trace_category"].append(category if isinstance(category, str) else "")


def _plane_rows(plane: Any, device: int, host: str) -> tuple[pd.DataFrame, list[tuple[int, int, Any]]]:
    ps = PlaneStats(plane)
    wanted = {ps.ids[n]: n for n in _EVENT_STATS if n in ps.ids}
    out: dict[str, list[Any]] = {k: [] for k in ("program_id", "op", "start_ps", "dur_ps", "aggregated_self",
                                                  "occurrences", "trace_category", *_FLOAT_STATS)}
    steps: list[tuple[int, int, Any]] = []
    modules: list[tuple[int, int, Any]] = []
    for line in plane.lines:
        if line.name == "XLA Ops":
            _scan_ops(plane, ps, line, wanted, out)
        elif line.name == "Steps":
            steps = _line_spans(plane, ps, line, wanted)
        elif line.name == "XLA Modules":
            modules = _line_spans(plane, ps, line, wanted)
    start = np.asarray(out["start_ps"], dtype=np.int64)
    dur = np.asarray(out["dur_ps"], dtype=np.int64)
    timed = start >= 0
    self_ps = np.asarray(out["aggregated_self"], dtype=np.int64)
    self_ps[timed] = self_times(np.zeros(int(timed.sum()), dtype=np.int64), start[timed], dur[timed])
    run = np.full(len(start), NO_RUN, dtype=np.int64)
    if modules:
        arr = np.asarray([(s, e, int_or(r, NO_RUN)) for s, e, r in modules], dtype=np.int64)
        run[timed] = assign_by_span(start[timed], arr[:, 0], arr[:, 1], arr[:, 2], default=NO_RUN)
    frame = events_frame({
        "host": [host] * len(start), "device": np.full(len(start), device), "program_id": out["program_id"],
        "op": out["op"], "start_ps": start, "dur_ps": dur, "self_ps": self_ps,
        "occurrences": out["occurrences"], "run_id": run, "trace_flops": out["flops"],
        "trace_model_flops": out["model_flops"], "trace_bytes": out["bytes_accessed"],
        "trace_category": out["trace_category"],
    })
    return frame, steps


def _step_number(label: Any, index: int) -> int:
    text = str(label).strip()
    return int(text) if text.lstrip("-").isdigit() else index


def core_label(plane: Any) -> str:
    """The plane name, with chip and core ids when the plane states its `core_details`."""
    ps = PlaneStats(plane)
    data = ps.to_dict(plane.stats).get("core_details")
    if not isinstance(data, bytes):
        return str(plane.name)
    details = CoreDetails()
    details.ParseFromString(data)
    return f"{plane.name} (chip {details.global_chip_id}, core {details.global_core_id})"


def extract_tpu(planes: list[tuple[int, Any]], host: str) -> HostExtraction:
    """Per-op rows from `/device:TPU:N` TensorCore planes, with steps from their `Steps` lines."""
    frames, step_rows = [], []
    for device, plane in planes:
        if not len(plane.lines):  # most planes of a crafted file: no frame of nothing per plane
            continue
        frame, steps = _plane_rows(plane, device, host)
        if steps:
            arr = np.asarray([(s, e, _step_number(n, i)) for i, (s, e, n) in enumerate(steps)], dtype=np.int64)
            frame["step"] = assign_by_span(frame["start_ps"].to_numpy(), arr[:, 0], arr[:, 1], arr[:, 2])
            step_rows += [(host, device, int(n), int(s), int(e)) for s, e, n in arr.tolist()]
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True) if frames else events_frame({"host": []})
    for col in ("host", "op", "trace_category"):
        frame[col] = frame[col].astype("category")
    source = "Steps line" if step_rows else ""
    if not step_rows and not frame.empty:
        frame["step"], step_rows = launch_steps(host, frame)
        source = "module launches" if step_rows else ""
    names = {device: core_label(plane) for device, plane in planes}
    return HostExtraction(frame, steps_frame(step_rows), source, names, [])
