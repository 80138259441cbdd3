"""What `make install` prepares ahead (`python -m audit.prepare`) is what a first run then finds:
the compiled decoder (where pip could not build its C version), and the CPU calibration kept with the install for a fresh home directory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit.costmodel.chips import calibration
from audit.orchestration import calibrate
from audit.base import user_cache
from conftest import skip_without_c

_RECORD = {"matmul_flops_per_s": 2e11, "matmul_bf16_flops_per_s": 1e11, "copy_bytes_per_s": 1.5e10,
           "op_overhead_s": 2e-6, "methods": {"matmul": "best of 3: jitted f32 matmul", "matmul_bf16": "m",
                                              "copy": "c", "op_overhead": "o"},
           "cpu_model": "test cpu", "cores": 2, "jax_version": "0", "measured_at": "2026-01-01T00:00:00Z",
           "memory_bytes": 8e9, "last_level_cache_bytes": None, "cache_levels": []}


@skip_without_c
@pytest.mark.slow
def test_prepare_has_nothing_to_compile_where_pip_built_the_c_decoder(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    env.pop("AUDIT_DECODER", None)
    done = subprocess.run([sys.executable, "-m", "audit.prepare", "--no-calibrate"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and "built in C at install" in done.stderr, done.stderr
    assert not (tmp_path / "numba").exists()  # numba was not even imported


@pytest.mark.slow  # compiles the numba decoder from scratch (about 10 s)
def test_prepare_compiles_the_numba_decoder_once_for_later_processes(tmp_path: Path) -> None:
    # An install without the C build (no compiler) falls back on numba: prepare compiles it once.
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "AUDIT_DECODER": "numba"}
    cmd = [sys.executable, "-m", "audit.prepare", "--no-calibrate"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0 and "compiled (numba)" in first.stderr, first.stderr
    cached = sorted(p.name for p in (tmp_path / "numba").rglob("*.nbc"))
    assert any("_decode" in n for n in cached) and any("_count_events" in n for n in cached)
    # A later process loads the machine code instead of compiling: nothing new is written.
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "numba").rglob("*")}
    start = time.perf_counter()
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "numba").rglob("*")} == stamps
    assert time.perf_counter() - start < 60


@pytest.fixture
def fresh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No user cache and no $AUDIT_CACHE_DIR; the install's folder is a temp dir."""
    monkeypatch.delenv("AUDIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    install = tmp_path / "install"
    monkeypatch.setattr(user_cache, "install_dir", lambda kind: install / kind)
    monkeypatch.setattr(calibration, "machine_key", lambda: "test machine")
    return install


def test_a_fresh_home_uses_the_calibration_the_install_made(fresh_home: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate, "measure", lambda: dict(_RECORD))
    written = calibrate.calibrate_install()
    assert written.is_relative_to(fresh_home) and written.exists()
    monkeypatch.setattr(calibrate, "measure", lambda: pytest.fail("measured again despite the install's record"))
    hw = calibrate.cpu_hardware()
    assert hw.source == "calibrated" and hw.peak("f32").value == pytest.approx(2e11)
    # A user's own measurement wins over the install's.
    monkeypatch.setattr(calibrate, "measure", lambda: dict(_RECORD, matmul_flops_per_s=3e11))
    assert calibrate.cpu_hardware(refresh=True).peak("f32").value == pytest.approx(3e11)
    monkeypatch.setattr(calibrate, "measure", lambda: pytest.fail("measured again"))
    assert calibrate.cpu_hardware().peak("f32").value == pytest.approx(3e11)


def test_audit_cache_dir_names_the_only_place_to_look(fresh_home: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate, "measure", lambda: dict(_RECORD))
    calibrate.calibrate_install()
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "mine"))
    calls: list[int] = []
    monkeypatch.setattr(calibrate, "measure", lambda: calls.append(1) or dict(_RECORD))
    calibrate.cpu_hardware()
    assert calls == [1]


def test_a_newer_install_calibration_wins_over_an_older_one_in_the_users_cache(
        fresh_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate, "measure",
                        lambda: dict(_RECORD, matmul_flops_per_s=1e10, measured_at="2026-01-01T00:00:00Z"))
    calibrate.cpu_hardware(refresh=True)  # an old measurement in the user's cache (a busy hour)
    monkeypatch.setattr(calibrate, "measure",
                        lambda: dict(_RECORD, matmul_flops_per_s=2e11, measured_at="2026-03-01T00:00:00Z"))
    calibrate.calibrate_install()  # a later reinstall measured again
    monkeypatch.setattr(calibrate, "measure", lambda: pytest.fail("measured again"))
    assert calibrate.cpu_hardware().peak("f32").value == pytest.approx(2e11)
