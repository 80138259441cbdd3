"""Pod-level analyses on the reduced data, sized to read at a thousand hosts: top-N lists
plus distributions over hosts, never one row per host.

All times are seconds per device, summed over the analysed steps (measured, from the trace).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..analyses.steps import step_time_stats
from ..optable.record import OpRecord
from ..base.timebase import PS
from ..base.options import DEFAULTS

TOP = DEFAULTS.pod_ranked


def distribution(values: Iterable[float | None]) -> dict[str, Any]:
    """min, p10, median, p90, max of a set of values (None when there are none)."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if arr.size == 0:
        return {"n": 0, "min": None, "p10": None, "median": None, "p90": None, "max": None}
    q = np.quantile(arr, [0.0, 0.1, 0.5, 0.9, 1.0])
    return {"n": int(arr.size), "min": float(q[0]), "p10": float(q[1]), "median": float(q[2]),
            "p90": float(q[3]), "max": float(q[4])}


def host_summary(per_device: pd.DataFrame, steps: list[dict[str, Any]], hosts: Sequence[Any]) -> list[dict[str, Any]]:
    """One entry per host: its devices, busy time and step times [trace]."""
    out = []
    for h in hosts:
        host_rows = per_device[per_device["host"] == h.host]
        step_times = [t for s in steps if (t := s.get("per_host_s", {}).get(h.host)) is not None]
        out.append({"host": h.host, "devices": int(host_rows["device"].nunique()),
                    "busy_s": float(host_rows["self_ps"].sum()) * PS,
                    "step_time_s": step_time_stats([{"time_s": t} for t in step_times])})
    return out


def pod_analyses(per_device: pd.DataFrame, ops: Sequence[OpRecord], steps: list[dict[str, Any]],
                 hosts: Sequence[Any], top: int = TOP) -> dict[str, Any]:
    """Stragglers per op, slowest hosts and why, hosts whose programs differ, collective wait by host."""
    names = {(o.program_id, o.name): o for o in ops}
    timed = {k for k, o in names.items() if not o.container}
    frame = per_device.assign(host=per_device["host"].astype(str), op=per_device["op"].astype(str),
                              program_id=per_device["program_id"].astype("uint64"))
    keep = np.fromiter(((int(p), o) in timed for p, o in zip(frame["program_id"], frame["op"])), bool, len(frame))
    frame = frame[keep]
    # Per (host, op): mean over the host's devices; the pod's median host is the yardstick.
    host_means = frame.groupby(["host", "program_id", "op"], sort=False)["dur_ps"].mean().mul(PS).rename("s")
    per_host = host_means.reset_index()
    median_host = per_host.groupby(["program_id", "op"], sort=False)["s"].median().rename("median_s")
    per_host = per_host.merge(median_host.reset_index(), on=["program_id", "op"])
    per_host["excess_s"] = per_host["s"] - per_host["median_s"]
    host_steps = _host_step_times(steps)
    return {
        "units": "seconds per device, summed over the analysed steps; step times are medians over steps",
        "source": "trace (measured), reduced per host",
        "hosts": len(hosts),
        "top_n": top,
        "step_time_by_host_s": distribution(host_steps.values()),
        "slowest_hosts": _slowest_hosts(host_steps, per_host, names, top),
        "stragglers": _stragglers(frame, names, top),
        "straggler_ratio_distribution": distribution(_ratios(frame)),
        "program_mismatch": _mismatch(hosts, top),
        "collective_wait": _collective_wait(per_host, names, top),
    }


def _host_step_times(steps: list[dict[str, Any]]) -> dict[str, float]:
    by_host: dict[str, list[float]] = {}
    for s in steps:
        for h, t in s.get("per_host_s", {}).items():
            by_host.setdefault(h, []).append(t)
    return {h: float(np.median(v)) for h, v in by_host.items()}


def _label(names: dict[tuple[int, str], OpRecord], pid: Any, op: Any) -> dict[str, Any]:
    o = names.get((int(pid), str(op)))
    return {"key": o.key if o else None, "name": str(op), "module": o.module if o else None}


def _slowest_hosts(host_steps: dict[str, float], per_host: pd.DataFrame, names: dict[tuple[int, str], OpRecord], top: int) -> list[dict[str, Any]]:
    if not host_steps:
        return []
    median = float(np.median(list(host_steps.values())))
    ranked = sorted(host_steps.items(), key=lambda kv: -kv[1])[:top]
    out = []
    for host, t in ranked:
        mine = per_host[(per_host["host"] == host) & (per_host["excess_s"] > 0)].nlargest(3, "excess_s")
        out.append({"host": host, "step_time_s": t, "vs_median": t / median if median else None,
                    "excess_s": max(t - median, 0.0),  # time beyond the median host's: none for a faster host
                    "ops": [{**_label(names, pid, op), "excess_s": float(excess),
                             "ratio": float(s / med) if med else None}
                            for pid, op, excess, s, med in zip(mine["program_id"], mine["op"],
                                                               mine["excess_s"].to_numpy(float),
                                                               mine["s"].to_numpy(float),
                                                               mine["median_s"].to_numpy(float))]})
    return out


def _ratios(frame: pd.DataFrame) -> pd.Series:
    g = frame.groupby(["program_id", "op"], sort=False)["dur_ps"]
    med = g.median()
    return (g.max() / med.where(med > 0)).dropna()


def _stragglers(frame: pd.DataFrame, names: dict[tuple[int, str], OpRecord], top: int) -> list[dict[str, Any]]:
    """Ops whose slowest device lost the most time against the median device."""
    if frame.empty:
        return []
    g = frame.groupby(["program_id", "op"], sort=False)["dur_ps"]
    stats = pd.DataFrame({"median": g.median(), "max": g.max(), "argmax": g.idxmax()})
    stats["excess_s"] = (stats["max"] - stats["median"]) * PS
    top_ops = stats.nlargest(top, "excess_s").reset_index()
    out = []
    for pid, op, med, worst, excess, at in zip(top_ops["program_id"], top_ops["op"], top_ops["median"].to_numpy(float),
                                               top_ops["max"].to_numpy(float), top_ops["excess_s"].to_numpy(float),
                                               top_ops["argmax"]):
        slow = frame.loc[at]
        out.append({**_label(names, pid, op), "straggler_ratio": float(worst / med) if med else None,
                    "median_s": float(med) * PS, "max_s": float(worst) * PS, "excess_s": float(excess),
                    "slowest_host": str(slow["host"]), "slowest_device": int(slow["device"])})
    return out


def _mismatch(hosts: Sequence[Any], top: int) -> dict[str, Any]:
    """Hosts that ran a program whose HLO fingerprint differs from the most common one."""
    from collections import Counter

    common: dict[int, Counter[str]] = {}
    for h in hosts:
        for pid, fp in h.programs.items():
            common.setdefault(pid, Counter())[fp] += 1
    chosen = {pid: c.most_common(1)[0][0] for pid, c in common.items()}
    differing = []
    for h in hosts:
        diff = [{"program_id": pid, "fingerprint": fp, "common_fingerprint": chosen[pid]}
                for pid, fp in h.programs.items() if chosen[pid] != fp]
        if diff:
            differing.append({"host": h.host, "programs": diff})
    return {"hosts": len(differing), "examples": differing[:top]}


def _collective_wait(per_host: pd.DataFrame, names: dict[tuple[int, str], OpRecord], top: int) -> dict[str, Any]:
    """Time in collectives per host: the host that waits least arrived last (the others waited for it)."""
    comm = {k for k, o in names.items() if o.comm_bytes}
    keep = np.array([(int(p), str(o)) in comm for p, o in zip(per_host["program_id"], per_host["op"])], dtype=bool)
    wait = per_host[keep].groupby("host", sort=False)["s"].sum()
    if wait.empty:
        return {"by_host_s": distribution([]), "arrives_last": [], "waits_longest": []}
    median = float(wait.median())

    def rows(series: pd.Series) -> list[dict[str, Any]]:
        return [{"host": h, "wait_s": float(w), "vs_median": float(w / median) if median else None}
                for h, w in series.items()]

    return {"by_host_s": distribution(wait.to_numpy()), "arrives_last": rows(wait.nsmallest(top)),
            "waits_longest": rows(wait.nlargest(top))}
