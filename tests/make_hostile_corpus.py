"""Write the small crafted corpus in tests/data/hostile (run from the repository root; deterministic).

    python tests/make_hostile_corpus.py

Each file is a few KB: XSpaces built from scratch in the layout of the real GPU captures (one
`/device:GPU:0` plane of kernels with `hlo_op`/`program_id`, a `/host:CPU` plane), HLO texts from
`hostile_inputs.HLO_TEMPLATE` and `hostile_hlo` (named *.hlo.txt: tests that read every *.hlo under
tests/data expect modules XLA's own parser accepts), nsys-jax archives built from scratch in the
layout of the real ones (an xz bomb of 80 MiB in 13 kB for the program's dump, a range on two rows),
hardware files from the catalog's h100.toml, and reports. MANIFEST.json says what each must end in:
the exit code and the words of its one line (tests/test_fuzz_hostile.py checks it).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from hostile_archives import xz_bomb  # noqa: E402
from hostile_hlo import nested  # noqa: E402
from hostile_inputs import craft_hlo  # noqa: E402

from audit.parsers.xplane.schema import XSpace  # noqa: E402

OUT = HERE / "data" / "hostile"


def gpu_space(edit: Callable[[Any], None] | None = None) -> bytes:
    """A tiny GPU capture: three kernels of one XLA op on stream 7 of GPU 0."""
    space = XSpace()
    space.hostnames.append("corpus")
    gpu = space.planes.add(id=1, name="/device:GPU:0")
    for sid, name in ((1, "hlo_op"), (2, "program_id"), (3, "correlation_id")):
        gpu.stat_metadata[sid].id = sid
        gpu.stat_metadata[sid].name = name
    gpu.event_metadata[1].id = 1
    gpu.event_metadata[1].name = "loop_fusion_kernel"
    line = gpu.lines.add(id=7, name="Stream #7(Kernel)", timestamp_ns=1000)
    for i in range(3):
        ev = line.events.add(metadata_id=1, offset_ps=1_000_000 * (i + 1), duration_ps=400_000)
        ev.stats.add(metadata_id=1, str_value="loop_fusion.1")
        ev.stats.add(metadata_id=2, int64_value=42)
        ev.stats.add(metadata_id=3, int64_value=100 + i)
    space.planes.add(id=2, name="/host:CPU")
    if edit is not None:
        edit(space)
    return bytes(space.SerializeToString())


def _event(space: Any, i: int = 1) -> Any:
    return space.planes[0].lines[0].events[i]


def report(edit: Callable[[dict[str, Any]], None] | None = None) -> bytes:
    doc: dict[str, Any] = {
        "schema": "audit.report/v1", "tool": {"name": "audit", "version": "0"},
        "hardware": {"name": "h100", "source": "catalog"}, "summary": {"steps": 2},
        "steps": [{"index": 0, "time_s": 0.01}, {"index": 1, "time_s": 0.011}],
        "ops": [{"name": "f.1", "module": "m", "opcode": "fusion", "category": "loop fusion", "framework_op": "f",
                 "fingerprint": "ab", "measured_s": 0.001, "self_s": 0.001, "flops": 1e6, "bytes": 1e3}],
        "collectives": [],
    }
    if edit is not None:
        edit(doc)
    return json.dumps(doc).encode()


def nsys_archive(dump: bytes, repeat_row: bool = False) -> bytes:
    """A tiny nsys-jax archive: three executions of program 1 (`jit_f`), one thunk each, and the
    program's dump after optimization (`dump`, xz-compressed as nsys-jax stores it)."""
    import io
    import zipfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: dict[str, list[object]] = {k: [] for k in ("Name", "Projected Start", "Projected Duration", "RangeId",
                                                     "ParentId", "TID", "NumGPUOps")}
    for i in range(3):
        for name, start, parent in (("TSL:XlaModule:#hlo_module=jit_f,program_id=1#", 1000 * i, -1.0),
                                    ("TSL:Thunk:#hlo_op=fusion.1#", 1000 * i + 10, float(2 * i))):
            for key, value in zip(rows, (name, start, 500, float(2 * i + (parent >= 0)), parent, 7, 1)):
                rows[key].append(value)
    if repeat_row:
        for key in rows:
            rows[key].append(rows[key][1])
    trace = io.BytesIO()
    pq.write_table(pa.table(rows), trace)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(zipfile.ZipInfo("nvtx_gpu_proj_trace/trace.parquet"), trace.getvalue())
        z.writestr(zipfile.ZipInfo("dump/module_0001.jit_f.sm_8.0_gpu_after_optimizations.hlo.pb.xz"), dump)
    return out.getvalue()


def hardware_file(old: str, new: str) -> bytes:
    text = (HERE.parent / "costmodel" / "chips" / "data" / "h100.toml").read_text()
    assert old in text, old
    return text.replace(old, new, 1).encode()


def corpus() -> dict[str, tuple[bytes, int, str]]:
    """name -> (bytes, exit code, words of the line)."""
    def hlo(craft: str) -> bytes:
        return craft_hlo("", craft, random.Random(0)).encode()

    return {
        "gpu-ok.xplane.pb": (gpu_space(), 0, ""),
        "gpu-duration-max.xplane.pb": (gpu_space(lambda s: setattr(_event(s), "duration_ps", 2**63 - 1)), 2,
                                       "event 1: duration_ps 9223372036854775807 is out of range"),
        "gpu-offset-negative.xplane.pb": (gpu_space(lambda s: setattr(_event(s), "offset_ps", -5)), 2,
                                          "event 1: offset_ps -5 is out of range"),
        "gpu-timestamp-negative.xplane.pb": (gpu_space(lambda s: setattr(s.planes[0].lines[0], "timestamp_ns", -1)),
                                             2, "timestamp_ns -1 is out of range"),
        "gpu-ordinal-huge.xplane.pb": (gpu_space(lambda s: setattr(s.planes[0], "name", "/device:GPU:4611686018427387904")),
                                       2, "device ordinal 4611686018427387904 is out of range"),
        "gpu-program-id-string.xplane.pb": (gpu_space(lambda s: setattr(_event(s).stats[1], "str_value", "x")), 0, ""),
        "gpu-no-metadata.xplane.pb": (gpu_space(lambda s: s.planes[0].ClearField("event_metadata")), 0, ""),
        "ALL_HOSTS.op_stats_v2.pb": (b"\x0a\x04\x08\x01\x10\x02", 2, "an XProf cache file, not a profile; point "
                                                                     "audit at the .xplane.pb beside it"),
        "empty.xplane.pb": (b"", 2, "file is empty"),
        "template.hlo.txt": (hlo("trip-count-text").replace(b'"abc"', b'"4"'), 0, ""),
        "self-fusion.hlo.txt": (hlo("self-fusion"), 2, "a recursive call (fused -> fused)"),
        "mutual-recursion.hlo.txt": (hlo("mutual-recursion"), 2, "a recursive call (fused -> other -> fused)"),
        "iota-groups-huge.hlo.txt": (hlo("iota-groups-huge"), 2, "spans 2,000,000,000,000 devices"),
        "rank-huge.hlo.txt": (hlo("shape-rank-huge"), 2, "has a shape of rank 300 (at most 64)"),
        "trip-count-text.hlo.txt": (hlo("trip-count-text"), 2, "known_trip_count 'abc' is not a trip count"),
        "fusion-dag-20.hlo.txt": (hlo("fusion-dag-20"), 0, ""),
        "call-dag-30.hlo.txt": (hlo("call-dag-30"), 0, ""),
        "nested-fusion-70.hlo.txt": (nested("fusion", 70).encode(), 2, "computations nested more than 64 deep"),
        "nested-while-70.hlo.txt": (nested("while", 70).encode(), 2, "computations nested more than 64 deep"),
        "trip-product.hlo.txt": (hlo("trip-product"), 2, "runs 'c7' more than 1,125,899,906,842,624 times"),
        "layout-out-of-range.hlo.txt": (hlo("layout-out-of-range"), 2, "has a layout {7,0} that is not a "
                                                                       "permutation of the 2 dimensions"),
        "parameter-named.hlo.txt": (hlo("parameter-named"), 2, "is parameter(%a): a parameter's operand is its "
                                                               "number"),
        "mesh-axis-zero.hlo.txt": (hlo("mesh-axis-zero"), 2, "a mesh of [4, 0]: a size of 0"),
        "dynamic-dim.hlo.txt": (hlo("dynamic-dim"), 2, "has an unbounded dynamic dimension in f32[8,?]"),
        "groups-empty-group.hlo.txt": (hlo("groups-empty-group"), 2, "replica groups: group 0 holds no device"),
        "tile-zero.hlo.txt": (hlo("tile-zero"), 2, "has a layout tile T(0, 128)"),
        "stack-frame-no-location.hlo.txt": (hlo("stack-frame-no-location"), 0, ""),
        "backend-config-deep.hlo.txt": (hlo("backend-config-deep"), 2, "has a backend_config nested more than 64 "
                                                                       "deep"),
        "nsys-xz-bomb.zip": (nsys_archive(xz_bomb(80 << 20)), 2, "dump/module_0001.jit_f.sm_8.0_gpu_after_"
                                                                 "optimizations.hlo.pb.xz: 12,880 compressed bytes expand to more than 67,108,864 (5,210 times "
                                                                 "as many): refused as a decompression bomb"),
        "nsys-repeated-range.zip": (nsys_archive(b"", repeat_row=True), 2, "range id 1 is on more than one row"),
        "hardware-deep.toml": (hardware_file("notes = []", "notes = " + "[" * 5000 + "]" * 5000), 2,
                               "arrays or tables nested deeper than TOML can be read"),
        "hardware-unit.toml": (hardware_file('hbm_bytes_per_s = { value = 3.35e12, unit = "B/s"',
                                             'hbm_bytes_per_s = { value = 3350, unit = "GB/s"'), 2,
                               "key 'hbm_bytes_per_s.unit' (line 6): unit 'GB/s', but this figure is in B/s"),
        "report-ok.json": (report(), 0, ""),
        "report-deep.json": (b'{"schema": "audit.report/v1", "x": ' + b"[" * 20_000 + b"]" * 20_000 + b"}", 2,
                             "JSON nested 20001 levels deep"),
        "report-nan.json": (report(lambda d: d["steps"][0].update(time_s=float("nan"))), 2,
                            "NaN is not a number a report may hold"),
        "report-no-summary.json": (report(lambda d: d.pop("summary")), 2, "(top level): missing field 'summary'"),
        "report-measured-text.json": (report(lambda d: d["ops"][0].update(measured_s="x")), 2,
                                      'ops[0].measured_s: expected a number or null, got "x"'),
        "report-huge-int.json": (report(lambda d: d["summary"].update(steps=10**400)), 2,
                                 "summary.steps: 1000000000000000000000000000000000000... is out of range"),
        "empty.json": (b"", 2, "empty, not a JSON report"),
    }


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name, (data, code, says) in corpus().items():
        (OUT / name).write_bytes(data)
        manifest[name] = {"exit": code, "says": says}
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(manifest)} files to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
