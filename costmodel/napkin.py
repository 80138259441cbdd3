"""Napkin math for `audit calc`, on the same functions the auditor uses.

`matmul` builds the `OpCost` of a dense [M,K] x [K,N] dot and asks `roofline.expect` and
`achievable.achievable_time`;
`collective` places a logical mesh group with `mesh_layout.mesh_group` and asks
`collectives.collective_time`. So a prediction made here and the audit of the
compiled op cannot disagree.
"""

from __future__ import annotations

from typing import Any

import re

from ..base.errors import UsageError
from ..parsers.hlo.dtypes import DTYPE_BITS, canonical_dtype
from .network.collectives import collective_time
from .chips.hardware import Hardware
from .ops.complex_flops import CONTRACTION_NOTE, contraction_factor, is_complex
from .ops.compute import dot_flops
from .costs import OpCost
from .achievable import achievable_time, collective_seconds
from .roofline import expect, flops_peak, memory_rate, per_device_rates
from .network.mesh_layout import mesh_group

_SHAPE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*\[\s*([0-9,\s]*)\]\s*$")


def dtype_name(text: str) -> str:
    """An HLO element type for `text` ("bf16", "int8", "float32", ...); UsageError if unknown."""
    name = canonical_dtype(text)
    if name is None:
        raise UsageError(f"unknown dtype {text!r}", hint="e.g. bf16, f32, f64, c64, int8, fp8")
    return name


def parse_shape(text: str) -> tuple[str, tuple[int, ...], float]:
    """`bf16[2048,8192]` -> ("bf16", (2048, 8192), 33554432.0 bytes)."""
    match = _SHAPE.match(text)
    if not match:
        raise UsageError(f"cannot read shape {text!r}", hint="write it as DTYPE[d0,d1,...], e.g. bf16[2048,8192]")
    dtype = dtype_name(match.group(1))
    dims_text = [d.strip() for d in match.group(2).split(",") if d.strip()]
    dims = tuple(int(d) for d in dims_text)
    if any(d <= 0 for d in dims):
        raise UsageError(f"shape {text!r} has a dimension that is not positive")
    elements = 1
    for d in dims:
        elements *= d
    return dtype, dims, elements * DTYPE_BITS[dtype] / 8


def parse_axes(text: str) -> list[str]:
    axes = [a.strip() for a in text.split(",") if a.strip()]
    if not axes:
        raise UsageError(f"cannot read axes {text!r}", hint="name mesh axes, e.g. Y or X,Y")
    return axes


PRECISIONS = ("default", "high", "highest", "dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3", "dot_bf16_bf16_f32",
              "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6", "dot_f32_f32_f32")
"""What `--precision` accepts: JAX's precision levels and the dot algorithms XLA names."""


def matmul(m: int, k: int, n: int, dtype: str, hw: Hardware, precision: str = "default") -> dict[str, Any]:
    """Roofline and achievable time of [M,K] x [K,N] -> [M,N] on one chip: 2MKN FLOPs (8MKN real
    FLOPs for complex operands), (MK + KN + MN) elements. `precision` prices an f32 matmul as the auditor prices a dot
    asking for it (default: what JAX runs on the platform: TF32 on GPUs that have it, one bf16
    pass on TPU)."""
    if min(m, k, n) < 1:
        raise UsageError(f"matmul sizes must be positive, got M={m} K={k} N={n}")
    asked = precision.strip().lower()
    if asked not in PRECISIONS:
        raise UsageError(f"unknown precision {precision!r}", hint=f"choose one of: {', '.join(PRECISIONS)}")
    dt = dtype_name(dtype)
    size = DTYPE_BITS[dt] / 8
    flops = float(dot_flops((m, k), (1,), m * n)) * contraction_factor(dt)  # the auditor's dot rule
    read, written = size * (m * k + k * n), size * m * n
    cost = OpCost(flops=flops, bytes_read=read, bytes_written=written, dtype=dt, precision=asked,
                  gemm=(1, m, n, k), notes=(CONTRACTION_NOTE,) if is_complex(dt) else ())
    exp = expect(cost, hw)
    reach = achievable_time(cost, exp, hw)
    peak = flops_peak(cost, hw)
    hbm = per_device_rates(hw, dt)[1]
    own, used = hw.own_peak_key(dt), hw.peak_key(dt)
    fallback = ([f"{hw.name} states no {own} peak: {dt} is priced at its {used} peak"] if own != used else [])
    return {
        "op": "matmul", "m": m, "k": k, "n": n, "dtype": dt, "precision": asked, "hardware": hw.name,
        "flops": flops, "bytes": read + written, "intensity": flops / (read + written),
        # The ridge of the roof the matmul is priced on (TF32 for an f32 dot JAX runs on TF32).
        "ridge_intensity": hw.ridge(dt) if exp.peak_flops_per_s is None else exp.peak_flops_per_s / hbm,
        "peak_flops_per_s": exp.peak_flops_per_s,
        "peak_flops_source": peak.source, "peak_flops_note": peak.note,
        "hbm_bytes_per_s": hbm,
        "memory_level": exp.memory_level, "memory_bytes_per_s": memory_rate(hw, read + written)[2],
        "memory_source": memory_rate(hw, read + written)[1].source,
        "compute_s": exp.compute_s, "memory_s": exp.memory_s,
        "overhead_s": exp.overhead_s,
        "time_s": exp.expected_s, "bound_by": exp.bound_by, "notes": fallback + list(exp.reasons),
        "achievable_s": reach.seconds, "achievable_compute_s": reach.compute_s,
        "achievable_memory_s": reach.memory_s, "achievable_source": reach.source,
        "achievable_notes": list(reach.notes),
    }


def collective(op: str, shape: str, mesh: dict[str, int], axes: list[str], hw: Hardware,
               wraparound: str = "auto") -> dict[str, Any]:
    """Time of collective `op` on the array `shape` (volume V as one device of the group sees it)
    over mesh `axes`, the mesh laid on `hw`'s topology."""
    dtype, dims, volume = parse_shape(shape)
    placement = mesh_group(mesh, axes, hw)
    ct = collective_time(op, volume, placement, hw, wraparound)
    out = ct.to_json()
    if hw.achievable is not None:
        seconds, used = collective_seconds(ct, hw.achievable, hw)
        out.update(achievable_s=seconds, achievable_source="; ".join(used) or "the roofline's own terms")
    else:
        out.update(achievable_s=ct.time_s, achievable_source=f"roofline: {hw.name} states no achievable figures")
    out.update(op=ct.kind, shape=f"{dtype}[{','.join(map(str, dims))}]", hardware=hw.name,
               topology=list(hw.topology), mesh=dict(mesh), axes=list(axes),
               devices=list(placement.devices), leaves_domain=placement.leaves_domain)
    return out
