"""How the two ceilings fit real ops: measured / roofline and measured / achievable time per op.

    python bench/fidelity.py [--profiles DIR] [--capture] [--audit CMD] [--label NAME] [--json FILE]

The roofline is meant to be a lower bound: an op should rarely run faster than its
expected time. The achievable time (what good kernels reach on the chip) is meant to be
tight: real ops should take about that long. For every real capture in tests/data/fixtures/
(the MI300X traces, the A100 nsys-jax archives; the HLO dumps carry no measurements), every
reference workload in
workloads/ run on this CPU, and the default `audit run` (no workload), this prints the
distribution of measured/expected over the timed ops (median, p10, p90), the share of ops,
and of op time, that ran more than 1.25x faster than expected, the time-weighted median of
measured/achievable, and every flagged op with its achieved rate against both ceilings.

The CPU profiles are captured once (`--capture`, kept under `--profiles DIR`) and then
only inspected, so two versions of the cost model (`--audit` names another checkout's
`audit` executable) are judged on the same measurements.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "fixtures"
FASTER = 1.25  # an op "beats" its roofline when measured < expected / FASTER
# (name, workload file or None for the default run, --devices, workload arguments)
WORKLOADS: tuple[tuple[str, str | None, int | None], ...] = (
    ("default", None, None),
    ("matmul", "workloads/matmul.py", 1),
    ("sharded_matmul", "workloads/sharded_matmul.py", 8),
    ("collectives", "workloads/collectives.py", 8),
    ("transformer", "workloads/transformer.py", 8),
    ("decode", "workloads/decode.py", 8),
)


def capture(audit: list[str], profiles: Path, steps: int) -> None:
    """`audit run` every workload once, keeping the raw profile under profiles/NAME."""
    for name, path, devices in WORKLOADS:
        out = profiles / name
        if out.exists():
            continue
        cmd = [*audit, "run", *([str(ROOT / path)] if path else []), "--steps", str(steps), "--quiet",
               "--out", str(out), "--json", os.devnull]
        if devices:
            cmd += ["--devices", str(devices)]
        print(f"capturing {name}: {shlex.join(cmd)}", file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT)


def inputs(profiles: Path | None) -> list[tuple[str, Path]]:
    found = [(f"fixture {p.parent.name}/{p.name}", p) for p in sorted(FIXTURES.glob("*/*.xplane.pb"))
             if p.parent.name != "not-jax"]  # the TensorFlow trace has no HLO to cost
    # nsys-jax archives: one folder holds one run, an archive per process (host)
    found += [(f"fixture {d.name}/", d) for d in sorted({z.parent for z in FIXTURES.glob("*/*.zip")})]
    if profiles is not None:
        found += [(f"cpu {name}", profiles / name) for name, _, _ in WORKLOADS if (profiles / name).exists()]
    return found


def report(audit: list[str], path: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        subprocess.run([*audit, "inspect", str(path), "--quiet", "--json", str(out)], check=False,
                       cwd=ROOT, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def timed_ops(data: dict) -> list[tuple[float, float]]:
    """(measured_s, expected_s) of every op that has both and is not a container (while, call)."""
    out = []
    for op in data.get("ops", []):
        measured, expected = op.get("measured_s"), op.get("expected_s")
        if op.get("container") or measured is None or expected is None or measured <= 0 or expected <= 0:
            continue
        out.append((float(measured), float(expected)))
    return out


def stats(pairs: list[tuple[float, float]]) -> dict:
    if not pairs:
        return {"ops": 0}
    measured = np.array([m for m, _ in pairs])
    ratio = measured / np.array([e for _, e in pairs])
    faster = ratio < 1 / FASTER
    return {
        "ops": len(pairs),
        "median": float(np.median(ratio)),
        "p10": float(np.percentile(ratio, 10)),
        "p90": float(np.percentile(ratio, 90)),
        "faster_ops": int(faster.sum()),
        "faster_ops_share": float(faster.mean()),
        "faster_time_share": float(measured[faster].sum() / measured.sum()),
    }


def achievable_pairs(data: dict) -> list[tuple[float, float]]:
    """(measured / achievable, measured_s) of every judged op (ok or flagged: not a wait, a
    container or a collective between simulated devices) with an achievable time."""
    return [(float(op["measured_s"]) / float(op["achievable_s"]), float(op["measured_s"]))
            for op in data.get("ops", [])
            if op.get("verdict") in ("ok", "flagged") and (op.get("measured_s") or 0) > 0
            and (op.get("achievable_s") or 0) > 0]


def weighted_median(pairs: list[tuple[float, float]]) -> float | None:
    """The ratio at which half of the measured time is in ops at or below it (None without ops)."""
    if not pairs:
        return None
    pairs = sorted(pairs)
    half, seen = sum(t for _, t in pairs) / 2, 0.0
    for ratio, t in pairs:
        seen += t
        if seen >= half:
            return ratio
    return pairs[-1][0]


def tightness(data: dict) -> float | None:
    """Time-weighted median of measured / achievable over the timed ops (None in a report
    without achievable times): half of the measured op time is in ops at most this far off."""
    return weighted_median(achievable_pairs(data))


def flagged(data: dict) -> list[dict]:
    """The flagged ops, most measured time first: time against the roofline and the achievable time."""
    out = []
    for op in data.get("ops", []):
        if not op.get("flagged"):
            continue
        measured = op.get("measured_s")
        out.append({"name": op.get("name"), "opcode": op.get("opcode"), "bound_by": op.get("bound_by"),
                    "measured_s": measured, "expected_s": op.get("expected_s"),
                    "achievable_s": op.get("achievable_s"), "share": op.get("share"),
                    "achieved_flops_per_s": op.get("achieved_flops_per_s"),
                    "achieved_bytes_per_s": op.get("achieved_bytes_per_s"),
                    "roofline_fraction": op.get("efficiency"),
                    "achievable_fraction": op.get("achievable_efficiency")})
    return sorted(out, key=lambda o: -(o["measured_s"] or 0.0))


def roofline_flags(data: dict, min_efficiency: float = 0.5, min_share: float = 0.01) -> int:
    """Ops the same report would flag if judged on the roofline instead (the old rule)."""
    return sum(1 for op in data.get("ops", [])
               if op.get("verdict") in ("ok", "flagged") and (op.get("efficiency") or 1.0) < min_efficiency
               and (op.get("share") or 0.0) >= min_share)


def levels(data: dict) -> dict[str, int]:
    """How many timed ops each memory level judged (absent in reports that predate the field)."""
    counts: dict[str, int] = {}
    for op in data.get("ops", []):
        if op.get("measured_s") and op.get("expected_s") and not op.get("container"):
            level = op.get("memory_level") or "-"
            counts[level] = counts.get(level, 0) + 1
    return counts


def markdown(label: str, results: list[dict]) -> str:
    lines = [f"| input ({label}) | timed ops | median | p10 | p90 | ops >{FASTER}x faster | op time >{FASTER}x faster |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        s = r["stats"]
        if not s["ops"]:
            lines.append(f"| {r['input']} | 0 | | | | | |")
            continue
        lines.append(f"| {r['input']} | {s['ops']} | {s['median']:.3g} | {s['p10']:.3g} | {s['p90']:.3g} | "
                     f"{s['faster_ops']} ({100 * s['faster_ops_share']:.1f}%) | {100 * s['faster_time_share']:.1f}% |")
    return "\n".join(lines)


def _num(value: float | None, fmt: str = ".3g") -> str:
    return "" if value is None else format(value, fmt)


def flag_markdown(label: str, results: list[dict]) -> str:
    """Flag counts and tightness per input, then each capture's flagged ops."""
    lines = [f"| input ({label}) | timed ops | flagged | on the roofline it would be | "
             "measured / achievable, time-weighted median |",
             "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['input']} | {r['stats']['ops']} | {len(r['flagged'])} | {r.get('roofline_flags', '')} | "
                     f"{_num(r['tightness'])} |")
    real = [r for r in results if r["input"].startswith("fixture")]
    pooled = weighted_median([p for r in real for p in r.get("pairs", [])])
    lines.append(f"| **real captures, pooled** | {sum(r['stats']['ops'] for r in real)} | "
                 f"{sum(len(r['flagged']) for r in real)} | {sum(r.get('roofline_flags', 0) for r in real)} | "
                 f"{_num(pooled)} |")
    for r in results:
        if not r["flagged"] or not r["input"].startswith("fixture"):
            continue
        lines += ["", f"{r['input']}: flagged ops", "",
                  "| op | bound | measured | share | FLOP/s | B/s | roofline fraction | achievable fraction |",
                  "|---|---|---|---|---|---|---|---|"]
        for o in r["flagged"]:
            lines.append(f"| {o['name']} | {o['bound_by']} | {_num(o['measured_s'])} s | {_num(o['share'], '.1%')} | "
                         f"{_num(o['achieved_flops_per_s'])} | {_num(o['achieved_bytes_per_s'])} | "
                         f"{_num(o['roofline_fraction'], '.2f')} | {_num(o['achievable_fraction'], '.2f')} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", type=Path, help="directory of captured CPU profiles (one per workload)")
    parser.add_argument("--capture", action="store_true", help="capture missing profiles with `audit run` first")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--audit", default=f"{shlex.quote(sys.executable)} -m audit",
                        help="the audit command to judge with (default: this checkout's)")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON")
    args = parser.parse_args()
    audit = shlex.split(args.audit)
    if args.capture:
        if args.profiles is None:
            parser.error("--capture needs --profiles DIR")
        args.profiles.mkdir(parents=True, exist_ok=True)
        capture(audit, args.profiles, args.steps)
    results = []
    for label, path in inputs(args.profiles):
        data = report(audit, path)
        results.append({"input": label, "stats": stats(timed_ops(data)), "levels": levels(data),
                        "hardware": (data.get("hardware") or {}).get("name"), "tightness": tightness(data),
                        "pairs": achievable_pairs(data), "flagged": flagged(data),
                        "roofline_flags": roofline_flags(data)})
        print(f"{label}: {results[-1]['stats']}", file=sys.stderr, flush=True)
    print(markdown(args.label, results))
    print()
    print(flag_markdown(args.label, results))
    if args.json:
        args.json.write_text(json.dumps({"label": args.label, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
