"""Replica groups of HLO collectives, from any of XLA's spellings, as explicit device groups.

Spellings (as `replica_groups=` prints them):
- explicit lists: `{{0,1},{2,3}}`; `{}` means "all devices" and reads as ();
- iota lists: `[2,4]<=[8]` or `[2,4]<=[4,2]T(1,0)`: arange(prod(reshape dims)) reshaped to
  the reshape dims, transposed by the permutation, then reshaped to [groups, group size];
- mesh axes: `mesh['x'=2,'y'=4], device_ids=([2,4]<=[4,2]T(1,0)) {'y'}` (older XLA prints
  `@mesh<x=2,y=4>(devices=...) {y}`): the devices of the mesh, grouped along the named axes;
  an axis may be a sub-axis `y:(1)2` (pre-size 1, size 2).
"""

from __future__ import annotations

import re
from math import prod
from typing import Sequence

import numpy as np

from ...base.errors import InputError
from ...base.ranges import MAX_DEVICES

Groups = tuple[tuple[int, ...], ...]

_IOTA = re.compile(r"\[([\d,\s]*)\]<=\[([\d,\s]*)\](?:T\(([\d,\s]*)\))?")
_MESH = re.compile(
    r"(?:@mesh<(?P<axes1>[^>]*)>(?:\((?P<dev1>(?:[^()]|\([^()]*\))*)\))?"
    r"|mesh\[(?P<axes2>[^\]]*)\](?:,?\s*device_ids=\((?P<dev2>(?:[^()]|\([^()]*\))*)\))?"
    r"|maximal_mesh\[device_id=(?P<maximal>\d+)\])"
    r"\s*\{(?P<refs>[^}]*)\}"
)
_SHORT_IOTA = re.compile(r"\[([\d,\s]*)\](?:T\(([\d,\s]*)\))?")
_AXIS_REF = re.compile(r"^([^:\s]+)(?::\((\d+)\)(\d+))?$")


def _unquote(name: str) -> str:
    return name.strip().strip("'\"")


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.replace(" ", "").split(",") if t]


def iota_groups(num_groups: int, group_size: int, reshape_dims: Sequence[int],
                transpose_perm: Sequence[int] = ()) -> Groups:
    """Expand an iota replica-group list (`[num_groups,group_size]<=[reshape_dims]T(perm)`)."""
    dims = list(reshape_dims) or [num_groups * group_size]
    _check_sizes([num_groups, group_size, *dims], f"iota replica groups [{num_groups},{group_size}]<={dims}")
    _check_devices(num_groups * group_size, f"[{num_groups},{group_size}]")
    _check_devices(prod(dims), f"<={dims}")
    perm = list(transpose_perm) or list(range(len(dims)))
    if sorted(perm) != list(range(len(dims))):
        raise InputError(f"iota replica groups: T{tuple(perm)} is not a permutation of {len(dims)} dims")
    if prod(dims) != num_groups * group_size:
        raise InputError(f"iota replica groups: [{num_groups},{group_size}] does not match "
                         f"{prod(dims)} devices of <={dims}")
    devices = np.arange(prod(dims)).reshape(dims).transpose(perm).reshape(num_groups, group_size)
    return tuple(tuple(int(d) for d in row) for row in devices)


def _explicit(text: str) -> Groups:
    inner = text.strip()[1:-1].strip()
    if not inner:
        return ()
    if not (inner.startswith("{") and inner.endswith("}")):
        raise InputError(f"replica groups: expected {{{{...}},...}}, got {_short(text)}")
    groups = tuple(tuple(_ints(g)) for g in re.findall(r"\{([^{}]*)\}", inner))
    return check_groups(groups)


def check_groups(groups: Groups) -> Groups:
    """`groups` when every device id is one a real cluster has. **Raises:** `InputError`."""
    if any(not g for g in groups):  # `{{}}`: a group of no device, which no collective runs on
        raise InputError(f"replica groups: group {next(i for i, g in enumerate(groups) if not g)} holds no "
                         "device (`{}` alone means all devices)")
    ids = [d for g in groups for d in g]
    _check_devices(len(ids), f"{len(groups)} groups")
    if ids and not 0 <= min(ids) <= max(ids) < MAX_DEVICES:
        raise InputError(f"replica groups: device id {max(ids) if max(ids) >= MAX_DEVICES else min(ids)} is out "
                         f"of range (0 to {MAX_DEVICES:,})")
    return groups


def _check_sizes(sizes: Sequence[int], spelled: str) -> None:
    """Refuse a group, mesh axis or sub-axis of no devices (or fewer): every one holds at least one."""
    if any(s < 1 for s in sizes):
        raise InputError(f"{spelled}: a size of {min(sizes)}; every group and mesh axis holds at least one device")


def _check_devices(count: int, spelled: str) -> None:
    """Refuse a device count beyond any cluster before an array of that many ids is made."""
    if count > MAX_DEVICES:
        raise InputError(f"replica groups: {spelled} spans {count:,} devices, more than any cluster "
                         f"({MAX_DEVICES:,})")


def _short(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")


def _iota(match: re.Match[str]) -> Groups:
    shape = _ints(match.group(1))
    if len(shape) != 2:
        raise InputError(f"iota replica groups: expected [groups,size], got [{match.group(1)}]")
    return iota_groups(shape[0], shape[1], _ints(match.group(2)), _ints(match.group(3) or ""))


def _device_array(text: str | None, axis_sizes: list[int]) -> np.ndarray:
    """The mesh's device ids, shaped by its axes (iota when not given)."""
    count = prod(axis_sizes)
    _check_sizes(axis_sizes, f"mesh replica groups: a mesh of {axis_sizes}")
    _check_devices(count, f"a mesh of {axis_sizes}")
    if not text:
        return np.arange(count).reshape(axis_sizes)
    text = text.strip().removeprefix("devices=")
    iota = _IOTA.fullmatch(text)
    short = _SHORT_IOTA.fullmatch(text)
    if iota:
        ids = np.arange(count).reshape(_ints(iota.group(2)))
        ids = ids.transpose(_ints(iota.group(3) or "") or None)
    elif short:  # `[8,4]T(1,0)`: iota over these dims, transposed (the reshape is implied)
        ids = np.arange(count).reshape(_ints(short.group(1))).transpose(_ints(short.group(2) or "") or None)
    else:
        flat = re.sub(r"^\[[\d,]*\]", "", text)  # "[2,4]0,1,..." lists dims then ids
        ids = np.array(_ints(flat))
    if ids.size != count:
        raise InputError(f"mesh device_ids: {ids.size} ids for a mesh of {count} devices")
    return ids.reshape(axis_sizes)


def _axis_split(size: int, refs: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Split one mesh axis so each referenced sub-axis is its own dimension.

    `refs` are (pre_size, size) pairs in the order they are referenced; returns the new
    dimension sizes and, for each ref in that order, the index of its dimension.
    """
    order = sorted(range(len(refs)), key=lambda i: refs[i][0])
    dims: list[int] = []
    where: dict[int, int] = {}
    covered = 1
    for i in order:
        pre, sub = refs[i]
        if pre % covered or pre < covered:
            raise InputError(f"mesh sub-axes overlap: ({pre}){sub} on an axis of {size}")
        if pre > covered:
            dims.append(pre // covered)
        where[i] = len(dims)
        dims.append(sub)
        covered = pre * sub
    if size % covered:
        raise InputError(f"mesh sub-axis does not divide its axis of size {size}")
    if covered < size:
        dims.append(size // covered)
    return dims, [where[i] for i in range(len(refs))]


def mesh_groups(axes: Sequence[tuple[str, int]], refs: Sequence[tuple[str, int, int] | str],
                device_ids: np.ndarray | None = None) -> Groups:
    """Groups of devices that vary along the referenced mesh axes (all others fixed).

    `axes` are (name, size) in mesh order; `refs` are axis names or (name, pre_size, size)
    sub-axes; `device_ids` is the device array shaped like the mesh (iota if None).
    """
    names = [n for n, _ in axes]
    sizes = [s for _, s in axes]
    _check_sizes(sizes, f"mesh replica groups: mesh {dict(axes)}")
    _check_sizes([n for r in refs if not isinstance(r, str) for n in r[1:]],
                 f"mesh replica groups: sub-axes {[r for r in refs if not isinstance(r, str)]}")
    _check_devices(prod(sizes), f"a mesh of {sizes}")
    ids = np.arange(prod(sizes)).reshape(sizes) if device_ids is None else device_ids
    per_axis: dict[int, list[tuple[int, int]]] = {}
    ref_axis: list[int] = []
    for ref in refs:
        name, pre, sub = (ref, 0, 0) if isinstance(ref, str) else ref
        if name not in names:
            raise InputError(f"mesh replica groups: axis {name!r} is not in mesh {names}")
        a = names.index(name)
        per_axis.setdefault(a, []).append((pre or 1, sub or sizes[a]))
        ref_axis.append(a)
    new_sizes: list[int] = []
    ref_dims: dict[int, list[int]] = {}
    for a, size in enumerate(sizes):
        dims, where = _axis_split(size, per_axis[a]) if a in per_axis else ([size], [])
        ref_dims[a] = [len(new_sizes) + w for w in where]
        new_sizes.extend(dims)
    seen: dict[int, int] = {}
    grouped = []
    for a in ref_axis:
        grouped.append(ref_dims[a][seen.get(a, 0)])
        seen[a] = seen.get(a, 0) + 1
    rest = [d for d in range(len(new_sizes)) if d not in grouped]
    group_size = prod(new_sizes[d] for d in grouped)
    arranged = ids.reshape(new_sizes).transpose(rest + grouped).reshape(-1, group_size)
    return tuple(tuple(int(d) for d in row) for row in arranged)


def _mesh(match: re.Match[str]) -> Groups:
    if match.group("maximal") is not None:
        return check_groups(((int(match.group("maximal")),),))
    axes_text = match.group("axes1") if match.group("axes1") is not None else match.group("axes2")
    axes = []
    for item in filter(None, (a.strip() for a in axes_text.split(","))):
        name, _, size = item.partition("=")
        axes.append((_unquote(name), int(size)))
    ids = _device_array(match.group("dev1") or match.group("dev2"), [s for _, s in axes])
    refs: list[tuple[str, int, int] | str] = []
    for item in filter(None, (r.strip() for r in match.group("refs").split(","))):
        ref = _AXIS_REF.match(item)
        if not ref:
            raise InputError(f"mesh replica groups: cannot read axis {item!r}")
        name = _unquote(ref.group(1))
        refs.append((name, int(ref.group(2)), int(ref.group(3))) if ref.group(2) else name)
    return mesh_groups(axes, refs, ids)


def parse_replica_groups(text: str) -> Groups:
    """Parse any spelling of `replica_groups=` into explicit groups; `{}` gives ()."""
    text = text.strip()
    if text.startswith("{"):
        return _explicit(text)
    iota = _IOTA.fullmatch(text)
    if iota:
        return _iota(iota)
    mesh = _MESH.fullmatch(text)
    if mesh:
        return _mesh(mesh)
    raise InputError(f"replica groups: cannot read {text!r}")


def parse_source_target_pairs(text: str) -> tuple[tuple[int, int], ...]:
    """`{{0,1},{1,2}}` -> ((0, 1), (1, 2))."""
    pairs = _explicit(text)
    if any(len(p) != 2 for p in pairs):
        raise InputError(f"source_target_pairs: expected pairs, got {text!r}")
    return tuple((p[0], p[1]) for p in pairs)
