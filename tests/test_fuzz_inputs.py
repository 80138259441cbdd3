"""Mutated real captures and HLO dumps: the tool returns a report or raises InputError, nothing else."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from audit.base.errors import InputError
from conftest import shared_fixture

SEED_FILES = {
    "gemm": "gpu-mi300x/gemm.xplane.pb",
    "conv": "gpu-mi300x/conv3d-8gpu.xplane.pb",
}
TIME_BOUND_S = 10.0


@pytest.fixture(scope="module")
def captures() -> dict[str, bytes]:
    return {k: shared_fixture(v).read_bytes() for k, v in SEED_FILES.items()}


def _read_or_input_error(tmp_path, data: bytes, name: str = "m.xplane.pb") -> None:
    from audit.orchestration.pipeline import analyse_profile

    path = tmp_path / name
    path.write_bytes(data)
    start = time.perf_counter()
    try:
        report = analyse_profile(path).to_json()
    except InputError as exc:
        assert str(exc).strip() and "\n" not in str(exc)
    else:
        assert report["ops"]  # a result, never a silently empty one
    assert time.perf_counter() - start < TIME_BOUND_S


def _load_hlo_or_input_error(path, data: bytes) -> None:
    from audit.parsers.hlo.files import load_hlo_file

    path.write_bytes(data)
    try:
        load_hlo_file(path)
    except InputError as exc:
        assert "\n" not in str(exc)


mutation = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0.0, 1.0)),
    st.tuples(st.just("flip"), st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(1, 255)), min_size=1, max_size=16)),
    st.tuples(st.just("cut"), st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 0.2))),
)


def _mutate(data: bytes, how) -> bytes:
    kind, arg = how
    if kind == "truncate":
        return data[: int(len(data) * arg)]
    if kind == "flip":
        out = bytearray(data)
        for where, mask in arg:
            i = min(int(where * len(out)), len(out) - 1)
            out[i] ^= mask
        return bytes(out)
    start, length = arg
    i = int(start * len(data))
    return data[:i] + data[i + int(length * len(data)):]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(sorted(SEED_FILES)), how=mutation)
def test_mutated_captures_read_or_fail_cleanly(tmp_path, captures, which, how):
    _read_or_input_error(tmp_path, _mutate(captures[which], how))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=mutation)
def test_mutated_hlo_text_parses_or_fails_cleanly(tmp_path, how):
    text = shared_fixture("tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt").read_bytes()
    head = text[:60_000]  # the module header, parameters and the first computations
    _load_hlo_or_input_error(tmp_path / "m.txt", _mutate(head, how))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=mutation)
def test_mutated_hlo_proto_parses_or_fails_cleanly(tmp_path, how):
    data = shared_fixture("gpu-h100-maxtext/module_0016.jit_train_step.before_optimizations.hlo.pb").read_bytes()
    _load_hlo_or_input_error(tmp_path / "m.hlo.pb", _mutate(data, how))
