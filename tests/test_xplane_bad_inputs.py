"""Inputs that are not JAX profiles give one-line InputErrors, never tracebacks or empty tables."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

import pytest
from conftest import read_hosts, shared_fixture

from audit.base.errors import InputError
from audit.parsers.xplane.schema import CoreDetails, XStatMetadata

GEMM = "gpu-mi300x/gemm.xplane.pb"


def _png() -> bytes:
    header = b"\x89PNG\r\n\x1a\n"
    ihdr = b"IHDR" + (1).to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00"
    chunk = len(ihdr[4:]).to_bytes(4, "big") + ihdr + zlib.crc32(ihdr).to_bytes(4, "big")
    return header + chunk


def _error_for(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        read_hosts(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return info.value


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_tensorflow_profile_says_it_holds_no_xla_programs() -> None:
    # GIVEN a real TensorFlow GPU profile: GPU planes with TF kernels, no HLO
    path = shared_fixture("not-jax/tensorflow-gpu-multiworker.xplane.pb")
    # THEN the reader says so instead of returning an empty table
    assert "holds no XLA programs" in _error_for(path).message


def test_empty_file(tmp_path: Path) -> None:
    assert "empty" in _error_for(_write(tmp_path, "vm.xplane.pb", b"")).message


def test_truncated_profile(tmp_path: Path) -> None:
    data = shared_fixture(GEMM).read_bytes()
    error = _error_for(_write(tmp_path, "vm.xplane.pb", data[: len(data) // 2]))
    assert "truncated or corrupt" in error.message


def test_random_bytes(tmp_path: Path) -> None:
    error = _error_for(_write(tmp_path, "vm.xplane.pb", os.urandom(4096)))
    assert "not" in error.message and "XSpace" in error.message


@pytest.mark.parametrize("name, data, kind", [
    ("image.xplane.pb", _png(), "PNG"),
    ("trace.xplane.pb", gzip.compress(json.dumps({"traceEvents": []}).encode()), "gzip"),
    ("notes.xplane.pb", b"this is a plain text note\nwith two lines\n", "text"),
    ("trace.json", json.dumps({"traceEvents": [{"ph": "X"}]}).encode(), "text"),
])
def test_wrong_file_types_are_named(tmp_path: Path, name: str, data: bytes, kind: str) -> None:
    assert kind in _error_for(_write(tmp_path, name, data)).message


@pytest.mark.parametrize("message", [
    XStatMetadata(id=5, name="a stat", description="valid protobuf, wrong message"),
    CoreDetails(hostname="vm", device_ordinal=3, global_core_id=7),
])
def test_valid_protobuf_that_is_not_an_xspace(tmp_path: Path, message: object) -> None:
    path = _write(tmp_path, "other.xplane.pb", message.SerializeToString())  # type: ignore[attr-defined]
    assert "not an XSpace" in _error_for(path).message


def test_hlo_module_proto_is_not_an_xspace() -> None:
    path = shared_fixture("gpu-h100-maxtext/module_0016.jit_train_step.before_optimizations.hlo.pb")
    assert "XSpace" in _error_for(path).message


def test_directory_without_profiles(tmp_path: Path) -> None:
    (tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00").mkdir(parents=True)
    (tmp_path / "README.txt").write_text("nothing here")
    assert "no .xplane.pb profiles found" in _error_for(tmp_path).message


def test_missing_path(tmp_path: Path) -> None:
    assert "no such file" in _error_for(tmp_path / "absent.xplane.pb").message


def test_unknown_run_lists_the_runs(tmp_path: Path) -> None:
    run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    (run / "vm.xplane.pb").write_bytes(shared_fixture(GEMM).read_bytes())
    with pytest.raises(InputError) as info:
        read_hosts(tmp_path, run="nope")
    assert "2026_01_01_00_00_00" in str(info.value)
