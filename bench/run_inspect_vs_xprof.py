"""`audit inspect` versus XProf's `hlo_stats` conversion on the same profile, side by side.

    python bench/run_inspect_vs_xprof.py [PROFILE.xplane.pb] [--repeats 3] [--unprepared]

Each tool runs in its own fresh process, `--repeats` times; the best wall time, the best CPU
time (user + system, the process tree) and the peak memory are printed with their ratios.
Every process gets a fresh, empty home directory (no user cache: no CPU calibration, no
profile summaries), as on a CI runner, and `audit inspect` is also timed on its first run
there, against its warm runs; `--unprepared` adds `--repeats` first runs with the install's own
calibration hidden too, as after a bare `pip install`, each in a fresh home and calibration folder,
best of them against the best warm run, every one of them printed (target: at most 1.5x warm).
The load average is printed before and after, since the machine may be shared. Memory is the
peak summed PSS of the whole process tree, sampled every 50 ms from /proc/PID/smaps_rollup of
the process and all its descendants (bench/measure.py): the largest single process (`ru_maxrss`)
would miss a tool's workers, and summed RSS would count the pages they share many times.
Without a path the newest profile under bench/data/big is used, made first with
bench/make_big_profile.py when there is none (as from a fresh clone).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_big_profile import count_events  # noqa: E402
from measure import fresh_home, load_average, measure  # noqa: E402
# use_saved_result=False: XProf otherwise answers from the op_stats cache it writes beside
# the profile (ALL_HOSTS.op_stats_v2.pb) on its first run, which would time a cache read.
XPROF = ("import sys; from xprof.convert import raw_to_tool_data as r; "
         "out = r.xspace_to_tool_data([sys.argv[1]], 'hlo_stats', {'use_saved_result': False}); "
         "print(len(str(out[0])) if isinstance(out, tuple) else len(str(out)))")


def newest_big_profile() -> Path:
    """The newest profile bench/make_big_profile.py made, making one first when there is none."""
    found = sorted((HERE / "data" / "big").glob("plugins/profile/*/*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    if not found:
        print("no big profile yet: making one with bench/make_big_profile.py (a few minutes)", flush=True)
        subprocess.run([sys.executable, str(HERE / "make_big_profile.py")], check=True)
        found = sorted((HERE / "data" / "big").glob("plugins/profile/*/*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    return found[-1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("profile", nargs="?", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--unprepared", action="store_true",
                        help="Also time a first run without the calibration the install prepared (the CPU is "
                             "calibrated during the run), as after a bare `pip install`.")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="Run N CPU-bound processes (a Python busy loop each) beside both tools throughout.")
    args = parser.parse_args()
    if importlib.util.find_spec("xprof") is None:
        raise SystemExit("XProf is not installed: pip install -e '.[xprof]' (or `make install`, which installs it "
                         "with the test extra), then run this again.")
    path = args.profile or newest_big_profile()
    load_before = load_average()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        results, first, bare_runs = _compare(path, args.repeats, args.unprepared)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    (aw, ac, am), (xw, xc, xm) = results.values()
    bare = None if bare_runs is None else (min(r[0] for r in bare_runs), min(r[1] for r in bare_runs),
                                           max(r[2] for r in bare_runs))
    print(f"profile: {path.name}, {path.stat().st_size / 1e6:.1f} MB, {count_events(path)} events")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; python "
          f"{platform.python_version()}; jax {version('jax')}; xprof {version('xprof')}; "
          f"roofline-audit {version('roofline-audit')}; {args.busy} CPU-bound processes beside both tools")
    print(f"load average (1, 5, 15 min): {load_before} before, {load_average()} after")
    print(f"{'tool':<45} {'wall s':>8} {'CPU s':>8} {'peak PSS MB':>12}")
    if bare is not None:
        print(f"{'audit inspect, first run, install unprepared':<45} {bare[0]:>8.2f} {bare[1]:>8.2f} {bare[2]:>12.0f}")
    print(f"{'audit inspect, first run in a fresh home':<45} {first[0]:>8.2f} {first[1]:>8.2f} {first[2]:>12.0f}")
    for name, (w, c, m) in results.items():
        print(f"{name:<45} {w:>8.2f} {c:>8.2f} {m:>12.0f}")
    if bare is not None:
        print(f"{'ratio audit first run, unprepared / warm':<45} {bare[0] / aw:>8.2f} {bare[1] / ac:>8.2f}")
    print(f"{'ratio audit first run / warm':<45} {first[0] / aw:>8.2f} {first[1] / ac:>8.2f}")
    print(f"{'ratio xprof / audit':<45} {xw / aw:>8.2f} {xc / ac:>8.2f} {xm / am:>12.2f}")
    if bare_runs is not None:
        print(f"first runs after a bare install, wall s: {', '.join(f'{r[0]:.2f}' for r in bare_runs)}")
    return 0


Timing = tuple[float, float, float]


def _compare(path: Path, repeats: int, unprepared: bool) -> tuple[dict[str, Timing], Timing, list[Timing] | None]:
    """Best (wall, CPU) and peak memory of each tool, warm; audit's first run in a fresh home; and
    with `unprepared`, each of its first runs with no calibration found anywhere."""
    with tempfile.TemporaryDirectory() as tmp:
        env = fresh_home(Path(tmp))
        tools = {
            "audit inspect (table + cost model + JSON)": [sys.executable, "-m", "audit", "inspect", str(path),
                                                          "--quiet", "--json", str(Path(tmp) / "r.json")],
            "xprof hlo_stats": [sys.executable, "-c", XPROF, str(path)],
        }
        audit_cmd = tools["audit inspect (table + cost model + JSON)"]
        bare = None
        if unprepared:  # the calibration cache in a folder of its own, empty: the install's is not looked at
            runs = []
            for n in range(repeats):  # each a first run: a fresh home and calibration folder every time
                bare_root = Path(tmp) / f"bare{n}"
                bare_root.mkdir()
                runs.append(measure(audit_cmd, env={**fresh_home(bare_root),
                                                    "AUDIT_CACHE_DIR": str(bare_root / "calibration")}))
            bare = runs
        first = measure(audit_cmd, env=env)
        results = {}
        for name, cmd in tools.items():
            runs = []
            for _ in range(repeats):
                for cache in path.parent.glob("ALL_HOSTS.op_stats*.pb"):
                    cache.unlink()
                runs.append(measure(cmd, env=env))
            results[name] = (min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs))
    return results, first, bare


if __name__ == "__main__":
    sys.exit(main())
