"""`audit`'s memory per program against XProf's memory viewer, on every real capture that carries a
buffer assignment.

    python bench/memory_vs_xprof.py [--write]

For each capture (and each HLO dump written as a proto), XProf (the `xprof` package, as its server runs it) writes each program's
`<module>(<id>).hlo_proto.pb` beside a private copy of the capture, and its `memory_viewer` tool
reads that file: its peak heap and entry parameters are compared with `audit`'s, which reads the
same HloProto out of the capture itself. `--write` puts the table into bench/RESULTS.md between its
memory markers. tests/test_program_memory.py runs the same comparison.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "RESULTS.md"
START, END = "<!-- memory:start -->", "<!-- memory:end -->"
MIB = 2.0 ** 20
# The real captures the repository holds that carry a buffer assignment, relative to its root.
CAPTURES = (
    "tests/data/captures/h200-jax0.11/train-step.xplane.pb",
    "tests/data/captures/h200-jax0.11/microbench.xplane.pb",
    "tests/data/captures/h100-jax0.11/train-step.xplane.pb",
    "tests/data/captures/h100-jax0.11/train-step-cmdbuf.xplane.pb",
    "tests/data/captures/h100-jax0.11/microbench.xplane.pb",
    "tests/data/captures/h100-jax0.11/attention-sweep/attention-sweep.xplane.pb",
    "tests/data/fixtures/gpu-mi300x/gemm.xplane.pb",
    "tests/data/fixtures/gpu-mi300x/attention.xplane.pb",
    "tests/data/fixtures/gpu-mi300x/elementwise.xplane.pb",
    "tests/data/fixtures/gpu-mi300x/conv3d-8gpu.xplane.pb",
    "tests/data/fixtures/gpu-mi300x/conv3d-legacy.xplane.pb",
    "tests/data/captures/cpu-default-run/vm.xplane.pb",  # XLA:CPU writes a buffer assignment too
)
# HLO dumps written as HloProto (`--xla_dump_hlo_as_proto`): XProf's memory viewer reads the same bytes
# when they lie beside a capture as `<module>(<id>).hlo_proto.pb`.
DUMPS = ("tests/data/fixtures/gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb",)
# nsys-jax archives: each process's programs as xz-compressed HloProtos under dump/
ARCHIVES = tuple(f"tests/data/fixtures/gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc{i}.zip" for i in range(4))
CARRIER = "tests/data/fixtures/gpu-mi300x/gemm.xplane.pb"  # any capture: XProf's tools open one beside the file
_WRITTEN = re.compile(r"^(?P<module>.+)\((?P<id>\d+)\)\.hlo_proto\.pb$")


@dataclass(frozen=True)
class Row:
    capture: str
    program_id: int
    module: str
    audit_peak_mib: float
    audit_params_mib: float
    xprof_peak_mib: float
    xprof_params_mib: float

    @staticmethod
    def _gap(ours: float, theirs: float) -> float:
        return 0.0 if ours == theirs else abs(ours - theirs) / max(abs(theirs), abs(ours))

    @property
    def peak_gap(self) -> float:
        return self._gap(self.audit_peak_mib, self.xprof_peak_mib)

    @property
    def params_gap(self) -> float:
        return self._gap(self.audit_params_mib, self.xprof_params_mib)


def xprof_memory(capture: Path, folder: Path) -> dict[int, tuple[str, float, float]]:
    """Program id -> (module, peak heap MiB, entry parameters MiB) from XProf's memory viewer, run
    on a copy of `capture` in `folder` (XProf writes its per-program files beside its input)."""
    from xprof.convert import raw_to_tool_data

    copy = folder / capture.name
    shutil.copy(capture, copy)
    raw_to_tool_data.xspace_to_tool_names([str(copy)])  # writes each program's <module>(<id>).hlo_proto.pb
    found: dict[int, tuple[str, float, float]] = {}
    for written in sorted(folder.glob("*.hlo_proto.pb")):
        match = _WRITTEN.match(written.name)
        if match is None:
            continue
        data, _ = raw_to_tool_data.xspace_to_tool_data(
            [str(copy)], "memory_viewer", {"module_name": written.name.removesuffix(".hlo_proto.pb"),
                                           "memory_space": "0"})
        if not data:
            continue
        view = json.loads(data)
        found[int(match["id"])] = (match["module"], float(view.get("peakHeapMib") or 0.0),
                                   float(view.get("entryComputationParametersMib") or 0.0))
    return found


def audit_memory(capture: Path) -> dict[int, tuple[float, float]]:
    """Program id -> (peak MiB, entry parameters MiB) as `audit` reads them from the capture."""
    from audit.parsers.hlo.buffer_assignment import memory_usage, read_buffer_assignment
    from audit.parsers.xplane.reader import read_host

    _, protos = read_host(capture, decode_hlo=False)
    out: dict[int, tuple[float, float]] = {}
    for pid, data in protos.items():
        assignment = read_buffer_assignment(data)
        if assignment is not None:
            usage = memory_usage(assignment)
            out[pid] = (usage.peak_bytes / MIB, usage.parameter_bytes / MIB)
    return out


def compare(capture: Path, folder: Path) -> tuple[list[Row], list[str]]:
    """Every program XProf's memory viewer reports on, audit beside XProf, and the programs of
    XProf's that `audit` has no figures for."""
    theirs = xprof_memory(capture, folder)
    ours = audit_memory(capture)
    name = str(capture.relative_to(ROOT)) if capture.is_relative_to(ROOT) else capture.name
    rows = [Row(name, pid, module, ours[pid][0], ours[pid][1], peak, params)
            for pid, (module, peak, params) in sorted(theirs.items()) if pid in ours]
    return rows, [f"{module}({pid})" for pid, (module, _, _) in sorted(theirs.items()) if pid not in ours]


def compare_dump(dump: Path, folder: Path) -> Row:
    """One dumped HloProto, audit beside XProf's memory viewer given the same bytes."""
    return compare_proto(str(dump.relative_to(ROOT)), dump.name, dump.read_bytes(), folder)


def compare_proto(capture: str, name: str, data: bytes, folder: Path) -> Row:
    """An HloProto's bytes, audit beside XProf's memory viewer reading them as its server's file."""
    from xprof.convert import raw_to_tool_data

    from audit.parsers.hlo.buffer_assignment import memory_usage, read_buffer_assignment

    assignment = read_buffer_assignment(data)
    if assignment is None:
        raise ValueError(f"{capture}: {name} carries no buffer assignment")
    usage = memory_usage(assignment)
    carrier = folder / Path(CARRIER).name
    if not carrier.exists():
        shutil.copy(ROOT / CARRIER, carrier)
    (folder / "dump(0).hlo_proto.pb").write_bytes(data)
    raw, _ = raw_to_tool_data.xspace_to_tool_data([str(carrier)], "memory_viewer",
                                                  {"module_name": "dump(0)", "memory_space": "0"})
    view = json.loads(raw)
    match = re.match(r"module_(\d+)\.([^.]+)\.", name)
    return Row(capture, int(match[1]) if match else 0, match[2] if match else name, usage.peak_bytes / MIB,
               usage.parameter_bytes / MIB, float(view["peakHeapMib"]), float(view["entryComputationParametersMib"]))


def compare_archive(archive: Path, folder: Path) -> list[Row]:
    """Every program an nsys-jax archive holds after optimization (xz-compressed HloProtos under
    `dump/`), audit beside XProf's memory viewer on the same bytes."""
    import lzma
    import zipfile

    rows = []
    with zipfile.ZipFile(archive) as z:
        for n, info in enumerate(sorted(z.infolist(), key=lambda i: i.filename)):
            if info.filename.endswith("after_optimizations.hlo.pb.xz"):
                own = folder / str(n)  # one folder a program: nothing XProf keeps of one is read for another
                own.mkdir()
                data = lzma.decompress(z.read(info))
                rows.append(compare_proto(str(archive.relative_to(ROOT)), Path(info.filename).name, data, own))
    return rows


def table(rows: list[Row]) -> list[str]:
    """One line per capture: its largest program audit beside XProf, and the largest difference over
    all its programs."""
    out = ["| capture | programs | largest program | audit peak / params (MiB) | XProf peak / params (MiB) "
           "| largest difference, any program (peak, params) |", "|---|---:|---|---:|---:|---:|"]
    for capture in dict.fromkeys(r.capture for r in rows):
        mine = [r for r in rows if r.capture == capture]
        top = max(mine, key=lambda r: r.xprof_peak_mib)
        out.append(f"| `{capture.removeprefix('tests/data/')}` | {len(mine)} | {top.module} ({top.program_id}) | "
                   f"{top.audit_peak_mib:,.1f} / {top.audit_params_mib:,.1f} | "
                   f"{top.xprof_peak_mib:,.1f} / {top.xprof_params_mib:,.1f} | "
                   f"{100 * max(r.peak_gap for r in mine):.2f}%, {100 * max(r.params_gap for r in mine):.2f}% |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="put the table into bench/RESULTS.md")
    args = parser.parse_args()
    rows: list[Row] = []
    missing: list[str] = []
    for relative in CAPTURES:
        with tempfile.TemporaryDirectory() as folder:
            found, lacking = compare(ROOT / relative, Path(folder))
        rows += found
        missing += [f"{relative}: {m}" for m in lacking]
    for relative in DUMPS:
        with tempfile.TemporaryDirectory() as folder:
            rows.append(compare_dump(ROOT / relative, Path(folder)))
    for relative in ARCHIVES:
        with tempfile.TemporaryDirectory() as folder:
            rows += compare_archive(ROOT / relative, Path(folder))
    lines = table(rows)
    worst = max((max(r.peak_gap, r.params_gap) for r in rows), default=0.0)
    summary = (f"{len(rows)} programs in {len(CAPTURES)} XPlane captures, {len(DUMPS)} HLO dump and "
               f"{len(ARCHIVES)} nsys-jax archives; the largest difference on peak heap or "
               f"entry parameters is {100 * worst:.2f}%; programs XProf reports that audit does not: "
               f"{', '.join(missing) or 'none'}.")
    print("\n".join(lines + ["", summary]))
    if args.write:
        text = RESULTS.read_text()
        if START not in text:
            sys.exit(f"{RESULTS} has no {START} marker")
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        RESULTS.write_text(head + START + "\n" + "\n".join(lines + ["", summary]) + "\n" + END + tail)


if __name__ == "__main__":
    main()
