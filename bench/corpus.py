"""The real-input corpus: every real capture and dump the project holds, through `audit inspect`.

    python bench/corpus.py [--only NAME ...] [--write]

Runs the CLI on each input in its own process, as a user would, and tabulates what a user first
needs to trust a report: the chip and what identified it, devices and steps, the share of measured
op time priced by a full cost model (not only a bytes bound), the ops flagged and the ops whose
spread is interference, whether any headline figure is a dash, and the exit code with its one line.
`--write` puts the table into bench/RESULTS.md between its corpus markers. tests/test_conformance.py
holds each input's hand-reviewed expectation and runs the same function.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "tests" / "data" / "fixtures"
CAPTURES = ROOT / "tests" / "data" / "captures"
RESULTS = ROOT / "bench" / "RESULTS.md"
START, END = "<!-- corpus:start -->", "<!-- corpus:end -->"
# The terminal lines that state the headline figures, from the hardware line to the time split.
HEADLINE = re.compile(r"^(hardware|\d+ step|op time|achievable op time|expected step|time by bound)")


@dataclass(frozen=True)
class Entry:
    """One real input: `path` relative to the project root (under `tests/`), with the
    arguments a user would pass; `derive` names a copy made from it first (see `materialise`)."""

    name: str
    path: str
    origin: str
    args: tuple[str, ...] = ()
    derive: str = ""


CORPUS: tuple[Entry, ...] = (
    Entry("mi300x-gemm", "tests/data/fixtures/gpu-mi300x/gemm.xplane.pb", "TraceLens, JAX 0.8, MI300X"),
    Entry("mi300x-attention", "tests/data/fixtures/gpu-mi300x/attention.xplane.pb", "TraceLens, JAX 0.8, MI300X"),
    Entry("mi300x-elementwise", "tests/data/fixtures/gpu-mi300x/elementwise.xplane.pb", "TraceLens, JAX 0.8, MI300X"),
    Entry("mi300x-conv3d-8gpu", "tests/data/fixtures/gpu-mi300x/conv3d-8gpu.xplane.pb",
          "TraceLens, JAX 0.8, 8 MI300X"),
    Entry("mi300x-conv3d-legacy", "tests/data/fixtures/gpu-mi300x/conv3d-legacy.xplane.pb",
          "TraceLens, JAX before 0.8 (older XPlane layout), MI300X"),
    Entry("a100-nsys-jax-4proc", "tests/data/fixtures/gpu-a100-pax-nsys-jax", "JAX-Toolbox nsys-jax, Pax FSDP, 4 A100"),
    Entry("a100-nsys-jax-no-metadata", "tests/data/fixtures/gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc0.zip",
          "the same archive as an older nsys-jax writes it (no device-metadata.parquet)", derive="drop-metadata"),
    Entry("h100-maxtext-hlo", "tests/data/fixtures/gpu-h100-maxtext/"
          "module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb", "JAX-Toolbox, MaxText FSDP 4 H100",
          args=("--hardware", "h100:4")),
    Entry("h100-maxtext-hlo-before-optimization", "tests/data/fixtures/gpu-h100-maxtext/"
          "module_0016.jit_train_step.before_optimizations.hlo.pb", "the same module before XLA optimized it",
          args=("--hardware", "h100:4")),
    Entry("h100-maxtext-hlo-no-hardware", "tests/data/fixtures/gpu-h100-maxtext/"
          "module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb",
          "the same dump with no --hardware and no target config beside it"),
    Entry("tpu-v6e-llama3-8b-hlo", "tests/data/fixtures/tpu-v6e-llama3-8b/module_0262.jit_train_step."
          "after_optimizations.txt", "a public TPU v6e-8 Llama3-8B dump", args=("--hardware", "tpu-v6e:2x4")),
    Entry("tensorflow-not-jax", "tests/data/fixtures/not-jax/tensorflow-gpu-multiworker.xplane.pb",
          "tensorflow/profiler demo (TF2, not XLA)"),
    Entry("pytorch-nsys-sqlite", "tests/data/fixtures/not-jax/pytorch-h100-2gpu.nsys.sqlite",
          "nsys-ai test fixture (PyTorch)"),
    Entry("xprof-op-stats-cache", "tests/data/fixtures/gpu-mi300x/ALL_HOSTS.op_stats_v2.pb", "XProf's own cache file"),
    Entry("h100-microbench", "tests/data/captures/h100-jax0.11/microbench.xplane.pb",
          "this project, JAX 0.11.2, H100 SXM"),
    Entry("h100-attention-sweep", "tests/data/captures/h100-jax0.11/attention-sweep/attention-sweep.xplane.pb",
          "this project, JAX 0.11.2, H100 SXM, cuDNN attention"),
    Entry("h100-train-step", "tests/data/captures/h100-jax0.11/train-step.xplane.pb",
          "this project, JAX 0.11.2, H100 SXM, command buffers off"),
    Entry("h100-train-step-cuda-graphs", "tests/data/captures/h100-jax0.11/train-step-cmdbuf.xplane.pb",
          "this project, JAX 0.11.2, H100 SXM, XLA's default CUDA graphs"),
    Entry("h100-train-step-dump", "tests/data/captures/h100-jax0.11/dump",
          "this project, XLA 0.11 dump folder with gpu_target_config"),
    Entry("h200-microbench", "tests/data/captures/h200-jax0.11/microbench.xplane.pb",
          "this project, JAX 0.11.2, H200"),
    Entry("h200-train-step", "tests/data/captures/h200-jax0.11/train-step.xplane.pb",
          "this project, JAX 0.11.2, H200, command buffers off"),
    Entry("h200-train-step-dump", "tests/data/captures/h200-jax0.11/dump",
          "this project, XLA 0.11 dump folder with gpu_target_config, H200"),
    Entry("cpu-default-run", "tests/data/captures/cpu-default-run/vm.xplane.pb",
          "this project, the default run on 8 simulated CPU devices",
          args=("--hardware", "tests/data/captures/cpu-default-run/cpu.toml")),
    Entry("tpu-v5p-aot-hlo", "tests/data/hlo/tpu-aot/fsdp_mlp.tpu-v5p-2x2x1.after_optimizations.txt",
          "this project, libtpu AOT compile for v5p 2x2x1", args=("--hardware", "tpu-v5p:2x2x1")),
    Entry("tpu-v6e-aot-hlo", "tests/data/hlo/tpu-aot/fsdp_mlp.tpu-v6e-2x4.after_optimizations.txt",
          "this project, libtpu AOT compile for v6e 2x4", args=("--hardware", "tpu-v6e:2x4")),
)


@dataclass
class Row:
    """What one run of `audit inspect` says about one input."""

    name: str
    exit_code: int
    error: str = ""  # the one line of an exit 2
    chip: str = ""
    identified_by: str = ""
    platform: str = ""
    devices: int = 0
    steps: int = 0
    priced_share: float | None = None  # of measured op time (HLO only: of ops), a full cost model
    bound_only_share: float | None = None
    flagged: list[str] = field(default_factory=list)
    interference: int = 0
    headline_dashes: list[str] = field(default_factory=list)
    warnings: int = 0
    seconds: float = 0.0


def materialise(entry: Entry, workdir: Path) -> Path:
    """The input's path; for a derived entry, the copy made in `workdir`."""
    source = (ROOT / entry.path).resolve()
    if entry.derive == "drop-metadata":
        target = workdir / source.name
        with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
            for item in zin.infolist():
                if not item.filename.endswith("device-metadata.parquet"):
                    zout.writestr(item, zin.read(item.filename))
        return target
    if entry.derive:
        raise ValueError(f"unknown derivation {entry.derive!r}")
    return source


def run(entry: Entry, workdir: Path, audit: str | None = None) -> Row:
    """Run `audit inspect` on one entry (terminal summary and --json) and reduce what it said."""
    path = materialise(entry, workdir)
    out = workdir / f"{entry.name}.json"
    command = [audit or str(Path(sys.executable).with_name("audit")), "inspect", str(path), "--json", str(out),
               "--top", "5", *[_resolve(a) for a in entry.args]]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=workdir,
                          env={**os.environ, "AUDIT_CACHE": ""})
    row = Row(entry.name, done.returncode, seconds=time.perf_counter() - start)
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        row.error = lines[-1] if lines else ""
        return row
    report = json.loads(out.read_text())
    _fill(row, report, done.stdout)
    return row


def _resolve(arg: str) -> str:
    """A project-relative path among the arguments, made absolute (the CLI runs in a temporary folder)."""
    candidate = ROOT / arg
    return str(candidate) if "/" in arg and candidate.exists() else arg


def _fill(row: Row, report: dict[str, Any], terminal: str) -> None:
    hardware, summary, ops = report["hardware"], report["summary"], report["ops"]
    row.chip = hardware.get("name", "")
    row.identified_by = hardware.get("identified_by", "") or hardware.get("source", "")
    row.platform = summary.get("platform", "")
    row.devices = int(summary.get("devices") or 0)
    row.steps = int(summary.get("steps") or 0)
    row.flagged = sorted(op["name"] for op in ops if op.get("flagged"))
    row.interference = sum(1 for op in ops if op.get("verdict") == "interference")
    row.warnings = len(report.get("warnings", []))
    measured = [op for op in ops if op.get("launches_work", True)]
    weight = (lambda op: op.get("self_s") or 0.0) if any(op.get("self_s") for op in measured) else (lambda op: 1.0)
    total = sum(weight(op) for op in measured)
    if total > 0:
        priced = sum(weight(op) for op in measured if op.get("expected_s") is not None and not op.get("lower_bound"))
        bound = sum(weight(op) for op in measured if op.get("lower_bound"))
        row.priced_share, row.bound_only_share = priced / total, bound / total
    row.headline_dashes = [ln.strip() for ln in terminal.splitlines() if HEADLINE.match(ln.strip()) and "—" in ln]


def table(rows: list[Row]) -> str:
    """The rows as the markdown table bench/RESULTS.md holds."""
    head = ("| input | exit | chip (identified by) | devices | steps | op time priced | bound only | flagged | "
            "interference | dashes in headline | s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if r.exit_code:
            lines.append(f"| {r.name} | {r.exit_code} | {_cell(r.error)} | | | | | | | | {r.seconds:.1f} |")
            continue
        chip = f"{r.chip} ({_cell(r.identified_by)})" if r.identified_by else r.chip
        lines.append(f"| {r.name} | 0 | {chip} | {r.devices} | {r.steps} | {_pct(r.priced_share)} | "
                     f"{_pct(r.bound_only_share)} | {len(r.flagged)}{_names(r.flagged)} | {r.interference} | "
                     f"{len(r.headline_dashes)} | {r.seconds:.1f} |")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _names(names: list[str]) -> str:
    return f": {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}" if names else ""


def _cell(text: str) -> str:
    """A table cell: paths as the table's reader finds them from the project root, pipes escaped."""
    text = text.replace(f"{ROOT.parent}/", "../").replace(f"{ROOT}/", "")
    return text.replace("|", "\\|")


def write(markdown: str) -> None:
    """Put the table between the corpus markers of bench/RESULTS.md."""
    text = RESULTS.read_text()
    if START not in text:
        raise SystemExit(f"{RESULTS} has no {START} ... {END} section")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    RESULTS.write_text(f"{before}{START}\n{markdown}\n{END}{after}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="entry names (default: all)")
    parser.add_argument("--write", action="store_true", help="write the table into bench/RESULTS.md")
    args = parser.parse_args(argv)
    entries = [e for e in CORPUS if args.only is None or e.name in args.only]
    workdir = Path(tempfile.mkdtemp(prefix="audit-corpus-"))
    try:
        rows = []
        for entry in entries:
            rows.append(run(entry, workdir))
            print(f"{entry.name}: exit {rows[-1].exit_code} in {rows[-1].seconds:.1f} s", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    markdown = table(rows)
    print(markdown)
    if args.write:
        write(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
