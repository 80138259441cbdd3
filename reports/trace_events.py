"""The report as a trace-viewer file (Chrome trace-event JSON, opened by ui.perfetto.dev and
chrome://tracing): the measured ops of one representative step on their real timelines (or, for a
capture whose steps are many different programs, the capture window: reports.trace_devices), one
process per device, with the cost model's timeline beside them.

Per device (process) the threads are, top to bottom:
- `step`: the step's window (each step, in a capture window); `flags`: an instant marker at each
  flagged op, with its reasons;
- `measured`: each op as the trace recorded it, its verdict and reasons as slice arguments
  (category `flagged`, `ok`, `interference`, `not judged`...), and where it has identical ops the
  fastest of them per run; ops that overlap go on further `measured` lanes;
- `expected (roofline)`: each op at its measured start, lasting its roofline time (the model's
  lower bound), so a gap under a measured slice is time the model cannot explain;
- `achievable`: the same at the achievable time (what good kernels take; flags judge against it).
Collectives carry the time the schedule hides behind compute and the time left exposed.
Times (`ts`, `dur`) are microseconds from the start of each device's step (of each host's capture
window), as the format asks; arguments ending in `_s` are seconds. `otherData` says which window the
file holds and how many events per device it keeps.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from typing import Any

from ..optable.record import OpRecord
from ..base.errors import UsageError
from .json_report import clean
from .model.report import ReportModel
from .trace_devices import Device, Event, devices as _devices, window_statement

_STEP_TID, _FLAG_TID, _MEASURED_TID, _EXPECTED_TID, _ACHIEVABLE_TID = 1, 2, 10, 100, 200


def trace_document(report: ReportModel) -> dict[str, Any]:
    """The trace-event JSON object for `report`.

    **Raises:** `UsageError` for a report with no measured timeline (an HLO dump, a prediction).
    """
    devices = _devices(report)
    if not devices:
        raise UsageError("a trace file needs a measured timeline, and this report has none (an HLO dump or a "
                         "prediction is not run; a profile without steps has no step to draw)")
    by_key = {o.key: o for o in report.ops}
    by_name: dict[str, OpRecord] = {}
    for o in report.ops:
        by_name.setdefault(o.name, o)
    events: list[dict[str, Any]] = []
    for pid, dev in enumerate(devices, start=1):
        def find(ev: Event) -> OpRecord | None:
            name = ev.carrier or ev.name  # a kernel run inside an async op is judged as that op
            hit = by_key.get(f"{ev.program_id}/{name}") if ev.program_id is not None else None
            return hit if hit is not None else by_name.get(name)
        events += _process(pid, dev, [(ev, find(ev)) for ev in dev.events])
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"tool": f"{report.tool.get('name', 'audit')} {report.tool.get('version', '')}".strip(),
                          "hardware": str(report.hardware.get("name", "")),
                          "hardware_source": str(report.hardware.get("source", "")),
                          **window_statement(report),
                          "expected": "roofline time from the cost model [model], a lower bound",
                          "measured": "op times from the trace [trace]"}}


def render_trace(report: ReportModel) -> str:
    """The trace-event file as JSON text."""
    return json.dumps(clean(trace_document(report)), separators=(",", ":"), allow_nan=False)


TRACE_SUFFIXES = (".json", ".json.gz")


def trace_file_bytes(text: str, path: str) -> bytes:
    """What a trace file at `path` holds: the JSON, gzip-compressed (deterministically) for `.gz`."""
    data = text.encode()
    return gzip.compress(data, mtime=0) if path.endswith(".gz") else data


def _process(pid: int, dev: Device, events: list[tuple[Event, OpRecord | None]]) -> list[dict[str, Any]]:
    label = f"{dev.host + ' · ' if dev.host else ''}device {dev.device}{' (' + dev.label + ')' if dev.label else ''}"
    out: list[dict[str, Any]] = [_meta(pid, None, "process_name", {"name": label}),
                                 _meta(pid, None, "process_sort_index", {"sort_index": pid})]
    for w in dev.windows:
        out.append(_slice(pid, _STEP_TID, f"step {w.step}", "step", w.start_s, w.dur_s, {"step": w.step}))
    measured = [(ev.start_s, ev.dur_s, _measured_slice(ev, op)) for ev, op in events]
    threads = [(_STEP_TID, "step"), (_FLAG_TID, "flags")]
    placed = list(_lanes(measured))
    for lane, (start, dur, args) in placed:
        out.append(_slice(pid, _MEASURED_TID + lane, args.pop("name"), args.pop("cat"), start, dur, args))
    lanes = max((lane for lane, _ in placed), default=0) + 1
    threads += [(_MEASURED_TID + k, "measured" if k == 0 else f"measured {k + 1}") for k in range(lanes)]
    for tid, name, which in ((_EXPECTED_TID, "expected (roofline)", "expected"), (_ACHIEVABLE_TID, "achievable",
                                                                                   "achievable")):
        model = _model_track(pid, tid, which, events)
        if model or which == "expected":
            out += model
            threads.append((tid, name))
    for ev, op in events:
        if op is not None and op.flagged:
            out.append({"ph": "i", "s": "t", "pid": pid, "tid": _FLAG_TID, "ts": _us(ev.start_s), "cat": "flagged",
                        "name": f"flagged: {op.name}", "args": {"reasons": list(op.reasons),
                                                                "suggestion": op.suggestion}})
    for tid, name in threads:
        out += [_meta(pid, tid, "thread_name", {"name": name}), _meta(pid, tid, "thread_sort_index", {"sort_index": tid})]
    return out


def _model_track(pid: int, tid: int, which: str, events: list[tuple[Event, OpRecord | None]]) -> list[dict[str, Any]]:
    """One track of the model's times: each op at its measured start, or right after the previous
    op of the track when they would overlap (ops that ran concurrently), so the track never nests
    unrelated ops. A collective's slice holds its hidden and exposed parts as children."""
    out: list[dict[str, Any]] = []
    end = float("-inf")
    for ev, op in sorted(events, key=lambda e: e[0].start_s):
        if op is None:
            continue
        dur = _per_event(op.expected_s if which == "expected" else op.achievable_s, ev, op)
        if dur is None or dur <= 0:
            continue
        start = max(ev.start_s, end)
        args = _model_slice(ev, op, which)
        if start > ev.start_s:
            args["shifted_by_s"] = start - ev.start_s  # ran beside another op; drawn after it
        out.append(_slice(pid, tid, args.pop("name"), args.pop("cat"), start, dur, args))
        if which == "expected" and op.overlap is not None:
            out += _overlap_parts(pid, tid, start, dur, ev, op)
        end = start + dur
    return out


def _overlap_parts(pid: int, tid: int, start: float, dur: float, ev: Event, op: OpRecord) -> list[dict[str, Any]]:
    """The hidden (behind compute in the schedule) and exposed parts of a collective's expected slice."""
    assert op.overlap is not None
    hidden, exposed = _per_event(op.overlap.hidden_s, ev, op) or 0.0, _per_event(op.overlap.exposed_s, ev, op) or 0.0
    total = hidden + exposed
    if total <= 0:
        return []
    scale = min(1.0, dur / total)  # children stay inside their parent
    parts = []
    if hidden > 0:
        parts.append(_slice(pid, tid, "hidden", "hidden", start, hidden * scale, {"hidden_s": hidden}))
    if exposed > 0:
        parts.append(_slice(pid, tid, "exposed", "exposed", start + hidden * scale, exposed * scale,
                            {"exposed_s": exposed}))
    return parts


def _per_event(total_s: float | None, ev: Event, op: OpRecord) -> float | None:
    """An op's per-device time (summed over its occurrences) for this event's occurrences."""
    if total_s is None or not op.occurrences:
        return None
    return total_s / op.occurrences * ev.occurrences


def _measured_slice(ev: Event, op: OpRecord | None) -> dict[str, Any]:
    args: dict[str, Any] = {"name": ev.name, "cat": "op" if op is None else op.verdict, "measured_s": ev.dur_s,
                            "occurrences": ev.occurrences}
    if op is None:
        return args
    args.update(opcode=op.opcode, category=op.category, bound_by=op.bound_by, verdict=op.verdict,
                flagged=op.flagged, roofline_fraction=op.roofline_fraction,
                expected_s=_per_event(op.expected_s, ev, op),
                achievable_s=_per_event(op.achievable_s, ev, op), achievable_fraction=op.achievable_fraction,
                reasons=list(op.reasons), framework_op=op.framework_op, source=op.source, module=op.module)
    if ev.carrier:
        args["judged_as"] = op.name  # a kernel of an async op: the report's row is the op's
    if op.flagged:
        args["suggestion"] = op.suggestion
    if op.identical is not None:  # per run: what the kernel takes at its fastest, and this op against it
        args.update(fastest_identical_s=op.identical.kernel_s, fastest_identical=op.identical.kernel_key,
                    vs_fastest_identical=op.identical.ratio)
    args.update(_collective_args(ev, op))
    return args


def _model_slice(ev: Event, op: OpRecord, which: str) -> dict[str, Any]:
    args: dict[str, Any] = {"name": ev.name, "cat": which, "bound_by": op.bound_by,
                            "compute_s": _per_event(op.compute_s, ev, op), "memory_s": _per_event(op.memory_s, ev, op),
                            "comm_s": _per_event(op.comm_s, ev, op), "memory_level": op.memory_level,
                            "measured_s": ev.dur_s, "source": "model"}
    args.update(_collective_args(ev, op))
    return args


def _collective_args(ev: Event, op: OpRecord) -> dict[str, Any]:
    if op.overlap is None:
        return {}
    return {"exposed_s": _per_event(op.overlap.exposed_s, ev, op), "hidden_s": _per_event(op.overlap.hidden_s, ev, op),
            "window_compute_s": _per_event(op.overlap.window_compute_s, ev, op)}


def _lanes(slices: Iterable[tuple[float, float, dict[str, Any]]]) -> Iterator[tuple[int, tuple[float, float, dict[str, Any]]]]:
    """Each slice with the first lane where it overlaps nothing (a trace viewer nests slices of one
    thread, so partly overlapping ops, such as async collectives beside compute, need their own)."""
    ends: list[float] = []
    for item in sorted(slices, key=lambda s: (s[0], -s[1])):
        start, dur, _ = item
        lane = next((k for k, end in enumerate(ends) if end <= start), len(ends))
        if lane == len(ends):
            ends.append(start + dur)
        else:
            ends[lane] = start + dur
        yield lane, (start, dur, dict(item[2]))


def _slice(pid: int, tid: int, name: str, cat: str, start_s: float, dur_s: float,
           args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "cat": cat, "ts": _us(start_s), "dur": _us(dur_s),
            "args": {k: v for k, v in args.items() if v is not None}}


def _meta(pid: int, tid: int | None, name: str, args: dict[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": "M", "pid": pid, "name": name, "args": args}
    if tid is not None:
        event["tid"] = tid
    return event


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 6)
