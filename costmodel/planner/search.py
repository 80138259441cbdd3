"""Search the layouts a model can run on a cluster and rank them by predicted step time.

Degrees come from the model and the machine: TP divides the query heads and d_ff, divides or
is a multiple of the KV heads, and fits the fast domain (a GPU's NVLink/xGMI domain, one axis
of a TPU slice); EP divides the experts and DP; PP is at most the layer count; CP splits the
sequence (tried only for long ones); DP takes the remaining chips and must split the batch.
Each candidate runs each pipeline schedule and ZeRO stage (ZeRO 3 also sharded within each
fast domain and replicated across them); gradient accumulation and
microbatching are chosen per layout before it is called too big. The fastest layout that
fits wins, by its step at achievable rates (the bound where the chip states none); among layouts
within 1% of it, the simplest (fewest axes, lowest ZeRO stage).
"""

from __future__ import annotations

import math
from typing import Any

from ...base.options import DEFAULTS
from ..chips.hardware import Hardware
from ..units import nbytes, seconds, whole_percent
from .hierarchy import fast_domain
from .layout import Layout
from .layout_step import RunSpec, divisors, evaluate_layout
from .transformer import ModelConfig

LONG_SEQUENCE = 32768  # context parallelism is tried from here on
TIE = 0.01


def _schedules(pp: int, layers: int) -> list[tuple[str, int]]:
    if pp == 1:
        return [("1f1b", 1)]
    out = [("1f1b", 1), ("zero-bubble", 1), ("dualpipe", 1)]
    out += [("interleaved", v) for v in (2, 4) if pp * v <= layers]
    return out


def candidate_layouts(cfg: ModelConfig, run: RunSpec, hw: Hardware) -> list[Layout]:
    """Every layout worth pricing: degrees that divide the chips, the model and the batch."""
    chips = run.chips
    domain = fast_domain(hw, chips)
    tps = [t for t in divisors(chips) if cfg.heads % t == 0 and cfg.d_ff % t == 0
           and (cfg.kv_heads % t == 0 or t % cfg.kv_heads == 0)
           and (t <= domain if hw.kind != "tpu" else t <= max(hw.topology or hw.interconnect.max_torus or (1,)))]
    cps = [c for c in divisors(chips) if c <= 32 and run.seq % (2 * c) == 0] if run.seq >= LONG_SEQUENCE else [1]
    out = []
    for tp in tps:
        for cp in cps:
            for pp in (p for p in divisors(chips // (tp * cp)) if p <= cfg.layers):
                dp = chips // (tp * cp * pp)
                if run.per_replica(dp) is None:
                    continue
                eps = [e for e in divisors(dp) if cfg.experts and cfg.experts % e == 0] or [1]
                if cfg.experts and tp * cp > 1:  # EP over the TP and CP ranks and some DP ranks
                    eps += [e * tp * cp for e in divisors(dp) if cfg.experts % (e * tp * cp) == 0
                            and dp % (e * tp * cp) and e * tp * cp not in eps]
                for ep in eps:
                    for schedule, v in _schedules(pp, cfg.layers):
                        for zero in (1, 2, 3):
                            for replicas in _replicas(dp // ep, chips // domain, zero):
                                out.append(Layout(dp=dp, tp=tp, pp=pp, ep=ep, cp=cp, zero=zero,
                                                  schedule=schedule, virtual_stages=v, replicas=replicas))
    return out


def _replicas(dp: int, domains: int, zero: int) -> list[int]:
    """Shard over all DP ranks, or (ZeRO 3) within each fast domain, replicated across them."""
    if zero >= 3 and 1 < domains < dp and dp % domains == 0:
        return [1, domains]
    return [1]


def ranked_step(result: dict[str, Any]) -> float:
    """What layouts are ranked by: the step at achievable rates (each op priced, the overlap the
    schedule really gets), else the bound where the chip states no achievable figures."""
    est = result.get("step_time_achievable_s")
    return float(est["total"]) if est else float(result["step_time_s"]["total"])


def _simplicity(result: dict[str, Any]) -> tuple[int, int, int]:
    lay = result["layout"]
    axes = sum(1 for k in ("tp", "pp", "ep", "cp") if lay[k] > 1)
    return (axes, lay["zero"], 0 if lay["schedule"] in ("1f1b", "none") else 1)


def search(cfg: ModelConfig, run: RunSpec, hw: Hardware, top: int = DEFAULTS.plan_top) -> dict[str, Any]:
    """The `top` fastest fitting layouts, the best that does not fit, and why the winner wins."""
    results = [evaluate_layout(cfg, run, hw, lay) for lay in candidate_layouts(cfg, run, hw)]
    valid = [r for r in results if r["valid"]]
    fitting = sorted((r for r in valid if r["fits"]), key=ranked_step)
    if fitting:
        best_time = ranked_step(fitting[0])
        near = [r for r in fitting if ranked_step(r) <= best_time * (1 + TIE)]
        winner = min(near, key=_simplicity)
        ranked = [winner] + [r for r in fitting if r is not winner]
    else:
        ranked = []
    smallest = min(valid, key=lambda r: r["memory_per_chip_bytes"]["total"], default=None)
    return {"candidates": len(results), "valid": len(valid), "fitting": len(fitting),
            "layouts": ranked[:top], "best": ranked[0] if ranked else None,
            "why": explain(ranked) if ranked else _nothing_fits(smallest, run),
            "smallest_footprint": None if fitting or smallest is None else smallest}


def _parts(r: dict[str, Any]) -> dict[str, float]:
    """The parts of the step the ranking used: the estimate's by network level, else the bound's by axis."""
    est = r.get("step_time_achievable_s")
    if est:
        parts = {"compute": est["compute"], "bubble": est["bubble"]}
        parts.update({f"{k} communication": v for k, v in est["exposed_comm_by_level"].items()})
        return parts
    s = r["step_time_s"]
    parts = {"compute": s["compute"], "bubble": s["bubble"]}
    parts.update({f"{k} communication": v for k, v in s["exposed_comm_by_axis"].items()})
    return parts


def compare(best: dict[str, Any], other: dict[str, Any]) -> str:
    """How `best` differs from `other` in step time, by the parts that differ most."""
    mine, theirs = _parts(best), _parts(other)
    diffs = sorted(((theirs.get(k, 0.0) - mine.get(k, 0.0), k) for k in set(mine) | set(theirs)), reverse=True)
    gains = [f"{k} {seconds(theirs.get(k, 0.0))} -> {seconds(mine.get(k, 0.0))}" for d, k in diffs if d > 0][:2]
    losses = [f"{k} {seconds(theirs.get(k, 0.0))} -> {seconds(mine.get(k, 0.0))}" for d, k in reversed(diffs) if d < 0][:1]
    delta = ranked_step(other) - ranked_step(best)
    return (f"{best['layout']['label']} is {seconds(abs(delta))} per step {'faster' if delta >= 0 else 'slower'} "
            f"than {other['layout']['label']}: " + (", ".join(gains) or "less of everything")
            + (f"; but {losses[0]}" if losses else ""))


def explain(ranked: list[dict[str, Any]]) -> str:
    """Why the first layout beats the next one, in the parts of the step that differ most."""
    best = ranked[0]
    if len(ranked) == 1:
        return f"{best['layout']['label']} is the only layout that fits"
    other = ranked[1]
    total = ranked_step(best)
    if ranked_step(other) - total <= total * TIE and _simplicity(best) < _simplicity(other):
        return (f"{best['layout']['label']} ties {other['layout']['label']} within {whole_percent(TIE)} of the step time "
                f"and is simpler (fewer parallel axes, lower ZeRO stage or a plainer schedule)")
    return compare(best, other)



def _nothing_fits(smallest: dict[str, Any] | None, run: RunSpec) -> str:
    if smallest is None:
        return f"no layout divides {run.chips} chips, this model and {run.sequences} sequences per step"
    need = smallest["memory_per_chip_bytes"]["total"]
    have = smallest["hbm_bytes"]
    more = math.ceil(run.chips * need / have) if have else run.chips
    return (f"nothing fits, even with the most microbatches: the smallest footprint, "
            f"{smallest['layout']['label']}, needs {nbytes(need)} per chip of {nbytes(have)}; "
            f"about {more} chips, more remat (--remat full or offload), or a smaller batch per step")
