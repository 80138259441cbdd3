"""The fast and slow paths of each reader give the same report on mutated real inputs.

HLO text is read by template (each distinct instruction line parsed once, its copies stamped with their
names) or line by line: with the bytes that stand in for names in strings and attribute values, `, metadata={`
inside strings, names inside strings and lines broken inside an attribute, both give the same module.
An HLO proto is split in C straight from its bytes, or message by message in Python: crafted fields and
damaged bytes of real protos give the same module, or the same error, either way. The residency walk (C,
or Python without a compiler) places a real program's ops alike under any cache levels a file may state.

The `/host:CPU` scan reads a plane through protobuf messages (Python: small planes, and every plane of
an install without a compiler or with AUDIT_DECODER=python) or straight from its bytes (the C build,
else numba): crafted stats (no value, two values, unsigned ids past 2^63, strings that are not UTF-8),
zero and absurd durations, damaged metadata, each on the default run's real capture, must give the
same op table and steps on every path, or the same refusal. `make fuzz` runs many more examples.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hostile_hlo import PROTO_CRAFTS, TEMPLATE_CRAFTS, craft_hlo_proto, craft_template_text
from hostile_inputs import craft_xplane, mutate_bytes
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from conftest import ROOT, WITHOUT_C, skip_without_c

from audit.base.errors import InputError
from audit.parsers.xplane import events_cpu, xline as xline_decode
from audit.parsers.hlo import proto as hlo_proto
from audit.parsers.hlo.text import parse_hlo_text
from audit.parsers.hlo.text_templates import read_hlo_text
from conftest import read_hosts

FUZZ = os.environ.get("AUDIT_FUZZ") == "1"
CPU_RUN = ROOT / "tests" / "data" / "captures" / "cpu-default-run" / "vm.xplane.pb"
SCAN_CRAFTS = ("stat-no-value", "stat-two-values", "stat-u64", "stat-not-utf8", "op-zero-duration", "stat-value",
               "stat-metadata", "duration", "offset", "occurrences", "line-duration", "timestamp", "metadata-id")
PATHS = ("python", "numba") if WITHOUT_C else ("python", "c", "numba")  # the compiled decoders here


def _read(path: Path, way: str, monkeypatch: pytest.MonkeyPatch) -> tuple[object, ...]:
    """The first host's op table, steps and step source as one path reads them, or its refusal."""
    monkeypatch.setattr(events_cpu, "COMPILED_MIN_EVENTS", 1 << 62 if way == "python" else 0)
    monkeypatch.setattr(xline_decode, "build", lambda: "" if way == "python" else way)
    try:
        host = read_hosts(path)[0]
    except InputError:
        return ("refused",)
    events = host.events.astype({c: str for c in ("host", "op", "trace_category")})
    return events, host.steps, host.step_source


def _refused(read: tuple[object, ...]) -> bool:
    return isinstance(read[0], str)


def _assert_same(a: tuple[object, ...], b: tuple[object, ...], what: str) -> None:
    assert _refused(a) == _refused(b), f"{what}: {'refused' if _refused(a) else 'read'} against " \
                                       f"{'refused' if _refused(b) else 'read'}"
    if _refused(a):
        return
    pd.testing.assert_frame_equal(a[0], b[0])  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(a[1], b[1])  # type: ignore[arg-type]
    assert a[2] == b[2], what


@pytest.fixture(scope="module")
def cpu_run() -> bytes:
    return CPU_RUN.read_bytes()


# Each example reads a 2.6 MB trace three times (seconds): no shrinking, the failing seed is printed.
@settings(max_examples=60 if FUZZ else 8, deadline=None, derandomize=not FUZZ,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(craft=st.sampled_from(SCAN_CRAFTS), seed=st.integers(0, 2**32 - 1))
def test_the_cpu_scans_agree_on_crafted_real_traces(craft: str, seed: int, tmp_path_factory,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the default run's real trace with one kind of crafted field
    path = tmp_path_factory.mktemp("scan") / "vm.xplane.pb"
    path.write_bytes(craft_xplane(CPU_RUN.read_bytes(), craft, random.Random(seed)))
    # WHEN the Python, C and numba paths read it THEN they give the same table and steps, or all refuse it
    with monkeypatch.context() as m:
        reference = _read(path, "python", m)
    for way in PATHS[1:]:
        with monkeypatch.context() as m:
            _assert_same(reference, _read(path, way, m), f"{craft} seed {seed}: python against {way}")


@pytest.mark.parametrize("craft", ["stat-no-value", "stat-two-values", "stat-u64", "stat-not-utf8"])
def test_each_stat_craft_that_split_the_paths_reads_alike(craft: str, cpu_run: bytes, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The crafts that split them (a step_num stat with no value: 2 steps and 22.3 s idle on one path, 1 step and
    # 0.71 s on the other), each on a few seeds
    for seed in range(3):
        path = tmp_path / f"{seed}.xplane.pb"
        path.write_bytes(craft_xplane(cpu_run, craft, random.Random(seed)))
        with monkeypatch.context() as m:
            reference = _read(path, "python", m)
        for way in PATHS[1:]:
            with monkeypatch.context() as m:
                _assert_same(reference, _read(path, way, m), f"{craft} seed {seed}: python against {way}")


def test_a_step_number_with_no_value_is_one_step_on_every_path(cpu_run: bytes, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the real trace whose step annotations' step_num stats lost their values
    from audit.parsers.xplane.schema import XSpace

    space = XSpace.FromString(cpu_run)
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    step_num = next(k for k, m in plane.stat_metadata.items() if m.name == "step_num")
    cleared = 0
    for line in plane.lines:
        for ev in line.events:
            for stat in ev.stats:
                if stat.metadata_id == step_num:
                    stat.ClearField("int64_value")
                    stat.ClearField("uint64_value")
                    cleared += 1
    assert cleared
    path = tmp_path / "vm.xplane.pb"
    path.write_bytes(space.SerializeToString())
    # WHEN each path reads it THEN each finds the same steps (step number 0 for each: the stat is there)
    reads = {}
    for way in PATHS:
        with monkeypatch.context() as m:
            reads[way] = _read(path, way, m)
    for way in PATHS[1:]:
        _assert_same(reads["python"], reads[way], f"python against {way}")
    assert reads["python"][2] == "StepTraceAnnotation"


# --- HLO text: read by template (each distinct line once) and line by line -----------------------------------

HLO_TEXTS = sorted(p for p in (ROOT / "tests" / "data" / "hlo").rglob("*") if p.suffix in (".hlo", ".txt")
                   and p.read_bytes()[:64].lstrip().startswith(b"HloModule")) + \
    sorted((ROOT / "tests" / "data" / "te_attention").glob("*.hlo.txt"))


def _module_or_error(read: Any, text: str) -> object:
    try:
        return read(text, "m.hlo")
    except InputError as exc:
        return str(exc)


@settings(max_examples=200 if FUZZ else 25, deadline=None, derandomize=not FUZZ,
          suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(HLO_TEXTS), craft=st.sampled_from(sorted(TEMPLATE_CRAFTS)), seed=st.integers(0, 2**32 - 1))
def test_the_template_reader_reads_crafted_real_text_as_the_line_reader(path: Path, craft: str, seed: int) -> None:
    # GIVEN a real HLO text with stand-in bytes, metadata in strings, names in strings or a broken line
    text = craft_template_text(path.read_text(), craft, random.Random(seed))
    # WHEN it is read by template and line by line THEN both give the same module, or the same error
    by_template, by_line = _module_or_error(read_hlo_text, text), _module_or_error(parse_hlo_text, text)
    assert type(by_template) is type(by_line), (by_template if isinstance(by_template, str) else by_line)
    if isinstance(by_line, str):
        assert by_template == by_line
        return
    assert by_template == by_line
    pairs = list(zip((i for _, i in by_template.instructions()), (i for _, i in by_line.instructions())))
    assert all(x == y and repr(x) == repr(y) for x, y in pairs)


# --- HLO protos: split in C straight from the bytes, or message by message in Python -------------------------

PROTOS = [ROOT / "tests" / "data" / "fixtures" / "gpu-h100-maxtext" / name for name in
          ("module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb",
           "module_0016.jit_train_step.before_optimizations.hlo.pb")]


def _proto_or_error(data: bytes, python: bool, monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as patch:
        if python:
            patch.setattr(hlo_proto, "_hloscan", None)
            patch.setattr(hlo_proto, "_STAMP", None)
        try:
            return hlo_proto.read_hlo_proto_bytes(data)
        except InputError as exc:
            return str(exc)


@skip_without_c
@settings(max_examples=60 if FUZZ else 6, deadline=None, derandomize=not FUZZ,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.sampled_from([0, 1]), craft=st.sampled_from(["bytes", *sorted(PROTO_CRAFTS)]),
       seed=st.integers(0, 2**32 - 1))
def test_the_c_and_python_proto_readers_agree_on_crafted_real_protos(which: int, craft: str, seed: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a real HLO proto with crafted fields, or damaged bytes
    data, rng = PROTOS[which].read_bytes(), random.Random(seed)
    crafted = mutate_bytes(data, rng) if craft == "bytes" else craft_hlo_proto(data, craft, rng)
    # WHEN the C and the Python reader read it THEN the same module, instruction by instruction, or the same error
    c, python = _proto_or_error(crafted, False, monkeypatch), _proto_or_error(crafted, True, monkeypatch)
    assert type(c) is type(python), (c if isinstance(c, str) else python)
    if isinstance(c, str):
        assert c == python
        return
    assert c == python
    pairs = list(zip((i for _, i in c.instructions()), (i for _, i in python.instructions())))  # type: ignore[attr-defined]
    assert all(a == b and repr(a) == repr(b) for a, b in pairs)


# --- the line decoder's builds on damaged real lines ---------------------------------------------------------

@pytest.fixture(scope="module")
def cpu_lines() -> list[bytes]:
    from audit.parsers.xplane.space import decode_xspace

    plane = next(p for p in decode_xspace(CPU_RUN.read_bytes(), str(CPU_RUN)).planes if p.name == "/host:CPU")
    return [bytes(data) for data in plane.lines.encoded() if len(data) < 200_000]


def _line_read(data: bytes, build: str) -> object:
    import numpy as np

    slot_of = np.arange(64, dtype=np.int64) % 5  # every stat id below 64 read into one of five slots
    try:
        d = xline_decode.decode_line(data, slot_of, 5, build)
    except ValueError:
        return "refused"
    present = d.kind != xline_decode.ABSENT
    return (d.timestamp_ns, d.line_duration_ps, d.metadata_id.tolist(), d.offset_ps.tolist(), d.duration_ps.tolist(),
            d.occurrences.tolist(), d.kind.tolist(), np.where(present, d.value, 0).tolist(),
            np.where(present, d.length, 0).tolist())


@skip_without_c
@settings(max_examples=300 if FUZZ else 40, deadline=None, derandomize=not FUZZ,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pick=st.integers(0, 10_000), seed=st.integers(0, 2**32 - 1))
def test_the_c_and_numba_decoders_agree_on_damaged_real_lines(pick: int, seed: int, cpu_lines: list[bytes]) -> None:
    # GIVEN one real line of the default run's trace, cut, flipped, cut out of or repeated in places
    data = mutate_bytes(cpu_lines[pick % len(cpu_lines)], random.Random(seed))
    # WHEN the C and numba builds decode it THEN they return the same columns, or both refuse it
    assert _line_read(data, "c") == _line_read(data, "numba")


# --- the residency walk: C and Python on a real program, under any cache levels a hardware file may state ------

@pytest.fixture(scope="module")
def h100_program() -> tuple[Any, Any]:
    from audit.costmodel.ops.module import cost_module
    from audit.parsers.hlo.files import load_hlo_file

    module = load_hlo_file(ROOT / "tests" / "data" / "fixtures" / "gpu-h100-maxtext" /
                           "module_0016.jit_train_step.before_optimizations.hlo.pb")
    return module, cost_module(module)


@skip_without_c
@settings(max_examples=20 if FUZZ else 3, deadline=None, derandomize=not FUZZ,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(capacities=st.lists(st.one_of(st.integers(1, 1 << 40).map(float), st.sampled_from([1.0, 5e7, 2.5e8])),
                           min_size=1, max_size=8))
def test_the_c_and_python_residency_walks_agree_on_any_cache_levels(capacities: list[float], h100_program,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a real program and the H100 with up to 8 cache levels (all a hardware file may state) of any size
    from dataclasses import replace

    from audit.costmodel import residency, residency_walk
    from audit.costmodel.chips.catalog import CATALOG
    from audit.costmodel.chips.hardware import MemoryLevel, Quantity

    hw = CATALOG["h100"]
    levels = tuple(MemoryLevel(f"L{i}", Quantity(c, "B", "user"), Quantity(1e13, "B/s", "user"))
                   for i, c in enumerate(sorted(capacities)))
    chip = replace(hw, caches=levels)
    module, costs = h100_program
    # WHEN the C and the Python walk place its ops THEN the same residency for every op
    compiled = residency.with_residency(module, costs, chip)
    with monkeypatch.context() as m:
        m.setattr(residency, "_walker", lambda: residency_walk.walk)
        python = residency.with_residency(module, costs, chip)
    assert compiled == python
    assert sum(c.resident is not None for c in python.values()) > 100  # the walk placed the program's ops
