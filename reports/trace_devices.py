"""The devices a trace-viewer file draws, with their events and windows on one clock per device.

A host exported by one representative step (the steps repeat one program) has one window per
device, its clock starting at that step. A host whose steps are many programs is exported by its
capture window (audit.pod.trace_window): its devices share the host's clock, starting at the
earliest exported event, and every step inside the window is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd

from .model.report import DeviceSteps, ReportModel
from ..base.timebase import PS



@dataclass(frozen=True)
class Event:
    """One measured op occurrence on one device, on its device's clock (seconds from its origin)."""

    name: str
    program_id: int | None
    start_s: float
    dur_s: float
    occurrences: int
    carrier: str = ""  # the op the report judged this event as, where it is not the event's own name


@dataclass(frozen=True)
class StepSpan:
    """A step drawn on the device's step track, on the device's clock."""

    step: int | None
    start_s: float
    dur_s: float


@dataclass(frozen=True)
class Device:
    host: str
    device: int
    label: str
    windows: tuple[StepSpan, ...]
    events: tuple[Event, ...]


def devices(report: ReportModel) -> list[Device]:
    if report.device_steps is not None:
        return _from_device_steps(report.device_steps)
    return _from_timeline(report.timeline)


def window_statement(report: ReportModel) -> dict[str, Any]:
    """What the file holds, for its `otherData`: the window, the cap and what the cap left out."""
    steps = report.device_steps
    if steps is None or not steps.capture:
        return {"window": "one representative step (the median-length one) on every device",
                "units": "ts and dur: microseconds from the start of each device's step; *_s args: seconds",
                **({"cap_events_per_device": steps.cap} if steps is not None and steps.cap else {})}
    left = {f"{host} device {d}": n for host, by_device in steps.capture.items() for d, n in sorted(by_device.items())}
    return {"window": "the capture window of every device: its steps are not one repeated program, so one step "
                      "would show one of them",
            "units": "ts and dur: microseconds from the first exported event of each host; *_s args: seconds",
            "cap_events_per_device": steps.cap, "events_left_out": left}


def capture_note(report: ReportModel) -> str | None:
    """The line a reader of the file must know when it holds a capture window (None for a step)."""
    steps = report.device_steps
    if steps is None or not steps.capture:
        return None
    left = sum(n for by_device in steps.capture.values() for n in by_device.values())
    cut = (f"; {left} later event(s) left out (on {sum(len(v) for v in steps.capture.values() if v)} device(s))"
           if left else "; none left out")
    return (f"the trace file holds the capture window of each device, not one step (the steps are not one "
            f"repeated program): at most the first {steps.cap} events of each device{cut}")


def _from_device_steps(steps: DeviceSteps) -> list[Device]:
    out = []
    windows = {(str(h), int(d)): (int(s), int(st), int(e)) for h, d, s, st, e in
               zip(steps.windows["host"], steps.windows["device"], steps.windows["step"],
                   steps.windows["start_ps"], steps.windows["end_ps"])}
    origins = _host_origins(steps)
    marks = _steps_by_device(steps.steps)
    frame = steps.events
    for keys, group in frame.groupby(["host", "device"], sort=True):
        host, device = cast(tuple[str, int], keys)
        key = (str(host), int(device))
        step, t0, t1 = windows.get(key, (None, int(group["start_ps"].min()), None))
        t0 = origins.get(key[0], t0)
        carriers = group["carrier"] if "carrier" in group.columns else group["op"]
        evs = tuple(Event(str(op), int(pid), (int(st) - t0) * PS, int(du) * PS, max(int(n), 1),
                          "" if str(c) == str(op) else str(c))
                    for op, pid, st, du, n, c in zip(group["op"], group["program_id"], group["start_ps"],
                                                     group["dur_ps"], group["occurrences"], carriers))
        if key[0] in origins:  # a capture window: every step inside it
            drawn = tuple(StepSpan(n, (max(a, t0) - t0) * PS, (min(b, t1 or b) - max(a, t0)) * PS)
                          for n, a, b in marks.get(key, ()) if b > t0 and (t1 is None or a < t1))
        else:
            drawn = () if t1 is None else (StepSpan(step, 0.0, (t1 - t0) * PS),)
        out.append(Device(key[0], key[1], steps.device_names.get(key, ""), drawn, evs))
    return out


def _host_origins(steps: DeviceSteps) -> dict[str, int]:
    """The clock origin of each capture host: its earliest exported event, shared by its devices."""
    frame = steps.events
    inside = frame[frame["host"].isin(list(steps.capture))]
    return {str(h): int(v) for h, v in inside.groupby("host", sort=False, observed=True)["start_ps"].min().items()}


def _steps_by_device(steps: pd.DataFrame | None) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    out: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    if steps is None:
        return out
    for h, d, n, a, b in zip(steps["host"], steps["device"], steps["step"], steps["start_ps"], steps["end_ps"]):
        out.setdefault((str(h), int(d)), []).append((int(n), int(a), int(b)))
    return out


def _from_timeline(timeline: Sequence[Mapping[str, Any]]) -> list[Device]:
    """A report read back from JSON keeps one strip per device class: export those."""
    out = []
    for strip in timeline:
        evs = tuple(Event(str(e.get("name") or ""), None, float(e["start_s"]), float(e["dur_s"]), 1)
                    for e in strip.get("events") or [] if e.get("start_s") is not None and e.get("dur_s") is not None)
        if evs:
            start, end = strip.get("start_s"), strip.get("end_s")
            drawn = ((StepSpan(strip.get("step"), 0.0, float(end) - float(start)),)
                     if start is not None and end is not None else ())
            out.append(Device(str(strip.get("host") or ""), int(strip.get("device") or 0),
                              str(strip.get("device_class") or ""), drawn, evs))
    return out
