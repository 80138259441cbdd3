"""The platform an HLO dump was compiled for: a GPU or TPU program is never priced as this CPU."""

from __future__ import annotations

import json
import shutil

import jax
import jax.numpy as jnp
import pytest
from jaxlib import _hlo

from audit.cli import main
from audit.base.errors import InputError
from audit.orchestration.pipeline import analyse_hlo
from audit.parsers.hlo.platform import platform_of
from audit.parsers.hlo.text import parse_hlo_text
from conftest import shared_fixture

H100_DUMP = "gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb"
H100_BEFORE = "gpu-h100-maxtext/module_0016.jit_train_step.before_optimizations.hlo.pb"
TPU_DUMP = "tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"

PLAIN = """HloModule plain

ENTRY main {
  a = f32[256,256]{1,0} parameter(0)
  ROOT e = f32[256,256]{1,0} exponential(a)
}
"""
CUBLAS = """HloModule gemm

ENTRY main {
  a = f32[256,256]{1,0} parameter(0)
  b = f32[256,256]{1,0} parameter(1)
  g = (f32[256,256]{1,0}, s8[4194304]{0}) custom-call(a, b), custom_call_target="__cublas$gemm", backend_config={"operation_queue_id":"0","gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"alpha_imag":0,"precision_config":{"operand_precision":["DEFAULT","DEFAULT"]},"epilogue":"DEFAULT"}}
  ROOT r = f32[256,256]{1,0} get-tuple-element(g), index=0
}
"""
TILED = """HloModule tiled

ENTRY main {
  a = bf16[256,256]{1,0:T(8,128)(2,1)} parameter(0)
  ROOT e = bf16[256,256]{1,0:T(8,128)(2,1)} exponential(a)
}
"""


@pytest.mark.parametrize("text", [PLAIN, CUBLAS, TILED])
def test_the_modules_parse_with_xlas_own_parser(text):
    assert _hlo.hlo_module_from_text(text) is not None


@pytest.mark.parametrize("text, name, kind, vendor, arch", [
    (PLAIN, "module_0001.jit_f.cpu_after_optimizations.txt", "cpu", "", None),
    (PLAIN, "module_0001.jit_f.sm_9.0_gpu_after_optimizations.txt", "gpu", "nvidia", (9, 0)),
    (PLAIN, "module_0001.jit_f.sm_8.0_gpu_after_optimizations.txt", "gpu", "nvidia", (8, 0)),
    (PLAIN, "module_0007.jit_step.gfx942_gpu_after_optimizations.txt", "gpu", "amd", (9, 4)),
    (PLAIN, "module_0007.jit_step.gfx950_gpu_after_optimizations.txt", "gpu", "amd", (9, 5)),
    (CUBLAS, "gemm.hlo", "gpu", "", None),
    (TILED, "tiled.hlo", "tpu", "", None),
    (PLAIN, "plain.hlo", "unknown", "", None),
])
def test_the_platform_comes_from_the_name_or_the_contents(text, name, kind, vendor, arch):
    found = platform_of(parse_hlo_text(text), name)
    assert (found.kind, found.vendor, found.arch) == (kind, vendor, arch)
    assert found.evidence


@pytest.mark.parametrize("dump, kind, suggests", [
    (H100_DUMP, "NVIDIA GPU", "h100"), (H100_BEFORE, "NVIDIA GPU", "h100"), (TPU_DUMP, "TPU", "tpu-v7"),
])
def test_a_real_accelerator_dump_without_hardware_exits_2_naming_it(capsys, dump, kind, suggests):
    assert main(["inspect", str(shared_fixture(dump)), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and kind in err and f"--hardware {suggests}" in err


def test_the_before_optimizations_dump_is_known_by_its_sibling(tmp_path):
    alone = tmp_path / "module_0016.jit_train_step.before_optimizations.hlo.pb"
    shutil.copy(shared_fixture(H100_BEFORE), alone)
    report = analyse_hlo(alone).to_json()  # nothing says GPU any more: priced as this CPU, with a warning
    assert any("this machine's CPU" in w for w in report["warnings"])
    shutil.copy(shared_fixture(H100_DUMP), tmp_path / shared_fixture(H100_DUMP).name)
    with pytest.raises(InputError, match="NVIDIA GPU"):
        analyse_hlo(alone).to_json()


def test_with_hardware_the_gpu_dump_is_priced_on_that_gpu(capsys):
    assert main(["inspect", str(shared_fixture(H100_DUMP)), "--hardware", "h100:4", "--json", "-", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["hardware"]["name"] == "h100" and report["summary"]["expected_s"] > 0


def test_a_cpu_dump_is_still_priced_on_this_machine(tmp_path):
    path = tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt"
    path.write_text(PLAIN)
    report = analyse_hlo(path).to_json()
    assert report["hardware"]["kind"] == "cpu"
    (line,) = [w for w in report["warnings"] if "--hardware" in w]
    assert "a CPU program: its file name says cpu_after_optimizations" in line


def test_a_cpu_program_is_known_by_its_xla_cpu_backend_config():
    # A matmul XLA compiled for this CPU: its fusion carries XLA:CPU's backend config.
    compiled = jax.jit(lambda a, b: jnp.tanh(a @ b).sum()).lower(jnp.ones((64, 64)), jnp.ones((64, 64))).compile()
    found = platform_of(parse_hlo_text(compiled.as_text()), "renamed.hlo")
    assert found.kind == "cpu" and "XLA:CPU backend config" in found.evidence


def test_a_hand_written_module_is_of_an_unknown_platform_not_a_cpu(tmp_path):
    path = tmp_path / "plain.hlo"
    path.write_text(PLAIN)
    # Nothing in it says CPU: --hardware h100 is not said to contradict the program.
    on_h100 = analyse_hlo(path, hardware="h100").to_json()
    assert not [w for w in on_h100["warnings"] if "compiled for" in w]
    alone = analyse_hlo(path).to_json()
    assert alone["hardware"]["kind"] == "cpu"  # priced somewhere, and the warning says what is not known
    (line,) = [w for w in alone["warnings"] if "--hardware" in w]
    assert "the platform the program was compiled for is unknown" in line and "compiled for a CPU" not in line
