"""`audit inspect` of 50 MB HLO programs, as text and as proto, against XLA's own parser.

    python bench/run_big_hlo.py [--mb 50] [--repeats 2] [--json] [--data bench/data/hlo]

The programs are bench/make_big_hlo.py's (made first when bench/data/hlo has none): one
unrolled computation of about 250,000 instructions, and a program of about 87,000
computations, each as `.hlo` text and as the `.hlo.pb` XLA's parser writes for it. Each run is
`audit inspect FILE --quiet` (parse, cost, schedule walk, the report on the terminal) in a
fresh process, judged on this machine's CPU (its calibration already cached); `--json` also
writes the JSON report. Best wall and CPU time and the largest peak memory (summed PSS of the
process tree) of `--repeats` runs. Beside them, XLA's own HLO parser (the installed jaxlib)
turning the same text into a proto: what reading the text alone costs in C++.
Targets: at most 10 s and 1 GB for each.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from measure import load_average, measure  # noqa: E402

_XLA_PARSE = ("import sys, time; from jax._src.lib import xla_client as x; text = open(sys.argv[1]).read(); "
              "start = time.perf_counter(); x.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto(); "
              "print(time.perf_counter() - start)")


def programs(mb: float, folder: Path) -> list[Path]:
    """The four inputs, made when missing."""
    found = [folder / f"{kind}{suffix}" for kind in ("unrolled", "computations") for suffix in (".hlo", ".hlo.pb")]
    if not all(p.exists() for p in found):
        print("no big HLO programs yet: making them with bench/make_big_hlo.py (a minute)", flush=True)
        subprocess.run([sys.executable, str(HERE / "make_big_hlo.py"), "--mb", str(mb), "--out", str(folder)],
                       check=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="also write the JSON report")
    parser.add_argument("--data", type=Path, default=HERE / "data" / "hlo",
                        help="where the programs are (made there at --mb MB when missing)")
    args = parser.parse_args()
    paths = programs(args.mb, args.data)
    print(f"load average (1, 5, 15 min) before: {load_average()}")
    print("| input | size | tool | wall s | CPU s | peak PSS MB |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            cmd = [sys.executable, "-m", "audit", "inspect", str(path), "--quiet"]
            cmd += ["--json", str(Path(tmp) / "r.json")] if args.json else []
            runs = [measure(cmd) for _ in range(args.repeats)]
            wall, cpu, peak = min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs)
            size = f"{path.stat().st_size / 1e6:.1f} MB"
            print(f"| {path.name} | {size} | audit inspect | {wall:.2f} | {cpu:.2f} | {peak:.0f} |", flush=True)
            if path.suffix == ".hlo":  # the parse alone, in a process that has already imported JAX
                xla = min(float(subprocess.run([sys.executable, "-c", _XLA_PARSE, str(path)], check=True,
                                               capture_output=True, text=True).stdout.split()[-1])
                          for _ in range(args.repeats))
                print(f"| {path.name} | {size} | XLA's parser, text to proto (no start-up) | {xla:.2f} | | |",
                      flush=True)
    print(f"load average (1, 5, 15 min) after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
