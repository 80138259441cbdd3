"""`audit hardware` as text: the catalog as a table, and every number of one chip with unit and source.

A figure that is an estimate (not published or measured) says so beside its source, and one a user
gave (a hardware file of theirs, or `--set`) is marked `user`, its source."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..costmodel.chips.hardware import Hardware, Quantity
from ..costmodel.units import bytes_per_s, human, number


def catalog_table(entries: Sequence[Hardware], cpu: Hardware | None, files: Mapping[str, str] | None = None) -> str:
    """One row per entry, and this machine's CPU (or how to measure it); `files`: name -> the
    user's file an entry comes from (AUDIT_HARDWARE_PATH), the others being the catalog's own."""
    files = files or {}
    rows = [_row(hw) + [files.get(hw.name, "catalog")] for hw in entries]
    rows.append(_row(cpu) + ["calibrated"] if cpu is not None else
                ["cpu", "cpu", "-", "-", "-", "measured on first use (audit hardware show cpu)", "calibrated"])
    header = ["name", "kind", "bf16 TFLOP/s", "HBM GB/s", "HBM GB", "interconnect", "from"]
    return _table(header, rows)


def source_label(q: Quantity) -> str:
    """Where a figure comes from, and `estimate` when it is one: `catalog`, `catalog, estimate`, `user`."""
    return f"{q.source}, estimate" if q.estimate and q.source != "user" else q.source


def describe(hw: Hardware, path: str | None = None) -> str:
    """A person's view of one Hardware value; `path`: the user's file it was read from."""
    lines = [f"{hw.name}  ({hw.vendor} {hw.kind}, source: {hw.source})"]
    if path:
        lines.append(_line("file", path))
    if hw.topology:
        wraps = hw.interconnect.wraparound(hw.topology)
        shape = "x".join(map(str, hw.topology))
        lines.append(_line("topology", shape) + (
            f"  wraparound per axis: {', '.join('yes' if w else 'no' for w in wraps)}"
            if hw.kind == "tpu" else ""))
    for key, q in hw.quantities().items():
        lines.append(_line(key, f"{_value(q):>16}  [{source_label(q)}] {q.note}"))
    net = hw.interconnect
    lines.append(_line("interconnect", _interconnect(hw)))
    if net.node_size or net.nics_per_node:
        lines.append(_line("scale-out network", f"{net.node_size or '?'} devices per node, "
                           f"{net.nics_per_node or '?'} NICs per node"))
    if net.torus_axes:
        lines.append(_line("torus", f"{net.torus_axes} axes, {net.links_per_axis} links per axis, "
                     f"max {'x'.join(map(str, net.max_torus))}, wraparound rule: {net.wraparound_rule} "
                     f"(min {net.wraparound_min})"))
    if hw.mxu_tile:
        lines.append(_line("matrix unit tile", f"{hw.mxu_tile[0]}x{hw.mxu_tile[1]}"))
    lines.extend(f"  note: {n}" for n in hw.notes)
    return "\n".join(lines)


def _line(label: str, text: str) -> str:
    return f"  {label:<32} {text}"


def _value(q: Quantity) -> str:
    if not math.isfinite(q.value):
        return "unknown"
    return human(q.value, q.unit)


def _row(hw: Hardware) -> list[str]:
    hbm = hw.hbm_bytes.value / 1e9 if hw.hbm_bytes is not None else math.nan
    return [hw.name, hw.kind, number(hw.peak("bf16").value / 1e12), number(hw.hbm_bytes_per_s.value / 1e9),
            number(hbm), _interconnect(hw)]


def _interconnect(hw: Hardware) -> str:
    net = hw.interconnect
    link = net.link_bytes_per_s
    speed = bytes_per_s(link.value) if link is not None and math.isfinite(link.value) else "?"
    if net.kind == "ici":
        return f"ICI {net.torus_axes}D torus <= {'x'.join(map(str, net.max_torus))}, {speed}/link one-way"
    if net.kind in ("nvlink", "xgmi"):
        return f"{net.link_name} x{net.domain_size}, {speed}/GPU one-way"
    if net.kind == "host-memory":
        return f"host memory, {speed}"
    return "unknown"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    numeric = {2, 3, 4}

    def fmt(row: list[str]) -> str:
        cells = (c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
        return "  ".join(cells).rstrip()

    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, rows)])
