"""What changed in time between two sides of runs: the step time judged against run-to-run noise and
the threshold, and the ops whose measured time moved [trace]."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..costmodel.units import percent, signed
from ..reports.model.diff import MeasuredChanges, MovedOp, RunRow, StepTimeChange, UnstableRun
from ..reports.model.report import ReportModel
from .diff_pairing import PairedOps
from .diff_program import per_step

DEFAULT_THRESHOLD = 0.05  # step-time change that counts when none is given
# With one run a side, nothing measures run-to-run variance: identical runs on a shared
# machine differ by this much (and more beside a CPU hog), so the within-run interval is
# widened by it and the comparison is labelled weak.
SINGLE_RUN_FLOOR = 0.15
# A run stands apart from the other runs of its side when its median is off theirs by more than
# this and by more than the runs' steps explain (4 standard errors). Repeated runs of identical
# code on a shared 2-core machine differ by up to about 20% (bench/RESULTS.md); a CPU hog beside
# one run slows it by 60% or more.
RUN_OUTLIER = 0.25
RESAMPLES = 2000
# Up to this many steps a run's resamples are drawn outright (resamples x steps values, 32 MB at
# most); beyond it each resample's median is drawn from its order-statistic distribution, so memory
# and time do not grow with steps (a report of 250,000 steps would need 4 GB drawn outright).
DIRECT_STEPS = 2048


@dataclass(frozen=True)
class Run:
    """One run of a side: where it came from and its step times (s)."""

    source: str
    steps: list[float]


def noise_interval(base: list[float], head: list[float], *, resamples: int = RESAMPLES,
                   confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Bootstrap interval of median(head)/median(base) from per-step samples (seeded, repeatable)."""
    rng = np.random.default_rng(seed)
    mb = bootstrap_medians(rng, np.asarray(base, float), resamples)
    mh = bootstrap_medians(rng, np.asarray(head, float), resamples)
    lo, hi = np.quantile(mh / np.maximum(mb, 1e-30), [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return float(lo), float(hi)


def bootstrap_medians(rng: np.random.Generator, x: np.ndarray, resamples: int) -> np.ndarray:
    """The medians of `resamples` bootstrap resamples of `x` (each of x.size draws with replacement).

    For many steps the same distribution is drawn without the resamples: a resample's k-th
    smallest draw is x_(floor(n U_(k))), and the k-th order statistic of n uniforms is
    Beta(k, n-k+1); the next one is U_(k) + (1 - U_(k)) Beta(1, n-k).
    """
    n = x.size
    if n <= DIRECT_STEPS:
        return np.asarray(np.median(rng.choice(x, size=(resamples, n)), axis=1))
    ordered = np.sort(x)

    def at(u: np.ndarray) -> np.ndarray:
        return np.asarray(ordered[np.minimum((u * n).astype(np.int64), n - 1)])

    k = (n + 1) // 2
    low = rng.beta(k, n - k + 1, size=resamples)
    if n % 2:
        return at(low)
    high = low + (1.0 - low) * rng.beta(1, n - k, size=resamples)
    return np.asarray((at(low) + at(high)) / 2.0)


def hierarchical_interval(base_runs: list[list[float]], head_runs: list[list[float]], *,
                          resamples: int = RESAMPLES, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Bootstrap interval of the head/base ratio of mean run medians: resample runs, then steps within runs."""
    rng = np.random.default_rng(seed)

    def side(runs: list[list[float]]) -> np.ndarray:
        # medians[j, r]: run j's median in resample r, from its own steps drawn with replacement
        medians = np.stack([bootstrap_medians(rng, np.asarray(r, float), resamples) for r in runs])
        picked = rng.integers(0, len(runs), size=(resamples, len(runs)))
        return np.asarray(medians[picked, np.arange(resamples)[:, None]].mean(axis=1))

    ratios = side(head_runs) / np.maximum(side(base_runs), 1e-30)
    lo, hi = np.quantile(ratios, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return float(lo), float(hi)


def runs_of(reports: Sequence[ReportModel]) -> list[Run]:
    """The runs in one side: each report's own steps, or the runs a combined (--repeat) report lists.

    A run that appears both alone and inside a combined report counts once.
    """
    runs: list[Run] = []
    seen: set[tuple[float, ...]] = set()
    for i, rep in enumerate(reports):
        listed = rep.part("runs") or [{"source": rep.part("run_source") or _source_name(rep, i),
                                       "steps": [s["time_s"] for s in rep.steps]}]
        for run in listed:
            key = tuple(run["steps"])
            if key and key in seen:
                continue
            seen.add(key)
            runs.append(Run(run.get("source") or f"run {len(runs) + 1}", list(run["steps"])))
    return runs


def _source_name(report: ReportModel, index: int) -> str:
    for key in ("path", "profile", "run_dir", "file"):
        if report.source.get(key):
            return str(report.source[key])
    return f"run {index + 1}"


def _rel_mad(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    med = statistics.median(xs)
    return 1.4826 * statistics.median(abs(x - med) for x in xs) / med if med > 0 else 0.0


def _median_se(xs: list[float]) -> float:
    """Relative standard error of a run's median step time, from its own steps (robust spread)."""
    return float(1.2533 * _rel_mad(xs) / max(len(xs), 1) ** 0.5)


def _run_rows(runs: list[Run]) -> list[RunRow]:
    return [RunRow(r.source, len(r.steps), statistics.median(r.steps), _rel_mad(r.steps), tuple(r.steps))
            for r in runs]


def _instability(name: str, rows: list[RunRow], runs: list[Run]) -> UnstableRun | None:
    """The run of one side that stands apart from the side's other runs, if any: its median is off
    theirs by more than ordinary run-to-run variation (`RUN_OUTLIER`) and more than the steps of
    the runs explain (4 standard errors). That is the machine (a busy neighbour), not the code."""
    if len(rows) < 2:
        return None
    meds = [r.median_s for r in rows]
    found = None
    for i, med in enumerate(meds):
        rest = [j for j in range(len(meds)) if j != i]
        others = statistics.median(meds[j] for j in rest)
        off = med / others - 1.0 if others > 0 else 0.0
        se_others = statistics.fmean(_median_se(runs[j].steps) for j in rest)
        explained = 4 * (_median_se(runs[i].steps) ** 2 + se_others ** 2) ** 0.5
        allowed = max(explained, RUN_OUTLIER)
        if abs(off) > allowed and (found is None or abs(off) > abs(found.off_by)):
            found = UnstableRun(name, i + 1, len(rows), rows[i].source, med, others, off, max(meds) / min(meds) - 1.0,
                                explained, allowed)
    return found


def _interval(base_runs: list[Run], head_runs: list[Run], ratio: float) -> tuple[float, float, str, bool]:
    """(low, high) of the head/base ratio, how it was found, and whether it is weak (one run a side)."""
    if len(base_runs) >= 2 and len(head_runs) >= 2:
        lo, hi = hierarchical_interval([r.steps for r in base_runs], [r.steps for r in head_runs])
        return lo, hi, (f"hierarchical bootstrap 95% interval of the ratio of mean run medians: runs resampled, then "
                        f"steps within runs ({RESAMPLES} resamples, seed 0); {len(base_runs)} base and "
                        f"{len(head_runs)} head runs"), False
    bs = [t for r in base_runs for t in r.steps]
    hs = [t for r in head_runs for t in r.steps]
    lo, hi = noise_interval(bs, hs) if min(len(bs), len(hs)) >= 2 else (ratio, ratio)
    lo, hi = min(lo, ratio) / (1 + SINGLE_RUN_FLOOR), max(hi, ratio) * (1 + SINGLE_RUN_FLOOR)
    return lo, hi, (f"weak: fewer than 2 runs a side, so run-to-run variance is not measured; the per-step "
                    f"bootstrap interval is widened by a {percent(SINGLE_RUN_FLOOR)} run-to-run floor. "
                    f"Repeat runs (audit run --repeat N) for a real interval"), True


def _verdict(lo: float, hi: float, limit: float, unstable: list[UnstableRun]) -> tuple[str, str]:
    """The step-time verdict on the interval of the change, and why."""
    if unstable:
        # Runs of one side that disagree say the machine, not the code, moved them (a busy
        # neighbour beside one run): no verdict either way until the runs agree.
        u = unstable[0]
        return "inconclusive", (f"the {u.side} runs disagree: run {u.run} of {u.runs} ({u.source}) is "
                                f"{signed(u.off_by, percent)} from the others, more than ordinary run-to-run "
                                f"variation and its steps explain ({percent(u.allowed)})")
    if lo > limit:
        return "regression", f"the whole interval is above +{percent(limit)}"
    if hi < -limit:
        return "improvement", f"the whole interval is below -{percent(limit)}"
    if -limit <= lo and hi <= limit:
        return "no change", f"the whole interval is within ±{percent(limit)}"
    return "inconclusive", f"the interval straddles the ±{percent(limit)} threshold"


def _moved(pairs: PairedOps, base: ReportModel, head: ReportModel, limit: float, noise: float,
           head_median: float) -> list[MovedOp]:
    """Paired ops whose time per step moved beyond the threshold, noise and 1% of the step, most first."""
    ops = []
    for b, h, _ in pairs:
        if b.self_s is None or h.self_s is None:
            continue
        tb, th = b.self_s / per_step(base), h.self_s / per_step(head)
        if tb <= 0:
            continue
        change = th / tb - 1.0
        if abs(change) > max(limit, 3 * noise) and abs(th - tb) > 0.01 * head_median:
            ops.append(MovedOp(h.name, b.name, h.module, tb, th, change))
    ops.sort(key=lambda r: -abs(r.head_s - r.base_s))
    return ops[:50]


def measured(base: Sequence[ReportModel], head: Sequence[ReportModel], pairs: PairedOps,
             threshold: float | None) -> MeasuredChanges:
    """Step time and per-op time changes, judged against run-to-run noise and the threshold.

    Each side is the reports of runs of the same code (see `runs_of`); `pairs` pairs the measured
    ops of each side's first report. With two or more runs a side the interval comes from a
    hierarchical bootstrap over runs and their steps; with one run a side the within-run interval
    is widened by `SINGLE_RUN_FLOOR`.
    """
    base_runs, head_runs = runs_of(base), runs_of(head)
    limit = DEFAULT_THRESHOLD if threshold is None else threshold
    counts = (sum(len(r.steps) for r in base_runs), sum(len(r.steps) for r in head_runs), len(base_runs),
              len(head_runs), limit, threshold is not None)
    base_runs = [r for r in base_runs if r.steps]
    head_runs = [r for r in head_runs if r.steps]
    if not base_runs or not head_runs:
        return MeasuredChanges(*counts, verdict="not compared", compared=None,
                               reason="a side has no measured steps (HLO dump or ahead-of-time report)")
    base_rows, head_rows = _run_rows(base_runs), _run_rows(head_runs)
    mb = statistics.fmean(r.median_s for r in base_rows)
    mh = statistics.fmean(r.median_s for r in head_rows)
    ratio = mh / mb if mb > 0 else float("inf")
    lo, hi, method, weak = _interval(base_runs, head_runs, ratio)
    unstable = [u for u in (_instability("base", base_rows, base_runs),
                            _instability("head", head_rows, head_runs)) if u]
    lo, hi = lo - 1.0, hi - 1.0
    verdict, why = _verdict(lo, hi, limit, unstable)
    noise = max(_rel_mad([t for r in base_runs for t in r.steps]), _rel_mad([t for r in head_runs for t in r.steps]))
    compared = StepTimeChange(mb, mh, ratio - 1.0, (lo, hi), why, weak, unstable, base_rows, head_rows, noise,
                              _moved(pairs, base[0], head[0], limit, noise, mh), method)
    return MeasuredChanges(*counts, verdict=verdict, compared=compared)
