"""The achievable attention figures of an NVIDIA H100, fitted to this project's own cuDNN captures.

    python bench/attention_rates.py [--json REPORT.json]

Reads tests/data/captures/h100-jax0.11/attention-sweep (cuDNN flash attention as JAX runs it, on one
H100 SXM): each attention op's problem from its HLO (the cost model's own reading) and its kernel
time per run from the trace. Fits, per pass, the model costmodel.attention prices with: time =
FLOPs x waves x (L + L_half) / L / R, L the mean keys per query, one L_half per pass and one R per
pass and mask (causal or not), to the multi-head D=128 programs at sequence lengths 512 to 8192
(least squares on log time). Prints the figures, then every op of both H100 captures against them:
the fitted points, and the held-out ones (the microbenchmark's S=2048 capture, grouped-query heads,
head dim 64, a sliding window), which judge the model.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "tests" / "data" / "captures" / "h100-jax0.11"
SWEEP = CAPTURES / "attention-sweep"


def _report(path: Path, json_path: str | None = None) -> dict:
    if json_path:
        return json.loads(Path(json_path).read_text())
    from audit.library import inspect

    return inspect(path, hardware="h100", cache="").to_json()


def _problems(hlo_dir: Path) -> dict[tuple[int, str], tuple[object, float, str]]:
    """(program id, op name) -> (AttentionProblem, FLOPs, target) for every fused attention call."""
    import audit.costmodel.ops.module  # noqa: F401  (registers the handlers)
    from audit.costmodel.ops.base import CostContext, cost_instruction
    from audit.parsers.hlo.text import parse_hlo_text

    out: dict[tuple[int, str], tuple[object, float, str]] = {}
    for path in sorted(hlo_dir.glob("module_*after_optimizations.txt")):
        program = int(path.name.split(".")[0].removeprefix("module_"))
        module = parse_hlo_text(path.read_text(), str(path))
        for comp in module.computations.values():
            for instr in comp.instructions:
                if instr.custom_call_target.startswith("__cudnn$fmha"):
                    c = cost_instruction(instr, CostContext(module, comp))
                    out[(program, instr.name)] = (c.attention, c.flops or 0.0, instr.custom_call_target)
    return out


def points(report: dict, hlo_dir: Path) -> list[dict]:
    from audit.costmodel.attention import _waves, pairs
    from audit.costmodel.chips.catalog import CATALOG

    hw = CATALOG["h100"]
    assert hw.achievable is not None
    problems = _problems(hlo_dir)
    rows = []
    for op in report["ops"]:
        found = problems.get((op["program_id"], op["name"]))
        if found is None or not op["measured_s"]:
            continue
        p, flops, target = found
        rows.append({"name": op["name"], "program": op["program_id"], "p": p, "flops": flops, "target": target,
                     "time": op["measured_s"] / op["occurrences"], "keys": pairs(p) / p.q_len,
                     "waves": _waves(p, hw, hw.achievable)})
    return rows


def fitted(row: dict) -> bool:
    p = row["p"]
    return (p.heads == p.kv_heads == 16 and p.qk_dim == 128 and not p.padded and p.window == (-1, -1)
            and "Bias" not in row["target"])


def fit(rows: list[dict]) -> dict[str, float]:
    """Per pass: the L_half (0 to 4000 keys) and per-mask R that minimise the squared log error."""
    figures: dict[str, float] = {}
    for backward in (False, True):
        mine = [r for r in rows if r["p"].backward == backward]
        best: tuple[float, float, dict[bool, float]] | None = None
        for half in range(0, 4001, 5):
            rates = {}
            for causal in (False, True):
                group = [r for r in mine if r["p"].causal == causal]
                logs = [math.log(r["flops"] * r["waves"] * (r["keys"] + half) / r["keys"] / r["time"]) for r in group]
                rates[causal] = math.exp(sum(logs) / len(logs))
            error = sum((math.log(r["flops"] * r["waves"] * (r["keys"] + half) / r["keys"] / rates[r["p"].causal])
                         - math.log(r["time"])) ** 2 for r in mine)
            if best is None or error < best[0]:
                best = (error, half, rates)
        assert best is not None
        name = "backward" if backward else "forward"
        figures[f"{name}_half"] = best[1]
        figures[name], figures[f"{name}_causal"] = best[2][False], best[2][True]
    return figures


def predicted(row: dict, figures: dict[str, float]) -> float:
    p = row["p"]
    name = "backward" if p.backward else "forward"
    rate = figures[name + ("_causal" if p.causal or p.window != (-1, -1) else "")]
    return row["flops"] * row["waves"] * (row["keys"] + figures[f"{name}_half"]) / row["keys"] / rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="a report `audit inspect --json` wrote of the sweep capture")
    args = parser.parse_args()
    sweep = points(_report(SWEEP / "attention-sweep.xplane.pb", args.json), SWEEP / "hlo")
    micro = points(_report(CAPTURES / "microbench.xplane.pb"), CAPTURES / "attention")
    figures = fit([r for r in sweep if fitted(r)])
    print("| figure | value |\n|---|---|")
    for key, value in figures.items():
        print(f"| {key} | {value:.4g} {'keys' if key.endswith('half') else 'FLOP/s'} |")
    print("\n| capture | op | pass | mask | B | H/KV | S | D | measured | model | measured/model | fitted |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for where, rows in (("sweep", sweep), ("microbench", micro)):
        for r in sorted(rows, key=lambda r: (r["p"].backward, r["p"].causal, r["p"].q_len, r["program"])):
            p, model = r["p"], predicted(r, figures)
            mask = ("causal" if p.causal else "none") + (" window" if p.window != (-1, -1) else "") + (
                " padding" if p.padded else "")
            print(f"| {where} | {r['program']} {r['name']} | {p.kernel} | {mask} | {p.batch} | {p.heads}/{p.kv_heads} "
                  f"| {p.q_len} | {p.qk_dim} | {r['time'] * 1e6:.1f} us | {model * 1e6:.1f} us | "
                  f"{r['time'] / model:.2f} | {'yes' if where == 'sweep' and fitted(r) else 'no'} |")


if __name__ == "__main__":
    main()
