"""A hostile-input campaign: crafted and mutated inputs through the real CLI, each in its own process.

    python bench/hostile_campaign.py [--seed 1] [--per-family 40] [--out DIR] [--jobs 2]

Inputs are derived from the real captures and HLO dumps in ../shared/fixtures, the HLO files in
tests/data/hlo, and reports the tool writes from them: crafted XPlane fields (durations, offsets,
timestamps, ordinals, stat values of the wrong type), crafted HLO (recursion, huge shapes and
replica groups, bad numbers), malformed report JSON, random byte mutations, and odd paths
(FIFOs, devices, remote URLs, outputs that are inputs). Each case runs `audit` in a fresh
process with a time limit and is judged on what the contract promises:

- exit 0, 1 or 2, never 4 (a bug) and never killed;
- for exit 2, exactly one line on stderr, `audit: error: ...`; no traceback anywhere;
- no file in the case's folder changed except the outputs it named, and no partial output left.

Prints one line per failing case and a count per family and outcome; the exit status is the
number of failures (capped at 100).
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURES = ROOT.parent / "shared" / "fixtures"
sys.path.insert(0, str(ROOT / "tests"))
from hostile_inputs import (HLO_CRAFTS, REPORT_CRAFTS, XPLANE_CRAFTS, craft_hlo, craft_report,  # noqa: E402
                            craft_xplane, mutate_bytes)

SEED_PROFILES = ["gpu-mi300x/gemm.xplane.pb", "gpu-mi300x/conv3d-8gpu.xplane.pb"]
SEED_HLO = sorted((ROOT / "tests" / "data" / "hlo").glob("*.hlo"))
TIME_LIMIT_S = 120.0


@dataclass
class Case:
    family: str
    name: str
    argv: list[str]  # after `audit`; {dir} is the case's folder
    files: dict[str, bytes] = field(default_factory=dict)
    fifos: tuple[str, ...] = ()
    links: dict[str, str] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()  # files the command may create or change


@dataclass
class Outcome:
    case: Case
    code: int
    seconds: float
    stderr: str
    problems: list[str]


def _profile_cases(rng: random.Random, n: int, seeds: dict[str, bytes]) -> list[Case]:
    cases = []
    for i in range(n):
        seed = rng.choice(sorted(seeds))
        craft = rng.choice(XPLANE_CRAFTS)
        data = craft_xplane(seeds[seed], craft, rng)
        cases.append(Case("xplane-field", f"{craft}-{i}", ["inspect", "{dir}/p.xplane.pb", "-q", "--json",
                                                           "{dir}/out.json"],
                          files={"p.xplane.pb": data}, outputs=("out.json",)))
    return cases


def _mutation_cases(rng: random.Random, n: int, seeds: dict[str, bytes], reports: dict[str, bytes]) -> list[Case]:
    cases = []
    for i in range(n):
        kind = rng.choice(["xplane", "hlo", "report"])
        if kind == "xplane":
            data, name, argv = mutate_bytes(seeds[rng.choice(sorted(seeds))], rng), "m.xplane.pb", ["inspect"]
        elif kind == "hlo":
            data, name, argv = mutate_bytes(rng.choice(SEED_HLO).read_bytes(), rng), "m.hlo", ["inspect"]
        else:
            data, name, argv = mutate_bytes(reports[rng.choice(sorted(reports))], rng), "m.json", ["diff", "{dir}/m.json"]
        cases.append(Case("byte-mutation", f"{kind}-{i}", [*argv, "{dir}/" + name, "-q", "--hardware", "h100"]
                          if kind != "xplane" else [*argv, "{dir}/" + name, "-q"], files={name: data}))
    return cases


def _hlo_cases(rng: random.Random, n: int) -> list[Case]:
    cases = []
    for i in range(n):
        craft = rng.choice(HLO_CRAFTS)
        text = craft_hlo(rng.choice(SEED_HLO).read_text(), craft, rng)
        cases.append(Case("hlo-craft", f"{craft}-{i}", ["inspect", "{dir}/m.hlo", "-q", "--hardware", "h100",
                                                        "--json", "{dir}/out.json"],
                          files={"m.hlo": text.encode()}, outputs=("out.json",)))
    return cases


def _report_cases(rng: random.Random, n: int, reports: dict[str, bytes]) -> list[Case]:
    cases = []
    for i in range(n):
        craft = rng.choice(REPORT_CRAFTS)
        base = reports[rng.choice(sorted(reports))]
        data = craft_report(json.loads(base), craft, rng)
        cases.append(Case("report-json", f"{craft}-{i}", ["diff", "{dir}/base.json", "{dir}/head.json", "-q",
                                                          "--json", "{dir}/diff.json"],
                          files={"base.json": base, "head.json": data}, outputs=("diff.json",)))
    return cases


def _path_cases(seeds: dict[str, bytes], reports: dict[str, bytes]) -> list[Case]:
    profile, report = seeds[sorted(seeds)[0]], reports[sorted(reports)[0]]
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


def _run(case: Case, work: Path) -> Outcome:
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
    env = {**os.environ, "AUDIT_CACHE": "", "JAX_PLATFORMS": "cpu"}
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "audit", *argv], capture_output=True, timeout=TIME_LIMIT_S,
                              env=env, stdin=subprocess.DEVNULL)
        code, stderr = proc.returncode, proc.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as exc:
        code, stderr = -9, (exc.stderr or b"").decode(errors="replace")
    seconds = time.perf_counter() - start
    problems = _judge(code, stderr, seconds)
    changed = {k for k in set(before) | set(_snapshot(folder)) if before.get(k) != _snapshot(folder).get(k)}
    stray = sorted(k for k in changed if k not in case.outputs)
    if stray:
        problems.append(f"changed files it did not name: {stray}")
    if code != 0:
        partial = sorted(k for k in changed if k in case.outputs)
        if partial:
            problems.append(f"left output files although it failed: {partial}")
    shutil.rmtree(folder, ignore_errors=True)
    return Outcome(case, code, seconds, stderr, problems)


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


def _seed_reports(seeds: dict[str, bytes], work: Path) -> dict[str, bytes]:
    out = {}
    for i, (name, data) in enumerate(sorted(seeds.items())):
        src, dst = work / f"seed{i}.xplane.pb", work / f"seed{i}.json"
        src.write_bytes(data)
        subprocess.run([sys.executable, "-m", "audit", "inspect", str(src), "-q", "--json", str(dst)], check=True,
                       env={**os.environ, "AUDIT_CACHE": ""})
        out[name] = dst.read_bytes()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--per-family", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, help="keep the failing cases' stderr here (JSON lines)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    seeds = {name: (FIXTURES / name).read_bytes() for name in SEED_PROFILES}
    with tempfile.TemporaryDirectory(prefix="audit-campaign-") as tmp:
        work = Path(tmp)
        reports = _seed_reports(seeds, work)
        n = args.per_family
        cases = (_profile_cases(rng, n, seeds) + _hlo_cases(rng, n) + _report_cases(rng, n, reports)
                 + _mutation_cases(rng, n, seeds, reports) + _path_cases(seeds, reports))
        start = time.perf_counter()
        with ThreadPoolExecutor(args.jobs) as pool:
            outcomes = list(pool.map(lambda c: _run(c, work), cases))
    counts: Counter[tuple[str, str]] = Counter()
    failures = [o for o in outcomes if o.problems]
    for o in outcomes:
        counts[(o.case.family, "fail" if o.problems else f"exit {o.code}")] += 1
    for o in failures:
        last = o.stderr.strip().splitlines()[-1] if o.stderr.strip() else ""
        print(f"FAIL {o.case.family}/{o.case.name}: {'; '.join(o.problems)} | {last[:300]}")
    if args.out:
        with args.out.open("w") as f:
            for o in outcomes:
                f.write(json.dumps({"family": o.case.family, "case": o.case.name, "code": o.code,
                                    "seconds": round(o.seconds, 2), "problems": o.problems,
                                    "stderr": o.stderr[-2000:]}) + "\n")
    print(f"{len(outcomes)} cases, seed {args.seed}, {time.perf_counter() - start:.0f} s; slowest "
          f"{max(o.seconds for o in outcomes):.1f} s")
    for (family, outcome), k in sorted(counts.items()):
        print(f"  {family:15} {outcome:8} {k}")
    print(f"exit 4: {sum(o.code == 4 for o in outcomes)}, tracebacks: "
          f"{sum('Traceback' in o.stderr for o in outcomes)}, hangs: {sum(o.code == -9 for o in outcomes)}, "
          f"failures: {len(failures)}")
    return min(len(failures), 100)


if __name__ == "__main__":
    raise SystemExit(main())
