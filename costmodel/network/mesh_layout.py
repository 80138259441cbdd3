"""A logical mesh laid on the physical topology, for `audit calc` and the planner.

Mesh axes are laid on physical axes in order, an outer mesh axis taking the strided
part of a physical axis it shares; the group a collective over some mesh axes forms is
then placed like any other group.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import gcd, prod
from typing import Sequence

from ...base.errors import AuditError, UsageError
from ..chips.hardware import Hardware
from .topology import GroupPlacement, check_fits, place_group, place_groups


def parse_mesh(mesh: str | Mapping[str, int] | None, *,
               error: type[AuditError] = UsageError) -> dict[str, int]:
    """`X=8,Y=4` (or a mapping) -> {"X": 8, "Y": 4}; {} for none.

    `error` is the error to raise: a mesh typed on the command line is a usage error, one in
    a workload's description is an input error.
    """
    if not mesh:
        return {}
    if isinstance(mesh, str):
        text = mesh
        pairs = [part.partition("=") for part in text.split(",")]
        if any(not sep for _, sep, _ in pairs):
            raise error(f"cannot read mesh {text!r}", hint="write it as NAME=SIZE,..., e.g. X=8,Y=4")
        items = [(name, size) for name, _, size in pairs]
    else:
        items = [(str(k), str(v)) for k, v in mesh.items()]
        text = ",".join(f"{k}={v}" for k, v in items)
    out: dict[str, int] = {}
    for name, size in items:
        name, size = name.strip(), size.strip()
        if not name or not size.isdigit() or int(size) < 1:
            raise error(f"cannot read mesh {text!r}: every axis needs a name and a positive size",
                        hint="write it as NAME=SIZE,..., e.g. X=8,Y=4")
        if name in out:
            raise error(f"mesh {text!r} names axis {name!r} twice")
        out[name] = int(size)
    return out


def mesh_group(mesh: dict[str, int], axes: list[str], hw: Hardware) -> GroupPlacement:
    """The group of device 0 for a collective over `axes` of a logical mesh (all its groups
    run at once, so links shared between them are counted).

    Mesh axes are laid on physical axes in order (the first mesh axis on x); a mesh axis
    smaller than what is left of a physical axis takes its outer part, a larger one
    continues on the next physical axis. Without a named topology the mesh is the slice.
    """
    _check_mesh(mesh, axes)
    sizes = list(mesh.values())
    shape = tuple(hw.topology) if hw.topology else _mesh_shape(sizes, hw)
    if prod(shape) != prod(sizes):
        raise UsageError(f"mesh {_mesh_text(mesh)} has {prod(sizes)} devices but topology "
                         f"{'x'.join(map(str, shape))} has {prod(shape)}",
                         hint="make the mesh cover the slice")
    if hw.kind != "tpu":
        return place_group(_mesh_ids_flat(sizes, [list(mesh).index(a) for a in axes]), hw)
    check_fits(hw, shape)
    hw_placed = hw.with_topology(shape)
    layout = _lay_mesh(sizes, shape)
    chosen = {list(mesh).index(a) for a in axes}
    rest = set(range(len(sizes))) - chosen
    offsets = _group_coords(sizes, rest, layout, len(shape))
    members = _group_coords(sizes, chosen, layout, len(shape))
    groups = [[tuple(m + o for m, o in zip(p, off)) for p in members] for off in offsets]
    coords = {_coord_to_id(c, shape): c for g in groups for c in g}
    group = place_groups([[_coord_to_id(c, shape) for c in g] for g in groups], hw_placed, coords)
    if hw.topology:
        return group
    note = f"slice taken to be the mesh: {'x'.join(map(str, shape))}"
    return GroupPlacement(group.kind, group.devices, group.axes, group.domains, group.notes + (note,))


def _check_mesh(mesh: dict[str, int], axes: list[str]) -> None:
    if not mesh:
        raise UsageError("the mesh is empty", hint="e.g. --mesh X=8,Y=4")
    bad = [f"{k}={v}" for k, v in mesh.items() if not isinstance(v, int) or v < 1]
    if bad:
        raise UsageError(f"mesh axis sizes must be positive integers: {', '.join(bad)}")
    unknown = [a for a in axes if a not in mesh]
    if unknown or not axes:
        raise UsageError(f"collective axes {axes} must name mesh axes of {_mesh_text(mesh)}",
                         hint=f"one or more of {', '.join(mesh)}")
    if len(set(axes)) != len(axes):
        raise UsageError(f"collective axes {axes} name an axis twice")


def _mesh_text(mesh: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in mesh.items())


def _mesh_shape(sizes: list[int], hw: Hardware) -> tuple[int, ...]:
    """Physical slice for a mesh with no named topology: one mesh axis per torus axis,
    trailing mesh axes folded into the last torus axis when there are more of them."""
    rank = max(hw.interconnect.torus_axes, 1)
    head, tail = sizes[:rank - 1], sizes[rank - 1:]
    return tuple(head) + ((prod(tail),) if tail else ())


def _lay_mesh(sizes: list[int], shape: Sequence[int]) -> list[list[tuple[int, int, int]]]:
    """For each mesh axis, the (physical axis, stride, extent) pieces it occupies."""
    left = list(shape)  # what remains of each physical axis, filled outermost first
    axis = 0
    layout: list[list[tuple[int, int, int]]] = []
    for size in sizes:
        pieces = []
        remaining = size
        while remaining > 1:
            while axis < len(left) and left[axis] == 1:
                axis += 1
            if axis >= len(left):
                raise UsageError(f"mesh axis of size {size} does not fit the topology {tuple(shape)}")
            take = gcd(remaining, left[axis])
            if take == 1:
                raise UsageError(f"mesh axis of size {size} does not tile the topology {tuple(shape)}",
                                 hint="mesh axis sizes must divide the physical axes")
            left[axis] //= take
            pieces.append((axis, left[axis], take))  # stride = what is left inside it
            remaining //= take
        layout.append(pieces)
    return layout


def _group_coords(sizes: list[int], chosen: set[int], layout: list[list[tuple[int, int, int]]],
                  rank: int) -> list[tuple[int, ...]]:
    """Physical coordinates of the devices that differ from device 0 only along `chosen`."""
    points = [[0] * rank]
    for m, pieces in enumerate(layout):
        if m not in chosen:
            continue
        for axis, stride, extent in pieces:
            points = [p[:axis] + [p[axis] + k * stride] + p[axis + 1:] for p in points
                      for k in range(extent)]
    return [tuple(p) for p in points]


def _coord_to_id(coord: Sequence[int], shape: Sequence[int]) -> int:
    out, scale = 0, 1
    for c, d in zip(coord, shape):
        out += c * scale
        scale *= d
    return out


def _mesh_ids_flat(sizes: list[int], chosen: list[int]) -> list[int]:
    """Device ids of device 0's group when the mesh is laid row-major on device ids."""
    strides = [prod(sizes[i + 1:]) for i in range(len(sizes))]
    ids = [0]
    for m in chosen:
        ids = [i + k * strides[m] for i in ids for k in range(sizes[m])]
    return sorted(ids)
