"""How bench/ measures a tool: one fresh process, its wall and CPU time, and the peak memory of
its whole process tree; and the machine's load, since the machine may be shared."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(k) for k in kids]


def tree_pss_mb(root: int) -> float:
    """Summed proportional set size (MB) of a process and all its descendants.

    PSS splits each shared page among the processes mapping it, so copy-on-write pages a
    forked worker shares with its parent count once, not once per process as RSS would.
    """
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except OSError:  # the process ended between listing and reading
            pass
        todo += _children(pid)
    return total / 1024


def measure(cmd: list[str], interval: float = 0.05,
            env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak summed PSS (MB) of one child process
    and all of its descendants. CPU time is what a shared machine moves least: a busy neighbour
    stretches a tool's wall time, not the work it does."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, tree_pss_mb(proc.pid))
        time.sleep(interval)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.read().decode()[-2000:]}")
    return wall, cpu, peak


def fresh_home(root: Path) -> dict[str, str]:
    """An environment whose home and cache directories are new and empty."""
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "AUDIT_CACHE", "AUDIT_CACHE_DIR")}
    return {**env, "HOME": str(home)}


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
