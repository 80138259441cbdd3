"""The planner against published training runs: the markdown table of bench/RESULTS.md.

Usage: python bench/plan_validation.py. Each row evaluates the run's published layout
(fits? its step-time lower bound at peak FLOP/s, and the MFU that bound allows; the estimate at
achievable rates, each op of the step priced by the cost model that judges profiles) beside the
step time the report states or its MFU implies, their ratio, and the planner's own recommendation.
A summary line counts the runs whose estimate lands within [0.67, 1.5] of the published step and
checks that no bound is above one.
"""

from __future__ import annotations

import time

from audit.costmodel.planner.published import RUNS, validate
from audit.costmodel.planner.search import search
from audit.costmodel.planner.transformer import MODELS


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def row(v: dict) -> str:
    e, best = v["evaluation"], v["recommendation"]
    published = v["published_step_s"] or v["step_at_published_mfu_s"]
    how = "stated" if v["published_step_s"] else "at published MFU"
    fits = (f"yes, {e['memory_per_chip_bytes']['total'] / 1e9:.0f} GB" if e["fits"] else "NO") if e["valid"] \
        else "cannot run"
    bound = e["step_time_s"]["total"] if e["valid"] else None
    best_est = None if best is None else best.get("step_time_achievable_s")
    mine = "-" if best is None else (f"`{best['layout']['label']}` ~{_s(best_est['total'] if best_est else None)} "
                                     f"(>= {_s(best['step_time_s']['total'])}), "
                                     f"{best['memory_per_chip_bytes']['total'] / 1e9:.0f} GB")
    mfu = "-" if not e["valid"] else f"{100 * e['mfu_upper_bound']:.0f}%"
    ach = e.get("step_time_achievable_s")
    est = "-" if not ach else f"{_s(ach['total'])} ({100 * e['mfu_at_achievable']:.0f}%)"
    ratio = "-" if not ach or not published else f"{ach['total'] / published:.2f}"
    remat = e.get("remat", {}).get("estimate", "-")
    return (f"| {v['name']} | {v['chips']} x {v['hardware']} | `{v['layout']}` | {remat} | {fits} | {_s(bound)} | "
            f"{mfu} | {est} | {_s(published)} ({how}: {v['published']}) | {ratio} | {mine} |")


def summary(validated: list[dict]) -> str:
    """Runs within [0.67, 1.5], and whether every bound is below its published step."""
    ratios, above = [], []
    for v in validated:
        e = v["evaluation"]
        published = v["published_step_s"] or v["step_at_published_mfu_s"]
        ach = e.get("step_time_achievable_s") if e["valid"] else None
        if ach and published:
            ratios.append(ach["total"] / published)
        if e["valid"] and published and e["step_time_s"]["total"] > published:
            above.append(v["name"])
    inside = sum(1 for r in ratios if 0.67 <= r <= 1.5)
    ordered = sorted(ratios)
    median = ordered[len(ordered) // 2] if ordered else float("nan")
    return (f"{inside} of {len(ratios)} estimates within [0.67, 1.5] of the published step (median "
            f"estimate/published {median:.2f}); bounds above a published step: {', '.join(above) or 'none'}")


def main() -> None:
    print("| run | chips | published layout | remat | fits (per chip) | step >= (planner) | MFU <= |"
          " step ~ at achievable rates (MFU) | published step | estimate / published |"
          " planner's layout, step ~ (>=), memory |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    validated = [validate(run) for run in RUNS]
    for v in validated:
        print(row(v))
    print()
    print(summary(validated))
    print()
    for run in RUNS:
        print(f"- {run.name}: {run.source}")
    print()
    print("| search | chips | layouts priced | runnable | fit | seconds (best of 3) |")
    print("|---|---|---|---|---|---|")
    for run in RUNS:
        spec, hw = run.setup().run_spec(), run.hw()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            found = search(MODELS[run.model], spec, hw)
            times.append(time.perf_counter() - start)
        print(f"| {run.name} | {run.chips} | {found['candidates']} | {found['valid']} | {found['fitting']} | "
              f"{min(times):.2f} |")


if __name__ == "__main__":
    main()
