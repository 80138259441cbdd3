"""Make a large CPU profile (>= 2 million events, >= 100 MB) with `audit run`.

    python bench/make_big_profile.py [--steps 3500] [--layers 48] [--out bench/data/big]

Prints the profile's path, size and event count.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def count_events(path: Path) -> int:
    from audit.parsers.xplane.schema import XSpace

    space = XSpace()
    space.ParseFromString(path.read_bytes())
    return sum(len(line.events) for plane in space.planes for line in plane.lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3500)
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--out", type=Path, default=HERE / "data" / "big")
    args = parser.parse_args()
    cmd = [sys.executable, "-m", "audit", "run", str(HERE / "many_small_ops.py"), "--devices", "8",
           "--steps", str(args.steps), "--warmup", "2", "--out", str(args.out), "--quiet",
           "--", "--layers", str(args.layers)]
    subprocess.run(cmd, check=True)
    files = sorted(args.out.glob("plugins/profile/*/*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    path = files[-1]
    print(f"{path}\t{path.stat().st_size / 1e6:.1f} MB\t{count_events(path)} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
