"""Finding profiles (file, run dir, logdir), several hosts, and the nesting and id formulas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import read_hosts, shared_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.parsers.profile.events import self_times, to_u64
from audit.parsers.profile.files import find_profile_files
from audit.pod.files import list_host_files
from audit.parsers.xplane.schema import XSpace

GEMM = "gpu-mi300x/gemm.xplane.pb"


def _host_copy(target: Path, hostname: str) -> None:
    space = XSpace()
    space.ParseFromString(shared_fixture(GEMM).read_bytes())
    space.hostnames[:] = [hostname]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(space.SerializeToString())


def _logdir(root: Path, runs: dict[str, list[str]]) -> Path:
    for run, hosts in runs.items():
        for host in hosts:
            _host_copy(root / "plugins" / "profile" / run / f"{host}.xplane.pb", host)
    return root


def test_single_file(tmp_path: Path) -> None:
    hosts = read_hosts(shared_fixture(GEMM))
    assert len(hosts) == 1 and hosts[0].host == "tw003"
    assert [h.path for h in hosts] == [str(shared_fixture(GEMM))]


def test_logdir_with_several_runs_reads_the_latest_and_warns(tmp_path: Path) -> None:
    root = _logdir(tmp_path, {"2026_01_01_10_00_00": ["a"], "2026_01_02_09_00_00": ["b"]})
    found = list_host_files(root)
    assert found.run == "2026_01_02_09_00_00"
    assert [h.host for h in read_hosts(root)] == ["b"]
    assert any("2 runs" in w and "2026_01_01_10_00_00" in w for w in found.warnings)


def test_run_name_picks_a_run(tmp_path: Path) -> None:
    root = _logdir(tmp_path, {"2026_01_01_10_00_00": ["a"], "2026_01_02_09_00_00": ["b"]})
    found = list_host_files(root, run="2026_01_01_10_00_00")
    assert [h.host for h in read_hosts(root, run="2026_01_01_10_00_00")] == ["a"]
    assert all("runs" not in w for w in found.warnings)


def test_plugins_profile_dir_and_run_dir_resolve_alike(tmp_path: Path) -> None:
    root = _logdir(tmp_path, {"2026_01_01_10_00_00": ["a"]})
    by_logdir = find_profile_files(root)
    by_profile_dir = find_profile_files(root / "plugins" / "profile")
    by_run_dir = find_profile_files(root / "plugins" / "profile" / "2026_01_01_10_00_00")
    assert by_logdir.paths == by_profile_dir.paths == by_run_dir.paths
    assert by_run_dir.run == "2026_01_01_10_00_00" and not by_logdir.warnings


def test_run_dir_with_several_hosts_reads_each(tmp_path: Path) -> None:
    # GIVEN a run directory with one file per host (read in parallel processes)
    root = _logdir(tmp_path, {"2026_01_01_10_00_00": ["host-a", "host-b", "host-c"]})
    hosts = read_hosts(root / "plugins" / "profile" / "2026_01_01_10_00_00")
    # THEN every host is there, keyed by its own hostname, with identical per-host tables
    assert [h.host for h in hosts] == ["host-a", "host-b", "host-c"]
    single = read_hosts(shared_fixture(GEMM))[0].events
    events = pd.concat([h.events for h in hosts], ignore_index=True)
    assert len(events) == 3 * len(single)
    assert sorted(events["host"].astype(str).unique()) == ["host-a", "host-b", "host-c"]
    for host in hosts:
        assert host.events["dur_ps"].sum() == single["dur_ps"].sum()
    assert all(h.module_names == hosts[0].module_names for h in hosts)


@st.composite
def _laminar_events(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    """Properly nested intervals (a forest), as (start, dur, direct-children duration) lists."""
    starts: list[int] = []
    durs: list[int] = []
    child_sums: list[int] = []

    def build(lo: int, hi: int, depth: int) -> int:
        total = 0
        cursor = lo
        while cursor < hi and draw(st.booleans()):
            start = draw(st.integers(cursor, hi))
            end = draw(st.integers(start, hi))
            index = len(starts)
            starts.append(start)
            durs.append(end - start)
            child_sums.append(0)
            if depth < 3 and end > start:
                child_sums[index] = build(start, end, depth + 1)
            total += end - start
            cursor = end + 1
        return total

    build(0, 10_000, 0)
    return starts, durs, child_sums


@settings(max_examples=200, deadline=None)
@given(_laminar_events())
def test_self_time_is_duration_minus_direct_children(events: tuple[list[int], list[int], list[int]]) -> None:
    starts, durs, child_sums = events
    start = np.asarray(starts, dtype=np.int64)
    dur = np.asarray(durs, dtype=np.int64)
    got = self_times(np.zeros(len(start), dtype=np.int64), start, dur)
    assert got.tolist() == [d - c for d, c in zip(durs, child_sums)]
    assert (got >= 0).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1000), st.integers(0, 100)), max_size=40))
def test_self_time_sums_to_busy_time_per_group_when_nothing_overlaps(rows: list[tuple[int, int, int]]) -> None:
    # Serial events per group (no overlap): self time equals duration, so sums match busy time.
    serial: list[tuple[int, int, int]] = []
    ends: dict[int, int] = {}
    for group, gap, dur in rows:
        start = ends.get(group, 0) + gap
        serial.append((group, start, dur))
        ends[group] = start + dur
    group = np.asarray([r[0] for r in serial], dtype=np.int64)
    start = np.asarray([r[1] for r in serial], dtype=np.int64)
    dur = np.asarray([r[2] for r in serial], dtype=np.int64)
    assert self_times(group, start, dur).tolist() == dur.tolist()


@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_program_ids_normalize_to_unsigned_64_bit(value: int) -> None:
    unsigned = to_u64(value)
    assert 0 <= unsigned < 1 << 64
    assert np.int64(value).view(np.uint64) == unsigned
    assert to_u64(unsigned) == unsigned


@pytest.mark.slow
def test_files_naming_the_same_host_stay_apart(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _host_copy(run / "worker0.xplane.pb", "vm")
    _host_copy(run / "worker1.xplane.pb", "vm")
    # As audit inspect reads them: the pod layer reduces the hosts, on a local Dask cluster.
    from audit.pod.reduce import PodSettings, reduce_profile

    pod = reduce_profile(run, settings=PodSettings(cache="", progress=False, workers=1))
    assert [h.host for h in pod.hosts] == ["vm:worker0", "vm:worker1"]
    assert set(pod.ops["host"].astype(str)) == {"vm:worker0", "vm:worker1"}
    assert any("several files name host 'vm'" in w for h in pod.hosts for w in h.warnings)


@pytest.mark.parametrize("capture", ["gpu-mi300x/gemm.xplane.pb", "gpu-mi300x/conv3d-legacy.xplane.pb",
                                     "not-jax/tensorflow-gpu-multiworker.xplane.pb"])
def test_plane_names_at_a_glance_are_the_decoded_planes(capture: str, fixture_path) -> None:
    from audit.parsers.profile.files import plane_names
    from audit.parsers.xplane.space import read_xspace

    path = fixture_path(capture)
    assert plane_names(path) == [p.name for p in read_xspace(path).planes]


def test_plane_names_of_something_else_is_none(tmp_path) -> None:
    from audit.parsers.profile.files import plane_names

    text = tmp_path / "m.hlo"
    text.write_text("HloModule m\n\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(b"\x0a\xff\x7f/host:CPU")  # a plane longer than the file
    assert plane_names(text) is None and plane_names(cut) is None and plane_names(tmp_path / "none") is None


def test_lines_are_views_of_the_files_bytes_and_read_as_protobuf_reads_them(fixture_path) -> None:
    # GIVEN a real multi-GPU trace's bytes
    from audit.parsers.xplane.space import decode_xspace

    data = fixture_path("gpu-mi300x/conv3d-8gpu.xplane.pb").read_bytes()
    whole = XSpace()
    whole.ParseFromString(data)
    # WHEN it is decoded with its lines left encoded
    space = decode_xspace(data, "trace")
    # THEN every plane's metadata and every line match protobuf's full decode, and each encoded line is
    # a view of the file's own bytes (a big profile is held once, not copied plane by plane)
    assert [p.name for p in space.planes] == [p.name for p in whole.planes]
    for lazy, full in zip(space.planes, whole.planes):
        assert dict(lazy.event_metadata) == dict(full.event_metadata) and list(lazy.stats) == list(full.stats)
        encoded = lazy.lines.encoded()
        assert all(isinstance(b, memoryview) and b.obj is data for b in encoded)
        assert list(lazy.lines) == list(full.lines)
