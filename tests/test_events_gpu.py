"""Real MI300X captures: kernels attributed to HLO ops, cross-checked with XProf and JAX's own reader."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import jax
import pandas as pd
import pytest
from conftest import shared_fixture

from conftest import read_hosts

CAPTURES = ["gemm", "attention", "elementwise", "conv3d-8gpu"]


def _fixture(name: str) -> Path:
    return shared_fixture(f"gpu-mi300x/{name}.xplane.pb")


def _jax_view(path: Path) -> jax.profiler.ProfileData:
    return jax.profiler.ProfileData.from_serialized_xspace(path.read_bytes())


def _xprof_hlo_stats(path: Path, tmp_path: Path) -> pd.DataFrame:
    """XProf's own hlo_stats table for one file (run on a private copy: XProf caches beside the input)."""
    from xprof.convert import raw_to_tool_data

    copy = tmp_path / path.name
    shutil.copy(path, copy)
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "hlo_stats", {})
    table = json.loads(data)
    ids = [c["id"] for c in table["cols"]]
    rows = [dict(zip(ids, (cell.get("v") for cell in row["c"]))) for row in table["rows"]]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("name", CAPTURES)
def test_every_kernel_with_hlo_op_is_attributed(name: str) -> None:
    # GIVEN JAX's own reader's count of device events carrying hlo_op, per GPU
    expected: Counter[int] = Counter()
    for plane in _jax_view(_fixture(name)).planes:
        if plane.name.startswith("/device:GPU:"):
            device = int(plane.name.rsplit(":", 1)[1])
            expected[device] += sum("hlo_op" in dict(e.stats) for line in plane.lines for e in line.events)
    # THEN every such kernel is in exactly one occurrence row of its device
    events = read_hosts(_fixture(name))[0].events
    got = events.groupby("device")["kernels"].sum()
    assert {d: int(n) for d, n in got.items()} == {d: n for d, n in expected.items() if n}


@pytest.mark.parametrize("name", CAPTURES)
def test_op_times_agree_with_xprof_hlo_stats(name: str, tmp_path: Path) -> None:
    xprof = _xprof_hlo_stats(_fixture(name), tmp_path)
    events = read_hosts(_fixture(name))[0].events
    # XProf sums all GPUs into one row per (program id, op); so do we, for the comparison.
    ours = events.groupby(["program_id", "op"], observed=True).agg(
        time_us=("dur_ps", lambda s: s.sum() / 1e6), kernels=("kernels", "sum"))
    assert len(xprof) == len(ours)
    for row in xprof.itertuples():
        mine = ours.loc[(int(row.program_id), row.hlo_op_name)]
        assert mine.time_us == pytest.approx(row.total_time, rel=0.01)
        # XProf's "occurrences" count kernels, not HLO executions.
        assert mine.kernels == row.occurrences


@pytest.mark.parametrize("name", ["gemm", "attention", "elementwise"])
def test_occurrences_equal_hlo_executions(name: str) -> None:
    # GIVEN the host-side thunk events, one per HLO op execution, named after the op
    events = read_hosts(_fixture(name))[0].events
    ops = set(events["op"].astype(str))
    executed: Counter[str] = Counter()
    for plane in _jax_view(_fixture(name)).planes:
        if plane.name == "/host:CPU":
            for line in plane.lines:
                if not line.name.startswith("Host Threads"):
                    executed.update(e.name for e in line.events if e.name in ops)
    # THEN occurrences count executions (several kernels of one execution are one occurrence)
    assert events.groupby("op", observed=True)["occurrences"].sum().to_dict() == dict(executed)


def test_conv_capture_has_per_device_rows() -> None:
    host = read_hosts(_fixture("conv3d-8gpu"))[0]
    events = host.events
    assert host.platform == "gpu"
    assert sorted(events["device"].unique()) == list(range(8))
    per_device = events.groupby(["device", "op"], observed=True).agg(
        occurrences=("occurrences", "sum"), kernels=("kernels", "sum"), runs=("run_id", "nunique"))
    assert set(per_device.index.get_level_values("op")) == {
        "cudnn-conv.1", "input_transpose_fusion", "input_transpose_fusion.1", "loop_transpose_fusion"}
    # Each GPU ran the module 5 times; the capture lost one input_transpose_fusion.1 launch on GPU 0.
    lost = {(0, "input_transpose_fusion.1")}
    for key, row in per_device.iterrows():
        assert row.occurrences == row.runs == (4 if key in lost else 5), key
    # The convolution launches two kernels per execution (but the first on GPU 0): merged into one occurrence.
    conv = per_device.xs("cudnn-conv.1", level="op")
    assert (conv["kernels"] >= 2 * conv["occurrences"] - 1).all()
    assert host.step_source == "module launches"
    assert len(host.steps) == 8 * 5


def test_gpu_hardware_facts_from_plane_stats() -> None:
    host = read_hosts(_fixture("conv3d-8gpu"))[0]
    assert set(host.device_stats) == {f"/device:GPU:{i}" for i in range(8)}
    stats = host.device_stats["/device:GPU:3"]
    assert stats["device_vendor"] == "AMD"
    assert stats["clock_rate"] == 2_100_000  # kHz
    assert stats["core_count"] == 304
    assert stats["memory_bandwidth"] == 2_662_400_000_000  # bytes/s
    assert (stats["compute_cap_major"], stats["compute_cap_minor"]) == (9, 4)
    assert host.device_names[3] == "/device:GPU:3"


def test_gpu_program_ids_and_module_names() -> None:
    host = read_hosts(_fixture("gemm"))[0]
    assert set(int(p) for p in host.events["program_id"].unique()) <= set(host.module_names)
    assert host.module_names[49] == "jit_dot"
    assert host.profile_start_ns == 1771595650217823548


@pytest.mark.parametrize("name", CAPTURES)
def test_every_gpu_op_is_found_in_its_hlo_module(name: str) -> None:
    host = read_hosts(_fixture(name))[0]
    pairs = set(zip(host.events["program_id"].astype(int), host.events["op"].astype(str)))
    assert pairs
    assert all(host.modules[program].find(op) is not None for program, op in pairs)
