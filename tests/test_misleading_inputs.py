"""Inputs that would mislead silently are named: a before-optimization HLO (with its optimized
sibling), a --hardware of another vendor or platform, a folder of profiles from different chips."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from audit.orchestration.pipeline import analyse_hlo, analyse_profile
from audit.parsers.xplane.schema import XSpace
from conftest import shared_fixture

_H100 = "gpu-h100-maxtext/module_0016.jit_train_step.{}.hlo.pb"


def _warnings(report) -> list[str]:
    return list(report.to_json()["warnings"])


def test_a_before_optimization_dump_says_so_and_names_its_optimized_sibling():
    report = analyse_hlo(shared_fixture(_H100.format("before_optimizations")), hardware="h100:4")
    (line,) = [w for w in _warnings(report) if "before optimization" in w]
    assert "module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb" in line
    after = analyse_hlo(shared_fixture(_H100.format("sm_9.0_gpu_after_optimizations")), hardware="h100:4")
    assert not [w for w in _warnings(after) if "before optimization" in w or "--hardware" in w]


def test_a_before_optimization_dump_alone_is_known_by_its_contents(tmp_path):
    alone = tmp_path / "step.hlo.pb"  # renamed, no sibling: no fusions and no schedule give it away
    shutil.copy(shared_fixture(_H100.format("before_optimizations")), alone)
    (line,) = [w for w in _warnings(analyse_hlo(alone, hardware="h100:4")) if "before optimization" in w]
    assert "no fusions and no schedule" in line and "after_optimizations" in line


def test_hardware_of_another_vendor_or_platform_is_a_warning():
    after = shared_fixture(_H100.format("sm_9.0_gpu_after_optimizations"))
    (amd,) = [w for w in _warnings(analyse_hlo(after, hardware="mi300x:4")) if "--hardware" in w]
    assert amd.startswith("--hardware mi300x is an AMD GPU but the program was compiled for an NVIDIA GPU")
    assert "sm_9.0" in amd
    (tpu,) = [w for w in _warnings(analyse_hlo(after, hardware="tpu-v6e:2x2")) if "--hardware" in w]
    assert tpu.startswith("--hardware tpu-v6e is a TPU but the program was compiled for an NVIDIA GPU")
    traced = analyse_profile(shared_fixture("gpu-mi300x/gemm.xplane.pb"), hardware="h100")
    (line,) = [w for w in _warnings(traced) if "--hardware" in w]
    assert line.startswith("--hardware h100 is an NVIDIA GPU but the profile ran on an AMD GPU")


def _as_mi355x(source: Path, target: Path) -> None:
    """The capture as an MI355X would state itself: gfx950, 256 compute units."""
    space = XSpace()
    space.ParseFromString(source.read_bytes())
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for stat in plane.stats:
            if names.get(stat.metadata_id) == "compute_cap_minor":
                stat.int64_value = 5
            elif names.get(stat.metadata_id) == "core_count":
                stat.int64_value = 256
    target.write_bytes(space.SerializeToString())


@pytest.mark.slow
def test_a_folder_of_profiles_from_different_chips_is_refused(tmp_path):
    run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    shutil.copy(shared_fixture("gpu-mi300x/gemm.xplane.pb"), run / "a.xplane.pb")
    _as_mi355x(shared_fixture("gpu-mi300x/gemm.xplane.pb"), run / "b.xplane.pb")
    done = subprocess.run([sys.executable, "-m", "audit", "inspect", str(tmp_path), "--quiet"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    # One line from the tool (a library may warn beside it, e.g. Dask about a busy port).
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("audit:")]
    assert "different chips" in line and "mi300x: a.xplane.pb" in line and "mi355x: b.xplane.pb" in line
