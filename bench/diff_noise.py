"""False alarms and detection power of `audit diff` under this machine's run-to-run noise.

    python bench/diff_noise.py [--runs 16] [--slowed 6] [--hog 4] [--steps 10] [--out DIR]

Profiles the bundled transformer step (default size, f32, 2 simulated CPU devices: a
~0.27 s step whose run medians agree within a few percent on a quiet 2-core machine,
where the 8-device bf16 default spreads by 30%) as separate `audit run` processes,
interleaved: identical runs (a busy-loop CPU hog beside `--hog` of them), and
runs slowed at runtime only by 10% and 25% (`bench/host_work.py`: busy host work inside
each step window; the compiled program is unchanged). Then it forms base/head pairs with
1 and 3 runs a side and counts `audit diff` verdicts with the default threshold:

- false alarms: identical code on both sides that reads as a regression (target 0);
- detection: a slowed head that reads as a regression (target >= 90% for 25% at 3 runs);
  its base runs are the identical runs without the hog (the hog is for the false alarms).

Pairs reuse runs from the pool (a run appears in several pairs), so they are not
independent trials; the table says how many distinct runs stand behind each rate.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEVICES = "2"
WARM = 3  # clean runs first, whose median step sizes the slowdowns
CONFIG = ["--dtype", "float32"]


def run(out: Path, steps: int, host_work_ms: float, hog: bool) -> dict:
    hog_proc = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if hog else None
    try:
        subprocess.run([sys.executable, "-m", "audit", "run", str(ROOT / "bench" / "host_work.py"), "--devices", DEVICES,
                        "--steps", str(steps), "--warmup", "2", "--quiet", "--json", str(out), "--",
                        *CONFIG, "--host-work-ms", f"{host_work_ms:.3f}"], check=True)
    finally:
        if hog_proc is not None:
            hog_proc.kill()
            hog_proc.wait()
    report = json.loads(out.read_text())
    return {**report, "run_source": out.name}


def median_step(report: dict) -> float:
    return statistics.median(s["time_s"] for s in report["steps"])


def verdicts(bases: list[dict], heads: list[dict], per_side: int, trials: int, rng: random.Random,
             disjoint: bool) -> Counter:
    from audit.analyses.diff_verdict import diff_reports

    out: Counter = Counter()
    if per_side == 1:
        pairs = ([([a], [b]) for a, b in itertools.combinations(bases, 2)] if disjoint else
                 [([a], [b]) for a in bases for b in heads])
        pairs = rng.sample(pairs, min(trials, len(pairs)))
    else:
        pairs = []
        for _ in range(trials):
            if disjoint:
                pick = rng.sample(bases, 2 * per_side)
                pairs.append((pick[:per_side], pick[per_side:]))
            else:
                pairs.append((rng.sample(bases, per_side), rng.sample(heads, per_side)))
    for b, h in pairs:
        out[diff_reports(b, h).verdict] += 1
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=16, help="identical runs")
    parser.add_argument("--slowed", type=int, default=6, help="runs at each slowdown")
    parser.add_argument("--hog", type=int, default=4, help="identical runs with a CPU hog beside them")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--trials", type=int, default=20, help="pairs drawn per cell")
    parser.add_argument("--out", type=Path, help="keep the reports here (default: a temp dir)")
    parser.add_argument("--analyse", type=Path, metavar="DIR",
                        help="only form pairs from the reports an earlier --out DIR kept (hog runs: --hog-runs)")
    parser.add_argument("--hog-runs", default="", help="with --analyse: base run numbers that had the hog, e.g. 1,4")
    args = parser.parse_args()
    started = time.time()
    if args.analyse:
        load = lambda p: {**json.loads(p.read_text()), "run_source": p.name}  # noqa: E731
        number = lambda p: int(p.stem.rsplit("_", 1)[-1].removeprefix("base"))  # noqa: E731
        bases = [load(p) for p in sorted(args.analyse.glob("base*.json"), key=number)]
        slowed = {pct: [load(p) for p in sorted(args.analyse.glob(f"slow{pct}_*.json"), key=number)]
                  for pct in (10, 25)}
        hog_at = {int(x) for x in args.hog_runs.split(",") if x}
        return report(bases, slowed, hog_at, 1000 * statistics.median(median_step(b) for b in bases[:WARM]), args.trials,
                      started)
    with tempfile.TemporaryDirectory() as tmp:
        t = args.out or Path(tmp)
        t.mkdir(parents=True, exist_ok=True)
        # The slowdowns are sized from the median of the first few clean runs, not from one run
        # (a run alone can be 10% off the typical step here).
        bases = [run(t / f"base{i}.json", args.steps, 0.0, False) for i in range(WARM)]
        base_ms = 1000 * statistics.median(median_step(b) for b in bases)
        hog_at = set(range(WARM, args.runs, max(1, (args.runs - WARM) // max(args.hog, 1)))[:args.hog])
        slowed: dict[int, list[dict]] = {10: [], 25: []}
        # Interleaved, so drift in the machine's load reaches every kind alike: base, +25%, base, +10%, ...
        schedule, kinds = [], itertools.cycle((25, 10))
        for i in range(WARM, max(args.runs, 2 * args.slowed + WARM)):
            if i < args.runs:
                schedule.append(0)
            schedule += [next(kinds)] * (len([k for k in schedule if k]) < 2 * args.slowed)
        for kind in schedule:
            if kind == 0:
                i = len(bases)
                bases.append(run(t / f"base{i}.json", args.steps, 0.0, i in hog_at))
            else:
                slowed[kind].append(run(t / f"slow{kind}_{len(slowed[kind])}.json", args.steps,
                                        base_ms * kind / 100, False))
            print(f"{time.time() - started:6.0f} s: {len(bases)} base, {len(slowed[25])} at +25%, "
                  f"{len(slowed[10])} at +10%", flush=True)
        return report(bases, slowed, hog_at, base_ms, args.trials, started)


def report(bases: list[dict], slowed: dict[int, list[dict]], hog_at: set[int], base_ms: float, trials: int,
           started: float) -> int:
    """Form the pairs, count verdicts, print the table; exit 0 when both targets are met."""
    rng = random.Random(0)
    clean = [b for i, b in enumerate(bases) if i not in hog_at]
    clean_ms = 1000 * statistics.median(median_step(b) for b in clean)
    rows = []
    for per_side in (1, 3):
        rows.append(("identical (hog beside some)", per_side,
                     verdicts(bases, bases, per_side, trials, rng, True), len(bases)))
        for pct in (10, 25):
            if len(slowed[pct]) < per_side:
                continue
            achieved = statistics.median(median_step(r) for r in slowed[pct]) * 1000 / clean_ms - 1
            rows.append((f"+{pct}% host work (measured {100 * achieved:+.0f}%)", per_side,
                         verdicts(clean, slowed[pct], per_side, trials, rng, False),
                         len(clean) + len(slowed[pct])))
    print(f"\nbase step {base_ms:.1f} ms (first {WARM} runs), {clean_ms:.1f} ms (median of runs without the hog); "
          f"{len(bases)} identical runs, {len(hog_at)} with a CPU hog beside; {time.time() - started:.0f} s")
    print("| head | runs a side | pairs | regression | inconclusive | no change | improvement | distinct runs |")
    print("|---|---|---|---|---|---|---|---|")
    for label, per_side, counts, distinct in rows:
        n = sum(counts.values())
        print(f"| {label} | {per_side} | {n} | {counts['regression']} | {counts['inconclusive']} | "
              f"{counts['no change']} | {counts['improvement']} | {distinct} |")
    false_alarms = sum(r[2]["regression"] for r in rows if r[0].startswith("identical"))
    power = next((r[2] for r in rows if r[1] == 3 and r[0].startswith("+25%")), Counter())
    return 0 if false_alarms == 0 and power["regression"] >= 0.9 * max(sum(power.values()), 1) else 1


if __name__ == "__main__":
    sys.exit(main())
