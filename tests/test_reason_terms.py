"""Reasons speak in the op's own terms: a matmul of its M, N and K, a convolution of its batch,
positions, channels and kernel; never of "tokens" for an op no transformer layer was recognised in."""

from __future__ import annotations

import pytest

from audit.costmodel.chips.catalog import CATALOG
from audit.costmodel.ops.module import cost_module
from audit.costmodel.roofline import expect
from audit.optable.verdict import flag_reasons
from audit.orchestration.pipeline import analyse_profile
from audit.parsers.hlo.text import parse_hlo_text
from conftest import shared_fixture


def _reasons(text: str, name: str, chip: str = "h100") -> list[str]:
    hw = CATALOG[chip]
    c = cost_module(parse_hlo_text(text))[name]
    e = expect(c, hw)
    return flag_reasons(c, e, 10 * (e.expected_s or 0.0), hw)


def test_a_memory_bound_matmul_speaks_of_m_n_k():
    reasons = _reasons("""HloModule m
ENTRY e {
  x = bf16[8,4096] parameter(0)
  w = bf16[4096,4096] parameter(1)
  ROOT d = bf16[8,4096] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", "d")
    line = next(r for r in reasons if "matmul" in r)
    assert "a matmul M=8 N=4,096 K=4,096" in line and "smallest dimension, M=8, limits it" in line
    assert not any("token" in r for r in reasons)


def test_a_memory_bound_convolution_speaks_of_its_convolution():
    reasons = _reasons("""HloModule m
ENTRY e {
  x = bf16[64,128,128,8] parameter(0)
  k = bf16[3,3,8,16] parameter(1)
  ROOT c = bf16[64,128,128,16] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}""", "c")
    line = next(r for r in reasons if "convolution" in r)
    assert "batch 64 and 128x128 output positions, 8 -> 16 channels, kernel 3x3" in line
    assert not any("token" in r for r in reasons)


@pytest.mark.parametrize("capture", ["conv3d-8gpu", "gemm", "attention"])
def test_real_captures_never_speak_of_tokens(capture):
    report = analyse_profile(shared_fixture(f"gpu-mi300x/{capture}.xplane.pb")).to_json()
    assert not [r for o in report["ops"] for r in o["reasons"] if "token" in r]
    if capture == "conv3d-8gpu":
        conv = next(o for o in report["ops"] if o["name"] == "cudnn-conv.1")
        assert any("a convolution over batch 1 and 34x31x53 output positions" in r for r in conv["reasons"])
