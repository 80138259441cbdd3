"""The calc and hardware tools: `audit calc matmul|collective --json` and `audit hardware list|show`,
through the functions those commands call."""

from __future__ import annotations

from typing import Any, Literal

from ..commands.hardware import show_json
from ..costmodel.chips.calibration import cached_cpu_hardware
from ..costmodel.chips.catalog import chips, entries
from ..costmodel.napkin import collective as collective_napkin
from ..costmodel.napkin import matmul as matmul_napkin
from ..costmodel.napkin import parse_axes
from ..costmodel.network.mesh_layout import parse_mesh
from ..base.errors import UsageError
from ..hardware_options import resolve_hardware
from ..orchestration.calibrate import cpu_hardware

JSON = dict[str, Any]
LISTED = ("peak_flops_per_s.bf16", "hbm_bytes_per_s", "hbm_bytes", "interconnect.link_bytes_per_s")
"""The figures `hardware list` shows of each entry (its table's columns), each with unit and source."""


def matmul_doc(m: int, k: int, n: int, dtype: str, precision: str, hardware: str) -> JSON:
    return matmul_napkin(m, k, n, dtype, resolve_hardware(hardware, ()), precision)


def collective_doc(op: str, shape: str, mesh: str, axes: str, hardware: str, wraparound: str) -> JSON:
    return collective_napkin(op, shape, parse_mesh(mesh), parse_axes(axes), resolve_hardware(hardware, ()),
                             wraparound)


def hardware_doc(action: Literal["list", "show"], name: str | None) -> JSON:
    if action == "list":
        return {"entries": catalog_rows(), "hardware": None}
    if not name:
        raise UsageError("hardware show needs a NAME[:TOPOLOGY] (e.g. tpu-v5e:8x4, h100:8, cpu)")
    if name.partition(":")[0].lower() == "cpu" and cached_cpu_hardware() is None:
        cpu_hardware()  # measured once, as `audit hardware show cpu` does, then read from its record
    return {"entries": None, "hardware": show_json(resolve_hardware(name, ()))}


def catalog_rows() -> list[JSON]:
    """`audit hardware list`'s rows: each entry, where it comes from, and the figures its table shows."""
    known = entries()
    rows = []
    cpu = cached_cpu_hardware()
    for hw in [*chips(), *([cpu] if cpu is not None else [])]:
        entry = known.get(hw.name)
        origin = "calibrated" if hw is cpu else (entry.path if entry is not None and entry.site else "catalog")
        figures = hw.quantities()
        rows.append({"name": hw.name, "kind": hw.kind, "vendor": hw.vendor, "from": origin,
                     "figures": {k: figures[k].to_json() for k in LISTED if k in figures}})
    return rows
