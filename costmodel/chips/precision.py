"""Which peak prices a dot: its operands' dtype, the precision it asks for, and the chip.

A dot states how its f32 operands are multiplied either with a dot algorithm
(`algorithm=dot_tf32_tf32_f32`, `dot_bf16_bf16_f32_x3`, ...: the element type the operands
are rounded to, and how many such passes make one product) or, older, with
`operand_precision={default|high|highest}`, which each platform maps its own way:

- NVIDIA and AMD GPUs with a TF32 matrix mode (A100, H100, H200, B200, MI300X): DEFAULT and
  HIGH run on TF32 tensor cores (JAX's default), HIGHEST runs true f32. A GPU without one
  (MI355X) runs every f32 dot at the f32 rate.
- TPU: the MXU multiplies bf16; DEFAULT is one bf16 pass, HIGH three (bf16_3x), HIGHEST six
  (bf16_6x), so an f32 dot runs at the bf16 peak divided by the passes.
- CPU: f32 at the f32 rate whatever is asked.

An algorithm names the passes exactly: `dot_bf16_bf16_f32_xN` is N bf16 passes,
`dot_tf32_tf32_f32_x3` three TF32 passes, `dot_f32_f32_f32` true f32 (six bf16 passes on TPU,
which has no f32 matrix unit). Operands that are not f32 are priced at their own dtype.

Complex operands run on the units of their parts' type: a c64 dot as an f32 one (TF32 tensor cores
at default precision on a GPU that has them, as cuBLAS's CGEMM runs when XLA allows TF32), a c128
dot as an f64 one. f64 runs on the FP64 matrix units where the chip states them (NVIDIA's FP64
tensor cores, AMD's FP64 matrix cores: `peak_flops.f64_matrix`), else on its FP64 vector units;
a TPU has no f64 units, and its emulation is priced as an estimate (`Hardware.f64_without_rate`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ...parsers.hlo.dtypes import real_part
from .hardware import F64_EMULATION_PASSES, Hardware, Quantity

_TPU_PASSES = {"default": 1, "high": 3, "highest": 6}
_ALGORITHM = re.compile(r"dot_(?P<a>[a-z0-9_]+?)_(?P=a)_(?P<acc>f16|bf16|f32|f64)(?:_x(?P<n>\d+))?$")


def matmul_peak(hw: Hardware, dtype: str, precision: str) -> Quantity:
    """Peak FLOP/s per chip of a dot on `dtype` operands asking for `precision` (an algorithm
    name or default/high/highest; "" = default); its note says which rule applied."""
    mode = matmul_mode(hw, dtype, precision)
    if mode.plain:
        return hw.peak(dtype or "bf16")
    peak = hw.peak(mode.base)
    if mode.passes == 1:
        return replace(peak, note=f"{mode.why}; {peak.note}" if peak.estimate else mode.why)
    return Quantity(peak.value / mode.passes, peak.unit, "catalog, derived",
                    f"{mode.why}, {mode.base} peak / {mode.passes}", kind="estimate" if mode.estimate else "")


@dataclass(frozen=True)
class MatmulMode:
    """How a chip's matrix units run a dot: `passes` products in the `base` peak key's mode.
    `plain`: the operands' own dtype prices it (not an f32 dot, or a CPU)."""

    base: str
    passes: int
    why: str
    plain: bool = False
    estimate: bool = False  # the passes are an estimate (f64 emulated on a TPU)


def matmul_mode(hw: Hardware, dtype: str, precision: str) -> MatmulMode:
    """The matrix-unit mode of a dot on `dtype` operands asking for `precision`: the peak key it
    runs at and how many passes make one product (see the module docstring)."""
    real = real_part(dtype)
    if real != dtype:
        mode = matmul_mode(hw, real, precision)
        return replace(mode, why=f"{dtype} operands (complex, {real} parts): {mode.why}")
    if dtype == "f64":
        return _f64(hw)
    if dtype != "f32" or hw.kind == "cpu":
        return MatmulMode(dtype or "bf16", 1, f"{dtype or 'bf16'} operands", plain=True)
    asked = (precision or "default").lower()
    found = _ALGORITHM.match(asked)
    if found is not None:
        base, passes = found["a"], int(found["n"] or 1)
        if base == "f32":
            return _f32(hw, asked)
        if base == "tf32" and "tf32" not in hw.peak_flops:
            base = "bf16" if hw.kind == "tpu" else "f32"
            passes = 3 if hw.kind == "tpu" else 1
        return _passes(base, passes, asked)
    if hw.kind == "tpu":
        return _passes("bf16", _TPU_PASSES.get(asked, 1), f"precision {asked}")
    if hw.kind == "gpu" and asked in ("default", "high") and "tf32" in hw.peak_flops:
        return MatmulMode("tf32", 1, f"f32 dot at precision {asked} runs on TF32 tensor cores "
                          "(JAX's default on GPU)")
    return _f32(hw, f"precision {asked}")


def _passes(base: str, passes: int, why: str) -> MatmulMode:
    if passes == 1:
        return MatmulMode(base, 1, f"{why}: one {base} pass")
    return MatmulMode(base, passes, f"{why}: {passes} {base} passes")


def _f32(hw: Hardware, why: str) -> MatmulMode:
    if hw.kind == "tpu":
        return _passes("bf16", 6, f"{why}: true f32 on the MXU")
    return MatmulMode("f32", 1, f"{why}: true f32")


def _f64(hw: Hardware) -> MatmulMode:
    """An f64 dot: on the FP64 matrix units where the chip states them, else its FP64 vector units;
    emulated with f32 pairs on a TPU (an estimate)."""
    if hw.kind == "tpu":
        return MatmulMode("bf16", F64_EMULATION_PASSES,
                          f"f64 dot: {hw.name} has no f64 units, XLA emulates it with pairs of f32 (estimate: "
                          f"at least {F64_EMULATION_PASSES} bf16 passes)", estimate=True)
    if hw.kind == "cpu":
        return MatmulMode("f64", 1, "f64 operands", plain=True)
    if "f64_matrix" in hw.peak_flops:
        return MatmulMode("f64_matrix", 1, "f64 dot on the FP64 matrix units (tensor cores / matrix cores)")
    return MatmulMode("f64", 1, "f64 dot on the FP64 vector units (no FP64 matrix rate stated)")
