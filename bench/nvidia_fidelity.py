"""The NVIDIA fidelity table: the A100 nsys-jax archives judged op by op against both ceilings.

    python bench/nvidia_fidelity.py [--json REPORT.json] [--top N]

Reads the four nsys-jax archives of tests/data/fixtures/gpu-a100-pax-nsys-jax/ as one profile
(or a JSON report `audit inspect` wrote of them) and prints, as markdown for bench/RESULTS.md:
the ops by kind with measured / roofline and measured / achievable (median, p10, min), how
many ops and how much op time beat the roofline by more than 1.25x, the largest ops one by
one, and every flagged op with its reasons. Times are per device summed over the analysed
steps [trace]; roofline and achievable times are the cost model's [model].
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ARCHIVES = ROOT / "tests" / "data" / "fixtures" / "gpu-a100-pax-nsys-jax"
FASTER = 1.25


def report(json_path: str | None) -> dict:
    if json_path:
        return json.loads(Path(json_path).read_text())
    from audit.orchestration.pipeline import analyse_profile
    from audit.pod.reduce import PodSettings

    return analyse_profile(ARCHIVES, pod=PodSettings(progress=False, cache="")).to_json()


def kind(op: dict) -> str:
    if op["comm_bytes"]:
        return "collective"
    if op["custom_call_target"].startswith("__cublas"):
        return "cuBLAS GEMM"
    if op["custom_call_target"]:
        return f"custom call {op['custom_call_target']}"
    if op["category"] == "custom fusion" and op["name"].startswith("gemm_fusion"):
        return "Triton GEMM fusion"
    return op["opcode"] or "not in the HLO"


def _q(values: list[float], q: float) -> str:
    return f"{np.quantile(values, q):.2f}" if values else "-"


def table(r: dict, top: int) -> str:
    timed = [o for o in r["ops"] if o["measured_s"] and o["expected_s"] and not o["container"]]
    judged = [o for o in timed if o["verdict"] != "not judged"]
    total = sum(o["measured_s"] for o in timed)
    waits = sum(1 for o in timed if any("wait on other ranks" in x for x in o["reasons"]))
    unseen = sum(1 for o in timed if any("devices the profile does not show" in x for x in o["reasons"]))
    lines = [f"{len(timed)} timed ops with a roofline time, {len(judged)} judged (not judged: {waits} collectives "
             f"whose time is mostly a wait on other ranks, {unseen} whose group spans devices the profile does not "
             f"hold, {len(timed) - len(judged) - waits - unseen} others), "
             f"{total * 1e3:.1f} ms of op time per device over {r['summary']['steps']} steps.", "",
             "| kind | ops | op time | measured / roofline: median, p10, min | measured / achievable: median, "
             "p10, min | ops >1.25x faster than roofline |", "|---|---|---|---|---|---|"]
    kinds: dict[str, list[dict]] = {}
    for o in timed:
        kinds.setdefault(kind(o), []).append(o)
    for name, ops in sorted(kinds.items(), key=lambda kv: -sum(o["measured_s"] for o in kv[1])):
        roof = [o["measured_s"] / o["expected_s"] for o in ops]
        ach = [o["measured_s"] / o["achievable_s"] for o in ops if o.get("achievable_s")]
        fast = sum(1 for x in roof if x < 1 / FASTER)
        lines.append(f"| {name} | {len(ops)} | {sum(o['measured_s'] for o in ops) * 1e3:.1f} ms | "
                     f"{_q(roof, .5)}, {_q(roof, .1)}, {min(roof):.2f} | "
                     f"{_q(ach, .5)}, {_q(ach, .1)}, {min(ach) if ach else float('nan'):.2f} | {fast} |")
    beating = [o for o in judged if o["measured_s"] * FASTER < o["expected_s"]]
    share = sum(o["measured_s"] for o in beating) / total if total else 0.0
    lines += ["", f"Judged ops faster than 1.25x their roofline: {len(beating)} of {len(judged)} "
              f"({len(beating) / max(len(judged), 1):.1%}), {share:.2%} of op time; faster than the roofline at all: "
              f"{sum(1 for o in judged if o['measured_s'] < o['expected_s'])}"
              + "".join(f"; `{o['name']}` {o['measured_s'] / o['expected_s']:.2f}x its roofline "
                        f"({o.get('memory_level') or o['bound_by']})"
                        for o in judged if o["measured_s"] < o["expected_s"]) + ".", "",
              f"The {top} largest ops:", "",
              "| op | kind | measured | roofline | achievable | measured / roofline | measured / achievable | verdict |",
              "|---|---|---|---|---|---|---|---|"]
    for o in sorted(timed, key=lambda o: -o["measured_s"])[:top]:
        ach = o.get("achievable_s")
        lines.append(f"| {o['name']} | {kind(o)} | {o['measured_s'] * 1e3:.2f} ms | {o['expected_s'] * 1e3:.2f} ms | "
                     f"{ach * 1e3:.2f} ms | {o['measured_s'] / o['expected_s']:.2f} | "
                     f"{o['measured_s'] / ach:.2f} | {o['verdict']} |" if ach else
                     f"| {o['name']} | {kind(o)} | {o['measured_s'] * 1e3:.2f} ms | {o['expected_s'] * 1e3:.2f} ms | - | "
                     f"{o['measured_s'] / o['expected_s']:.2f} | - | {o['verdict']} |")
    lines += ["", "Flagged:", ""]
    for o in r["ops"]:
        if o["flagged"]:
            reasons = "; ".join(x for x in o["reasons"] if not x.startswith("took ") or "roofline" in x)
            lines.append(f"- `{o['name']}` ({kind(o)}): {reasons}")
    m = r.get("matching") or {}
    if m:
        lines += ["", f"Matching: {m['matched_share']:.1%} of measured op time matched to HLO ops with an expected "
                  f"time; {m['covered_share']:.1%} matched or explained."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="a report `audit inspect` wrote of the archives (default: analyse them now)")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    print(table(report(args.json), args.top))


if __name__ == "__main__":
    main()
