"""Complex and f64 arithmetic priced on the units that run it, with its real FLOPs.

A complex multiply-add is 8 real FLOPs; c64 runs on the f32 units (TF32 tensor cores at JAX's
default precision on a GPU), c128 and f64 on the FP64 matrix units where the chip has them, and
a TPU, which has no f64 units, is priced as an estimate of its emulation.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from audit.cli import main
from audit.costmodel.chips.catalog import CATALOG
from audit.costmodel.chips.hardware import F64_EMULATION_PASSES
from audit.costmodel.ops.module import cost_module
from audit.orchestration.pipeline import analyse_hlo
from audit.parsers.hlo.text import parse_hlo_text

HLO = Path(__file__).parent / "data" / "hlo"
N = 4096


def _calc(capsys, dtype: str, hardware: str, *extra: str) -> dict:
    assert main(["calc", "matmul", "--m", str(N), "--k", str(N), "--n", str(N), "--dtype", dtype,
                 "--hardware", hardware, *extra, "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_c64_matmul_is_8_real_flops_per_multiply_add_on_the_tf32_units(capsys):
    out = _calc(capsys, "c64", "h100")
    assert out["flops"] == 8 * N ** 3  # ~550 GFLOP, not 2*N^3 = 137
    h100 = CATALOG["h100"]
    assert out["peak_flops_per_s"] == h100.peak_flops["tf32"].value  # not the bf16 peak
    assert out["compute_s"] == pytest.approx(8 * N ** 3 / h100.peak_flops["tf32"].value)
    assert any("8 real FLOPs" in n for n in out["notes"])
    # precision=highest: true f32 on the FP32 units.
    highest = _calc(capsys, "complex64", "h100", "--precision", "highest")
    assert highest["peak_flops_per_s"] == h100.peak_flops["f32"].value
    # A CPU runs it on its f32 units whatever is asked.
    assert _calc(capsys, "c64", "tpu-v5p")["peak_flops_per_s"] == CATALOG["tpu-v5p"].peak_flops["bf16"].value


@pytest.mark.parametrize("chip", ["a100", "h100", "h200", "b200", "mi300x", "mi355x"])
def test_f64_and_c128_matmuls_run_on_the_fp64_matrix_units(capsys, chip):
    hw = CATALOG[chip]
    matrix = hw.peak_flops["f64_matrix"]
    assert matrix.kind == "datasheet" and matrix.source
    f64 = _calc(capsys, "f64", chip)
    assert f64["flops"] == 2 * N ** 3 and f64["peak_flops_per_s"] == matrix.value
    assert hw.peak_flops["f64"].value <= matrix.value < hw.peak_flops["bf16"].value
    c128 = _calc(capsys, "c128", chip)
    assert c128["flops"] == 8 * N ** 3 and c128["peak_flops_per_s"] == matrix.value
    # What good kernels reach stays at or under the roof, and is said to be an estimate.
    assert matrix.value * 0.9 < hw.achievable.matmul_flops_per_s["f64_matrix"].value <= matrix.value
    assert "estimate" in c128["achievable_source"]


def test_b200_prices_f64_at_its_fp64_rate_not_its_f32_one(capsys):
    b200 = CATALOG["b200"]
    out = _calc(capsys, "f64", "b200")
    assert out["peak_flops_per_s"] == pytest.approx(37e12)  # HGX B200: 296 TFLOP/s FP64 per 8 GPUs
    assert b200.peak("f64").value == pytest.approx(37e12)
    assert b200.peak("f64").value < b200.peak("f32").value
    assert b200.peak("c128").value == b200.peak("f64").value and b200.peak("c64").value == b200.peak("f32").value


@pytest.mark.parametrize("chip", ["tpu-v5p", "tpu-v6e", "tpu-v7"])
def test_tpus_have_no_f64_units_and_say_the_emulation_is_an_estimate(capsys, chip):
    hw = CATALOG[chip]
    assert "f64" not in hw.peak_flops
    emulated = hw.peak("f64")
    assert emulated.kind == "estimate" and "no f64 units" in emulated.note
    assert emulated.value == pytest.approx(hw.peak_flops["bf16"].value / F64_EMULATION_PASSES)
    out = _calc(capsys, "f64", chip)
    per_device = hw.peak_flops["bf16"].value / F64_EMULATION_PASSES / hw.devices_per_chip
    assert out["peak_flops_per_s"] == pytest.approx(per_device)
    assert any("emulates it with pairs of f32" in n and "estimate" in n for n in out["notes"])


def test_a_zgemm_with_a_long_k_is_compute_bound_on_the_fp64_tensor_cores():
    # A c128 `__cublas$gemm` as XLA's GPU compiler writes it, K = 46080: on an A100 it runs on the
    # FP64 tensor cores (19.5 TFLOP/s) at 8 real FLOPs per multiply-add, ~25 ms, not the 1.9 ms a
    # bf16 tensor-core price of a quarter of its work gives (and not memory-bound).
    report = analyse_hlo(HLO / "zgemm-gpu.hlo", hardware="a100").to_json()
    ops = {o["name"]: o for o in report["ops"]}
    zgemm = ops["z"]
    assert zgemm["flops"] == 8 * 1152 * 1152 * 46080
    assert zgemm["bound_by"] == "compute"
    assert zgemm["peak_flops_per_s"] == 19.5e12
    assert zgemm["expected_s"] == pytest.approx(25.1e-3, rel=0.01)
    assert zgemm["expected_s"] <= zgemm["achievable_s"] < 1.1 * zgemm["expected_s"]
    assert ops["g"]["flops"] == 8 * N ** 3 and ops["g"]["peak_flops_per_s"] == 156e12  # c64: TF32
    assert ops["f"]["flops"] == 2 * N ** 3 and ops["f"]["peak_flops_per_s"] == 19.5e12  # f64: DMMA


def _compiled_hlo(fn, *args) -> str:
    return jax.jit(fn).lower(*args).compile().as_text()


def test_complex_elementwise_and_fft_count_real_flops_on_the_parts_units():
    # A real XLA program: complex multiply and add, and an FFT (CPU compile, x64 off: c64).
    x = jnp.ones((256, 512), jnp.complex64)
    text = _compiled_hlo(lambda a, b: (a * b + a, jnp.fft.fft(a)), x, x)
    module = parse_hlo_text(text)
    costs = cost_module(module)
    elements = 256 * 512
    # multiply (6) and add (2) per complex element: 8 real FLOPs.
    assert any(c.flops == 8 * elements and c.dtype == "c64" for name, c in costs.items() if "fft" not in name), \
        {n: (c.flops, c.transcendentals, c.dtype) for n, c in costs.items() if c.flops}
    # XLA's complex abs: 3 real FLOPs and a square root. JAX from 0.12 writes |z| as a scaled hypot of
    # real ops instead, so the op is read from a module that has it, as older JAX and XLA emit it.
    absolute = cost_module(parse_hlo_text(
        "HloModule m\n\nENTRY e {\n  p = c64[256,512]{1,0} parameter(0)\n"
        "  ROOT a = f32[256,512]{1,0} abs(p)\n}\n"))
    assert [(c.flops, c.transcendentals) for c in absolute.values() if c.flops] == [(3 * elements, elements)]
    fft = next(c for name, c in costs.items() if name.startswith("fft"))
    assert fft.dtype == "c64" and fft.flops == 5 * 512 * 9 * 256
    h100 = CATALOG["h100"]
    assert h100.peak(fft.dtype).value == h100.peak_flops["f32"].value  # FP32 vector units, not bf16 tensor cores
