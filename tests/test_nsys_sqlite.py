"""Nsight Systems SQLite exports, read the way the nsys-jax archives are. No real export is among
the fixtures, so one is built here in the export's schema (NVTX_EVENTS with StringIds, the CUDA
runtime calls and the kernels they launched tied by correlationId, TARGET_INFO_GPU) from a real
archive's ranges: each range on its CPU thread at its original time, each innermost range
launching one kernel over its projected GPU interval. Both readers then see the same data."""

from __future__ import annotations

import io
import sqlite3
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from audit.cli import main
from audit.orchestration.pipeline import analyse_profile
from audit.pod.reduce import PodSettings
from conftest import shared_fixture

ARCHIVE = "gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc0.zip"
PID, TID = 4242, 4243
GLOBAL_TID = (PID << 24) | TID

_SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
    category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER
    REFERENCES StringIds(id), domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL,
    uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER,
    globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER,
    shortName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER,
    l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER,
    pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, computeMajor INTEGER, computeMinor INTEGER);
CREATE TABLE TARGET_INFO_NVTX_CUDA_DEVICE (name TEXT, hwId INTEGER, vmId INTEGER, deviceId INTEGER);
"""


def _insert_ranges(db, nvtx, runtime, kernels) -> None:
    """NVTX ranges, CUDA launches and kernels, as the export's tables hold them."""
    db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId) VALUES (?,?,?,?,?,?)",
                   nvtx)
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId) VALUES (?,?,?,?)",
                   runtime)
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, correlationId) VALUES (?,?,?,?)",
                   kernels)


def build_export(path: Path, archive: Path, with_xla: bool = True) -> Path:
    with zipfile.ZipFile(archive) as z:
        trace = pq.read_table(io.BytesIO(z.read("nvtx_gpu_proj_trace/trace.parquet"))).to_pandas()
    trace = trace.dropna(subset=["RangeId", "Orig Start"])
    db = sqlite3.connect(path)
    db.executescript(_SCHEMA)
    strings: dict[str, int] = {}
    nvtx, runtime, kernels = [], [], []
    columns = ("Name", "Orig Start", "Orig Duration", "Projected Start", "Projected Duration", "NumChild", "NumGPUOps")
    for raw, cpu_start, cpu_dur, gpu_start, gpu_dur, children, gpu_ops in zip(*(trace[c] for c in columns)):
        name = str(raw) if with_xla else "my range"
        start = int(cpu_start)
        end = start + max(int(cpu_dur), 2)
        text_id = strings.setdefault(name, len(strings) + 1)
        # Most ranges name their text through StringIds; a few carry it inline, as exports do.
        inline = name if len(nvtx) % 7 == 0 else None
        nvtx.append((start, end, 59, inline, GLOBAL_TID, None if inline else text_id))
        if children == 0 and gpu_ops > 0:
            correlation = len(runtime) + 1
            runtime.append((start + 1, start + 2, GLOBAL_TID, correlation))
            kernels.append((int(gpu_start), int(gpu_start) + int(gpu_dur), 0, correlation))
    db.executemany("INSERT INTO StringIds (id, value) VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    _insert_ranges(db, nvtx, runtime, kernels)
    db.execute("INSERT INTO TARGET_INFO_GPU (id, name, l2CacheSize, totalMemory, memoryBandwidth, clockRate, smCount, "
               "chipName, computeMajor, computeMinor) VALUES (0, 'NVIDIA A100-SXM4-40GB', 41943040, 42505273344, "
               "1555200000000, 1410000000, 108, 'GA100', 8, 0)")
    db.execute("INSERT INTO TARGET_INFO_NVTX_CUDA_DEVICE VALUES ('Xla:#global=0,local=0,process=0,slice=0#', 0, 1, 0)")
    db.commit()
    db.close()
    return path


def dump_folder(folder: Path, archive: Path) -> Path:
    folder.mkdir()
    with zipfile.ZipFile(archive) as z:
        for name in z.namelist():
            if name.startswith("dump/module_0040.") and name.endswith("after_optimizations.hlo.pb.xz"):
                (folder / Path(name).name).write_bytes(z.read(name))
    return folder


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sqlite")
    archive = shared_fixture(ARCHIVE)
    return build_export(root / "report.sqlite", archive), dump_folder(root / "dump", archive)


def test_sqlite_export_reads_like_the_archive(export):
    sqlite_path, dump = export
    quiet = PodSettings(progress=False, cache="")
    from_sqlite = analyse_profile(sqlite_path, pod=PodSettings(progress=False, cache="", hlo=str(dump))).to_json()
    from_archive = analyse_profile(shared_fixture(ARCHIVE), pod=quiet).to_json()
    assert from_sqlite["source"]["kind"] == "nsys" and from_sqlite["hardware"]["name"] == "a100-40gb"
    assert from_sqlite["summary"]["steps"] == from_archive["summary"]["steps"] == 4
    for a, b in zip(from_sqlite["steps"], from_archive["steps"]):
        assert a["time_s"] == pytest.approx(b["time_s"], rel=1e-3)
    sqlite_ops = {o["name"]: o for o in from_sqlite["ops"] if o["measured_s"] is not None}
    archive_ops = {o["name"]: o for o in from_archive["ops"] if o["measured_s"] is not None}
    assert sqlite_ops.keys() == archive_ops.keys()
    for name, op in archive_ops.items():
        assert sqlite_ops[name]["measured_s"] == pytest.approx(op["measured_s"], rel=1e-6), name
        assert sqlite_ops[name]["expected_s"] == op["expected_s"]
    assert from_sqlite["matching"]["matched_share"] == pytest.approx(from_archive["matching"]["matched_share"])


def test_sqlite_export_without_hlo_names_what_to_pass(export, capsys):
    sqlite_path, _ = export
    assert main(["inspect", str(sqlite_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--hlo DIR" in err and "pjit__wrapped_step_fn (program 40)" in err


def test_sqlite_export_with_hlo_on_the_command_line_and_in_the_library(export, capsys):
    import audit

    sqlite_path, dump = export
    assert main(["inspect", str(sqlite_path), "--hlo", str(dump), "--quiet", "--json", "-"]) == 0
    assert '"a100-40gb"' in capsys.readouterr().out
    report = audit.inspect(sqlite_path, hlo=str(dump), cache="")
    assert report.to_json()["summary"]["steps"] == 4


def test_sqlite_without_xla_ranges_says_what_is_missing(tmp_path, capsys):
    path = build_export(tmp_path / "plain.sqlite", shared_fixture(ARCHIVE), with_xla=False)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no XLA module or thunk ranges" in err


def test_sqlite_that_is_not_an_nsight_export(tmp_path, capsys):
    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x INTEGER)")
    db.commit()
    db.close()
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not an Nsight Systems export" in err


H100_DUMP = "gpu-h100-maxtext"
_NO_KERNEL = {"parameter", "get-tuple-element", "bitcast", "tuple", "constant", "all-reduce-done", "all-gather-done",
              "async-done", "reduce-scatter-done", "copy-done", "opt-barrier", "partition-id", "replica-id"}


def build_export_from_hlo(path: Path, executions: int = 3, kernel_ns: int = 10_000) -> tuple[Path, dict[str, int]]:
    """An export of the real H100 MaxText step's schedule as XLA's runtime would annotate it: one
    module range per execution, a thunk per entry op that launches work, and for each while loop a
    thunk holding its body's thunks once per iteration; every thunk launches one 10 us kernel.
    Returns the export and each while body op's expected thunk count per execution."""
    from audit.costmodel.ops.loops import trip_count, while_parts
    from audit.parsers.hlo.files import load_hlo_file

    module = load_hlo_file(shared_fixture(f"{H100_DUMP}/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations"
                                          ".hlo.pb"))
    db = sqlite3.connect(path)
    db.executescript(_SCHEMA)
    nvtx: list[tuple] = []
    runtime: list[tuple] = []
    kernels: list[tuple] = []
    clock = {"cpu": 1_000_000, "gpu": 5_000_000}
    per_execution: dict[str, int] = {}

    def thunk(name: str, body: list[tuple[str, int]] | None = None) -> None:
        start = clock["cpu"]
        clock["cpu"] += 100
        if body:
            for inner, times in body:
                for _ in range(times):
                    thunk(inner)
        else:
            correlation = len(runtime) + 1
            runtime.append((clock["cpu"], clock["cpu"] + 10, GLOBAL_TID, correlation))
            kernels.append((clock["gpu"], clock["gpu"] + kernel_ns, 0, correlation))
            clock["gpu"] += kernel_ns + 1_000
        clock["cpu"] += 100
        nvtx.append((start, clock["cpu"], 59, f"TSL:Thunk:#hlo_op={name}#", GLOBAL_TID, None))

    for _ in range(executions):
        start = clock["cpu"]
        clock["cpu"] += 50
        for instr in module.entry_computation.instructions:
            if instr.opcode in _NO_KERNEL:
                continue
            if instr.opcode == "while":
                body, _cond = while_parts(module, instr)
                trips, _how = trip_count(module, instr)
                assert body is not None and trips
                work = [i.name for i in body.instructions if i.opcode not in _NO_KERNEL and i.opcode != "while"]
                per_execution.update({name: trips for name in work})
                thunk(instr.name, [(name, 1) for name in work] * trips)
            else:
                thunk(instr.name)
        clock["cpu"] += 50
        nvtx.append((start, clock["cpu"], 59, "TSL:XlaModule:#hlo_module=jit_train_step,program_id=16#", GLOBAL_TID,
                     None))
        clock["gpu"] += 50_000
    _insert_ranges(db, nvtx, runtime, kernels)
    db.execute("INSERT INTO TARGET_INFO_GPU (id, name, totalMemory, memoryBandwidth, clockRate, smCount, computeMajor, "
               "computeMinor) VALUES (0, 'NVIDIA H100 80GB HBM3', 85520809984, 3352320000000, 1980000000, 132, 9, 0)")
    db.commit()
    db.close()
    return path, per_execution


def test_export_of_the_h100_step_with_its_dump_folder(tmp_path):
    """The real H100 MaxText dump beside an export of its schedule: a while loop's thunk counts
    through its body's thunks, once per iteration, each matched to the body's instruction."""
    export, body = build_export_from_hlo(tmp_path / "maxtext.sqlite")
    dump = str(shared_fixture(H100_DUMP))
    report = analyse_profile(export, pod=PodSettings(progress=False, cache="", hlo=dump)).to_json()
    assert report["hardware"]["name"] == "h100" and report["summary"]["steps"] == 2
    ops = {o["name"]: o for o in report["ops"] if o["measured_s"] is not None}
    assert not [n for n in ops if n.startswith("while")]
    assert body and all(ops[name]["occurrences"] == 2 * trips for name, trips in body.items())
    # Every kernel is one 10 us thunk: op time is 10 us per occurrence, however the ops were named.
    total = sum(o["measured_s"] for o in ops.values())
    assert total == pytest.approx(1e-5 * sum(o["occurrences"] for o in ops.values()))
    assert report["matching"]["matched_share"] == pytest.approx(1.0)
