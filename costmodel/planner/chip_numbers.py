"""The few chip numbers the planner needs, read from a `Hardware` value with their sources.

The book's parallelism formulas (ch. 5) use C, the chip's FLOP/s, and W_ici, the
bidirectional bandwidth of one mesh axis: both one-way links of the axis together.
"""

from __future__ import annotations

from typing import Any

import math
from dataclasses import dataclass

from ...base.errors import InputError
from ..chips.hardware import Hardware, Quantity


@dataclass(frozen=True)
class ChipNumbers:
    """Per-chip ceilings in SI units (FLOP/s, bytes/s, bytes), each with its source."""

    name: str
    flops_per_s: Quantity
    hbm_bytes_per_s: Quantity
    hbm_bytes: Quantity | None
    ici_axis_bytes_per_s: Quantity | None
    dcn_bytes_per_s: Quantity | None
    topology: tuple[int, ...]
    torus_axes: int
    domain_chips: int = 1
    kind: str = "tpu"
    link_kind: str = "ici"
    max_torus: tuple[int, ...] = ()

    @property
    def alpha(self) -> float | None:
        """ICI arithmetic intensity C / W_ici in FLOPs per byte (book ch. 5: 2550 on v5p)."""
        w = self.ici_axis_bytes_per_s
        return None if w is None else self.flops_per_s.value / w.value

    @property
    def slice_chips(self) -> int | None:
        """Chips joined by ICI/NVLink: a TPU's named topology (else its pod), a GPU's NVLink domain."""
        if self.topology and self.kind == "tpu":
            return math.prod(self.topology)
        return self.domain_chips if self.domain_chips > 1 else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "topology": list(self.topology), "torus_axes": self.torus_axes,
                     "flops_per_s": self.flops_per_s.to_json(),
                     "hbm_bytes_per_s": self.hbm_bytes_per_s.to_json()}
        for key in ("hbm_bytes", "ici_axis_bytes_per_s", "dcn_bytes_per_s"):
            q = getattr(self, key)
            out[key] = None if q is None else q.to_json()
        if self.ici_axis_bytes_per_s is not None:
            out["alpha_flops_per_byte"] = self.alpha
        return out


def chip_numbers(hw: Hardware, compute_dtype: str = "bf16") -> ChipNumbers:
    """Collect the planner's inputs from `hw` for matmuls in `compute_dtype`."""
    ic = hw.interconnect
    ici = None
    if ic.link_bytes_per_s is not None and ic.kind == "ici":
        link = ic.link_bytes_per_s
        ici = Quantity(link.value * ic.links_per_axis, "bytes/s", link.source,
                       f"{ic.links_per_axis} x one-way link bandwidth per axis")
    elif ic.link_bytes_per_s is not None:
        ici = ic.link_bytes_per_s
    return ChipNumbers(name=hw.name, flops_per_s=hw.peak(compute_dtype), hbm_bytes_per_s=hw.hbm_bytes_per_s,
                       hbm_bytes=hw.hbm_bytes, ici_axis_bytes_per_s=ici, dcn_bytes_per_s=ic.dcn_bytes_per_s,
                       topology=tuple(hw.topology), torus_axes=max(ic.torus_axes, 1),
                       domain_chips=_domain(hw), kind=hw.kind, link_kind=ic.kind,
                       max_torus=tuple(ic.max_torus))


def mesh_axes(chips: ChipNumbers) -> int:
    """Physical axes a slice-wide collective runs over: the topology's axes longer than 1."""
    if chips.kind != "tpu":
        return 1
    if chips.topology:
        return max(1, min(chips.torus_axes, sum(1 for n in chips.topology if n > 1)))
    return chips.torus_axes


def require_hbm(chips: ChipNumbers) -> float:
    if chips.hbm_bytes is None:
        raise InputError(f"hardware {chips.name} has no HBM capacity in the catalog",
                         hint="pick a chip with stated HBM capacity")
    return chips.hbm_bytes.value


def slice_shape(n_chips: int, axes: int) -> tuple[int, ...]:
    """A power-of-two slice with `n_chips` chips over `axes` axes, longest first (4x2, 4x4, ...)."""
    exp = max(0, int(math.ceil(math.log2(max(n_chips, 1)) - 1e-9)))
    dims = [1] * max(axes, 1)
    for i in range(exp):
        dims[i % len(dims)] *= 2
    return tuple(sorted(dims, reverse=True))


def format_shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(n) for n in shape)


def _domain(hw: Hardware) -> int:
    """GPUs joined by NVLink/xGMI: the catalog's domain, or fewer where a NODESxGPUS topology names
    smaller racks (gb200-nvl72:4x64, racks of 64)."""
    size = max(hw.interconnect.domain_size, 1)
    if hw.kind == "gpu" and len(hw.topology) == 2:
        size = min(size, hw.topology[1])
    return size
