"""Big and hostile inputs: time and peak memory of `audit` on each, in a fresh process.

    python bench/hostile_big_inputs.py [--out DIR] [--profile BIG.xplane.pb] [--only NAME ...]

Cases (each made in DIR first, from real inputs):
- `hlo-50mb`: a 50 MB HLO text, the TPU Llama 3 8B module of tests/data/fixtures copied 58 times
  under new names, every copy called from one entry (as big MaxText dumps are); `audit inspect`.
- `events-10m`: an XPlane of 10 million XLA op events: the real profile given with --profile
  (bench/make_big_profile.py makes one), its op lines repeated until 10 million; compared with
  the real profile itself (`events-real`).
- `planes-100k-tpu`, `planes-100k-gpu`: 100,000 empty device planes beside a real GPU capture's.
- `diff-250k-steps`: `audit diff` of two reports of 250,000 steps each.

Time is wall seconds; memory is the peak summed PSS of the process tree, sampled every 50 ms
(bench/run_inspect_vs_xprof.py's `measure`). Exit codes other than 0 and 2 are printed.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run_inspect_vs_xprof import tree_pss_mb  # noqa: E402

FIXTURES = HERE.parent.parent / "shared" / "fixtures"
LLAMA = FIXTURES / "tpu-v6e-llama3-8b" / "module_0262.jit_train_step.after_optimizations.txt"
GEMM = FIXTURES / "gpu-mi300x" / "gemm.xplane.pb"
_ENTRY = re.compile(r"^ENTRY (%[\w.\-]+) \((.*)\) -> (.*) \{$", re.M)


def big_hlo(out: Path, target_mb: float = 50.0) -> Path:
    """Copies of a real module under new names, each called once from a new entry."""
    text = LLAMA.read_text()
    header, body = text.split("\n", 1)
    entry = _ENTRY.search(body)
    assert entry is not None
    name, params, result = entry.group(1), entry.group(2), entry.group(3)
    copies = max(1, int(target_mb * 1e6 / len(body)))
    parts = [header]
    for k in range(copies):
        copy = re.sub(r"%([\w.\-]+)", rf"%\1_c{k}", body).replace("ENTRY %", "%", 1)
        parts.append(copy)
    names = [p.split(":")[0].strip() for p in _split_params(params)]
    lines = [f"ENTRY %big ({params}) -> {result} {{"]
    lines += [f"  %{n} = {t.strip()} parameter({i})" for i, (n, t) in
              enumerate((p.split(":", 1)[0].strip(), p.split(":", 1)[1]) for p in _split_params(params))]
    args = ", ".join(f"%{n}" for n in names)
    for k in range(copies):
        root = "ROOT " if k == copies - 1 else ""
        lines.append(f"  {root}%run{k} = {result} call({args}), to_apply={name}_c{k}")
    parts.append("\n".join(lines) + "\n}\n")
    path = out / "big.hlo.txt"
    path.write_text("\n".join(parts))
    return path


def _split_params(text: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [p for p in out if p.strip()]


def many_events(real: Path, out: Path, target: int = 10_000_000) -> Path:
    """The real profile with its biggest lines repeated (as further lines) until `target` events."""
    from audit.parsers.xplane.schema import XSpace

    space = XSpace()
    space.ParseFromString(real.read_bytes())
    total = sum(len(line.events) for plane in space.planes for line in plane.lines)
    plane = max(space.planes, key=lambda p: sum(len(line.events) for line in p.lines))
    lines = sorted(plane.lines, key=lambda line: -len(line.events))[:8]
    k = 0
    while total < target:
        source = lines[k % len(lines)]
        copy = plane.lines.add()
        copy.CopyFrom(source)
        copy.id = source.id + 1_000_000 * (k + 1)
        copy.name = f"{source.name} (copy {k + 1})"
        total += len(source.events)
        k += 1
    path = out / "events10m.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


def many_planes(out: Path, kind: str, count: int = 100_000) -> Path:
    from audit.parsers.xplane.schema import XSpace

    space = XSpace()
    space.ParseFromString(GEMM.read_bytes())
    for i in range(count):
        space.planes.add(id=1000 + i, name=f"/device:{kind}:{100 + i}")
    path = out / f"planes100k-{kind.lower()}.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


def many_steps(out: Path, reports: dict[str, Path]) -> tuple[Path, Path]:
    base = json.loads(reports["gemm"].read_text())
    rng = random.Random(0)
    paths = []
    for name, scale in (("base", 1.0), ("head", 1.02)):
        base["steps"] = [{"index": i, "time_s": 0.01 * scale * (1 + 0.05 * rng.random())} for i in range(250_000)]
        base["summary"]["steps"] = 250_000
        path = out / f"steps250k-{name}.json"
        path.write_text(json.dumps(base))
        paths.append(path)
    return paths[0], paths[1]


def measure(cmd: list[str], interval: float = 0.05) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, tree_pss_mb(proc.pid))
        time.sleep(interval)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 2):
        print(f"  exit {proc.returncode}: {proc.stderr.read().decode()[-500:]}", flush=True)
    return wall, peak, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "data" / "hostile")
    parser.add_argument("--profile", type=Path, help="a real big profile (bench/make_big_profile.py)")
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    audit = [sys.executable, "-m", "audit"]
    gemm_report = args.out / "gemm.json"
    subprocess.run([*audit, "inspect", str(GEMM), "-q", "--json", str(gemm_report)], check=True)
    cases: dict[str, object] = {
        "hlo-50mb": lambda: [*audit, "inspect", str(big_hlo(args.out)), "--hardware", "tpu-v6e:2x4", "-q",
                             "--json", str(args.out / "hlo.json")],
        "planes-100k-tpu": lambda: [*audit, "inspect", str(many_planes(args.out, "TPU")), "-q"],
        "planes-100k-gpu": lambda: [*audit, "inspect", str(many_planes(args.out, "GPU")), "-q"],
        "diff-250k-steps": lambda: [*audit, "diff", *map(str, many_steps(args.out, {"gemm": gemm_report})), "-q"],
    }
    if args.profile:
        cases["events-real"] = lambda: [*audit, "inspect", str(args.profile), "-q", "--json",
                                        str(args.out / "real.json")]
        cases["events-10m"] = lambda: [*audit, "inspect", str(many_events(args.profile, args.out)), "-q",
                                       "--json", str(args.out / "10m.json")]
    env_note = "AUDIT_CACHE is off so every run reads its input"
    import os
    os.environ["AUDIT_CACHE"] = ""
    print(f"{'case':18} {'seconds':>8} {'peak PSS MB':>12} exit   ({env_note})")
    for name, make in cases.items():
        if args.only and name not in args.only:
            continue
        cmd = make()  # type: ignore[operator]
        wall, peak, code = measure(cmd)
        print(f"{name:18} {wall:8.1f} {peak:12.0f} {code:4}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
