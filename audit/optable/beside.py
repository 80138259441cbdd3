"""What ran beside an op: the other ops whose runs overlapped its runs in the exported window.

The window is what the trace-viewer export holds (one step on every device, or the capture
window): events of every device on each host's clock. Ops of other devices, and of other streams
of the same device, that overlap a run in time ran beside it; containers (a while loop around its
body) do not count, since their time is their children's.

`concurrency` is how many other ops were running at a time, on average over the op's runs: the
integral of the number of running ops over each run, less the run itself, over the runs' time.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .interference import Beside, BesideOp
from ..base.timebase import PS
from ..base.options import DEFAULTS

TOP_BESIDE = DEFAULTS.beside_ops
RUNS_EXAMINED = 16  # of an op's runs in the window, for naming what overlapped them


@dataclass(frozen=True)
class EventWindow:
    """The exported window's events (host, device, program_id, op, start_ps, dur_ps), its name, and
    which op keys (program/op) are collectives, inner ops of asynchronous collectives included."""

    events: pd.DataFrame
    label: str
    collectives: frozenset[str] = frozenset()


class Overlaps:
    """The window's events, indexed per host when first asked about (clocks and cores are per host)."""

    def __init__(self, window: EventWindow, containers: Collection[str], collectives: Collection[str]):
        self.window = window
        self.containers, self.collectives = frozenset(containers), frozenset(collectives) | window.collectives
        self.hosts = window.events["host"].astype(str).to_numpy()
        self.named = len(np.unique(self.hosts)) > 1  # say which host
        self._on: dict[str, _HostOverlaps] = {}

    def beside(self, key: str, host: str, kernel: tuple[str, str] | None) -> Beside | None:
        """What ran beside `key`'s runs on `host` (None when the window holds none there); `kernel`
        (op key, host/device) is the fastest identical instance, whose company is measured beside."""
        if host not in self._on:
            events = self.window.events[self.hosts == host]
            self._on[host] = _HostOverlaps(events, self.containers, self.collectives)
        label = self.window.label + (f" on {host}" if self.named else "")
        return self._on[host].beside(key, kernel, label)


class _HostOverlaps:
    """One host's events of the window, indexed once for every op asked about: ops by integer code."""

    def __init__(self, frame: pd.DataFrame, containers: frozenset[str], collectives: frozenset[str]):
        codes, names = pd.factorize(frame["program_id"].astype(str) + "/" + frame["op"].astype(str))
        self.names = [str(n) for n in names]
        self.code = {n: c for c, n in enumerate(self.names)}
        keep = ~np.array([n in containers for n in self.names], dtype=bool)[codes]
        self.codes = codes[keep]
        self.host = str(frame["host"].iloc[0]) if len(frame) else ""
        self.device = frame["device"].to_numpy(np.int64)[keep]
        start = frame["start_ps"].to_numpy(np.float64)[keep]
        origin = float(start.min()) if len(start) else 0.0
        self.start = start - origin  # small numbers keep the running sums exact enough
        self.end = self.start + frame["dur_ps"].to_numpy(np.float64)[keep]
        self.collective_op = np.array([n in collectives for n in self.names], dtype=bool)
        self.collective = self.collective_op[self.codes]
        self._all = _Running(self.start, self.end)
        self._comm = _Running(self.start[self.collective], self.end[self.collective])

    def _runs(self, key: str, device: int | None = None) -> np.ndarray:
        code = self.code.get(key)
        if code is None:
            return np.array([], dtype=np.int64)
        hit = self.codes == code
        return np.flatnonzero(hit if device is None else hit & (self.device == device))

    def beside(self, key: str, kernel: tuple[str, str] | None, label: str) -> Beside | None:
        runs = self._runs(key)
        if not len(runs):
            return None
        together, comm = self._concurrency(runs)
        kernel_runs = np.array([], dtype=np.int64)
        if kernel is not None and kernel[1].rpartition("/")[0] == self.host:
            kernel_runs = self._runs(kernel[0], int(kernel[1].rpartition("/")[2]))
        around = self._concurrency(kernel_runs) if len(kernel_runs) else (None, None)
        return Beside(window=label, runs=int(len(runs)), run_s=self._mean_run(runs) or 0.0, concurrency=together,
                      collective_concurrency=comm, kernel_concurrency=around[0],
                      kernel_collective_concurrency=around[1], kernel_run_s=self._mean_run(kernel_runs),
                      ops=self._named(runs, self.code[key]))

    def _mean_run(self, runs: np.ndarray) -> float | None:
        return float((self.end[runs] - self.start[runs]).mean()) * PS if len(runs) else None

    def _concurrency(self, runs: np.ndarray) -> tuple[float, float]:
        a, b = self.start[runs], self.end[runs]
        busy = float((b - a).sum())
        if busy <= 0:
            return 0.0, 0.0
        others = float((self._all.integral(a, b) - (b - a)).sum())
        comm = self._comm.integral(a, b) - np.where(self.collective[runs], b - a, 0.0)
        return max(others, 0.0) / busy, max(float(comm.sum()), 0.0) / busy

    def _named(self, runs: np.ndarray, code: int) -> tuple[BesideOp, ...]:
        """The ops that overlapped the first runs most, with the devices they ran on."""
        hits, overlaps = [], []
        for i in runs[:RUNS_EXAMINED]:
            a, b = self.start[i], self.end[i]
            hit = np.flatnonzero((self.start < b) & (self.end > a))
            hit = hit[hit != i]
            hits.append(hit)
            overlaps.append(np.minimum(self.end[hit], b) - np.maximum(self.start[hit], a))
        hit, overlap = np.concatenate(hits), np.concatenate(overlaps)
        if not len(hit):
            return ()
        time = np.bincount(self.codes[hit], weights=overlap, minlength=len(self.names))
        out = []
        for c in np.argsort(-time, kind="stable")[:TOP_BESIDE]:
            if time[c] <= 0:
                break
            devices = len(np.unique(self.device[hit[self.codes[hit] == c]]))
            out.append(BesideOp(self.names[c], self.names[c].split("/", 1)[1], devices, float(time[c]) * PS,
                                bool(self.collective_op[c]), int(c) == code))
        return tuple(out)


class _Running:
    """The integral over time of how many of a set of intervals are open, queried by interval."""

    def __init__(self, start: np.ndarray, end: np.ndarray):
        self.starts, self.ends = np.sort(start), np.sort(end)
        self.start_sums = np.concatenate([[0.0], np.cumsum(self.starts)])
        self.end_sums = np.concatenate([[0.0], np.cumsum(self.ends)])

    def _up_to(self, t: np.ndarray) -> np.ndarray:
        n_s = np.searchsorted(self.starts, t, "right")
        n_e = np.searchsorted(self.ends, t, "right")
        out: np.ndarray = (n_s * t - self.start_sums[n_s]) - (n_e * t - self.end_sums[n_e])
        return out

    def integral(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if not len(self.starts):
            return np.zeros_like(a)
        out: np.ndarray = self._up_to(b) - self._up_to(a)
        return out
