"""What the trace-viewer export keeps of one host: the representative step on every device when
the steps repeat one program, else the capture window of every device, capped.

A capture of many different programs (a benchmark that runs one jit function after another)
has steps that are one module launch each: its representative step is one program, often one
op. Its window is then the whole capture on each device, the first `TRACE_EVENTS` events of each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd

TRACE_EVENTS = 20000  # per device, in either window
STEP, CAPTURE = "step", "capture"
TRACE_INTS = ("device", "start_ps", "dur_ps", "occurrences", "step", "window_start_ps", "window_end_ps")


@dataclass
class TraceWindow:
    """The exported events (device, op, program_id, start_ps, dur_ps, occurrences, and the window on
    the device: step, window_start_ps, window_end_ps; step -1 for a capture window), what the window
    is, and how many events of each device the cap left out."""

    frame: pd.DataFrame
    scope: str = STEP
    left_out: dict[int, int] = field(default_factory=dict)


def empty_trace() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype="int64") for name in TRACE_INTS} | {
        "op": pd.Series(dtype=str), "program_id": pd.Series(dtype="uint64")})


def trace_window(steps: pd.DataFrame, events: pd.DataFrame, device: int, step: int) -> TraceWindow:
    """The step that is `step` on `device` on every device, or the capture window when the steps
    of `device` do not all run the same programs."""
    if repeats_one_program(steps, events, device):
        return TraceWindow(step_on_every_device(steps, events, device, step))
    return capture_on_every_device(events)


def repeats_one_program(steps: pd.DataFrame, events: pd.DataFrame, device: int) -> bool:
    """Whether every step of `device` runs the same set of programs."""
    own = steps[steps["device"] == device].sort_values("start_ps")
    mine = events[events["device"] == device]
    start = mine["start_ps"].to_numpy(np.int64)
    order = np.argsort(start, kind="stable")
    start, programs = start[order], mine["program_id"].to_numpy()[order]
    seen: set[frozenset[int]] = set()
    for s, e in zip(own["start_ps"].to_numpy(np.int64), own["end_ps"].to_numpy(np.int64)):
        lo, hi = np.searchsorted(start, s, "left"), np.searchsorted(start, e, "left")
        seen.add(frozenset(int(p) for p in np.unique(programs[lo:hi])))
        if len(seen) > 1:
            return False
    return True


def step_on_every_device(steps: pd.DataFrame, events: pd.DataFrame, device: int, step: int) -> pd.DataFrame:
    """Every device's events inside its own window of the step that is `step` on `device` (the same
    position in each device's steps, since devices may number their steps apart), the first
    TRACE_EVENTS of each, with that window (step, window_start_ps, window_end_ps) on every row."""
    ordered = steps.sort_values(["device", "start_ps"])
    position = ordered[ordered["device"] == device]["step"].tolist().index(step)
    nth = pd.DataFrame(ordered.groupby("device", sort=False).nth(position))
    windows = pd.DataFrame({"device": nth["device"], "step": nth["step"], "window_start_ps": nth["start_ps"],
                            "window_end_ps": nth["end_ps"]})
    # Each event's own device window, looked up by device id: no merge of the whole event table.
    on = events["device"].to_numpy(np.int64)
    size = int(max(on.max(initial=0), windows["device"].max()) + 1)
    lo, hi = np.zeros(size, np.int64), np.zeros(size, np.int64)
    lo[windows["device"].to_numpy(np.int64)] = windows["window_start_ps"].to_numpy(np.int64)
    hi[windows["device"].to_numpy(np.int64)] = windows["window_end_ps"].to_numpy(np.int64)
    start = events["start_ps"].to_numpy(np.int64)
    keep = (start >= lo[on]) & (start < hi[on])
    inside = events.loc[keep, ["device", "op", "program_id", "start_ps", "dur_ps", "occurrences"]].merge(
        windows, on="device")
    inside = inside.sort_values(["device", "start_ps"]).groupby("device", sort=True).head(TRACE_EVENTS)
    return _typed(inside)


def capture_on_every_device(events: pd.DataFrame) -> TraceWindow:
    """Each device's first TRACE_EVENTS timed events, its window from the first one's start to the
    latest end among them (step -1: a window of many steps)."""
    timed = events[events["start_ps"] >= 0]
    ordered = timed.sort_values(["device", "start_ps"], kind="stable")
    counts = ordered.groupby("device", sort=True).size()
    kept = ordered.groupby("device", sort=True).head(TRACE_EVENTS)
    kept = kept[["device", "op", "program_id", "start_ps", "dur_ps", "occurrences"]]
    ends = kept["start_ps"] + kept["dur_ps"]
    window = kept.assign(end=ends).groupby("device", sort=True).agg(window_start_ps=("start_ps", "min"),
                                                                   window_end_ps=("end", "max"))
    frame = kept.merge(window.reset_index(), on="device").assign(step=-1)
    left_out = {int(cast(int, d)): int(n) - TRACE_EVENTS for d, n in counts.items() if n > TRACE_EVENTS}
    return TraceWindow(_typed(frame), CAPTURE, left_out)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({name: frame[name].to_numpy(np.int64) for name in TRACE_INTS} | {
        "op": frame["op"].astype(str).to_numpy(), "program_id": frame["program_id"].to_numpy()})
