"""The chips of 2026 in the catalog: datasheet figures with sources, detection from the names their traces
carry, and the systems around them (a 72-GPU NVLink domain) seen by calc and plan."""

from __future__ import annotations

import json

import pytest

from audit.cli import main
from audit.costmodel.chips import hwfile
from audit.costmodel.chips.catalog import CATALOG, lookup
from audit.costmodel.chips.detect import hardware_from_trace
from audit.costmodel.network.topology import placement_for
from audit.costmodel.planner.chip_numbers import chip_numbers

NEW = ("gb200-nvl72", "gb300-nvl72", "b300", "h800", "h20", "mi325x", "tpu-v7")


@pytest.fixture(autouse=True)
def no_site_files(monkeypatch):
    monkeypatch.delenv("AUDIT_HARDWARE_PATH", raising=False)


@pytest.mark.parametrize("name", NEW)
def test_new_chips_are_listed_with_sources(capsys, name):
    hw = CATALOG[name]
    for key, q in hw.quantities().items():
        assert q.note and q.kind in hwfile.KINDS, (name, key)
    assert hw.peak("bf16").kind == "datasheet" and hw.hbm_bytes_per_s.kind == "datasheet"
    assert main(["hardware", "list"]) == 0
    assert any(line.startswith(f"{name} ") for line in capsys.readouterr().out.splitlines())


@pytest.mark.parametrize("name, bf16, hbm_bw, hbm, link, domain", [
    ("gb200-nvl72", 2.5e15, 8e12, 186e9, 9e11, 72),
    ("gb300-nvl72", 2.5e15, 8e12, 279e9, 9e11, 72),
    ("b300", 2.25e15, 8e12, 288e9, 9e11, 8),
    ("h800", 9.894e14, 3.35e12, 80e9, 2e11, 8),     # H100's compute, NVLink cut to 400 GB/s bidirectional
    ("h20", 1.48e14, 4e12, 96e9, 4.5e11, 8),        # compute cut to 15% of H100, full NVLink
    ("mi325x", 1.3074e15, 6e12, 256e9, 4.48e11, 8),
])
def test_gpu_datasheet_figures(name, bf16, hbm_bw, hbm, link, domain):
    hw = CATALOG[name]
    assert hw.peak("bf16").value == pytest.approx(bf16)
    assert hw.hbm_bytes_per_s.value == pytest.approx(hbm_bw) and hw.hbm_bytes.value == pytest.approx(hbm)
    assert hw.interconnect.link_bytes_per_s.value == pytest.approx(link)
    assert hw.interconnect.domain_size == domain


def test_export_variants_differ_where_the_export_rules_cut():
    h100, h800, h20 = CATALOG["h100"], CATALOG["h800"], CATALOG["h20"]
    assert h800.peak("bf16").value == h100.peak("bf16").value
    assert h800.interconnect.link_bytes_per_s.value < h100.interconnect.link_bytes_per_s.value / 2
    assert h800.peak("f64").value == pytest.approx(1e12)
    assert h800.peak("f64").value < h100.peak("f64").value
    assert h20.peak("bf16").value < 0.2 * h100.peak("bf16").value
    assert h20.hbm_bytes_per_s.value > h100.hbm_bytes_per_s.value
    # Blackwell Ultra cut INT8: an int8 dot is priced at its own rate, far below fp8.
    assert CATALOG["b300"].peak("s8").value < CATALOG["b300"].peak("f8e4m3fn").value / 10


def test_ironwood_numbers_are_per_chip_and_its_devices_are_half_chips():
    hw = CATALOG["tpu-v7"]
    assert hw.peak("bf16").value == pytest.approx(2.307e15) and hw.peak("f8e4m3fn").value == pytest.approx(4.614e15)
    assert hw.hbm_bytes_per_s.value == pytest.approx(7.38e12) and hw.devices_per_chip == 2
    assert hw.detection.libtpu_prefix == "tpu7x" and hw.interconnect.torus_axes == 3
    assert lookup("tpu7x:4x4x4").interconnect.wraparound((4, 4, 4)) == (True, True, True)


@pytest.mark.parametrize("stats, name", [
    ({"device_name": "NVIDIA GB200"}, "gb200-nvl72"),
    ({"device_name": "NVIDIA GB300"}, "gb300-nvl72"),
    ({"device_name": "NVIDIA B300 SXM6 AC"}, "b300"),
    ({"device_name": "NVIDIA H800"}, "h800"),
    ({"device_name": "NVIDIA H800 80GB HBM3"}, "h800"),
    ({"device_name": "NVIDIA H20"}, "h20"),
    ({"device_name": "AMD Instinct MI325X", "device_vendor": "Advanced Micro Devices, Inc."}, "mi325x"),
    # The shorter names of older chips inside the new ones must not win, nor the other way round.
    ({"device_name": "NVIDIA B200"}, "b200"),
    ({"device_name": "NVIDIA H200"}, "h200"),
    ({"device_name": "NVIDIA H100 80GB HBM3"}, "h100"),
    ({"device_name": "AMD Instinct MI300X"}, "mi300x"),
])
def test_gpu_traces_are_detected_by_their_device_names(stats, name):
    hw = hardware_from_trace("gpu", {"/device:GPU:0": stats})
    assert hw.name == name and any(f"identified as {name}" in n for n in hw.notes)


@pytest.mark.parametrize("memory, name", [(256 * 1e9, "mi325x"), (192 * 1e9, "mi300x"), (206141652992, "mi300x")])
def test_mi325x_and_mi300x_share_a_fingerprint_and_the_hbm_size_decides(memory, name):
    stats = {"device_vendor": "AMD", "compute_cap_major": 9, "compute_cap_minor": 4, "core_count": 304,
             "memory_size": memory, "clock_rate": 2_100_000}
    hw = hardware_from_trace("gpu", {"/device:GPU:0": stats})
    assert hw.name == name
    assert any("agrees with the datasheet" in n for n in hw.notes)


def test_b300_fingerprint_and_h20_clock_check():
    stats = {"compute_cap_major": 10, "compute_cap_minor": 3, "core_count": 148}
    assert hardware_from_trace("gpu", {"/device:GPU:0": stats}).name == "b300"
    h20 = {"device_name": "NVIDIA H20", "compute_cap_major": 9, "compute_cap_minor": 0, "core_count": 78,
           "clock_rate": 1_980_000}
    notes = " ".join(hardware_from_trace("gpu", {"/device:GPU:0": h20}).notes)
    assert "agrees with the datasheet" in notes  # judged by H20's own per-SM rate, not H100's


@pytest.mark.parametrize("type_string", ["TPU7x", "TPU v7", "TPU v7x"])
def test_ironwood_traces_are_detected(type_string):
    hw = hardware_from_trace("tpu", {"/device:TPU:0": {"device_type_string": type_string}})
    assert hw.name == "tpu-v7"
    assert hw.peak("bf16").value == pytest.approx(2.307e15 / 2)  # a device is one of the chip's 2 TensorCores


def _collective(capsys, hardware: str) -> dict:
    assert main(["calc", "collective", "--op", "all-reduce", "--shape", "bf16[8192,8192]", "--mesh", "X=72",
                 "--axes", "X", "--hardware", hardware, "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_72_gpu_all_reduce_stays_on_nvlink_in_an_nvl72_rack(capsys):
    nvl72, hgx = _collective(capsys, "gb200-nvl72"), _collective(capsys, "b200")
    assert nvl72["link"] == "nvlink" and nvl72["group_size"] == 72
    assert nvl72["bandwidth_bytes_per_s"] == pytest.approx(9e11)
    assert hgx["link"] == "dcn"  # nine 8-GPU nodes: the inter-node network
    assert nvl72["time_s"] < hgx["time_s"] / 10
    # Ring all-reduce: 2 (n-1)/n V bytes through each GPU's link.
    volume = 8192 * 8192 * 2
    assert nvl72["bandwidth_s"] == pytest.approx(2 * 71 / 72 * volume / 9e11, rel=1e-6)


def test_plan_and_placement_see_the_72_wide_domain():
    hw = lookup("gb200-nvl72:2x72")
    assert placement_for(hw).shape == (72,)
    assert chip_numbers(hw).slice_chips == 72
    assert chip_numbers(lookup("b300")).slice_chips == 8
