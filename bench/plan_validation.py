"""The planner against published training runs: the markdown table of bench/RESULTS.md.

Usage: python bench/plan_validation.py. Each row evaluates the run's published layout
(fits? its step-time lower bound at peak FLOP/s, and the MFU that bound allows) beside the
step time the report states or its MFU implies, and the planner's own recommendation.
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
    mine = "-" if best is None else (f"`{best['layout']['label']}` {_s(best['step_time_s']['total'])}, "
                                     f"{best['memory_per_chip_bytes']['total'] / 1e9:.0f} GB")
    mfu = "-" if not e["valid"] else f"{100 * e['mfu_upper_bound']:.0f}%"
    ach = e.get("step_time_achievable_s")
    est = "-" if not ach else f"{_s(ach['total'])} ({100 * e['mfu_at_achievable']:.0f}%)"
    return (f"| {v['name']} | {v['chips']} x {v['hardware']} | `{v['layout']}` | {fits} | {_s(bound)} | {mfu} | "
            f"{est} | {_s(published)} ({how}: {v['published']}) | {mine} |")


def main() -> None:
    print("| run | chips | published layout | fits (per chip) | step >= (planner) | MFU <= |"
          " step ~ at achievable rates (MFU) | published step | planner's layout, step >=, memory |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in RUNS:
        print(row(validate(run)))
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
