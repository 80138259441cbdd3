"""Compare two reports: what changed in the program (exact), and what changed in time (beyond noise).

Ops are matched across compilations structurally, since HLO names are not stable between
compiles: by fingerprint, then by opcode, framework op and shape, then (uncertain) by
framework op alone or by name with the same opcode and dtype; within each key by position
in the schedule. The rest are added/removed.
"""

from __future__ import annotations

from typing import Any

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from ..costmodel.units import percent, signed

SCHEMA = "audit.diff/v1"
Op = dict[str, Any]  # one op of a JSON report
_REL_EQ = 1e-9  # compile-time quantities are deterministic; this only absorbs float summation order
# What says the program changed. Expected times are reported beside them but do not count: they
# also move with the hardware's figures (a calibration taken on each machine),
# which differ between runs of one program.
_PROGRAM_FIELDS = ("flops", "bytes", "comm_bytes")


@dataclass(frozen=True)
class Gates:
    """What makes `audit diff` exit 1."""

    fail_on: float | None = None  # relative step-time regression, e.g. 0.05
    fail_on_flops: bool = False
    fail_on_comm_bytes: bool = False
    strict: bool = False  # an inconclusive step-time verdict also exits 1


def _per_step(report: dict[str, Any]) -> float:
    steps = report["summary"].get("steps") or 0
    return float(steps) if steps else 1.0


def _module_key(name: str) -> str:
    return name or "?"


# Matching passes, surest first: (name, key of an op, whether a pair found this way is uncertain).
# Within one key, ops pair by their position in the schedule. The name pass needs the same
# opcode and dtype, so an all-reduce of f32[33] is never paired with an unrelated bf16 one.
_PASSES = (
    ("fingerprint", lambda o: (o["fingerprint"],), False),
    ("shape", lambda o: (o["opcode"], o.get("framework_op") or "", o.get("shape") or "")
     if o.get("shape") else None, False),
    ("framework op", lambda o: (o["opcode"], o["framework_op"]) if o.get("framework_op") else None, True),
    ("name", lambda o: (o["opcode"], o["name"], o.get("dtype") or ""), True),
)
_MAX_GREEDY = 250_000  # candidate pairs in one group beyond which ops pair in schedule order


@dataclass(frozen=True)
class Pairing:
    """How a base op was paired with a head op, and whether the pairing may be wrong."""

    how: str
    uncertain: bool
    distance: float | None  # difference of schedule positions (0..1), None when unknown


def _order(op: dict[str, Any]) -> tuple[Any, ...]:
    pos = op.get("position")
    return (pos if pos is not None else 2.0, op["name"])


def _pair_group(bs: list[dict[str, Any]], hs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pair two groups of interchangeable ops by nearest schedule position (ties: name order)."""
    bs, hs = sorted(bs, key=_order), sorted(hs, key=_order)
    if len(bs) == len(hs) or len(bs) * len(hs) > _MAX_GREEDY or \
            any(o.get("position") is None for o in bs + hs):
        return list(zip(bs, hs))
    candidates = sorted(((abs(b["position"] - h["position"]), i, j) for i, b in enumerate(bs)
                         for j, h in enumerate(hs)))
    used_b: set[int] = set()
    used_h: set[int] = set()
    pairs = []
    for _, i, j in candidates:
        if i in used_b or j in used_h:
            continue
        used_b.add(i)
        used_h.add(j)
        pairs.append((bs[i], hs[j]))
    return sorted(pairs, key=lambda p: _order(p[0]))


def match_ops_detailed(base: dict[str, Any], head: dict[str, Any]) -> tuple[list[tuple[dict[str, Any], dict[str, Any], Pairing]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Pair ops structurally, pass by pass; return (base, head, pairing) triples, removed, added."""
    left_b = [o for o in base["ops"] if not o.get("container")]
    left_h = [o for o in head["ops"] if not o.get("container")]
    out: list[tuple[dict[str, Any], dict[str, Any], Pairing]] = []
    for how, key, uncertain in _PASSES:
        groups: dict[tuple[str, Any], tuple[list[Op], list[Op]]] = defaultdict(lambda: ([], []))
        for side, ops in ((0, left_b), (1, left_h)):
            for op in ops:
                k = key(op)
                if k is not None:
                    groups[(_module_key(op["module"]), k)][side].append(op)
        paired: set[int] = set()
        for k in sorted(groups, key=str):
            bs, hs = groups[k]
            # One op of a framework op on each side is that op, whatever its new shape.
            unsure = uncertain and not (how == "framework op" and len(bs) == len(hs) == 1)
            for b, h in _pair_group(bs, hs):
                pb, ph = b.get("position"), h.get("position")
                out.append((b, h, Pairing(how, unsure, None if pb is None or ph is None else abs(pb - ph))))
                paired.update((id(b), id(h)))
        left_b = [o for o in left_b if id(o) not in paired]
        left_h = [o for o in left_h if id(o) not in paired]
    return out, left_b, left_h


def _total(report: dict[str, Any], field: str) -> float:
    return sum((o.get(field) or 0.0) for o in report["ops"] if not o.get("container")) / _per_step(report)


def _counts(report: dict[str, Any]) -> dict[str, Any]:
    ops = [o for o in report["ops"] if not o.get("container")]
    return {
        "by_category": dict(Counter(o["category"] or "unknown" for o in ops)),
        "fusions": sum(1 for o in ops if o["opcode"] == "fusion"),
        "collectives": dict(Counter(f"{c['kind']} {int(c['bytes'])} B" for c in report["collectives"])),
    }


def _changed(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(a - b) > _REL_EQ * max(abs(a), abs(b), 1.0)


def compile_time(base: dict[str, Any], head: dict[str, Any], pairs: list[tuple[Op, Op]], removed: list[Op],
                 added: list[Op],
                 pairings: dict[tuple[int, int], Pairing] | None = None) -> dict[str, Any]:
    """Deterministic changes per step: totals, counts, per-op flops/bytes, added/removed ops.

    `pairings` (keyed by the ids of the base and head op) says how each pair was found; a
    changed op from an uncertain pairing says so instead of reading as a sure change.
    """
    totals: dict[str, dict[str, Any]] = {}
    for field in ("flops", "bytes", "comm_bytes", "expected_s"):
        total_b, total_h = _total(base, field), _total(head, field)
        totals[field] = {"base": total_b, "head": total_h, "delta": total_h - total_b,
                         "changed": _changed(total_b, total_h)}
    per_op: list[dict[str, Any]] = []
    for b, h in pairs:
        row: dict[str, Any] = {"name": h["name"], "base_name": b["name"], "module": h["module"], "opcode": h["opcode"],
               "framework_op": h["framework_op"], "shape_base": b.get("shape"), "shape_head": h.get("shape")}
        changed = False
        for field in ("flops", "bytes", "comm_bytes", "expected_s"):
            bv = None if b.get(field) is None else b[field] / _per_step(base)
            hv = None if h.get(field) is None else h[field] / _per_step(head)
            row[field] = {"base": bv, "head": hv}
            changed |= field in _PROGRAM_FIELDS and _changed(bv, hv)
        pairing = (pairings or {}).get((id(b), id(h)))
        if pairing is not None:
            row.update(pairing=pairing.how, uncertain=pairing.uncertain, position_distance=pairing.distance)
            if pairing.uncertain:
                row["pairing_note"] = (f"paired by {pairing.how} only: {b['name']} ({b.get('shape')}) and "
                                       f"{h['name']} ({h.get('shape')}) may be different ops")
        if changed:
            per_op.append(row)
    per_op.sort(key=lambda r: -abs((r["flops"]["head"] or 0) - (r["flops"]["base"] or 0)))

    def brief(op: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
        return {"name": op["name"], "module": op["module"], "opcode": op["opcode"], "category": op["category"],
                "framework_op": op["framework_op"], "shape": op.get("shape"),
                "flops": None if op.get("flops") is None else op["flops"] / _per_step(report),
                "comm_bytes": (op.get("comm_bytes") or 0.0) / _per_step(report),
                "expected_s": None if op.get("expected_s") is None else op["expected_s"] / _per_step(report)}

    step_b, step_h = (r["summary"].get("expected_step_s") for r in (base, head))
    if step_b is not None and step_h is not None:  # the overlapped step of a scheduled program: already one step
        sb, sh = float(step_b), float(step_h)
        totals["expected_step_s"] = {"base": sb, "head": sh, "delta": sh - sb, "changed": _changed(sb, sh)}
    cb, ch = _counts(base), _counts(head)
    return {
        "totals_per_step": totals,
        "counts": {"base": cb, "head": ch, "changed": cb != ch},
        "changed_ops": per_op,
        "uncertain_pairs": sum(1 for r in per_op if r.get("uncertain")),
        "pairing_counts": dict(Counter(p.how for p in (pairings or {}).values())),
        "added_ops": [brief(o, head) for o in added],
        "removed_ops": [brief(o, base) for o in removed],
        "changed": any(totals[f]["changed"] for f in _PROGRAM_FIELDS) or bool(per_op or added or removed) or cb != ch,
    }


def noise_interval(base: list[float], head: list[float], *, resamples: int = 2000,
                   confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Bootstrap interval of median(head)/median(base) from per-step samples (seeded, repeatable)."""
    rng = np.random.default_rng(seed)
    mb = bootstrap_medians(rng, np.asarray(base, float), resamples)
    mh = bootstrap_medians(rng, np.asarray(head, float), resamples)
    ratios = mh / np.maximum(mb, 1e-30)
    lo, hi = np.quantile(ratios, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return float(lo), float(hi)


# Up to this many steps a run's resamples are drawn outright (resamples x steps values, 32 MB at
# most); beyond it each resample's median is drawn from its order-statistic distribution, so memory
# and time do not grow with steps (a report of 250,000 steps would need 4 GB drawn outright).
DIRECT_STEPS = 2048


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


DEFAULT_THRESHOLD = 0.05  # step-time change that counts when --fail-on is not given
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


def _median_se(xs: list[float]) -> float:
    """Relative standard error of a run's median step time, from its own steps (robust spread)."""
    return float(1.2533 * _rel_mad(xs) / max(len(xs), 1) ** 0.5)


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


def _run_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"source": r["source"], "steps": len(r["steps"]), "median_s": statistics.median(r["steps"]),
             "noise_rel_mad": _rel_mad(r["steps"])} for r in runs]


def _instability(name: str, rows: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run of one side that stands apart from the side's other runs, if any: its median is off
    theirs by more than ordinary run-to-run variation (`RUN_OUTLIER`) and more than the steps of
    the runs explain (4 standard errors). That is the machine (a busy neighbour), not the code."""
    if len(rows) < 2:
        return None
    meds = [r["median_s"] for r in rows]
    found = None
    for i, med in enumerate(meds):
        rest = [j for j in range(len(meds)) if j != i]
        others = statistics.median(meds[j] for j in rest)
        off = med / others - 1.0 if others > 0 else 0.0
        se_others = statistics.fmean(_median_se(runs[j]["steps"]) for j in rest)
        explained = 4 * (_median_se(runs[i]["steps"]) ** 2 + se_others ** 2) ** 0.5
        allowed = max(explained, RUN_OUTLIER)
        if abs(off) > allowed and (found is None or abs(off) > abs(found["off_by"])):
            found = {"side": name, "run": i + 1, "runs": len(rows), "source": rows[i]["source"], "median_s": med,
                     "others_median_s": others, "off_by": off, "spread": max(meds) / min(meds) - 1.0,
                     "explained_by_steps": explained, "allowed": allowed}
    return found


def measured(base: dict[str, Any] | list[dict[str, Any]], head: dict[str, Any] | list[dict[str, Any]],
             pairs: list[tuple[Op, Op]], threshold: float | None) -> dict[str, Any]:
    """Step time and per-op time changes, judged against run-to-run noise and the threshold.

    Each side is one report or a list of runs of the same code (see `runs_of`). With two or
    more runs a side the interval comes from a hierarchical bootstrap over runs and their
    steps; with one run a side the within-run interval is widened by `SINGLE_RUN_FLOOR`.
    """
    base_runs, head_runs = runs_of(base), runs_of(head)
    base_rep = base if isinstance(base, dict) else base[0]
    head_rep = head if isinstance(head, dict) else head[0]
    bs = [t for r in base_runs for t in r["steps"]]
    hs = [t for r in head_runs for t in r["steps"]]
    limit = DEFAULT_THRESHOLD if threshold is None else threshold
    out: dict[str, Any] = {"base_steps": len(bs), "head_steps": len(hs), "base_runs": len(base_runs),
                 "head_runs": len(head_runs), "threshold": limit, "threshold_given": threshold is not None}
    base_runs = [r for r in base_runs if r["steps"]]
    head_runs = [r for r in head_runs if r["steps"]]
    if not base_runs or not head_runs:
        out.update(available=False, regression=False, verdict="not compared",
                   reason="a side has no measured steps (HLO dump or ahead-of-time report)")
        return out
    base_rows, head_rows = _run_rows(base_runs), _run_rows(head_runs)
    mb = statistics.fmean(r["median_s"] for r in base_rows)
    mh = statistics.fmean(r["median_s"] for r in head_rows)
    ratio = mh / mb if mb > 0 else float("inf")
    repeated = len(base_runs) >= 2 and len(head_runs) >= 2
    if repeated:
        lo, hi = hierarchical_interval([r["steps"] for r in base_runs], [r["steps"] for r in head_runs])
        method = (f"hierarchical bootstrap 95% interval of the ratio of mean run medians: runs resampled, then "
                  f"steps within runs ({RESAMPLES} resamples, seed 0); {len(base_runs)} base and "
                  f"{len(head_runs)} head runs")
    else:
        lo, hi = noise_interval(bs, hs) if min(len(bs), len(hs)) >= 2 else (ratio, ratio)
        lo, hi = min(lo, ratio) / (1 + SINGLE_RUN_FLOOR), max(hi, ratio) * (1 + SINGLE_RUN_FLOOR)
        method = (f"weak: fewer than 2 runs a side, so run-to-run variance is not measured; the per-step "
                  f"bootstrap interval is widened by a {percent(SINGLE_RUN_FLOOR)} run-to-run floor. "
                  f"Repeat runs (audit run --repeat N) for a real interval")
    unstable = [u for u in (_instability("base", base_rows, base_runs),
                            _instability("head", head_rows, head_runs)) if u]
    lo, hi = lo - 1.0, hi - 1.0
    if unstable:
        # Runs of one side that disagree say the machine, not the code, moved them (a busy
        # neighbour beside one run): no verdict either way until the runs agree.
        u = unstable[0]
        verdict, why = "inconclusive", (f"the {u['side']} runs disagree: run {u['run']} of {u['runs']} "
                                        f"({u['source']}) is {signed(u['off_by'], percent)} from the others, more "
                                        f"than ordinary run-to-run variation and its steps explain "
                                        f"({percent(u['allowed'])})")
    elif lo > limit:
        verdict, why = "regression", f"the whole interval is above +{percent(limit)}"
    elif hi < -limit:
        verdict, why = "improvement", f"the whole interval is below -{percent(limit)}"
    elif -limit <= lo and hi <= limit:
        verdict, why = "no change", f"the whole interval is within ±{percent(limit)}"
    else:
        verdict, why = "inconclusive", f"the interval straddles the ±{percent(limit)} threshold"
    rel_mad = max(_rel_mad(bs), _rel_mad(hs))
    ops = []
    for b, h in pairs:
        if b.get("self_s") is None or h.get("self_s") is None:
            continue
        tb, th = b["self_s"] / _per_step(base_rep), h["self_s"] / _per_step(head_rep)
        if tb <= 0:
            continue
        change = th / tb - 1.0
        if abs(change) > max(limit, 3 * rel_mad) and abs(th - tb) > 0.01 * mh:
            ops.append({"name": h["name"], "base_name": b["name"], "module": h["module"],
                        "base_s": tb, "head_s": th, "change": change})
    ops.sort(key=lambda r: -abs(r["head_s"] - r["base_s"]))
    out.update(available=True, base_median_s=mb, head_median_s=mh, change=ratio - 1.0,
               interval=[lo, hi], beyond_noise=lo > 0 or hi < 0, regression=verdict == "regression",
               verdict=verdict, verdict_reason=why, weak=not repeated, unstable=unstable,
               runs={"base": base_rows, "head": head_rows}, noise_rel_mad=rel_mad, changed_ops=ops[:50],
               method=method)
    return out


def runs_of(side: dict[str, Any] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs in one side: each report's own steps, or the runs a combined (--repeat) report lists.

    A run that appears both alone and inside a combined report counts once.
    """
    reports = [side] if isinstance(side, dict) else list(side)
    runs: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for i, rep in enumerate(reports):
        listed = rep.get("runs") or [{"source": rep.get("run_source") or _source_name(rep, i),
                                      "steps": [s["time_s"] for s in rep.get("steps", [])]}]
        for run in listed:
            key = tuple(run["steps"])
            if key and key in seen:
                continue
            seen.add(key)
            runs.append({"source": run.get("source") or f"run {len(runs) + 1}", "steps": list(run["steps"])})
    return runs


def _source_name(report: dict[str, Any], index: int) -> str:
    src = report.get("source")
    if isinstance(src, dict):
        for key in ("path", "profile", "run_dir", "file"):
            if src.get(key):
                return str(src[key])
    return f"run {index + 1}"


def _rel_mad(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    med = statistics.median(xs)
    return 1.4826 * statistics.median(abs(x - med) for x in xs) / med if med > 0 else 0.0


def diff_reports(base: dict[str, Any] | list[dict[str, Any]], head: dict[str, Any] | list[dict[str, Any]], gates: Gates = Gates()) -> dict[str, Any]:
    """The diff document: compile-time changes, measured changes, and which gates tripped.

    Each side is one report or several reports of repeated runs of the same code; the
    program (compile-time) comparison uses each side's first report.
    """
    base_list = [base] if isinstance(base, dict) else list(base)
    head_list = [head] if isinstance(head, dict) else list(head)
    b0, h0 = base_list[0], head_list[0]
    triples, removed, added = match_ops_detailed(b0, h0)
    pairs = [(b, h) for b, h, _ in triples]
    ct = compile_time(b0, h0, pairs, removed, added, {(id(b), id(h)): p for b, h, p in triples})
    me = measured(base_list, head_list, pairs, gates.fail_on)
    if me.get("weak") and me.get("verdict") in ("regression", "improvement") and not ct["changed"]:
        # One run a side cannot tell a runtime slowdown from a busy machine (a CPU hog beside one
        # run slows it severalfold); with the program unchanged there is no second witness.
        me.update(verdict="inconclusive", regression=False, verdict_reason=(
            f"step time {signed(me['change'], percent)} with one run a side and the program unchanged: machine load "
            "alone moves one run this much; repeat the runs (audit run --repeat N) to tell"))
    tripped = []
    if me.get("regression"):
        tripped.append(f"step time {signed(me['change'], percent)} (interval {signed(me['interval'][0], percent)} .. "
                       f"{signed(me['interval'][1], percent)}) is beyond noise and the {percent(me['threshold'])} "
                       "threshold" + ("" if me["threshold_given"] else " (default)"))
    if gates.strict and me.get("verdict") == "inconclusive":
        tripped.append(f"step time inconclusive (--strict): {me['verdict_reason']}")
    if gates.fail_on_flops and ct["totals_per_step"]["flops"]["delta"] > 0 and ct["totals_per_step"]["flops"]["changed"]:
        tripped.append("FLOPs per step increased (--fail-on-flops)")
    if gates.fail_on_comm_bytes and ct["totals_per_step"]["comm_bytes"]["delta"] > 0 and \
            ct["totals_per_step"]["comm_bytes"]["changed"]:
        tripped.append("communicated bytes per step increased (--fail-on-comm-bytes)")
    return {
        "schema": SCHEMA,
        "base": {"source": b0.get("source"), "hardware": b0["hardware"]["name"], "runs": len(base_list)},
        "head": {"source": h0.get("source"), "hardware": h0["hardware"]["name"], "runs": len(head_list)},
        "matched_ops": len(pairs),
        "compile_time": ct,
        "measured": me,
        "verdict": me.get("verdict"),
        "gates": {"fail_on": gates.fail_on, "fail_on_flops": gates.fail_on_flops,
                  "fail_on_comm_bytes": gates.fail_on_comm_bytes, "strict": gates.strict, "tripped": tripped},
        "regression": bool(tripped),
    }
