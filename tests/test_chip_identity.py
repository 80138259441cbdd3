"""The chip from everything an input carries: nsys-jax device metadata, else XLA's gpu_target_config in
the dump, else the target in the dumps' file names (which narrows, never names, the chip); a profile whose
chip nothing identifies exits 2 naming the --hardware values, never a report of dashes."""

from __future__ import annotations

import json
import math
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit.cli import main
from audit.costmodel.chips.detect import hardware_from_trace
from audit.orchestration.pipeline import analyse_profile
from audit.parsers.hlo.gpu_target import config_beside, stats_beside, target_stats
from audit.parsers.hlo.files import load_hlo_file
from audit.parsers.hlo.platform import platform_of
from audit.pod.reduce import PodSettings
from conftest import ROOT, render, shared_fixture

QUIET = PodSettings(progress=False, cache="")
A100 = "gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc0.zip"
H100 = ROOT / "tests" / "data" / "captures" / "h100-jax0.11"
TRAIN_DUMP = H100 / "dump" / "module_0000.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"
# XLA's gpu_target_config of an AMD Instinct MI100 under ROCm, as XLA dumped it (posted in a public
# JAX issue); the fields a ROCm config carries in place of cuda_compute_capability.
MI100_CONFIG = """gpu_device_info {
  threads_per_warp: 64
  core_count: 120
  memory_bandwidth: 1228800000000
  clock_rate_ghz: 1.502
  device_memory_size: 33806090240
  rocm_compute_capability {
    gcn_arch_name: "gfx908:sramecc+:xnack-"
  }
}
platform_name: "ROCM"
dnn_version_info {
  major: 1
  minor: 3
}
device_description_str: "AMD Instinct MI100"
"""


def _copy_without(tmp_path: Path, drop) -> Path:
    """The A100 archive of process 0 without the members `drop` selects (an older or partial nsys-jax)."""
    out = tmp_path / "proc0.zip"
    with zipfile.ZipFile(shared_fixture(A100)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if not drop(info.filename):
                dst.writestr(info, src.read(info.filename))
    return out


@pytest.fixture(scope="module")
def with_metadata() -> dict:
    return analyse_profile(shared_fixture(A100), pod=QUIET).to_json()


@pytest.fixture(scope="module")
def without_metadata(tmp_path_factory) -> dict:
    path = _copy_without(tmp_path_factory.mktemp("old-nsys-jax"), lambda n: n == "device-metadata.parquet")
    return analyse_profile(path, pod=QUIET).to_json()


def test_an_archive_without_device_metadata_is_identified_by_its_dumps_target_config(without_metadata):
    hw = without_metadata["hardware"]
    assert hw["name"] == "a100-40gb" and "gpu_target_config" in hw["identified_by"]
    assert "NVIDIA A100-SXM4-40GB" in hw["identified_by"]
    # The config states the 40 GB part's 1.5552 TB/s, as the device metadata does.
    assert hw["hbm_bytes_per_s"] == 1.5552e12
    assert any("gpu_target_config.pbtxt.xz" in n for n in hw["notes"])


def test_it_gets_the_same_report_as_with_the_metadata(with_metadata, without_metadata):
    a, b = with_metadata, without_metadata
    for key in ("peak_flops_per_s", "hbm_bytes_per_s", "hbm_bytes", "interconnect", "achievable"):
        assert a["hardware"][key] == b["hardware"][key], key
    for key in ("measured_s", "expected_s", "roofline_fraction", "expected_step_s", "flagged_ops"):
        assert b["summary"][key] == pytest.approx(a["summary"][key], rel=1e-6), key
    assert sum(o["expected_s"] is not None for o in b["ops"]) == sum(o["expected_s"] is not None for o in a["ops"])
    assert "device metadata" in a["hardware"]["identified_by"]


def test_the_hardware_line_names_each_peak_once_and_what_identified_the_chip(without_metadata):
    line = next(ln for ln in render(without_metadata, "terminal").splitlines() if ln.startswith("hardware:"))
    assert line.count("peak bf16") == 1 and line.count("peak f32") == 1 and "—" not in line
    assert "identified by device_name 'NVIDIA A100-SXM4-40GB' (the dump's gpu_target_config)" in line
    md = next(ln for ln in render(without_metadata, "markdown").splitlines() if ln.startswith("**Hardware:**"))
    assert md.count("bf16") == 1 and r"gpu\_target\_config" in md
    html = render(without_metadata, "html")
    assert html.count("<dt>Peak bf16</dt>") == 1 and "gpu_target_config" in html


def test_a_report_that_listed_an_unknown_peak_per_op_shows_each_peak_once(with_metadata):
    # What the earlier version wrote for the A100 archive without device metadata: 'peak bf16 —
    # [catalog, derived; 1 ops]' once per op, 400 times over.
    old = json.loads(json.dumps(with_metadata))
    old["hardware"]["peaks_used"] = [{"peak": "bf16", "flops_per_s": None, "source": "catalog, derived", "ops": 1,
                                      "flops": 1e9, "dtypes": ["bf16"]}] * 400 + old["hardware"]["peaks_used"]
    line = next(ln for ln in render(old, "terminal").splitlines() if ln.startswith("hardware:"))
    assert line.count("peak bf16") == 1 and "—" not in line.split("HBM")[0]
    assert render(old, "html").count("<dt>Peak bf16</dt>") == 1


def test_the_dumps_file_names_alone_narrow_the_chip_and_exit_2_naming_it(tmp_path, capsys):
    path = _copy_without(tmp_path, lambda n: n == "device-metadata.parquet" or "gpu_target_config" in n)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "sm_8.0" in err and "compute capability 8.0" in err and "--hardware a100" in err
    assert main(["inspect", str(path), "--hardware", "a100", "--quiet", "--json", str(tmp_path / "r.json")]) == 0


def test_a_profile_nothing_identifies_exits_2_naming_the_gpus(tmp_path, capsys):
    path = _copy_without(tmp_path, lambda n: n == "device-metadata.parquet" or n.startswith("dump/"))
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot be identified" in err
    assert "no device metadata" in err and "a100" in err and "h100" in err and "mi300x" in err


def test_the_target_config_reads_as_device_stats():
    h100 = stats_beside(TRAIN_DUMP)
    assert h100 is not None and h100["described_in"] == "module_0000.jit_train_step.gpu_target_config.pbtxt"
    assert (h100["device_name"], h100["core_count"], h100["clock_rate"]) == ("NVIDIA H100 80GB HBM3", 132, 1.98e6)
    assert (h100["memory_size"], h100["memory_bandwidth"]) == (85017493504, 3352320000000)
    assert (h100["compute_cap_major"], h100["compute_cap_minor"]) == (9, 0)  # `minor: 0` is not written
    mi100 = target_stats(MI100_CONFIG, "x")
    assert mi100 is not None and (mi100["device_vendor"], mi100["compute_cap_major"], mi100["compute_cap_minor"]) \
        == ("AMD", 9, 0)
    assert (mi100["device_name"], mi100["core_count"]) == ("AMD Instinct MI100", 120)


def test_a_module_without_its_own_config_uses_the_one_its_folder_holds():
    # XLA dumped the config once for the four attention programs of one process.
    module = H100 / "attention" / "module_207089.jit__lambda.sm_9.0a_gpu_after_optimizations.txt"
    assert config_beside(module) == H100 / "attention" / "module_206427.jit__lambda.gpu_target_config.pbtxt"


@given(st.text(max_size=300))
def test_any_text_is_a_config_or_none_never_an_error(text):
    stats = target_stats(text, "x")
    assert stats is None or stats["described_by"] == "the dump's gpu_target_config"


@pytest.mark.parametrize("text", ["gpu_device_info {" * 40 + "}" * 40, "gpu_device_info { core_count: }",
                                  "gpu_device_info { core_count: 1 } }", "\"unterminated", "a: {"])
def test_malformed_configs_are_not_configs(text):
    assert target_stats(text, "x") is None


@pytest.mark.parametrize("field, value", [("core_count", "9" * 400), ("memory_bandwidth", "1e400"),
                                          ("clock_rate_ghz", "-1.98")])
def test_a_config_figure_no_chip_has_is_left_out_and_the_rest_read(tmp_path, capsys, field, value):
    """An integer of 400 digits was read through a float (infinite: OverflowError, exit 4)."""
    config = TRAIN_DUMP.parent / "module_0000.jit_train_step.gpu_target_config.pbtxt"
    crafted = re.sub(rf"{field}: \S+", f"{field}: {value}", config.read_text(), count=1)
    stats = target_stats(crafted, "x")
    stat = {"core_count": "core_count", "memory_bandwidth": "memory_bandwidth", "clock_rate_ghz": "clock_rate"}[field]
    assert stats is not None and stat not in stats and stats["device_name"] == "NVIDIA H100 80GB HBM3"
    shutil.copy(TRAIN_DUMP, tmp_path / TRAIN_DUMP.name)
    (tmp_path / config.name).write_text(crafted)
    out = tmp_path / "r.json"
    assert main(["inspect", str(tmp_path / TRAIN_DUMP.name), "--quiet", "--json", str(out)]) == 0, \
        capsys.readouterr().err
    assert json.loads(out.read_text())["hardware"]["name"] == "h100"


def test_hlo_dump_file_and_folder_are_priced_on_the_h100_their_config_describes(tmp_path, capsys):
    for path in (TRAIN_DUMP, TRAIN_DUMP.parent):
        out = tmp_path / f"{path.name}.json"
        assert main(["inspect", str(path), "--quiet", "--json", str(out)]) == 0, capsys.readouterr().err
        report = json.loads(out.read_text())
        assert report["hardware"]["name"] == "h100" and "gpu_target_config" in report["hardware"]["identified_by"]
        assert report["source"]["paths"] == [str(TRAIN_DUMP)]
        assert not any("this machine's CPU" in w for w in report["warnings"])


def test_without_its_config_an_sm_90a_dump_still_needs_hardware(tmp_path, capsys):
    alone = tmp_path / TRAIN_DUMP.name
    shutil.copy(TRAIN_DUMP, alone)
    assert main(["inspect", str(alone)]) == 2
    err = capsys.readouterr().err
    assert "its file name says sm_9.0a" in err and "h100" in err and "h800" in err


def test_sm_90a_file_names_are_compute_capability_9_0():
    platform = platform_of(load_hlo_file(TRAIN_DUMP), str(TRAIN_DUMP))
    assert (platform.kind, platform.vendor, platform.arch) == ("gpu", "nvidia", (9, 0))


@pytest.mark.parametrize(("stats", "chip"), [
    ({"device_name": "NVIDIA H100 PCIe"}, "h100-pcie"),
    ({"device_name": "NVIDIA H800"}, "h800"),
    ({"device_name": "NVIDIA H20"}, "h20"),
    ({"device_name": "NVIDIA H200"}, "h200"),  # the longest catalog name in the description wins
    ({"device_name": "AMD Instinct MI325X"}, "mi325x"),
    # No name: the SM count, then the nearest memory size, then the nearest bandwidth.
    ({"compute_cap_major": 9, "compute_cap_minor": 0, "core_count": 114}, "h100-pcie"),
    ({"compute_cap_major": 9, "compute_cap_minor": 0, "core_count": 78, "memory_size": 96e9}, "h20"),
    ({"compute_cap_major": 9, "compute_cap_minor": 0, "core_count": 132, "memory_size": 141e9}, "h200"),
    ({"device_vendor": "AMD", "compute_cap_major": 9, "compute_cap_minor": 4, "core_count": 304,
      "memory_size": 256e9}, "mi325x"),
])
def test_variants_are_told_apart_by_name_then_units_memory_and_bandwidth(stats, chip):
    hw = hardware_from_trace("gpu", {"/device:GPU:0": stats})
    assert hw.name == chip and hw.identified_by


def test_chips_the_stated_figures_cannot_tell_apart_are_named(capsys):
    stats = {"compute_cap_major": 9, "compute_cap_minor": 0, "core_count": 132, "memory_size": 80e9,
             "memory_bandwidth": 3.35e12}
    hw = hardware_from_trace("gpu", {"/device:GPU:0": stats})
    # H100 SXM and H800 share SMs, HBM size and bandwidth; they differ in NVLink, which no stat states.
    assert hw.name == "h100" and "h800 matches these figures as well" in hw.identified_by
    assert "--hardware" in hw.identified_by
    assert math.isfinite(hw.peak("bf16").value)


def test_a_gpu_capture_whose_planes_state_nothing_exits_2(tmp_path, capsys):
    # The hostile corpus's well-formed GPU capture: kernels of one XLA op, and no device plane stats.
    path = tmp_path / "gpu-ok.xplane.pb"
    path.write_bytes((ROOT / "tests" / "data" / "hostile" / "gpu-ok.xplane.pb").read_bytes())
    assert main(["inspect", str(path)]) == 2
    assert "the GPU this profile ran on cannot be identified" in capsys.readouterr().err
    assert main(["inspect", str(path), "--hardware", "h100", "-q", "--json", str(tmp_path / "r.json")]) == 0


@pytest.mark.parametrize(("stat", "value"), [
    ("memory_size", 5e-324),  # a denormal: it became the chip's HBM size, 5e-324 B from the trace
    ("memory_size", 80e9 + 0.5),
    ("memory_size", 1e300),
    ("memory_bandwidth", 1e-300),
    ("core_count", 131.5),
    ("clock_rate", 1e-9),
])
def test_a_device_stat_no_chip_states_is_left_out(tmp_path, stat, value):
    # GIVEN the real H100 capture whose device plane states one figure no device has
    from audit.parsers.xplane.schema import XSpace

    space = XSpace.FromString((H100 / "train-step.xplane.pb").read_bytes())
    plane = next(p for p in space.planes if p.name == "/device:GPU:0")
    sid = next(k for k, m in plane.stat_metadata.items() if m.name == stat)
    for stat_ in plane.stats:
        if stat_.metadata_id == sid:
            for name in ("int64_value", "uint64_value", "double_value"):
                stat_.ClearField(name)
            stat_.double_value = value
    path = tmp_path / "t.xplane.pb"
    path.write_bytes(space.SerializeToString())
    # WHEN it is read THEN the chip is named from the rest and that figure is not taken (memory: the
    # catalog's 80 GB where the trace's own 85,017,493,504 B was crafted)
    hw = analyse_profile(path).to_json()["hardware"]
    assert hw["name"] == "h100"
    assert hw["hbm_bytes"] == (80e9 if stat == "memory_size" else 85017493504) and hw["hbm_bytes_per_s"] >= 1e12
