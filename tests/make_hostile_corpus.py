"""Write the small crafted corpus in tests/data/hostile (run from the repository root; deterministic).

    python tests/make_hostile_corpus.py

Each file is a few KB: XSpaces built from scratch in the layout of the real GPU captures (one
`/device:GPU:0` plane of kernels with `hlo_op`/`program_id`, a `/host:CPU` plane), HLO texts from
`hostile_inputs.HLO_TEMPLATE` (named *.hlo.txt: tests that read every *.hlo under tests/data
expect modules XLA's own parser accepts), and reports. MANIFEST.json says what each must end in: the exit
code and the words of its one line (tests/test_fuzz_hostile.py checks it).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from hostile_inputs import craft_hlo  # noqa: E402

from audit.parsers.xplane_schema import XSpace  # noqa: E402

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
