"""Constructs XLA emits for real GPU and TPU programs: FFT, TopK custom calls, host offload, and the
f32 dot precision that decides which peak prices a matmul."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from jaxlib import _hlo

from audit.costmodel.chips.catalog import CATALOG
from audit.costmodel.ops.module import cost_module
from audit.orchestration.pipeline import analyse_hlo
from audit.parsers.hlo.files import load_hlo_file
from audit.parsers.hlo.proto import read_hlo_proto_bytes

DATA = Path(__file__).resolve().parent / "data"
HLO = DATA / "hlo"


@pytest.mark.parametrize("path", sorted(DATA.rglob("*.hlo")), ids=lambda p: p.name)
def test_every_hlo_text_file_in_the_test_data_parses_with_xlas_own_parser(path):
    assert _hlo.hlo_module_from_text(path.read_text()) is not None


def _both_formats(name: str):
    """The module as HLO text and as the HloModuleProto XLA serializes from it."""
    text = load_hlo_file(HLO / name)
    proto = read_hlo_proto_bytes(_hlo.hlo_module_from_text((HLO / name).read_text())
                                 .as_serialized_hlo_module_proto())
    return text, proto


def _ops(report: dict) -> dict[str, dict]:
    return {o["name"]: o for o in report["ops"]}


# --- FFT ------------------------------------------------------------------------------------

def test_fft_flops_are_5_n_log2_n_per_transform_in_text_and_proto():
    for module in _both_formats("fft.hlo"):
        costs = cost_module(module)
        n = 4096
        assert costs["f"].flops == 5 * 4096 * 12 * 4096  # 4096 transforms of length 4096
        assert costs["i"].flops == costs["f"].flops
        assert costs["rf"].flops == costs["f"].flops  # 4096 real rows, each of length 4096
        assert costs["ir"].flops == costs["f"].flops
        assert costs["f2"].flops == 5 * (64 * 64) * math.log2(64 * 64) * 16  # 2-D: N = 64 x 64
        assert costs["f"].bytes == 2 * n * n * 8  # reads and writes c64[4096,4096]
        assert costs["rf"].bytes_read == n * n * 4 and costs["rf"].bytes_written == n * 2049 * 8


def test_an_fft_is_compute_or_memory_bound_never_free():
    report = analyse_hlo(HLO / "fft.hlo", hardware="h100").to_json()
    for name in ("f", "i", "rf", "ir", "f2"):
        op = _ops(report)[name]
        assert op["flops"] > 0 and op["expected_s"] >= op["bytes"] / 3.35e12


# --- TopK -----------------------------------------------------------------------------------

def test_topk_custom_calls_cost_what_the_topk_op_costs():
    report = analyse_hlo(HLO / "topk.hlo", hardware="h100").to_json()
    ops = _ops(report)
    assert report["summary"]["unmodeled_ops"] == 0
    comparisons = 1024 * 32768 * 3  # n log2(k), k = 8
    for name in ("cpu", "gpu", "op"):
        assert ops[name]["flops"] == comparisons
        assert ops[name]["bytes"] == 1024 * 32768 * 4 + 2 * 1024 * 8 * 4
        assert ops[name]["expected_s"] == pytest.approx(ops["op"]["expected_s"])


# --- host offload ---------------------------------------------------------------------------

def test_a_copy_to_host_memory_takes_pcie_time_on_h100():
    report = analyse_hlo(HLO / "host_offload.hlo", hardware="h100").to_json()
    ops = _ops(report)
    size = 32768 * 1024 * 4  # 128 MiB
    pcie = CATALOG["h100"].interconnect.pcie_bytes_per_s.value
    for name in ("out", "back"):  # to S(5) and back
        assert ops[name]["expected_s"] == pytest.approx(size / pcie, rel=0.01)
        assert ops[name]["memory_level"] == "host link"
        assert any("host link" in r and "PCIe" in r for r in ops[name]["reasons"])
    assert 1.5e-3 < ops["out"]["expected_s"] < 2.5e-3  # about 2 ms, not HBM's ~40 us
    for name in ("host", "in"):
        assert ops[name]["expected_s"] == 0.0
    assert report["summary"]["expected_s"] == pytest.approx(2 * size / pcie, rel=0.01)


def test_the_host_link_is_the_chips_own():
    for chip in ("tpu-v6e", "tpu-v5e", "mi300x"):
        op = _ops(analyse_hlo(HLO / "host_offload.hlo", hardware=chip).to_json())["out"]
        link = CATALOG[chip].interconnect.pcie_bytes_per_s
        assert op["expected_s"] >= 32768 * 1024 * 4 / link.value


# --- dot precision --------------------------------------------------------------------------

FLOPS_8192 = 2 * 8192 ** 3


@pytest.mark.parametrize("fmt", [0, 1], ids=["text", "proto"])
def test_h100_f32_dot_default_and_tf32_price_at_tf32_highest_at_f32(tmp_path, fmt):
    path = HLO / "dot_precision.hlo"
    if fmt:
        path = tmp_path / "dot_precision.hlo.pb"
        path.write_bytes(_hlo.hlo_module_from_text((HLO / "dot_precision.hlo").read_text())
                         .as_serialized_hlo_module_proto())
    ops = _ops(analyse_hlo(path, hardware="h100").to_json())
    peaks = CATALOG["h100"].peak_flops
    for name in ("default", "high", "tf32"):
        assert ops[name]["peak_flops_per_s"] == peaks["tf32"].value
        assert ops[name]["compute_s"] == pytest.approx(FLOPS_8192 / peaks["tf32"].value)
    for name in ("highest", "true_f32"):
        assert ops[name]["peak_flops_per_s"] == peaks["f32"].value
    assert ops["bf16_3x"]["peak_flops_per_s"] == pytest.approx(peaks["bf16"].value / 3)
    assert ops["bf16_6x"]["peak_flops_per_s"] == pytest.approx(peaks["bf16"].value / 6)


def test_tpu_f32_dots_are_one_three_and_six_bf16_passes():
    ops = _ops(analyse_hlo(HLO / "dot_precision.hlo", hardware="tpu-v5e").to_json())
    bf16 = CATALOG["tpu-v5e"].peak_flops["bf16"].value
    assert ops["default"]["peak_flops_per_s"] == bf16
    assert ops["high"]["peak_flops_per_s"] == pytest.approx(bf16 / 3)
    assert ops["highest"]["peak_flops_per_s"] == pytest.approx(bf16 / 6)
    assert ops["bf16_6x"]["peak_flops_per_s"] == pytest.approx(bf16 / 6)
    assert ops["true_f32"]["peak_flops_per_s"] == pytest.approx(bf16 / 6)


def test_a_gpu_without_tf32_runs_f32_dots_at_the_f32_rate():
    ops = _ops(analyse_hlo(HLO / "dot_precision.hlo", hardware="mi355x").to_json())
    f32 = CATALOG["mi355x"].peak_flops["f32"].value
    for name in ("default", "high", "highest", "tf32", "true_f32"):
        assert ops[name]["peak_flops_per_s"] == f32


def test_precision_never_changes_the_flops_only_the_peak():
    ops = _ops(analyse_hlo(HLO / "dot_precision.hlo", hardware="h100").to_json())
    assert {ops[n]["flops"] for n in ("default", "high", "highest", "tf32", "bf16_3x", "bf16_6x", "true_f32")} \
        == {FLOPS_8192}
