"""Napkin math for `audit calc`, on the same functions the auditor uses.

`matmul` builds the `OpCost` of a dense [M,K] x [K,N] dot and asks `roofline.expect`;
`collective` places a logical mesh group with `mesh_layout.mesh_group` and asks
`collectives.collective_time`. So a prediction made here and the audit of the
compiled op cannot disagree.
"""

from __future__ import annotations

from typing import Any

import re

from ..errors import UsageError
from ..parsers.dtypes import DTYPE_BITS, canonical_dtype
from .network.collectives import collective_time
from .chips.hardware import Hardware
from .ops.compute import dot_flops
from .records import OpCost
from .roofline import expect, memory_rate, per_device_rates
from .network.mesh_layout import mesh_group

_SHAPE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*\[\s*([0-9,\s]*)\]\s*$")


def dtype_name(text: str) -> str:
    """An HLO element type for `text` ("bf16", "int8", "float32", ...); UsageError if unknown."""
    name = canonical_dtype(text)
    if name is None:
        raise UsageError(f"unknown dtype {text!r}", hint="e.g. bf16, f32, int8, fp8")
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


def matmul(m: int, k: int, n: int, dtype: str, hw: Hardware) -> dict[str, Any]:
    """Roofline of bf16[M,K] x [K,N] -> [M,N] on one chip: 2MKN FLOPs, (MK + KN + MN) elements."""
    if min(m, k, n) < 1:
        raise UsageError(f"matmul sizes must be positive, got M={m} K={k} N={n}")
    dt = dtype_name(dtype)
    size = DTYPE_BITS[dt] / 8
    flops = float(dot_flops((m, k), (1,), m * n))  # the auditor's dot rule
    read, written = size * (m * k + k * n), size * m * n
    exp = expect(OpCost(flops=flops, bytes_read=read, bytes_written=written, dtype=dt), hw)
    return {
        "op": "matmul", "m": m, "k": k, "n": n, "dtype": dt, "hardware": hw.name,
        "flops": flops, "bytes": read + written, "intensity": flops / (read + written),
        "ridge_intensity": hw.ridge(dt), "peak_flops_per_s": exp.peak_flops_per_s,
        "peak_flops_source": hw.peak(dt).source, "hbm_bytes_per_s": per_device_rates(hw, dt)[1],
        "memory_level": exp.memory_level, "memory_bytes_per_s": memory_rate(hw, read + written)[2],
        "memory_source": memory_rate(hw, read + written)[1].source,
        "compute_s": exp.compute_s, "memory_s": exp.memory_s,
        "overhead_s": exp.overhead_s,
        "time_s": exp.expected_s, "bound_by": exp.bound_by, "notes": list(exp.reasons),
    }


def collective(op: str, shape: str, mesh: dict[str, int], axes: list[str], hw: Hardware,
               wraparound: str = "auto") -> dict[str, Any]:
    """Time of collective `op` on the array `shape` (volume V as one device of the group sees it)
    over mesh `axes`, the mesh laid on `hw`'s topology."""
    dtype, dims, volume = parse_shape(shape)
    placement = mesh_group(mesh, axes, hw)
    ct = collective_time(op, volume, placement, hw, wraparound)
    out = ct.to_json()
    out.update(op=ct.kind, shape=f"{dtype}[{','.join(map(str, dims))}]", hardware=hw.name,
               topology=list(hw.topology), mesh=dict(mesh), axes=list(axes),
               devices=list(placement.devices), leaves_domain=placement.leaves_domain)
    return out
