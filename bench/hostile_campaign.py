"""A hostile-input campaign: crafted and mutated inputs through the real CLI, each in its own process.

    python bench/hostile_campaign.py [--seed 1] [--per-family 40] [--out FILE] [--jobs 2] [--checkout DIR ...]
                                     [--family NAME ...]

Inputs are derived from real ones (bench/hostile_families.py): crafted XPlane fields (durations,
offsets, timestamps, ordinals, stat values, the HLO embedded in /host:metadata) of real GPU and
CPU captures, crafted HLO text (recursion, shared and deep call graphs, loops whose trip counts
multiply, huge shapes and groups, bad numbers), crafted fields of real HLO protos, nsys-jax
archives with damaged tables and decompression bombs, Nsight SQLite exports with damaged cells,
hardware files with crafted values, malformed report JSON, random byte damage of every format,
real HLO texts with lines the template reader must leave to the line reader (stand-in bytes,
metadata inside strings), fused attention calls stating numbers no kernel has, nsys-jax archives with encrypted or oddly compressed members, the
default run's CPU trace with crafted stats read by each decoder path (C, numba, Python: their
exit codes and summaries must agree), and odd paths (FIFOs, devices, remote URLs, outputs that are inputs). Each case runs `audit` in a
fresh process with a time limit and is judged on what the contract promises:

- exit 0, 1 or 2, never 4 (a bug) and never killed;
- for exit 2, exactly one line on stderr, `audit: error: ...`; no traceback anywhere;
- no file in the case's folder changed except the outputs it named, and no partial output left;
- no negative number in the JSON report an `inspect` case writes (`out.json`).

`--checkout DIR` (repeatable) runs the cases against each checkout of the project named (e.g. `git
archive COMMIT | tar -x -C DIR`) instead of the working tree, one after the other: the defects of an
earlier version and of this one on the very same cases. Prints one line per failing case and a count
per family and outcome, per checkout; the exit status is the number of failures of the last one run
(capped at 100).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
from hostile_families import (FIXTURES, NSYS_ARCHIVE, SEED_HLO, Case, Seeds, attention_cases,  # noqa: E402
                              decoder_cases,
                              hlo_cases, mutation_cases, nsys_cases, profile_cases, proto_cases, report_cases,
                              sqlite_cases, template_cases, toml_cases, zip_member_cases)

SEED_PROFILES = [FIXTURES / "gpu-mi300x" / "gemm.xplane.pb", FIXTURES / "gpu-mi300x" / "conv3d-8gpu.xplane.pb",
                 ROOT / "tests" / "data" / "captures" / "h100-jax0.11" / "train-step.xplane.pb"]
TIME_LIMIT_S = 120.0


@dataclass
class Outcome:
    case: Case
    code: int
    seconds: float
    stderr: str
    problems: list[str]
    report: object = None  # the summary a decoder path gave (decoder-paths cases)


def _path_cases(seeds: Seeds) -> list[Case]:
    profile, report = seeds.profiles[sorted(seeds.profiles)[0]], seeds.reports[sorted(seeds.reports)[0]]
    hlo = SEED_HLO[0].read_bytes()
    return [
        Case("paths", "fifo-report", ["diff", "{dir}/f.json", "{dir}/r.json", "-q"], files={"r.json": report},
             fifos=("f.json",)),
        Case("paths", "fifo-profile", ["inspect", "{dir}/f.xplane.pb", "-q"], fifos=("f.xplane.pb",)),
        Case("paths", "fifo-in-run-dir", ["inspect", "{dir}/run", "-q"], fifos=("run/h.xplane.pb",)),
        Case("paths", "fifo-hlo", ["inspect", "{dir}/f.hlo", "-q", "--hardware", "h100"], fifos=("f.hlo",)),
        Case("paths", "zero-as-report", ["diff", "{dir}/z.json", "{dir}/r.json", "-q"], files={"r.json": report},
             links={"z.json": "/dev/zero"}),
        Case("paths", "zero-as-profile", ["inspect", "{dir}/z.xplane.pb", "-q"], links={"z.xplane.pb": "/dev/zero"}),
        Case("paths", "zero-as-hlo", ["inspect", "{dir}/z.hlo.pb", "-q"], links={"z.hlo.pb": "/dev/zero"}),
        Case("paths", "urandom-as-profile", ["inspect", "{dir}/u.xplane.pb", "-q"],
             links={"u.xplane.pb": "/dev/urandom"}),
        Case("paths", "dir-named-json", ["diff", "{dir}/d.json", "{dir}/r.json", "-q"], files={"r.json": report,
                                                                                           "d.json/x": b"{}"}),
        Case("paths", "csv-over-own-input", ["inspect", "{dir}/p.xplane.pb", "-q", "--csv", "{dir}/p.xplane.pb"],
             files={"p.xplane.pb": profile}),
        Case("paths", "json-over-own-report", ["diff", "{dir}/r.json", "{dir}/r.json", "-q", "--json",
                                               "{dir}/r.json"], files={"r.json": report}),
        Case("paths", "html-over-hlo", ["inspect", "{dir}/m.hlo", "-q", "--hardware", "h100", "--html",
                                        "{dir}/m.hlo"], files={"m.hlo": hlo}),
        Case("paths", "json-to-dev-null", ["inspect", "{dir}/m.hlo", "-q", "--hardware", "h100", "--json",
                                           "/dev/null"], files={"m.hlo": hlo}),
        Case("paths", "json-to-missing-dir", ["inspect", "{dir}/m.hlo", "-q", "--hardware", "h100", "--json",
                                              "{dir}/no/such/dir/r.json"], files={"m.hlo": hlo}),
        Case("paths", "json-to-a-directory", ["inspect", "{dir}/m.hlo", "-q", "--hardware", "h100", "--json",
                                              "{dir}/sub"], files={"m.hlo": hlo, "sub/keep": b"x"}),
        Case("paths", "gs-url", ["inspect", "gs://audit-campaign-no-such-bucket/run/h.xplane.pb", "-q"]),
        Case("paths", "s3-url", ["inspect", "s3://audit-campaign-no-such-bucket/run/", "-q"]),
        Case("paths", "unknown-scheme", ["inspect", "nosuch://x/y.xplane.pb", "-q"]),
        Case("paths", "scheduler-not-a-url", ["inspect", "{dir}/run", "-q", "--scheduler", "not a url"],
             files={"run/a.xplane.pb": profile, "run/b.xplane.pb": profile}),
        Case("paths", "scheduler-unreachable", ["inspect", "{dir}/run", "-q", "--scheduler", "tcp://127.0.0.1:9"],
             files={"run/a.xplane.pb": profile, "run/b.xplane.pb": profile}),
        Case("paths", "xprof-cache", ["inspect", "{dir}/ALL_HOSTS.op_stats_v2.pb", "-q"],
             files={"ALL_HOSTS.op_stats_v2.pb": b"\x0a\x04\x08\x01\x10\x02"}),
        Case("paths", "empty-dir", ["inspect", "{dir}/empty", "-q"], files={"empty/.keep": b""}),
    ]


def _run(case: Case, work: Path, env: dict[str, str]) -> Outcome:
    if not case.decoders:
        return _run_once(case, work, env)
    # The same input read by each decoder path: each judged alone, then their exit codes and summaries compared.
    runs = [(name, _run_once(case, work, {**env, "AUDIT_DECODER": name}, keep="out.json")) for name in case.decoders]
    first_name, first = runs[0]
    problems = [f"{name}: {p}" for name, o in runs for p in o.problems]
    for name, o in runs[1:]:
        if o.code != first.code:
            problems.append(f"exit {o.code} with AUDIT_DECODER={name}, {first.code} with {first_name}")
        elif o.report != first.report:
            problems.append(f"AUDIT_DECODER={name} and {first_name} give different summaries")
    return Outcome(case, first.code, sum(o.seconds for _, o in runs), first.stderr, problems)


def _summary_of(path: Path) -> object:
    """What a decoder path must not change: the JSON report's summary and steps."""
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    return {"summary": doc.get("summary"), "steps": doc.get("steps"), "ops": len(doc.get("ops") or [])}


def _run_once(case: Case, work: Path, env: dict[str, str], keep: str = "") -> Outcome:
    folder = Path(tempfile.mkdtemp(prefix=f"{case.family}-", dir=work))
    for rel, data in case.files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    for rel in case.fifos:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(folder / rel)
    for rel, target in case.links.items():
        (folder / rel).symlink_to(target)
    before = _snapshot(folder)
    argv = [a.replace("{dir}", str(folder)) for a in case.argv]
    start = time.perf_counter()
    try:
        # In the case's folder: `python -m` imports from the working folder first, which must not be a checkout.
        proc = subprocess.run([sys.executable, "-m", "audit", *argv], capture_output=True, timeout=TIME_LIMIT_S,
                              env=env, stdin=subprocess.DEVNULL, cwd=folder)
        code, stderr = proc.returncode, proc.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as exc:
        code, stderr = -9, (exc.stderr or b"").decode(errors="replace")
    seconds = time.perf_counter() - start
    problems = _judge(code, stderr, seconds)
    after = _snapshot(folder)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    stray = sorted(k for k in changed if k not in case.outputs)
    if stray:
        problems.append(f"changed files it did not name: {stray}")
    if code not in (0, 1):  # exit 1 is a tripped gate: its report is written
        partial = sorted(k for k in changed if k in case.outputs)
        if partial:
            problems.append(f"left output files although it failed: {partial}")
    if code in (0, 1) and (folder / "out.json").is_file():
        problems += _negative_figures(folder / "out.json")
    report = _summary_of(folder / keep) if keep else None
    shutil.rmtree(folder, ignore_errors=True)
    return Outcome(case, code, seconds, stderr, problems, report)


def _negative_figures(path: Path) -> list[str]:
    """A report's first negative number (no figure of an `inspect` report is below zero), as a problem."""
    try:
        doc = json.loads(path.read_text())
    except ValueError:
        return ["its JSON report does not parse"]
    pending: list[tuple[str, object]] = [("", doc)]
    while pending:
        where, node = pending.pop()
        if isinstance(node, dict):
            pending += [(f"{where}.{k}", v) for k, v in node.items()]
        elif isinstance(node, list):
            pending += [(f"{where}[{i}]", v) for i, v in enumerate(node)]
        elif isinstance(node, (int, float)) and not isinstance(node, bool) and (node < 0 or str(node) == "-0.0"):
            return [f"negative figure {where.lstrip('.')} = {node}"]
    return []


def _snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for path in folder.rglob("*"):
        st = path.lstat()
        out[str(path.relative_to(folder))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def _judge(code: int, stderr: str, seconds: float) -> list[str]:
    problems = []
    if code == -9:
        problems.append(f"hung: killed after {TIME_LIMIT_S:.0f} s")
    elif code not in (0, 1, 2):
        problems.append(f"exit {code}")
    if "Traceback" in stderr:
        problems.append("traceback on stderr")
    lines = [line for line in stderr.splitlines() if line.strip()]
    if code == 2 and (len(lines) != 1 or not lines[0].startswith("audit: error: ")):
        problems.append(f"exit 2 with {len(lines)} stderr lines")
    return problems


def _seed_reports(profiles: dict[str, bytes], work: Path, env: dict[str, str]) -> dict[str, bytes]:
    out = {}
    for i, (name, data) in enumerate(sorted(profiles.items())):
        src, dst = work / f"seed{i}.xplane.pb", work / f"seed{i}.json"
        src.write_bytes(data)
        subprocess.run([sys.executable, "-m", "audit", "inspect", str(src), "-q", "--json", str(dst)], check=True,
                       env=env)
        out[name] = dst.read_bytes()
    return out


def _cpu_capture(work: Path, env: dict[str, str]) -> bytes:
    """A real CPU capture of a sharded matmul on 4 simulated devices, made here by `audit run`."""
    out = work / "cpu-run"
    subprocess.run([sys.executable, "-m", "audit", "run", str(ROOT / "workloads" / "sharded_matmul.py"), "--devices",
                    "4", "--steps", "2", "--warmup", "1", "--out", str(out), "-q"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    return next(out.rglob("*.xplane.pb")).read_bytes()


def _seeds(work: Path, env: dict[str, str]) -> Seeds:
    from test_nsys_sqlite import build_export, dump_folder

    profiles = {p.name: p.read_bytes() for p in SEED_PROFILES}
    profiles["cpu-sharded-matmul.xplane.pb"] = _cpu_capture(work, env)
    return Seeds(profiles, _seed_reports(profiles, work, env), build_export(work / "seed.sqlite", NSYS_ARCHIVE),
                 dump_folder(work / "seed-dump", NSYS_ARCHIVE))


def _site(checkout: Path, folder: Path) -> str:
    """An import folder where `audit` is the checkout's code, laid out as the package installs it."""
    site = folder / "audit"
    shutil.copytree(checkout / "audit", site, symlinks=True)
    for name in ("parsers", "costmodel", "workloads", "reports"):
        (site / name).symlink_to(checkout / name)
    return str(site.parent)


def _cases(rng: random.Random, n: int, seeds: Seeds, work: Path) -> list[Case]:
    return (profile_cases(rng, n, seeds) + hlo_cases(rng, n) + proto_cases(rng, n) + report_cases(rng, n, seeds)
            + nsys_cases(rng, n) + sqlite_cases(rng, n, seeds, work) + toml_cases(rng, n)
            + mutation_cases(rng, 2 * n, seeds) + template_cases(rng, n) + zip_member_cases(rng, n)
            + decoder_cases(rng, n) + attention_cases(rng, n) + _path_cases(seeds))


def _summary(outcomes: list[Outcome]) -> None:
    counts: Counter[tuple[str, str]] = Counter()
    for o in outcomes:
        counts[(o.case.family, "fail" if o.problems else f"exit {o.code}")] += 1
        if o.problems:
            last = o.stderr.strip().splitlines()[-1] if o.stderr.strip() else ""
            print(f"FAIL {o.case.family}/{o.case.name}: {'; '.join(o.problems)} | {last[:300]}")
    for (family, outcome), k in sorted(counts.items()):
        print(f"  {family:15} {outcome:8} {k}")
    print(f"exit 4: {sum(o.code == 4 for o in outcomes)}, tracebacks: "
          f"{sum('Traceback' in o.stderr for o in outcomes)}, hangs: {sum(o.code == -9 for o in outcomes)}, "
          f"failures: {sum(bool(o.problems) for o in outcomes)}")


def _log(o: Outcome, checkout: str, log: IO[str]) -> None:
    log.write(json.dumps({"checkout": checkout, "family": o.case.family, "case": o.case.name, "code": o.code,
                          "seconds": round(o.seconds, 2), "problems": o.problems, "stderr": o.stderr[-2000:]}) + "\n")
    log.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--per-family", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, help="write every case's outcome here (JSON lines)")
    parser.add_argument("--checkout", type=Path, action="append", default=[],
                        help="run the cases against this checkout's code (repeatable)")
    parser.add_argument("--family", action="append", default=[],
                        help="run only the cases of this family (repeatable; default: all)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    env = {**os.environ, "AUDIT_CACHE": "", "JAX_PLATFORMS": "cpu"}
    failures = 0
    with tempfile.TemporaryDirectory(prefix="audit-campaign-") as tmp, \
            (args.out or Path(os.devnull)).open("w") as log:
        work = Path(tmp)
        cases = [c for c in _cases(rng, args.per_family, _seeds(work, env), work)
                 if not args.family or c.family in args.family]
        for i, checkout in enumerate(args.checkout or [None]):
            code_env = dict(env)
            if checkout is not None:
                site = _site(checkout.resolve(), work / f"site{i}")
                code_env["PYTHONPATH"] = os.pathsep.join([site, env.get("PYTHONPATH", "")])
            label = str(checkout) if checkout is not None else "the working tree"
            outcomes = _campaign(cases, work, code_env, args.jobs, partial(_log, checkout=label, log=log))
            print(f"{label}: {len(outcomes)} cases, seed {args.seed}; slowest {max(o.seconds for o in outcomes):.1f} s")
            _summary(outcomes)
            failures = sum(bool(o.problems) for o in outcomes)
    return min(failures, 100)


def _campaign(cases: list[Case], work: Path, env: dict[str, str], jobs: int,
              log: Callable[[Outcome], None]) -> list[Outcome]:
    with ThreadPoolExecutor(jobs) as pool:
        outcomes = []
        for outcome in pool.map(lambda c: _run(c, work, env), cases):
            outcomes.append(outcome)
            log(outcome)  # as each ends: a campaign stopped early keeps what it found
    return outcomes


if __name__ == "__main__":
    raise SystemExit(main())
