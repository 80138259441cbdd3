"""Pod-level analyses on the reduced data, sized to read at a thousand hosts: top-N lists
plus distributions over hosts, never one row per host.

All times are seconds per device, summed over the analysed steps (measured, from the trace).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analyses.steps import CONTAINER_OPCODES

TOP = 10
PS = 1e-12


def distribution(values) -> dict:
    """min, p10, median, p90, max of a set of values (None when there are none)."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if arr.size == 0:
        return {"n": 0, "min": None, "p10": None, "median": None, "p90": None, "max": None}
    q = np.quantile(arr, [0.0, 0.1, 0.5, 0.9, 1.0])
    return {"n": int(arr.size), "min": float(q[0]), "p10": float(q[1]), "median": float(q[2]),
            "p90": float(q[3]), "max": float(q[4])}


def pod_analyses(per_device: pd.DataFrame, ops: list[dict], steps: list[dict], hosts, top: int = TOP) -> dict:
    """Stragglers per op, slowest hosts and why, hosts whose programs differ, collective wait by host."""
    names = {(o["program_id"], o["name"]): o for o in ops}
    timed = {k for k, o in names.items() if not o["container"] and o["opcode"] not in CONTAINER_OPCODES}
    frame = per_device.assign(host=per_device["host"].astype(str), op=per_device["op"].astype(str),
                              program_id=per_device["program_id"].astype("uint64"))
    keep = np.fromiter(((int(p), o) in timed for p, o in zip(frame["program_id"], frame["op"])), bool, len(frame))
    frame = frame[keep]
    # Per (host, op): mean over the host's devices; the pod's median host is the yardstick.
    per_host = frame.groupby(["host", "program_id", "op"], sort=False)["dur_ps"].mean().mul(PS).rename("s")
    per_host = per_host.reset_index()
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


def _host_step_times(steps: list[dict]) -> dict[str, float]:
    by_host: dict[str, list[float]] = {}
    for s in steps:
        for h, t in s.get("per_host_s", {}).items():
            by_host.setdefault(h, []).append(t)
    return {h: float(np.median(v)) for h, v in by_host.items()}


def _label(names: dict, pid, op) -> dict:
    o = names.get((int(pid), str(op)), {})
    return {"key": o.get("key"), "name": str(op), "module": o.get("module")}


def _slowest_hosts(host_steps: dict[str, float], per_host: pd.DataFrame, names: dict, top: int) -> list[dict]:
    if not host_steps:
        return []
    median = float(np.median(list(host_steps.values())))
    ranked = sorted(host_steps.items(), key=lambda kv: -kv[1])[:top]
    out = []
    for host, t in ranked:
        mine = per_host[(per_host["host"] == host) & (per_host["excess_s"] > 0)].nlargest(3, "excess_s")
        out.append({"host": host, "step_time_s": t, "vs_median": t / median if median else None,
                    "excess_s": t - median,
                    "ops": [{**_label(names, r.program_id, r.op), "excess_s": float(r.excess_s),
                             "ratio": float(r.s / r.median_s) if r.median_s else None}
                            for r in mine.itertuples()]})
    return out


def _ratios(frame: pd.DataFrame) -> pd.Series:
    g = frame.groupby(["program_id", "op"], sort=False)["dur_ps"]
    med = g.median()
    return (g.max() / med.where(med > 0)).dropna()


def _stragglers(frame: pd.DataFrame, names: dict, top: int) -> list[dict]:
    """Ops whose slowest device lost the most time against the median device."""
    if frame.empty:
        return []
    g = frame.groupby(["program_id", "op"], sort=False)["dur_ps"]
    stats = pd.DataFrame({"median": g.median(), "max": g.max(), "argmax": g.idxmax()})
    stats["excess_s"] = (stats["max"] - stats["median"]) * PS
    out = []
    for (pid, op), r in stats.nlargest(top, "excess_s").iterrows():
        slow = frame.loc[r["argmax"]]
        out.append({**_label(names, pid, op), "straggler_ratio": float(r["max"] / r["median"]) if r["median"] else None,
                    "median_s": float(r["median"]) * PS, "max_s": float(r["max"]) * PS,
                    "excess_s": float(r["excess_s"]), "slowest_host": str(slow["host"]),
                    "slowest_device": int(slow["device"])})
    return out


def _mismatch(hosts, top: int) -> dict:
    """Hosts that ran a program whose HLO fingerprint differs from the most common one."""
    from collections import Counter

    common: dict[int, Counter] = {}
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


def _collective_wait(per_host: pd.DataFrame, names: dict, top: int) -> dict:
    """Time in collectives per host: the host that waits least arrived last (the others waited for it)."""
    comm = {k for k, o in names.items() if o.get("comm_bytes")}
    keep = np.fromiter(((int(p), o) in comm for p, o in zip(per_host["program_id"], per_host["op"])), bool,
                       len(per_host))
    wait = per_host[keep].groupby("host", sort=False)["s"].sum()
    if wait.empty:
        return {"by_host_s": distribution([]), "arrives_last": [], "waits_longest": []}
    median = float(wait.median())

    def rows(series):
        return [{"host": h, "wait_s": float(w), "vs_median": float(w / median) if median else None}
                for h, w in series.items()]

    return {"by_host_s": distribution(wait.to_numpy()), "arrives_last": rows(wait.nsmallest(top)),
            "waits_longest": rows(wait.nlargest(top))}
