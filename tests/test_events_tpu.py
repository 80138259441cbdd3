"""TPU extraction on a small XSpace built here exactly as libtpu writes one (see xplane-format.md §3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import read_hosts
from audit.parsers.xplane.schema import CoreDetails, XSpace

PROGRAM = 12190760917235803885  # a 64-bit fingerprint, above 2**63
PROGRAM_AS_INT64 = PROGRAM - (1 << 64)
LINE_NS = 1_000  # line timestamp_ns; device spans are absolute ps on the same base
STEP_PS = 10_000_000
HLO_TEXT = "%fusion.3 = f32[8,128]{1,0} fusion(f32[8,128]{1,0} %p0), kind=kLoop, calls=%fused_computation.3"


class _Plane:
    """Builds one XPlane: interns stat names and event metadata like the profiler does."""

    def __init__(self, plane: Any) -> None:
        self.plane = plane
        self.stat_ids: dict[str, int] = {}

    def stat_id(self, name: str) -> int:
        if name not in self.stat_ids:
            sid = len(self.stat_ids) + 1
            self.stat_ids[name] = sid
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return self.stat_ids[name]

    def add_stat(self, stats: Any, name: str, value: Any, ref: bool = False) -> None:
        stat = stats.add(metadata_id=self.stat_id(name))
        if ref:
            stat.ref_value = self.stat_id(value)
        elif isinstance(value, bytes):
            stat.bytes_value = value
        elif isinstance(value, str):
            stat.str_value = value
        elif isinstance(value, float):
            stat.double_value = value
        elif value >= 1 << 63:
            stat.uint64_value = value
        else:
            stat.int64_value = value

    def metadata(self, mid: int, name: str, display: str = "", **stats: Any) -> None:
        md = self.plane.event_metadata[mid]
        md.id, md.name, md.display_name = mid, name, display
        for key, value in stats.items():
            self.add_stat(md.stats, key, value, ref=key == "hlo_category")

    def event(self, line: Any, mid: int, start_ps: int, dur_ps: int, **stats: Any) -> Any:
        # The raw offset is deliberately off: the device span stats are what count.
        ev = line.events.add(metadata_id=mid, offset_ps=start_ps // 2, duration_ps=dur_ps + 7)
        self.add_stat(ev.stats, "device_offset_ps", start_ps)
        self.add_stat(ev.stats, "device_duration_ps", dur_ps)
        for key, value in stats.items():
            self.add_stat(ev.stats, key, value)
        return ev


def _op_metadata(plane: _Plane) -> None:
    common = {"program_id": PROGRAM}
    plane.metadata(1, "%while.1 = (s32[], f32[8,128]) while(...)", "while.1", symbol_id=1,
                   hlo_category="while", **common)
    plane.metadata(2, HLO_TEXT, "fusion.3", symbol_id=2, hlo_category="loop fusion",
                   flops=2048, model_flops=1024, bytes_accessed=8192, **common)
    plane.metadata(3, "%all-reduce.2 = f32[8,128] all-reduce(...)", "all-reduce.2", symbol_id=3,
                   hlo_category="all-reduce", bytes_accessed=4096, **common)
    plane.metadata(9, f"jit_f({PROGRAM})")


def _core_plane(space: Any, index: int, with_steps: bool) -> None:
    plane = _Plane(space.planes.add(name=f"/device:TPU:{index}", id=index))
    for key, value in {"device_type_string": "TPU v6 Lite", "peak_teraflops_per_second": 918.0,
                       "peak_hbm_bw_gigabytes_per_second": 1640.0}.items():
        plane.add_stat(plane.plane.stats, key, value)
    details = CoreDetails(hostname="t1v", device_ordinal=index, global_chip_id=index, global_core_id=index)
    plane.add_stat(plane.plane.stats, "core_details", details.SerializeToString())
    _op_metadata(plane)
    base = LINE_NS * 1000
    steps = plane.plane.lines.add(id=1, name="Steps", timestamp_ns=LINE_NS)
    modules = plane.plane.lines.add(id=2, name="XLA Modules", timestamp_ns=LINE_NS)
    ops = plane.plane.lines.add(id=3, name="XLA Ops", timestamp_ns=LINE_NS)
    for step in range(2):
        t0 = base + step * STEP_PS
        if with_steps:
            plane.metadata(100 + step, str(step))
            plane.event(steps, 100 + step, t0, STEP_PS)
        plane.event(modules, 9, t0 + 1000, 9_000_000, run_id=step + 1)
        # A while op [t0+2us, +6us) nesting three body fusions of 1 us, then an all-reduce.
        plane.event(ops, 1, t0 + 2_000_000, 6_000_000)
        for trip in range(3):
            plane.event(ops, 2, t0 + 2_500_000 + trip * 1_500_000, 1_000_000)
        plane.event(ops, 3, t0 + 8_000_000, 500_000, flops=0)


def _metadata_plane(space: Any) -> None:
    meta = _Plane(space.planes.add(name="/host:metadata"))
    meta.add_stat(meta.plane.stats, "jax_version", "0.10.2")
    hlo = jax.jit(lambda x: jnp.tanh(x) * 2).lower(jnp.ones((8, 128))).compiler_ir("hlo")
    entry = meta.plane.event_metadata[PROGRAM_AS_INT64]
    entry.id, entry.name = PROGRAM_AS_INT64, f"jit_f({PROGRAM})"
    meta.add_stat(entry.stats, "Hlo Proto", hlo.as_serialized_hlo_module_proto())
    other = meta.plane.event_metadata[5]
    other.id, other.name = 5, "XLA_HLO_MODULE_ID_MAP:5"


def _space(tmp_path: Path) -> Path:
    space = XSpace(hostnames=["t1v"])
    _metadata_plane(space)
    _core_plane(space, 0, with_steps=True)
    _core_plane(space, 1, with_steps=False)
    space.planes.add(name="#Chip 0 HBM")
    space.planes.add(name="/device:TPU:0 SparseCore 0")
    env = _Plane(space.planes.add(name="Task Environment"))
    env.add_stat(env.plane.stats, "profile_start_time", 1_795_000_000_000_000_000)
    path = tmp_path / "t1v.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


@pytest.fixture(scope="module")
def tpu_host(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return read_hosts(_space(tmp_path_factory.mktemp("tpu")))[0]


def test_platform_devices_and_names(tpu_host: Any) -> None:
    assert tpu_host.platform == "tpu"
    assert sorted(tpu_host.events["device"].unique()) == [0, 1]
    assert set(tpu_host.events["op"].astype(str)) == {"while.1", "fusion.3", "all-reduce.2"}
    assert tpu_host.device_names[1] == "/device:TPU:1 (chip 1, core 1)"


def test_program_ids_are_unsigned_fingerprints(tpu_host: Any) -> None:
    assert set(tpu_host.events["program_id"]) == {np.uint64(PROGRAM)}
    assert tpu_host.module_names == {PROGRAM: "jit_f"}


def test_device_spans_nesting_and_self_time(tpu_host: Any) -> None:
    ev = tpu_host.events[tpu_host.events["device"] == 0].sort_values("start_ps")
    loop = ev[ev["op"] == "while.1"].iloc[0]
    assert loop["start_ps"] == LINE_NS * 1000 + 2_000_000  # device_offset_ps, not offset_ps
    assert loop["dur_ps"] == 6_000_000
    assert loop["self_ps"] == 6_000_000 - 3 * 1_000_000
    body = ev[ev["op"] == "fusion.3"]
    assert (body["self_ps"] == body["dur_ps"]).all()
    # Occurrences: the body op ran 3 times per step, on each of 2 steps.
    assert body["occurrences"].sum() == 6


def test_metadata_stats_merge_with_event_stats(tpu_host: Any) -> None:
    ev = tpu_host.events
    fusion = ev[ev["op"] == "fusion.3"].iloc[0]
    assert (fusion["trace_flops"], fusion["trace_model_flops"], fusion["trace_bytes"]) == (2048, 1024, 8192)
    assert fusion["trace_category"] == "loop fusion"  # a ref_value, resolved
    reduce = ev[ev["op"] == "all-reduce.2"].iloc[0]
    assert reduce["trace_flops"] == 0  # the event's own stat wins over (absent) metadata
    assert reduce["trace_bytes"] == 4096
    assert np.isnan(ev[ev["op"] == "while.1"]["trace_flops"]).all()


def test_steps_line_and_module_launches(tpu_host: Any) -> None:
    steps = tpu_host.steps
    assert tpu_host.step_source == "Steps line"
    core0 = steps[steps["device"] == 0]
    assert list(core0["step"]) == [0, 1]
    assert list(core0["end_ps"] - core0["start_ps"]) == [STEP_PS, STEP_PS]
    ev = tpu_host.events
    on0 = ev[ev["device"] == 0]
    assert on0.groupby("step")["run_id"].unique().map(list).to_dict() == {0: [1], 1: [2]}
    # Core 1 has no Steps line: its ops still carry the run_id of their XLA Modules event.
    assert set(ev[ev["device"] == 1]["run_id"]) == {1, 2}


def test_tpu_hardware_stats(tpu_host: Any) -> None:
    stats = tpu_host.device_stats["/device:TPU:0"]
    assert stats["device_type_string"] == "TPU v6 Lite"
    assert stats["peak_teraflops_per_second"] == 918.0
    assert stats["peak_hbm_bw_gigabytes_per_second"] == 1640.0
    assert set(tpu_host.device_stats) == {"/device:TPU:0", "/device:TPU:1"}
    assert tpu_host.versions == {"jax_version": "0.10.2"}
    assert tpu_host.profile_start_ns == 1_795_000_000_000_000_000


def test_aggregated_events_count_num_occurrences(tmp_path: Path) -> None:
    space = XSpace(hostnames=["t1v"])
    plane = _Plane(space.planes.add(name="/device:TPU:0"))
    _op_metadata(plane)
    line = plane.plane.lines.add(id=3, name="XLA Ops", timestamp_ns=LINE_NS)
    ev = line.events.add(metadata_id=2, num_occurrences=40, duration_ps=4_000_000)
    plane.add_stat(ev.stats, "self_duration_ps", 3_000_000)
    path = tmp_path / "agg.xplane.pb"
    path.write_bytes(space.SerializeToString())
    row = read_hosts(path)[0].events.iloc[0]
    assert (row["occurrences"], row["dur_ps"], row["self_ps"], row["start_ps"]) == (40, 4_000_000, 3_000_000, -1)


def test_modules_are_keyed_by_the_xplane_program_id(tpu_host: Any) -> None:
    module = tpu_host.modules[PROGRAM]
    assert module.id != PROGRAM  # the proto's own id is not the fingerprint
    assert module.instruction_count > 0


def test_undecodable_hlo_keeps_events_and_warns(tmp_path: Path) -> None:
    space = XSpace()
    space.ParseFromString(_space(tmp_path).read_bytes())
    meta = next(p for p in space.planes if p.name == "/host:metadata")
    entry = meta.event_metadata[PROGRAM_AS_INT64]
    entry.stats[0].bytes_value = b"\x0a\xff\xff\xff"  # a length prefix running past the end
    path = tmp_path / "bad_hlo.xplane.pb"
    path.write_bytes(space.SerializeToString())
    host = read_hosts(path)[0]
    assert host.modules == {}
    assert host.module_names == {PROGRAM: "jit_f"}
    assert len(host.events) > 0
    assert any(f"program {PROGRAM}" in w for w in host.warnings)


@pytest.mark.parametrize(("stated", "self_ps"), [(-5, 0), (-(2**62), 0), (9_000_000, 4_000_000), (3_000_000, 3_000_000)])
def test_an_aggregated_self_time_lies_within_its_duration(tmp_path: Path, stated: int, self_ps: int) -> None:
    # A self_duration_ps stat below zero or past the duration (crafted) gave a negative or impossible self time
    space = XSpace(hostnames=["t1v"])
    plane = _Plane(space.planes.add(name="/device:TPU:0"))
    _op_metadata(plane)
    line = plane.plane.lines.add(id=3, name="XLA Ops", timestamp_ns=LINE_NS)
    ev = line.events.add(metadata_id=2, num_occurrences=40, duration_ps=4_000_000)
    plane.add_stat(ev.stats, "self_duration_ps", stated)
    path = tmp_path / "agg.xplane.pb"
    path.write_bytes(space.SerializeToString())
    assert read_hosts(path)[0].events.iloc[0]["self_ps"] == self_ps
