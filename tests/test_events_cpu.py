"""CPU traces made here with jax.profiler on 8 simulated devices: per-op rows per device."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, strategies as st
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from conftest import read_hosts, skip_without_c
from audit.parsers.profile.model import EVENT_COLUMNS, STEP_COLUMNS

COMPILED = [pytest.param("c", marks=skip_without_c), "numba"]  # the compiled decoders
STEPS = 3
TRIP_COUNT = 3


@jax.jit
def _step(a: jax.Array, b: jax.Array) -> jax.Array:
    """A matmul, a sum over the sharded axis (an all-reduce), and a while loop whose body nests."""
    def body(_: jax.Array, x: jax.Array) -> jax.Array:
        return jnp.tanh(x @ b) + jnp.sin(x)
    # A data-dependent trip count keeps a real while loop (not unrolled).
    trips = jnp.int32(a[0, 0] > -5) * TRIP_COUNT
    return jnp.sum(a @ b) + jax.lax.fori_loop(0, trips, body, a).sum()


def _trace(logdir: Path, annotate: bool) -> Path:
    mesh = Mesh(jax.devices(), ("x",))
    a = jax.device_put(jnp.ones((256, 128)), NamedSharding(mesh, PartitionSpec("x", None)))
    b = jax.device_put(jnp.ones((128, 128)) / 128, NamedSharding(mesh, PartitionSpec()))
    _step(a, b).block_until_ready()  # compile outside the trace
    with jax.profiler.trace(str(logdir)):
        for i in range(STEPS):
            if annotate:
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    _step(a, b).block_until_ready()
            else:
                _step(a, b).block_until_ready()
    return logdir


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    assert len(jax.devices()) == 8
    root = tmp_path_factory.mktemp("cpu_traces")
    return {"steps": _trace(root / "steps", True), "launches": _trace(root / "launches", False)}


def _thunks_by_jax_reader(logdir: Path) -> Counter[tuple[int, str]]:
    """(device_ordinal, hlo_op) -> executions, counted by JAX's own XSpace reader."""
    path = next(logdir.rglob("*.xplane.pb"))
    data = jax.profiler.ProfileData.from_serialized_xspace(path.read_bytes())
    counts: Counter[tuple[int, str]] = Counter()
    for plane in data.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if "hlo_op" in stats and "device_ordinal" in stats:
                    counts[(int(stats["device_ordinal"]), str(stats["hlo_op"]))] += 1
    return counts


def _busy_ps(frame: pd.DataFrame) -> int:
    """Length of the union of the op intervals."""
    spans = sorted(zip(frame["start_ps"], frame["start_ps"] + frame["dur_ps"]))
    total, cur_start, cur_end = 0, None, None
    for start, end in spans:
        if cur_end is None or start > cur_end:
            total += 0 if cur_end is None else cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    return total + (0 if cur_end is None else cur_end - cur_start)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["steps", "launches"])
def test_one_row_per_executed_op_per_device(traces: dict[str, Path], kind: str) -> None:
    (host,) = read_hosts(traces[kind])
    events = host.events
    assert host.platform == "cpu"
    assert list(events.columns)[: len(EVENT_COLUMNS)] == list(EVENT_COLUMNS)
    ours = Counter(zip(events["device"].astype(int), events["op"].astype(str)))
    assert ours == _thunks_by_jax_reader(traces[kind])
    assert sorted(events["device"].unique()) == list(range(8))


def _inside_loops(events: pd.DataFrame) -> set[str]:
    """Ops that ran inside a while op's span on the same device."""
    loops = events[events["op"].astype(str).str.startswith("while")]
    inside: set[str] = set()
    for _, loop in loops.iterrows():
        end = loop["start_ps"] + loop["dur_ps"]
        mask = ((events["device"] == loop["device"]) & (events["start_ps"] > loop["start_ps"])
                & (events["start_ps"] + events["dur_ps"] <= end))
        inside |= set(events.loc[mask, "op"].astype(str))
    return inside


@pytest.mark.slow
def test_occurrences_are_steps_times_executions(traces: dict[str, Path]) -> None:
    events = read_hosts(traces["steps"])[0].events
    per_step = events.groupby(["device", "op", "step"], observed=True)["occurrences"].sum()
    total = events.groupby(["device", "op"], observed=True)["occurrences"].sum()
    looped = _inside_loops(events)
    assert looped
    for (device, op), n in total.items():
        runs = per_step.loc[(device, op)]
        assert len(runs) == STEPS and runs.nunique() == 1, (device, op)
        # Outside the loop an op runs once per launch; in its body (or condition) once per trip.
        executions = runs.iloc[0]
        assert executions in ((TRIP_COUNT, TRIP_COUNT + 1) if op in looped else (1,)), (device, op)
        assert n == STEPS * executions


@pytest.mark.slow
def test_self_time_sum_matches_busy_time_per_device(traces: dict[str, Path]) -> None:
    events = read_hosts(traces["steps"])[0].events
    for device, frame in events.groupby("device"):
        busy = _busy_ps(frame)
        assert abs(frame["self_ps"].sum() - busy) <= 0.05 * busy, device


@pytest.mark.slow
def test_while_loop_self_time_excludes_its_body(traces: dict[str, Path]) -> None:
    events = read_hosts(traces["steps"])[0].events
    loops = events[events["op"].astype(str).str.startswith("while")]
    assert len(loops) == 8 * STEPS
    for _, loop in loops.iterrows():
        same = events[(events["device"] == loop["device"]) & (events["run_id"] == loop["run_id"])]
        inside = same[(same["start_ps"] >= loop["start_ps"])
                      & (same["start_ps"] + same["dur_ps"] <= loop["start_ps"] + loop["dur_ps"])
                      & (same.index != loop.name)]
        assert len(inside) >= 2 * TRIP_COUNT
        assert loop["self_ps"] < loop["dur_ps"]
        # Body ops run inline on the loop's thread, so its children are exactly the ops inside it.
        assert loop["self_ps"] == loop["dur_ps"] - inside["dur_ps"].sum()


@pytest.mark.slow
def test_steps_from_step_trace_annotation(traces: dict[str, Path]) -> None:
    host = read_hosts(traces["steps"])[0]
    assert host.step_source == "StepTraceAnnotation"
    assert list(host.steps.columns) == list(STEP_COLUMNS)
    assert sorted(host.steps["step"].unique()) == list(range(STEPS))
    assert len(host.steps) == 8 * STEPS
    events = host.events
    # One launch per step: every op of a launch is in the same step, each step holds one launch.
    per_run = events.groupby("run_id")["step"].agg(["nunique", "first"])
    assert (per_run["nunique"] == 1).all()
    assert sorted(per_run["first"]) == list(range(STEPS))
    for row in host.steps.itertuples():
        ops = events[(events["device"] == row.device) & (events["step"] == row.step)]
        assert (ops["start_ps"] >= row.start_ps).all()


@pytest.mark.slow
def test_steps_from_module_launches_without_annotation(traces: dict[str, Path]) -> None:
    host = read_hosts(traces["launches"])[0]
    assert host.step_source == "module launches"
    assert sorted(host.steps["step"].unique()) == list(range(STEPS))
    assert host.events["run_id"].nunique() == STEPS
    assert (host.events.groupby("run_id")["step"].nunique() == 1).all()
    # Launches are numbered in time order.
    first = host.events.groupby("step")["start_ps"].min()
    assert list(first.index) == sorted(first.index, key=lambda s: first[s])


@pytest.mark.slow
def test_host_facts(traces: dict[str, Path]) -> None:
    (host,) = read_hosts(traces["steps"])
    events = host.events
    assert host.versions["jax_version"] == jax.__version__
    assert events["program_id"].dtype == np.uint64
    programs = set(int(p) for p in events["program_id"].unique())
    assert programs and all(host.module_names[p] == "jit__step" for p in programs)
    assert host.profile_start_ns and host.profile_start_ns > 1_600_000_000 * 10**9
    assert set(host.device_names) == set(range(8))
    assert "/host:CPU" in host.device_stats
    assert (events["trace_flops"].isna()).all() and (events["kernels"] == 0).all()


@pytest.mark.slow
def test_every_op_names_an_instruction_of_its_module(traces: dict[str, Path]) -> None:
    host = read_hosts(traces["steps"])[0]
    assert not host.warnings
    for program, op in set(zip(host.events["program_id"].astype(int), host.events["op"].astype(str))):
        module = host.modules[program]
        assert module.name == "jit__step"
        assert module.find(op) is not None, op


@pytest.mark.slow
@pytest.mark.parametrize("build", COMPILED)
@pytest.mark.parametrize("kind", ["steps", "launches"])
def test_compiled_line_decoder_gives_the_python_scans_table(traces: dict[str, Path], kind: str, build: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the reference reading of a real trace, event by event through protobuf messages
    from audit.parsers.xplane import events_cpu, xline as xline_decode

    monkeypatch.setattr(events_cpu, "COMPILED_MIN_EVENTS", 1 << 62)
    reference = read_hosts(traces[kind])[0]
    # WHEN its lines are decoded by one compiled pass over their bytes instead, by each build
    assert xline_decode._load(build), f"the {build} build of the decoder does not load"
    monkeypatch.setattr(events_cpu, "COMPILED_MIN_EVENTS", 0)
    monkeypatch.setattr(xline_decode, "build", lambda: build)
    compiled = read_hosts(traces[kind])[0]
    # THEN the op table (ops, devices, programs, runs, times, self times) and the steps are identical

    def plain(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.astype({c: str for c in ("host", "op", "trace_category")})
    pd.testing.assert_frame_equal(plain(reference.events), plain(compiled.events))
    pd.testing.assert_frame_equal(reference.steps, compiled.steps)
    assert reference.step_source == compiled.step_source


@pytest.mark.parametrize("build", COMPILED)
def test_compiled_decoder_reads_every_xline_field_as_protobuf_does(build: str) -> None:
    # GIVEN a line with every kind of stat value, negative and 64-bit values, and fields it skips
    import numpy as np

    from audit.parsers.xplane import xline as xd
    from audit.parsers.xplane.schema import XLine

    line = XLine(id=7, name="thread", timestamp_ns=123456789, duration_ps=5)
    values = [dict(int64_value=-5), dict(uint64_value=(1 << 64) - 3), dict(double_value=2.5),
              dict(str_value="fusion.1"), dict(bytes_value=b"\x00\xff"), dict(ref_value=300)]
    for i, value in enumerate(values):
        ev = line.events.add(metadata_id=1000 + i, offset_ps=(1 << 40) + i, duration_ps=i * 3)
        ev.stats.add(metadata_id=2, **value)
        ev.stats.add(metadata_id=9, int64_value=42)  # a stat no slot asks for
    ev = line.events.add(metadata_id=1, num_occurrences=4)  # no offset: the oneof's other member
    slot_of = np.full(10, -1, np.int64)
    slot_of[2] = 0
    # WHEN the compiled decoder reads its bytes
    d = xd.decode_line(line.SerializeToString(), slot_of, 1, build)
    # THEN every event and its slot's value come back as protobuf reads them
    assert d.timestamp_ns == 123456789 and list(d.metadata_id) == [1000, 1001, 1002, 1003, 1004, 1005, 1]
    assert list(d.offset_ps[:6]) == [(1 << 40) + i for i in range(6)] and d.offset_ps[6] == 0
    assert list(d.duration_ps) == [0, 3, 6, 9, 12, 15, 0]
    assert list(d.kind[:, 0]) == [xd.INT64, xd.UINT64, xd.DOUBLE, xd.STRING, xd.BYTES, xd.REF, xd.ABSENT]
    assert d.value[0, 0] == -5 and int(d.value[1, 0].view(np.uint64)) == (1 << 64) - 3
    assert d.value[2:3, 0].view(np.float64)[0] == 2.5 and d.value[5, 0] == 300
    data = line.SerializeToString()
    assert data[d.value[3, 0]:d.value[3, 0] + d.length[3, 0]] == b"fusion.1"
    assert data[d.value[4, 0]:d.value[4, 0] + d.length[4, 0]] == b"\x00\xff"
    # AND bytes cut short are an error, not a silently shorter line
    with pytest.raises(ValueError):
        xd.decode_line(data[:-3], slot_of, 1, build)


def test_older_xla_thunks_without_device_ordinal(tmp_path: Path) -> None:
    # GIVEN thunk events as older XLA wrote them: hlo_op on the event, program_id only on the
    # event metadata, no run_id and no device_ordinal
    from audit.parsers.xplane.schema import XSpace

    space = XSpace(hostnames=["old"])
    plane = space.planes.add(name="/host:CPU")
    for sid, name in enumerate(["hlo_op", "program_id", "fusion.1"], start=1):
        plane.stat_metadata[sid].id, plane.stat_metadata[sid].name = sid, name
    meta = plane.event_metadata[7]
    meta.id, meta.name = 7, "fusion.1"
    meta.stats.add(metadata_id=2, int64_value=-5)
    line = plane.lines.add(id=1, name="tf_XLAEigen/1", timestamp_ns=10)
    for i in range(3):
        ev = line.events.add(metadata_id=7, offset_ps=i * 1000, duration_ps=400)
        ev.stats.add(metadata_id=1, ref_value=3)
    path = tmp_path / "old.xplane.pb"
    path.write_bytes(space.SerializeToString())
    # THEN the ops are read, on device 0, with the metadata's program id as unsigned 64-bit, and a warning
    host = read_hosts(path)[0]
    events = host.events
    assert list(events["op"].astype(str)) == ["fusion.1"] * 3
    assert (events["program_id"] == np.uint64((1 << 64) - 5)).all()
    assert (events["device"] == 0).all() and (events["run_id"] == -1).all()
    assert list(events["start_ps"]) == [10_000, 11_000, 12_000]
    assert any("device_ordinal" in w for w in host.warnings)


@pytest.mark.slow
@pytest.mark.parametrize("build", COMPILED)
def test_compiled_decoder_names_a_corrupt_line(traces: dict[str, Path], build: str) -> None:
    # GIVEN a real trace whose busiest /host:CPU line lost its last bytes
    from audit.base.errors import InputError
    from audit.parsers.xplane import events_cpu
    from audit.parsers.xplane.space import decode_xspace

    path = next(traces["steps"].rglob("*.xplane.pb"))
    plane = next(p for p in decode_xspace(path.read_bytes(), str(path)).planes if p.name == "/host:CPU")
    encoded = plane.lines.encoded()
    busiest = max(range(len(encoded)), key=lambda i: len(encoded[i]))
    encoded[busiest] = encoded[busiest][:-3]
    # WHEN the compiled reader scans it THEN it says which line of which file, as the Python scan does
    with pytest.raises(InputError, match=f"line {busiest} of a plane is truncated") as err:
        events_cpu._scan_compiled(plane, build)
    assert str(path) in str(err.value)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50), st.integers(0, 20)), max_size=60),
       st.booleans())
def test_nesting_order_is_the_three_key_sort(events, time_ordered):
    """The stable group sort taken for time-ordered lines gives the order of the full three-key sort."""
    from audit.parsers.profile.events import _nesting_order

    if time_ordered:
        events = sorted(events, key=lambda e: (e[1], -e[2]))
    group, start, dur = (np.array([e[i] for e in events], dtype=np.int64) for i in range(3))
    got = _nesting_order(group, start, dur)
    want = np.lexsort((-dur, start, group))
    assert [tuple(x) for x in np.stack([group, start, -dur])[:, got].T] == \
        [tuple(x) for x in np.stack([group, start, -dur])[:, want].T]


@example([(0, 0, 10), (0, 0, 8), (0, 5, 5)])
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 60), st.integers(0, 30)), max_size=40))
def test_self_time_is_never_negative_and_children_are_counted_once(events):
    """Events that overlap without nesting (a damaged or crafted trace; a parent [0, 10] with children [0, 8] and
    [5, 10]) left negative self times: the children's union is taken from the parent, so each self time is between
    0 and the event's duration, and a group's self times add up to the time its events cover."""
    from audit.parsers.profile.events import self_times

    group, start, dur = (np.array([e[i] for e in events], dtype=np.int64) for i in range(3))
    self_ps = self_times(group, start, dur)
    assert (self_ps >= 0).all() and (self_ps <= dur).all()
    nested = all(not (s1 < s2 < s1 + d1 < s2 + d2) for g1, s1, d1 in events for g2, s2, d2 in events if g1 == g2)
    if nested and len(set(events)) == len(events):
        for g in set(group.tolist()):
            spans = sorted((int(s), int(s + d)) for s, d, gg in zip(start, dur, group) if gg == g)
            covered, reach = 0, None
            for s, e in spans:
                if reach is None or s > reach:
                    covered += e - s
                    reach = e
                elif e > reach:
                    covered += e - reach
                    reach = e
            assert int(self_ps[group == g].sum()) == covered
