"""GPU kernels on `/device:GPU:N` stream lines -> per-op rows, one per HLO execution.

Kernels carry the XLA annotation stats `hlo_op`, `hlo_module` and `program_id`.
An HLO op may launch several kernels back to back; consecutive kernels of one op
on one stream within one module execution are one occurrence (`kernels` counts
them). A module execution is the host `GpuExecutable::ExecuteThunks` span that
contains the kernel's launch call, found through `correlation_id`.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ...base.timebase import PS_PER_NS
from ..profile.events import HostExtraction, PlaneStats, assign_by_span, events_frame, int_or, launch_steps, steps_frame, to_u64

GPU_PLANE = re.compile(r"^/device:GPU:(\d+)$")
_DERIVED_LINES = ("XLA Ops", "XLA Modules", "Framework", "Source code", "Steps", "Launch Stats")
_KERNEL_STATS = ("hlo_op", "program_id", "correlation_id")
_EXECUTE_SPAN = "GpuExecutable::ExecuteThunks"


class _HostFacts:
    """What the host plane says about launches: API call per correlation id, module spans, steps."""

    def __init__(self) -> None:
        self.launch: dict[int, tuple[int, int]] = {}  # correlation id -> (line, start ps)
        self.spans: dict[int, list[tuple[int, int]]] = {}  # line -> [(start, end)] of module executions
        self.module_spans: dict[int, list[tuple[int, int]]] = {}  # fallback: "<module>:XLA GPU module"
        self.steps: list[tuple[int, int, int]] = []  # (step_num, start, end)


def _host_kind(name: str, stats: dict[str, Any]) -> str:
    if name == _EXECUTE_SPAN:
        return "execute"
    if name.endswith(":XLA GPU module"):
        return "module"
    if "correlation_id" in stats:
        return "launch"
    return "step" if "step_num" in stats else ""


def _scan_host(plane: Any) -> _HostFacts:
    """Launch calls by correlation id, module execution spans and step annotations; other events are skipped."""
    facts = _HostFacts()
    if plane is None:
        return facts
    ps = PlaneStats(plane)
    kinds: dict[int, str] = {}
    for index, line in enumerate(plane.lines):
        base = line.timestamp_ns * PS_PER_NS
        for ev in line.events:
            kind = kinds.get(ev.metadata_id)
            if kind is None:
                md = plane.event_metadata[ev.metadata_id]
                kind = kinds[ev.metadata_id] = _host_kind(md.name, ps.merged(ev.stats, md.stats))
            if not kind:
                continue
            start = base + ev.offset_ps
            span = (start, start + ev.duration_ps)
            if kind == "execute":
                facts.spans.setdefault(index, []).append(span)
            elif kind == "module":
                facts.module_spans.setdefault(index, []).append(span)
            else:
                stats = ps.to_dict(ev.stats)
                if kind == "launch" and isinstance(stats.get("correlation_id"), int):
                    facts.launch[stats["correlation_id"]] = (index, start)
                elif kind == "step":
                    facts.steps.append((int_or(stats.get("step_num"), len(facts.steps)), *span))
    if not facts.spans:
        facts.spans = facts.module_spans
    return facts


def _scan_device(plane: Any, device: int, out: dict[str, list[Any]]) -> int:
    """Append this plane's attributed kernels to `out`; return how many kernels lack `hlo_op`."""
    ps = PlaneStats(plane)
    wanted = {ps.ids[n]: n for n in _KERNEL_STATS if n in ps.ids}
    meta_stats: dict[int, dict[str, Any]] = {}
    unattributed = 0
    for line in plane.lines:
        if line.name.startswith(_DERIVED_LINES):
            continue
        base = line.timestamp_ns * PS_PER_NS
        for ev in line.events:
            mid = ev.metadata_id
            stats = meta_stats.get(mid)
            if stats is None:
                md = plane.event_metadata[mid]
                stats = meta_stats[mid] = {wanted[s.metadata_id]: ps.value(s)
                                           for s in md.stats if s.metadata_id in wanted}
            stats = dict(stats)
            for s in ev.stats:
                key = wanted.get(s.metadata_id)
                if key is not None:
                    stats[key] = ps.value(s)
            hlo_op = stats.get("hlo_op")
            if not hlo_op or not isinstance(hlo_op, str):
                unattributed += 1
                continue
            out["device"].append(device)
            out["line"].append(line.id)
            out["program_id"].append(to_u64(int_or(stats.get("program_id"), 0, unsigned=True)))
            out["op"].append(hlo_op.rsplit("::", 1)[-1])
            out["start_ps"].append(base + ev.offset_ps)
            out["dur_ps"].append(ev.duration_ps)
            out["cid"].append(int_or(stats.get("correlation_id"), -1))
    return unattributed


def _containing(spans: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Index of the span (sorted, non-overlapping rows of start, end) containing each time, else -1."""
    pos = np.searchsorted(spans[:, 0], times, side="right") - 1
    inside = pos >= 0
    inside[inside] = times[inside] <= spans[pos[inside], 1]
    return np.where(inside, pos, -1)


def _run_ids(cids: np.ndarray, facts: _HostFacts) -> tuple[np.ndarray, np.ndarray]:
    """Module execution id (a global span index, -1 if unknown) and host launch time of each kernel.

    Each launching (API) thread is matched with the executor line whose execution spans
    contain most of its launch calls: with several GPUs, one thread launches per GPU.
    """
    api_line = np.full(len(cids), -1, dtype=np.int64)
    launch_t = np.full(len(cids), -1, dtype=np.int64)
    for i, cid in enumerate(cids.tolist()):
        found = facts.launch.get(cid)
        if found is not None:
            api_line[i], launch_t[i] = found
    run = np.full(len(cids), -1, dtype=np.int64)
    lines = sorted(facts.spans)
    if not lines:
        return run, launch_t
    offset = 0
    hits = np.full((len(lines), len(cids)), -1, dtype=np.int64)
    for row, line in enumerate(lines):
        spans = np.asarray(sorted(facts.spans[line]), dtype=np.int64)
        local = _containing(spans, launch_t)
        hits[row] = np.where((local >= 0) & (launch_t >= 0), local + offset, -1)
        offset += len(spans)
    for api in np.unique(api_line[api_line >= 0]):
        mine = api_line == api
        best = int(np.argmax((hits[:, mine] >= 0).sum(axis=1)))
        run[mine] = hits[best, mine]
    return run, launch_t


def _occurrences(raw: pd.DataFrame) -> pd.DataFrame:
    """Merge consecutive kernels of one op on one stream within one module execution."""
    raw = raw.sort_values(["device", "line", "start_ps"], kind="stable").reset_index(drop=True)
    keys = raw[["device", "line", "program_id", "op", "run_id"]]
    same = (keys.shift() == keys).all(axis=1).to_numpy()
    group = np.cumsum(~same) - 1
    agg = raw.groupby(group, sort=True).agg(
        device=("device", "first"), program_id=("program_id", "first"), op=("op", "first"),
        start_ps=("start_ps", "first"), dur_ps=("dur_ps", "sum"), run_id=("run_id", "first"),
        launch_ps=("launch_ps", "first"), kernels=("op", "size"))
    return agg.reset_index(drop=True)


def extract_gpu(planes: list[tuple[int, Any]], host_plane: Any, host: str) -> HostExtraction:
    """Per-op rows from `/device:GPU:N` planes, with executions found on the host plane."""
    columns: dict[str, list[Any]] = {k: [] for k in ("device", "line", "program_id", "op", "start_ps",
                                                      "dur_ps", "cid")}
    unattributed = sum(_scan_device(plane, device, columns) for device, plane in planes)
    facts = _scan_host(host_plane)
    raw = pd.DataFrame({k: np.asarray(v, dtype=np.uint64 if k == "program_id" else None)
                        for k, v in columns.items() if k != "op"}).assign(op=columns["op"])
    if raw.empty:
        frame = events_frame({"host": []})
        return HostExtraction(frame, steps_frame([]), "", _names(planes), [])
    raw["run_id"], raw["launch_ps"] = _run_ids(raw["cid"].to_numpy(), facts)
    occ = _occurrences(raw)
    frame = events_frame({
        "host": [host] * len(occ), "device": occ["device"], "program_id": occ["program_id"],
        "op": occ["op"].tolist(), "start_ps": occ["start_ps"], "dur_ps": occ["dur_ps"],
        "self_ps": occ["dur_ps"], "run_id": occ["run_id"], "kernels": occ["kernels"],
    })
    warnings = [] if unattributed == 0 else \
        [f"{unattributed} GPU kernels or copies carry no hlo_op (not XLA ops, e.g. runtime copies); left out"]
    if (occ["run_id"] == -1).all():
        warnings.append("GPU kernels could not be tied to module executions (no host launch data); "
                        "consecutive kernels of one op are counted as one occurrence")
    frame, rows, source = _steps(host, frame, occ["launch_ps"].to_numpy(), facts)
    return HostExtraction(frame, steps_frame(rows), source, _names(planes), warnings)


def _steps(host: str, frame: pd.DataFrame, launch_ps: np.ndarray,
           facts: _HostFacts) -> tuple[pd.DataFrame, list[tuple[str, int, int, int, int]], str]:
    if not facts.steps:
        step, rows = launch_steps(host, frame)
        frame["step"] = step
        return frame, rows, "module launches" if rows else ""
    facts.steps.sort(key=lambda a: a[1])
    arr = np.asarray(facts.steps, dtype=np.int64)
    frame["step"] = assign_by_span(launch_ps, arr[:, 1], arr[:, 2], arr[:, 0])
    # The annotation is host time; a step's device span is that of the kernels it launched.
    in_step = frame[frame["step"] >= 0].assign(end_ps=frame["start_ps"] + frame["dur_ps"])
    bounds = in_step.groupby(["device", "step"]).agg(start_ps=("start_ps", "min"), end_ps=("end_ps", "max"))
    rows = [(host, int(d), int(n), int(a), int(b))
            for d, n, a, b in bounds.reset_index()[["device", "step", "start_ps", "end_ps"]].itertuples(index=False)]
    return frame, rows, "StepTraceAnnotation"


def _names(planes: list[tuple[int, Any]]) -> dict[int, str]:
    return {device: plane.name for device, plane in planes}
