"""Make a pod-like run dir of N host files from a real multi-process JAX capture.

    python bench/make_pod.py --hosts N OUT_DIR [--processes 2] [--straggler I] [--seed 0]

1. Capture: `--processes` JAX processes start on this machine and join one job with
   `jax.distributed.initialize` on localhost (CPU collectives over gloo), each with 4
   simulated CPU devices. They run a data-parallel training step (a sharded matmul and
   tanh, gradients all-reduced across processes) under `jax.profiler`, each process
   profiling itself into its own host file, as every host of a pod does.
2. Replicate: host file i is real capture i mod P, renamed `host-NNNN` (the XSpace
   hostname and the file name), with its whole timeline (event offsets and durations)
   scaled by a per-host factor drawn uniformly from [1, 1.03) (seeded): hosts on a pod
   never run at exactly the same speed.
3. Plant a straggler: host `--straggler` (default N // 2; -1 for none) is a copy of the
   slowest real capture (by median step time) with every event offset and duration scaled
   by 1.5, so its step time and every op it ran are 1.5x those of that capture's other
   copies and at least 1.5 / 1.03 times any other host's. The pod analysis should name it
   first. (Scaling a whole timeline also scales its collectives' time, so this straggler
   is slow everywhere, unlike a real one that makes the others wait.)

The run dir is OUT_DIR/plugins/profile/<run>/host-NNNN.xplane.pb; its path is printed.
With --hosts equal to --processes, the files are the real captures, only renamed.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

STRAGGLER_FACTOR = 1.5
JITTER = 0.03
DEVICES_PER_PROCESS = 4

_WORKER = r"""
import os, sys
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, nproc, pid, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=nproc, process_id=pid)
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((jax.device_count(),), ("data",))
batch = NamedSharding(mesh, P("data", None))
replicated = NamedSharding(mesh, P())
x = jax.make_array_from_callback((64 * jax.device_count(), 256), batch,
                                 lambda idx: np.ones((64, 256), np.float32)[: (idx[0].stop - idx[0].start)])
w = jax.device_put(jnp.full((256, 256), 0.01, jnp.float32), replicated)

@jax.jit
def step(x, w):
    loss = lambda w: jnp.mean(jnp.tanh(x @ w) ** 2)
    g = jax.grad(loss)(w)
    return w - 0.1 * g

w = jax.block_until_ready(step(x, w))
with jax.profiler.trace(out):
    for i in range(4):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            w = jax.block_until_ready(step(x, w))
jax.distributed.shutdown()
"""


def capture(processes: int, work: Path) -> list[Path]:
    """Run the workload as `processes` JAX processes; return each one's host file."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={DEVICES_PER_PROCESS}"}
    script = work / "worker.py"
    script.write_text(_WORKER)
    procs = [subprocess.Popen([sys.executable, str(script), str(port), str(processes), str(i), str(work / f"p{i}")],
                              env=env) for i in range(processes)]
    codes = [p.wait(timeout=600) for p in procs]
    if any(codes):
        raise SystemExit(f"capture failed: process exit codes {codes}")
    files = [next((work / f"p{i}").glob("plugins/profile/*/*.xplane.pb")) for i in range(processes)]
    return files


def replicate(sources: list[Path], hosts: int, run_dir: Path, straggler: int, seed: int) -> None:
    from audit.atomic import write_bytes
    from audit.parsers.xplane.schema import XSpace

    rng = random.Random(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    datas = [p.read_bytes() for p in sources]
    slowest = max(range(len(sources)), key=lambda i: _median_step(sources[i]))
    for i in range(hosts):
        name = f"host-{i:04d}"
        space = XSpace()
        space.ParseFromString(datas[slowest if i == straggler else i % len(datas)])
        del space.hostnames[:]
        space.hostnames.append(name)
        factor = 1.0 + rng.random() * JITTER if hosts > len(sources) else 1.0
        if i == straggler:
            factor *= STRAGGLER_FACTOR
        if factor != 1.0:
            for plane in space.planes:
                for line in plane.lines:
                    for event in line.events:
                        event.offset_ps = int(event.offset_ps * factor)
                        event.duration_ps = int(event.duration_ps * factor)
        write_bytes(run_dir / f"{name}.xplane.pb", space.SerializeToString())


def _median_step(path: Path) -> float:
    from audit.parsers.xplane.reader import read_host

    steps = read_host(path)[0].steps
    return float((steps["end_ps"] - steps["start_ps"]).median()) if not steps.empty else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, required=True)
    parser.add_argument("out", type=Path)
    parser.add_argument("--processes", type=int, default=2, help="real JAX processes captured (default 2)")
    parser.add_argument("--straggler", type=int, default=None, help="host index made 1.5x slower (-1: none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    straggler = args.hosts // 2 if args.straggler is None else args.straggler
    run_dir = args.out / "plugins" / "profile" / "pod"
    with tempfile.TemporaryDirectory() as tmp:
        sources = capture(min(args.processes, args.hosts), Path(tmp))
        replicate(sources, args.hosts, run_dir, straggler, args.seed)
    print(run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
