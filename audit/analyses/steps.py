"""Steps, idle time and the timeline from the step and op events: each returns plain data for the report."""

from __future__ import annotations

from typing import Any, cast

import statistics

import numpy as np
import pandas as pd

from .programs import step_program
from ..base.timebase import PS



def step_table(steps: pd.DataFrame, events: pd.DataFrame) -> list[dict[str, Any]]:
    """One entry per step: wall time (slowest device) and per-device times, in seconds."""
    if steps.empty:
        return []
    multi_host = steps["host"].nunique() > 1
    keys = ([f"{h}/{d}" for h, d in zip(steps["host"], steps["device"])] if multi_host
            else [str(d) for d in steps["device"]])
    lengths = ((steps["end_ps"] - steps["start_ps"]) * PS).to_numpy()
    out: dict[int, dict[str, Any]] = {}
    for step, key, host, start, end, length in zip(steps["step"], keys, steps["host"], steps["start_ps"],
                                                   steps["end_ps"], lengths):
        entry = out.setdefault(int(step), {"index": int(step), "start": start, "end": end, "per_device_s": {}})
        entry["start"], entry["end"] = min(entry["start"], start), max(entry["end"], end)
        entry["per_device_s"][key] = float(length)
        if multi_host:
            per_host = entry.setdefault("per_host_s", {})
            per_host[str(host)] = max(per_host.get(str(host), 0.0), float(length))
    programs = ({int(cast(int, k)): step_program(rows) for k, rows in steps.groupby("step", sort=False)}
                if "programs" in steps.columns else {})
    result = []
    for step in sorted(out):
        entry = out[step]
        entry["time_s"] = float((entry.pop("end") - entry.pop("start")) * PS)
        if programs.get(step) is not None:
            entry["program_id"] = programs[step]  # one execution of one program
        result.append(entry)
    return result


def step_time_stats(steps: list[dict[str, Any]]) -> dict[str, Any]:
    times = [s["time_s"] for s in steps]
    if not times:
        return {"min": None, "median": None, "max": None}
    return {"min": min(times), "median": statistics.median(times), "max": max(times)}


def idle_seconds(steps: pd.DataFrame, events: pd.DataFrame) -> float | None:
    """Mean per device of step time not covered by any op (union of op intervals)."""
    if steps.empty or events.empty:
        return None
    timed = events[events["start_ps"] >= 0]
    by_device = {key: grp for key, grp in timed.groupby(["host", "device"], observed=True, sort=False)}
    idle = []
    for key, sgrp in steps.groupby(["host", "device"], sort=False):
        evs = by_device.get(key)
        s, e = sgrp["start_ps"].to_numpy(np.int64), sgrp["end_ps"].to_numpy(np.int64)
        if evs is None:
            idle.append(float((e - s).sum()) * PS)
            continue
        starts = evs["start_ps"].to_numpy(np.int64)
        busy = _busy_in_windows(starts, starts + evs["dur_ps"].to_numpy(np.int64), s, e)
        idle.append(float((e - s).sum() - busy.sum()) * PS)
    return float(np.mean(idle)) if idle else None


def _merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint intervals."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    new = np.ones(s.size, bool)
    new[1:] = s[1:] > e[:-1]
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new)) if s.size else e[:0]


def _busy_in_windows(starts: np.ndarray, ends: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """For each window [ws, we), the length covered by the union of the intervals."""
    if starts.size == 0:
        return np.zeros(ws.size, np.int64)
    ms, me = _merged(starts, ends)
    prefix = np.concatenate([[0], np.cumsum(me - ms)])
    first = np.searchsorted(me, ws, side="right")  # first merged interval ending after the window opens
    last = np.searchsorted(ms, we, side="left")  # one past the last starting before it closes
    busy = prefix[last] - prefix[first]
    has = last > first
    lo = np.where(has, np.clip(ws - ms[np.minimum(first, ms.size - 1)], 0, None), 0)
    hi = np.where(has, np.clip(me[np.maximum(last - 1, 0)] - we, 0, None), 0)
    return np.where(has, busy - lo - hi, 0)


def timeline(steps: pd.DataFrame, events: pd.DataFrame, kind_of: dict[tuple[int, str], str],
             device_names: dict[tuple[str, int], str]) -> list[dict[str, Any]]:
    """One representative (median-length) step on the first device of each host."""
    if steps.empty:
        return []
    strips = []
    for host, hsteps in steps.groupby("host", sort=False):
        dev = int(hsteps["device"].min())
        dsteps = hsteps[hsteps["device"] == dev].assign(length=lambda d: d["end_ps"] - d["start_ps"])
        dsteps = dsteps.sort_values("length")
        row = dsteps.iloc[len(dsteps) // 2]
        s, e = int(row["start_ps"]), int(row["end_ps"])
        evs = events[(events["host"] == host) & (events["device"] == dev) & (events["start_ps"] >= s)
                     & (events["start_ps"] < e)].sort_values("start_ps")
        strips.append({
            "device_class": device_names.get((str(host), dev), f"device {dev}"),
            "host": str(host),
            "device": dev,
            "step": int(row["step"]),
            "start_s": 0.0,
            "end_s": (e - s) * PS,
            "events": [
                {"name": str(op), "kind": kind_of.get((int(pid), str(op)), "unknown"),
                 "start_s": (int(st) - s) * PS, "dur_s": int(du) * PS}
                for op, pid, st, du in zip(evs["op"], evs["program_id"], evs["start_ps"], evs["dur_ps"])
            ][:2000],
        })
    return strips


def overlapped_collectives(events: pd.DataFrame, names: set[str]) -> dict[str, bool]:
    """For async collectives, whether other ops ran on the device between -start and -done."""
    out: dict[str, bool] = {}
    if events.empty:
        return out
    timed = events[events["start_ps"] >= 0]
    for name in names:
        if not name.endswith("-start") and "-start" not in name:
            continue
        done = name.replace("-start", "-done")
        starts = timed[timed["op"] == name]
        dones = timed[timed["op"] == done]
        if starts.empty or dones.empty:
            continue
        (host, dev) = starts.iloc[0]["host"], starts.iloc[0]["device"]
        s0 = int(starts.iloc[0]["start_ps"] + starts.iloc[0]["dur_ps"])
        d = dones[(dones["host"] == host) & (dones["device"] == dev) & (dones["start_ps"] >= s0)]
        if d.empty:
            continue
        d0 = int(d.iloc[0]["start_ps"])
        between = timed[(timed["host"] == host) & (timed["device"] == dev) & (timed["start_ps"] >= s0)
                        & (timed["start_ps"] < d0)]
        out[name] = bool(len(between))
    return out
