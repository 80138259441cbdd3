"""Compare two reports: what changed in the program (exact), and what changed in time (beyond noise).

Ops are matched across compilations structurally, since HLO names are not stable between
compiles: by fingerprint, then by opcode, framework op and shape, then (uncertain) by
framework op alone or by name with the same opcode and dtype; within each key by position
in the schedule. The rest are added/removed.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

SCHEMA = "audit.diff/v1"
_REL_EQ = 1e-9  # compile-time quantities are deterministic; this only absorbs float summation order


@dataclass(frozen=True)
class Gates:
    """What makes `audit diff` exit 1."""

    fail_on: float | None = None  # relative step-time regression, e.g. 0.05
    fail_on_flops: bool = False
    fail_on_comm_bytes: bool = False


def _per_step(report: dict) -> float:
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


def _order(op: dict) -> tuple:
    pos = op.get("position")
    return (pos if pos is not None else 2.0, op["name"])


def _pair_group(bs: list[dict], hs: list[dict]) -> list[tuple[dict, dict]]:
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


def match_ops_detailed(base: dict, head: dict) -> tuple[list[tuple[dict, dict, Pairing]], list[dict], list[dict]]:
    """Pair ops structurally, pass by pass; return (base, head, pairing) triples, removed, added."""
    left_b = [o for o in base["ops"] if not o.get("container")]
    left_h = [o for o in head["ops"] if not o.get("container")]
    out: list[tuple[dict, dict, Pairing]] = []
    for how, key, uncertain in _PASSES:
        groups: dict = defaultdict(lambda: ([], []))
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


def match_ops(base: dict, head: dict) -> tuple[list[tuple[dict, dict]], list[dict], list[dict]]:
    """Pair ops structurally (see `match_ops_detailed`); return pairs, removed, added."""
    triples, removed, added = match_ops_detailed(base, head)
    return [(b, h) for b, h, _ in triples], removed, added


def _total(report: dict, field: str) -> float:
    return sum((o.get(field) or 0.0) for o in report["ops"] if not o.get("container")) / _per_step(report)


def _counts(report: dict) -> dict:
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


def compile_time(base: dict, head: dict, pairs, removed, added,
                 pairings: dict[tuple[int, int], Pairing] | None = None) -> dict:
    """Deterministic changes per step: totals, counts, per-op flops/bytes, added/removed ops.

    `pairings` (keyed by the ids of the base and head op) says how each pair was found; a
    changed op from an uncertain pairing says so instead of reading as a sure change.
    """
    totals = {}
    for field in ("flops", "bytes", "comm_bytes", "expected_s"):
        b, h = _total(base, field), _total(head, field)
        totals[field] = {"base": b, "head": h, "delta": h - b, "changed": _changed(b, h)}
    per_op = []
    for b, h in pairs:
        row = {"name": h["name"], "base_name": b["name"], "module": h["module"], "opcode": h["opcode"],
               "framework_op": h["framework_op"], "shape_base": b.get("shape"), "shape_head": h.get("shape")}
        changed = False
        for field in ("flops", "bytes", "comm_bytes", "expected_s"):
            bv = None if b.get(field) is None else b[field] / _per_step(base)
            hv = None if h.get(field) is None else h[field] / _per_step(head)
            row[field] = {"base": bv, "head": hv}
            changed |= _changed(bv, hv)
        pairing = (pairings or {}).get((id(b), id(h)))
        if pairing is not None:
            row.update(pairing=pairing.how, uncertain=pairing.uncertain, position_distance=pairing.distance)
            if pairing.uncertain:
                row["pairing_note"] = (f"paired by {pairing.how} only: {b['name']} ({b.get('shape')}) and "
                                       f"{h['name']} ({h.get('shape')}) may be different ops")
        if changed:
            per_op.append(row)
    per_op.sort(key=lambda r: -abs((r["flops"]["head"] or 0) - (r["flops"]["base"] or 0)))

    def brief(op: dict, report: dict) -> dict:
        return {"name": op["name"], "module": op["module"], "opcode": op["opcode"], "category": op["category"],
                "framework_op": op["framework_op"], "shape": op.get("shape"),
                "flops": None if op.get("flops") is None else op["flops"] / _per_step(report),
                "comm_bytes": (op.get("comm_bytes") or 0.0) / _per_step(report),
                "expected_s": None if op.get("expected_s") is None else op["expected_s"] / _per_step(report)}

    step_b, step_h = (r["summary"].get("expected_step_s") for r in (base, head))
    if step_b is not None and step_h is not None:  # the overlapped step of a scheduled program
        b, h = step_b / _per_step(base), step_h / _per_step(head)
        totals["expected_step_s"] = {"base": b, "head": h, "delta": h - b, "changed": _changed(b, h)}
    cb, ch = _counts(base), _counts(head)
    return {
        "totals_per_step": totals,
        "counts": {"base": cb, "head": ch, "changed": cb != ch},
        "changed_ops": per_op,
        "uncertain_pairs": sum(1 for r in per_op if r.get("uncertain")),
        "pairing_counts": dict(Counter(p.how for p in (pairings or {}).values())),
        "added_ops": [brief(o, head) for o in added],
        "removed_ops": [brief(o, base) for o in removed],
        "changed": any(t["changed"] for t in totals.values()) or bool(per_op or added or removed) or cb != ch,
    }


def noise_interval(base: list[float], head: list[float], *, resamples: int = 2000,
                   confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Bootstrap interval of median(head)/median(base) from per-step samples (seeded, repeatable)."""
    rng = np.random.default_rng(seed)
    b, h = np.asarray(base, float), np.asarray(head, float)
    mb = np.median(rng.choice(b, size=(resamples, b.size)), axis=1)
    mh = np.median(rng.choice(h, size=(resamples, h.size)), axis=1)
    ratios = mh / np.maximum(mb, 1e-30)
    lo, hi = np.quantile(ratios, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return float(lo), float(hi)


def measured(base: dict, head: dict, pairs, threshold: float | None) -> dict:
    """Step time and per-op time changes, judged against per-step noise and the threshold."""
    bs = [s["time_s"] for s in base.get("steps", [])]
    hs = [s["time_s"] for s in head.get("steps", [])]
    out: dict = {"base_steps": len(bs), "head_steps": len(hs)}
    if not bs or not hs:
        out.update(available=False, regression=False,
                   reason="a side has no measured steps (HLO dump or ahead-of-time report)")
        return out
    mb, mh = statistics.median(bs), statistics.median(hs)
    ratio = mh / mb if mb > 0 else float("inf")
    lo, hi = noise_interval(bs, hs) if min(len(bs), len(hs)) >= 2 else (ratio, ratio)
    beyond_noise = lo > 1.0 or hi < 1.0
    limit = threshold if threshold is not None else 0.0
    # A regression is a slowdown that the whole interval puts above the threshold: run-to-run
    # drift on a shared machine moves the median a little, never the interval's lower end past it.
    regression = lo > 1.0 + limit
    rel_mad = max(_rel_mad(bs), _rel_mad(hs))
    ops = []
    for b, h in pairs:
        if b.get("self_s") is None or h.get("self_s") is None:
            continue
        tb, th = b["self_s"] / _per_step(base), h["self_s"] / _per_step(head)
        if tb <= 0:
            continue
        change = th / tb - 1.0
        if abs(change) > max(limit, 3 * rel_mad) and abs(th - tb) > 0.01 * mh:
            ops.append({"name": h["name"], "base_name": b["name"], "module": h["module"],
                        "base_s": tb, "head_s": th, "change": change})
    ops.sort(key=lambda r: -abs(r["head_s"] - r["base_s"]))
    out.update(available=True, base_median_s=mb, head_median_s=mh, change=ratio - 1.0,
               interval=[lo - 1.0, hi - 1.0], beyond_noise=beyond_noise, threshold=threshold,
               regression=regression, noise_rel_mad=rel_mad, changed_ops=ops[:50],
               method="bootstrap 95% interval of the ratio of per-step medians (2000 resamples, seed 0)")
    return out


def _rel_mad(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    med = statistics.median(xs)
    return 1.4826 * statistics.median(abs(x - med) for x in xs) / med if med > 0 else 0.0


def diff_reports(base: dict, head: dict, gates: Gates = Gates()) -> dict:
    """The diff document: compile-time changes, measured changes, and which gates tripped."""
    triples, removed, added = match_ops_detailed(base, head)
    pairs = [(b, h) for b, h, _ in triples]
    ct = compile_time(base, head, pairs, removed, added, {(id(b), id(h)): p for b, h, p in triples})
    me = measured(base, head, pairs, gates.fail_on)
    tripped = []
    if me.get("regression"):
        tripped.append(f"step time +{100 * me['change']:.1f}% is beyond noise and the "
                       f"{100 * (gates.fail_on or 0):.1f}% threshold")
    if gates.fail_on_flops and ct["totals_per_step"]["flops"]["delta"] > 0 and ct["totals_per_step"]["flops"]["changed"]:
        tripped.append("FLOPs per step increased (--fail-on-flops)")
    if gates.fail_on_comm_bytes and ct["totals_per_step"]["comm_bytes"]["delta"] > 0 and \
            ct["totals_per_step"]["comm_bytes"]["changed"]:
        tripped.append("communicated bytes per step increased (--fail-on-comm-bytes)")
    return {
        "schema": SCHEMA,
        "base": {"source": base.get("source"), "hardware": base["hardware"]["name"]},
        "head": {"source": head.get("source"), "hardware": head["hardware"]["name"]},
        "matched_ops": len(pairs),
        "compile_time": ct,
        "measured": me,
        "gates": {"fail_on": gates.fail_on, "fail_on_flops": gates.fail_on_flops,
                  "fail_on_comm_bytes": gates.fail_on_comm_bytes, "tripped": tripped},
        "regression": bool(tripped),
    }
