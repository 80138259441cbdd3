"""Pod scale: wall time and peak memory of `audit inspect` on 1..N hosts, at 2 and 1 workers.

    python bench/pod_scale.py [--hosts 1 8 64] [--workers 2 1] [--repeat 3] [--data bench/data/pod]

Run dirs come from bench/make_pod.py (real 2-process jax.distributed capture, replicated,
one planted straggler); they are made once under --data. Each measurement runs
`audit inspect RUN --json FILE --quiet --cache '' --workers W` in a fresh process and samples,
every 50 ms, the proportional set size (Pss, /proc/PID/smaps_rollup) summed over the whole
process tree: the driver, the Dask scheduler thread's process and every worker process.
Pss splits shared pages between the processes that map them, so the sum counts each page
once. Prints a markdown table of medians over --repeat runs; also checks summary.hosts and
that the planted straggler is named first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def measure(run: Path, workers: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "audit", "inspect", str(run), "--json", str(out), "--quiet",
               "--cache", "", "--workers", str(workers)]
        start = time.monotonic()
        proc = subprocess.Popen(cmd)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, sum(pss_kib(p) for p in tree(proc.pid)))
            time.sleep(0.05)
        wall = time.monotonic() - start
        if proc.returncode:
            raise SystemExit(f"audit inspect failed ({proc.returncode}) on {run}")
        report = json.loads(out.read_text())
    pod = report.get("pod") or {}
    first = (pod.get("slowest_hosts") or [{}])[0].get("host")
    return {"wall_s": wall, "peak_pss_mib": peak / 1024, "hosts": report["summary"]["hosts"], "first": first}


def run_dir(data: Path, hosts: int) -> Path:
    target = data / f"hosts-{hosts}"
    run = target / "plugins" / "profile" / "pod"
    if not run.exists() or len(list(run.glob("*.xplane.pb"))) != hosts:
        subprocess.run([sys.executable, str(HERE / "make_pod.py"), "--hosts", str(hosts), str(target)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path, default=HERE / "data" / "pod")
    args = parser.parse_args()
    print("| hosts | workers | wall s (median) | peak summed PSS MiB (median) | hosts/s per worker | first named |")
    print("|---:|---:|---:|---:|---:|---|")
    for hosts in args.hosts:
        run = run_dir(args.data, hosts)
        for workers in (args.workers if hosts > 1 else [1]):
            runs = [measure(run, workers) for _ in range(args.repeat)]
            assert all(r["hosts"] == hosts for r in runs), runs
            wall = statistics.median(r["wall_s"] for r in runs)
            pss = statistics.median(r["peak_pss_mib"] for r in runs)
            print(f"| {hosts} | {workers} | {wall:.2f} | {pss:.0f} | {hosts / wall / workers:.2f} | "
                  f"{runs[0]['first'] or '-'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
