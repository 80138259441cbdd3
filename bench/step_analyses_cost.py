"""What the step diagnosis costs a warm `audit inspect`: the same profile with and without it.

    python bench/step_analyses_cost.py [PROFILE.xplane.pb] [--repeats 3]

"Without" runs `audit inspect` with the analyses this round added made no-ops in the process
(reading the host's Python thread, the idle split, the program waste detectors, the buffer
assignment and the memory rows, the findings); "with" runs it as shipped. Each run is a fresh
process with a fresh home (no per-host summary cache) and this machine's CPU calibration, the
two kinds interleaved so that load on a shared machine falls on both alike; the best wall and
CPU time of each are printed with the added share. Without a path the newest profile under
bench/data/big is used (bench/make_big_profile.py makes one).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from measure import fresh_home, load_average, measure  # noqa: E402

# The analyses made no-ops for the "without" runs: each replaced where its caller looks it up.
WITHOUT = """
import sys
import audit.orchestration.pipeline as pipeline
import audit.parsers.xplane.reader as profile
import audit.pod.summary as summary
import audit.pod.reduce as reduce
profile.python_events = lambda plane: None
summary.host_idle = lambda *args, **kwargs: {}
reduce.read_buffer_assignment = lambda data: None
pipeline.attach_waste = lambda report, *args, **kwargs: report
pipeline.attach_memory = lambda report, *args, **kwargs: report
pipeline.attach_diagnosis = lambda report, *args, **kwargs: report
from audit.cli import main
sys.exit(main(["inspect", sys.argv[1], "--quiet", "--json", sys.argv[2]]))
"""
WITH = """
import sys
from audit.cli import main
sys.exit(main(["inspect", sys.argv[1], "--quiet", "--json", sys.argv[2]]))
"""


def _run(code: str, profile: Path, out: Path) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as home:
        env = fresh_home(Path(home))
        wall, cpu, pss = measure([sys.executable, "-c", code, str(profile), str(out)], env=env)
    return wall, cpu, pss


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("profile", nargs="?", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    profile = args.profile or max((HERE / "data" / "big").glob("plugins/profile/*/*.xplane.pb"),
                                  key=lambda p: p.stat().st_mtime)
    print(f"profile: {profile} ({profile.stat().st_size / 1e6:.1f} MB); load before: {load_average()}")
    runs: dict[str, list[tuple[float, float, float]]] = {"without": [], "with": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for kind, code in (("without", WITHOUT), ("with", WITH)):
                runs[kind].append(_run(code, profile, Path(tmp) / f"{kind}{i}.json"))
                wall, cpu, pss = runs[kind][-1]
                print(f"  {kind:7} run {i + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU, {pss:.0f} MB")
    best = {k: (min(r[0] for r in v), min(r[1] for r in v), min(r[2] for r in v)) for k, v in runs.items()}
    added = {i: best["with"][i] / best["without"][i] - 1 for i in range(3)}
    print(f"best without: {best['without'][0]:.2f} s wall, {best['without'][1]:.2f} s CPU, "
          f"{best['without'][2]:.0f} MB")
    print(f"best with:    {best['with'][0]:.2f} s wall, {best['with'][1]:.2f} s CPU, {best['with'][2]:.0f} MB")
    print(f"added by the step diagnosis: {added[0]:+.1%} wall, {added[1]:+.1%} CPU, {added[2]:+.1%} memory "
          f"(target: at most +10%); load after: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
