"""Numbers from a profile or HLO dump are range-checked where they enter; impossible ones name where they sit."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from hostile_inputs import craft_hlo

from audit.cli import main
from audit.base.errors import ExitCode, InputError
from audit.parsers.hlo.text import parse_hlo_text
from audit.parsers.hlo.replica_groups import iota_groups, parse_replica_groups
from audit.parsers.xplane.schema import XSpace
from conftest import read_hosts, shared_fixture

GEMM = "gpu-mi300x/gemm.xplane.pb"


def _gemm_space():
    space = XSpace()
    space.ParseFromString(shared_fixture(GEMM).read_bytes())
    return space


def _kernel_line(space):
    plane = next(p for p in space.planes if p.name == "/device:GPU:0")
    return plane, next(line for line in plane.lines if line.events)


def _error(tmp_path: Path, space) -> str:
    path = tmp_path / "p.xplane.pb"
    path.write_bytes(space.SerializeToString())
    with pytest.raises(InputError) as caught:
        read_hosts(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    return text


@pytest.mark.parametrize(("field", "value"), [("duration_ps", 2**63 - 1), ("duration_ps", -1),
                                              ("offset_ps", 2**62), ("offset_ps", -(2**40))])
def test_an_event_time_out_of_range_names_plane_line_and_event(tmp_path, field, value):
    space = _gemm_space()
    plane, line = _kernel_line(space)
    setattr(line.events[3], field, value)
    text = _error(tmp_path, space)
    assert f"plane '/device:GPU:0' line 0 ({line.name!r}) event 3: {field} {value} is out of range" in text


@pytest.mark.parametrize("value", [-1, 2**62, 2**63 - 1])
def test_a_line_timestamp_out_of_range_is_refused(tmp_path, value):
    space = _gemm_space()
    _, line = _kernel_line(space)
    line.timestamp_ns = value
    assert f"timestamp_ns {value} is out of range" in _error(tmp_path, space)


def test_a_device_ordinal_beyond_any_host_is_refused(tmp_path):
    space = _gemm_space()
    plane, _ = _kernel_line(space)
    plane.name = "/device:GPU:4611686018427387904"
    assert "device ordinal 4611686018427387904 is out of range" in _error(tmp_path, space)


@pytest.mark.parametrize(("kind", "value"), [("str_value", "x"), ("double_value", float("nan")),
                                             ("double_value", float("inf")), ("bytes_value", b"\xff"),
                                             ("uint64_value", 2**64 - 1), ("int64_value", -(2**63))])
def test_kernel_stats_of_the_wrong_type_do_not_crash_the_reader(tmp_path, kind, value):
    """program_id and correlation_id of another type read as unknown; the table is still built."""
    space = _gemm_space()
    plane, line = _kernel_line(space)
    wanted = {sid for sid, md in plane.stat_metadata.items() if md.name in ("program_id", "correlation_id")}
    for ev in line.events:
        for stat in ev.stats:
            if stat.metadata_id in wanted:
                for name in ("int64_value", "uint64_value", "double_value", "str_value", "bytes_value", "ref_value"):
                    stat.ClearField(name)
                setattr(stat, kind, value)
    path = tmp_path / "p.xplane.pb"
    path.write_bytes(space.SerializeToString())
    assert len(read_hosts(path)[0].events) > 0


def _module(craft: str) -> str:
    return craft_hlo("", craft, random.Random(0))


@pytest.mark.parametrize(("craft", "message"), [
    ("self-fusion", "HLO instruction 'e' in computation 'fused' calls 'fused', which is already running: a "
                    "recursive call (fused -> fused)"),
    ("mutual-recursion", "a recursive call (fused -> other -> fused)"),
    ("while-body-calls-itself", "HLO instruction 'w0' in computation 'body' calls 'body'"),
    ("entry-calls-entry", "HLO instruction 'r' in computation 'main' calls 'main'"),
    ("shape-huge-dims", "HLO instruction 'd' in computation 'main' has a shape of more than 2^50 elements"),
    ("shape-rank-huge", "has a shape of rank 300 (at most 64)"),
    ("shape-negative", "has a negative dimension in f32[-8, 8]"),
    ("iota-groups-huge", "replica groups: [2000000,1000000] spans 2,000,000,000,000 devices"),
    ("iota-groups-transposed-huge", "spans 17,592,186,044,416 devices"),
    ("groups-huge-ids", "replica groups: device id 99999999999999999999 is out of range"),
    ("mesh-huge", "a mesh of [100000000, 100000000] spans 10,000,000,000,000,000 devices"),
    ("deep-tuple", None),
])
def test_crafted_hlo_is_refused_naming_the_instruction(craft, message):
    start = time.perf_counter()
    if message is None:
        parse_hlo_text(_module(craft), "m.hlo")  # a deep tuple in a signature line is not parsed
        return
    with pytest.raises(InputError) as caught:
        parse_hlo_text(_module(craft), "m.hlo")
    assert message in str(caught.value) and str(caught.value).startswith("m.hlo: ")
    assert time.perf_counter() - start < 5  # refused before anything of that size exists


def test_a_tuple_nested_past_any_program_is_refused_not_recursed():
    text = _module("self-fusion").replace("%p = f32[8,16]{1,0} parameter(0)",
                                          "%p = " + "(" * 5000 + "f32[8,16]" + ")" * 5000 + " parameter(0)", 1)
    with pytest.raises(InputError, match="a tuple shape nested more than 32 deep"):
        parse_hlo_text(text, "m.hlo")


@pytest.mark.parametrize(("craft", "value"), [("trip-count-text", "abc"), ("trip-count-negative", "-5"),
                                              ("trip-count-huge", "999999999999999999999999999")])
def test_a_trip_count_that_is_not_a_count_is_exit_2_naming_the_loop(tmp_path, capsys, craft, value):
    path = tmp_path / "m.hlo"
    path.write_text(_module(craft))
    assert main(["inspect", str(path), "--hardware", "h100", "-q"]) == ExitCode.INPUT
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"audit: error: {path}: HLO module 'crafted': HLO instruction 'loop': "
                          f"known_trip_count '{value[:30]}' is not a trip count"), err


def test_replica_groups_of_a_real_size_still_expand():
    assert iota_groups(2, 4, (4, 2), (1, 0)) == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert len(parse_replica_groups("[256,16]<=[4096]")) == 256


def test_a_scheduler_that_is_not_an_address_is_exit_2_at_once(tmp_path, capsys, fixture_path):
    run = tmp_path / "run"
    run.mkdir()
    for host in ("a", "b"):
        (run / f"{host}.xplane.pb").write_bytes(fixture_path(GEMM).read_bytes())
    start = time.perf_counter()
    assert main(["inspect", str(run), "-q", "--scheduler", "not a url"]) == ExitCode.INPUT
    assert time.perf_counter() - start < 10
    err = capsys.readouterr().err.strip()
    assert err == "audit: error: --scheduler 'not a url' is not a scheduler address; expected tcp://HOST:PORT"


def _silent_store() -> str:
    """A filesystem whose every existence check hangs, as a cloud store does without a network."""
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    class Silent(MemoryFileSystem):
        protocol = "silent"

        def exists(self, path, **kwargs):
            time.sleep(60)

    fsspec.register_implementation("silent", Silent, clobber=True)
    return "silent://bucket/run/h.xplane.pb"


def test_an_unreachable_remote_store_fails_within_its_budget_in_one_line(monkeypatch, capsys):
    """A store that never answers (no network) costs the budget once, then one line."""
    url = _silent_store()
    monkeypatch.setenv("AUDIT_REMOTE_TIMEOUT", "1")
    start = time.perf_counter()
    assert main(["inspect", url, "-q"]) == ExitCode.INPUT
    assert time.perf_counter() - start < 5
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"audit: error: {url}: cannot reach: no answer within 1 s")
    assert "\n" not in err


@pytest.mark.slow  # waits out a remote timeout per path: 7 s
def test_each_remote_path_a_notebook_names_gets_the_whole_budget(monkeypatch):
    """The budget belongs to one path's lookup, not to the process: a second inspect of an unreachable
    store in the same session waits as long as the first, and the error names the budget it waited,
    read from AUDIT_REMOTE_TIMEOUT when the call is made."""
    import audit

    url = _silent_store()
    for seconds in (2, 2, 3):
        monkeypatch.setenv("AUDIT_REMOTE_TIMEOUT", str(seconds))
        start = time.perf_counter()
        with pytest.raises(InputError, match=f"no answer within {seconds} s"):
            audit.inspect(url)
        assert seconds - 0.2 < time.perf_counter() - start < seconds + 3


def test_a_remote_timeout_that_is_not_a_number_of_seconds_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("AUDIT_REMOTE_TIMEOUT", "fifteen")
    assert main(["inspect", _silent_store(), "-q"]) == ExitCode.INPUT
    assert capsys.readouterr().err.strip() == (
        "audit: error: AUDIT_REMOTE_TIMEOUT='fifteen' is not a positive number of seconds")


def test_a_host_that_fails_inside_audit_is_one_line_with_the_workers_traceback_kept(monkeypatch, capsys, tmp_path,
                                                                                   fixture_path):
    from audit.pod import summary

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug\nwith a second line")

    monkeypatch.setattr(summary, "_summarise", broken)
    assert main(["inspect", str(fixture_path(GEMM)), "-q"]) == ExitCode.INTERNAL
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ZeroDivisionError: a bug" in err, err
    saved = Path(err.rsplit("details in ", 1)[1].rstrip(")"))
    try:
        assert "on the worker:" in saved.read_text() and "def broken" not in err
    finally:
        saved.unlink()
