"""`audit inspect` on the NVIDIA path (nsys-jax archives), against the time to read its inputs alone.

    python bench/run_nvidia.py [--hosts 100] [--repeats 2]

Two inputs: the real four-process A100 Pax capture (tests/data/fixtures/gpu-a100-pax-nsys-jax,
one archive per process, read as four hosts), and a pod of `--hosts` hosts made of it (hard
links to the four archives under new names, under bench/data/nvidia-pod; every host then
holds the same program, as the hosts of one job do). Each run is `audit inspect DIR --quiet
--cache ''` in a fresh process (two or more hosts: a local Dask cluster, one worker per core).

The floor is what reading the inputs alone takes, in one process: for every host, the
projected NVTX trace read from its Parquet file (the columns the reader asks for) and every
HLO dump after optimization decompressed and parsed by protobuf, one host after another,
each counted once (no cache); the time after the interpreter has started and imported
pyarrow and protobuf. A tool that reads its input once cannot go below it on one core.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from measure import load_average, measure  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "fixtures" / "gpu-a100-pax-nsys-jax"

_FLOOR = r"""
import io, lzma, sys, time, zipfile
import pyarrow.parquet as pq
from audit.parsers.hlo import schema as hlo_schema
from audit.parsers.nsys.archive import TRACE, _PROJECTED
start = time.perf_counter()
for path in sys.argv[1:]:
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if name.endswith(TRACE):
                source = pq.ParquetFile(io.BytesIO(z.read(name)))
                source.read(columns=[c for c in _PROJECTED if c in source.schema_arrow.names]).to_pandas()
            elif name.endswith("after_optimizations.hlo.pb.xz"):
                hlo_schema.HloProto.FromString(lzma.decompress(z.read(name)))
print(time.perf_counter() - start)
"""


def pod(hosts: int) -> Path:
    """`hosts` archives, each a hard link to one of the fixture's four, in a folder of their own."""
    folder = HERE / "data" / "nvidia-pod" / f"hosts-{hosts}"
    real = sorted(FIXTURE.glob("*.zip"))
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(hosts):
        target = folder / f"host-{i:04d}.zip"
        if not target.exists():
            try:
                os.link(real[i % len(real)], target)
            except OSError:  # another filesystem: a copy
                target.write_bytes(real[i % len(real)].read_bytes())
    return folder


def floor(archives: list[Path], repeats: int) -> float:
    return min(float(subprocess.run([sys.executable, "-c", _FLOOR, *map(str, archives)], check=True,
                                    capture_output=True, text=True).stdout.split()[-1]) for _ in range(repeats))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if not FIXTURE.is_dir():
        raise SystemExit(f"the A100 nsys-jax capture is missing: {FIXTURE}")
    print(f"load average (1, 5, 15 min) before: {load_average()}")
    print("| input | hosts | audit inspect wall s | CPU s | peak PSS MB | floor: reading the inputs, s | wall / floor |")
    print("|---|---|---|---|---|---|---|")
    for label, folder in (("A100 Pax FSDP step, nsys-jax", FIXTURE), (f"the same, {args.hosts} hosts", pod(args.hosts))):
        archives = sorted(folder.glob("*.zip"))
        cmd = [sys.executable, "-m", "audit", "inspect", str(folder), "--quiet", "--cache", ""]
        runs = [measure(cmd) for _ in range(args.repeats)]
        wall, cpu, peak = min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs)
        least = floor(archives, args.repeats)
        print(f"| {label} | {len(archives)} | {wall:.2f} | {cpu:.2f} | {peak:.0f} | {least:.2f} | "
              f"{wall / least:.1f}x |", flush=True)
    print(f"load average (1, 5, 15 min) after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
