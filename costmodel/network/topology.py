"""Where devices sit: TPU torus coordinates, GPU NVLink/xGMI domains, or one CPU host.

A `Placement` maps device ids to physical coordinates for one chip type and
slice shape; `place_group` says which physical axes a collective's group spans,
how long its ring is on each axis, whether that ring closes with a wraparound
link, how many hops its longest path takes, and whether it leaves the ICI slice
or NVLink/xGMI domain (`mesh_layout.mesh_group` does the same for a logical mesh).

Default TPU device order is x fastest, then y, then z (id = x + X*y + X*Y*z);
pass explicit coordinates where the real assignment is known.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod
from typing import Any, Callable, Sequence

from ...base.errors import UsageError
from ..chips.hardware import Hardware

AXIS_NAMES = ("x", "y", "z", "w")
KINDS = ("torus", "switch", "host")


@dataclass(frozen=True)
class Placement:
    """Physical layout of one slice (TPU), node (GPU) or host (CPU)."""

    kind: str  # one of KINDS
    shape: tuple[int, ...]  # torus dims; (domain_size,) for a switch; (devices,) for a host
    wraparound: tuple[bool, ...]  # per torus axis
    assumed: str = ""  # how the shape was chosen, when the user did not name it

    @property
    def size(self) -> int:
        return prod(self.shape)

    def coord(self, device: int) -> tuple[int, ...]:
        """Coordinates of `device` within its slice/domain, default device order."""
        local = device % self.size
        out = []
        for dim in self.shape:
            out.append(local % dim)
            local //= dim
        return tuple(out)

    def domain(self, device: int) -> int:
        """Which slice (TPU) or NVLink/xGMI domain (GPU) a device id falls in."""
        return device // self.size


@dataclass(frozen=True)
class AxisSpan:
    """The group's extent along one physical axis."""

    name: str
    size: int  # distinct positions of the group on this axis (its ring size)
    length: int  # the physical axis length
    wraparound: bool  # the group's ring closes with a wraparound link
    hops: int  # hops on the longest path along this axis
    shared_by: int = 1  # concurrent groups (this one included) whose rings use the same links

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "length": self.length,
                "wraparound": self.wraparound, "hops": self.hops, "shared_by": self.shared_by}


@dataclass(frozen=True)
class GroupPlacement:
    """Where one collective group runs, as the time formulas need it."""

    kind: str  # one of KINDS
    devices: tuple[int, ...]
    axes: tuple[AxisSpan, ...]  # torus axes with more than one position; empty otherwise
    domains: int  # ICI slices / NVLink or xGMI domains the group touches
    notes: tuple[str, ...] = ()
    path_hops: int | None = None  # longest source-target path, for point-to-point transfers

    @property
    def group_size(self) -> int:
        return len(self.devices)

    @property
    def leaves_domain(self) -> bool:
        return self.domains > 1

    @property
    def hops(self) -> int:
        """Hops on the group's longest path (torus), or ring steps (switch)."""
        if self.path_hops is not None:
            return self.path_hops
        if self.kind == "torus" and not self.leaves_domain:
            return sum(a.hops for a in self.axes)
        if self.kind == "host":
            return 0
        return max(self.group_size - 1, 0)

    @property
    def wraparound(self) -> bool | None:
        """True when every spanned axis closes its ring; None off a torus."""
        if self.kind != "torus" or not self.axes:
            return None
        return all(a.wraparound for a in self.axes)


def torus_wraparound(shape: Sequence[int], hw: Hardware) -> tuple[bool, ...]:
    """Which axes of a TPU slice have wraparound links (book ch. 2, "TPU Networking"),
    by the chip's rule in the catalog; an axis of 1 or 2 chips has no ring to close."""
    rule = hw.interconnect.wraparound(tuple(shape))
    return tuple(bool(w) and d > 2 for w, d in zip(rule, shape))


def placement_for(hw: Hardware, devices: int | None = None) -> Placement:
    """The physical layout for `hw`: its named topology, or a default that fits `devices`."""
    if hw.kind == "tpu":
        shape, assumed = _tpu_shape(hw, devices)
        return Placement("torus", shape, torus_wraparound(shape, hw), assumed)
    if hw.kind == "gpu":
        size = hw.interconnect.domain_size
        if hw.topology:
            size = min(size, hw.topology[-1]) if size > 1 else hw.topology[-1]
        return Placement("switch", (max(size, 1),), ())
    return Placement("host", (max(devices or 1, 1),), ())


def _tpu_shape(hw: Hardware, devices: int | None) -> tuple[tuple[int, ...], str]:
    if hw.topology:
        check_fits(hw, hw.topology)
        return tuple(hw.topology), ""
    n = max(devices or 1, 1)
    pod = hw.interconnect.max_torus
    if pod and n > prod(pod):  # more devices than one pod holds: full pods joined over DCN
        return tuple(pod), f"{n} devices exceed one {hw.name} pod: taken as full pods joined over DCN"
    shape = _near_cube(n, max(hw.interconnect.torus_axes, 1))
    return shape, (f"topology assumed {'x'.join(map(str, shape))} for {n} devices; "
                   f"name it as --hardware {hw.name}:{'x'.join('ABC'[:len(shape)])}")


def _near_cube(n: int, rank: int) -> tuple[int, ...]:
    """Split n into `rank` factors as evenly as possible, largest first (8 -> 4x2, 64 -> 4x4x4)."""
    dims = [1] * rank
    remaining = n
    factors = []
    f = 2
    while remaining > 1:
        while remaining % f == 0:
            factors.append(f)
            remaining //= f
        f += 1
    for f in sorted(factors, reverse=True):
        dims[dims.index(min(dims))] *= f
    return tuple(sorted(dims, reverse=True))


def check_fits(hw: Hardware, shape: Sequence[int]) -> None:
    ic = hw.interconnect
    if ic.torus_axes and len(shape) > ic.torus_axes:
        raise UsageError(f"topology {'x'.join(map(str, shape))} has {len(shape)} axes but "
                         f"{hw.name} has a {ic.torus_axes}D torus")
    if ic.max_torus and any(d > m for d, m in zip(sorted(shape, reverse=True),
                                                    sorted(ic.max_torus, reverse=True))):
        raise UsageError(f"topology {'x'.join(map(str, shape))} is larger than a {hw.name} pod "
                         f"({'x'.join(map(str, ic.max_torus))})")


def place_group(group: Sequence[int], hw: Hardware,
                coords: dict[int, tuple[int, ...]] | None = None) -> GroupPlacement:
    """Place one collective group (device ids) on `hw`'s topology.

    `coords` gives explicit physical coordinates per device (as an AOT compile for a TPU
    topology knows them); otherwise the default device order of the platform is used.
    """
    devices = tuple(int(d) for d in group)
    if not devices:
        raise UsageError("a collective group needs at least one device")
    if len(set(devices)) != len(devices):
        raise UsageError(f"collective group {list(devices)} names a device twice")
    chips_per = max(hw.devices_per_chip, 1)
    placement = placement_for(hw, max(devices) // chips_per + 1)
    notes = (placement.assumed,) if placement.assumed else ()
    if placement.kind == "torus":
        return _place_torus(devices, placement, hw, coords, notes)
    domains = len({placement.domain(d) for d in devices})
    return GroupPlacement(placement.kind, devices, (), domains, notes)


def _place_torus(devices: tuple[int, ...], placement: Placement, hw: Hardware,
                 coords: dict[int, tuple[int, ...]] | None, notes: tuple[str, ...]) -> GroupPlacement:
    if coords is not None:
        missing = [d for d in devices if d not in coords]
        if missing:
            raise UsageError(f"no coordinates given for devices {missing[:8]}")
        points = [tuple(coords[d]) for d in devices]
        shape = placement.shape if hw.topology else _bounding_shape(points)
        wrap = torus_wraparound(shape, hw)
        domains = 1
    else:
        chips = [d // max(hw.devices_per_chip, 1) for d in devices]  # cores of a chip share its links
        points = [placement.coord(c) for c in chips]
        shape, wrap = placement.shape, placement.wraparound
        domains = len({placement.domain(c) for c in chips})
    axes = tuple(span for span in (_axis_span(i, shape, wrap, points) for i in range(len(shape)))
                 if span.size > 1)
    if prod(a.size for a in axes) != len(set(points)):
        notes += ("group is not a full sub-grid of the torus: time assumes its bounding rings",)
    return GroupPlacement("torus", devices, axes, domains, notes)


def place_pairs(pairs: Sequence[Sequence[int]], hw: Hardware,
                coords: dict[int, tuple[int, ...]] | None = None) -> GroupPlacement:
    """Place a collective-permute: the devices of its (source, target) pairs, with the
    hop count of the longest source-target path (shortest way round where a ring wraps)."""
    if not pairs:
        raise UsageError("a collective-permute needs at least one source-target pair")
    devices = sorted({int(d) for pair in pairs for d in pair})
    group = place_group(devices, hw, coords)
    if group.kind != "torus" or group.leaves_domain:
        return replace(group, path_hops=1)
    placement, where = _locator(hw, max(devices), coords)
    longest = max(_distance(where(a), where(b), placement) for a, b in pairs)
    return replace(group, path_hops=longest)


def _locator(hw: Hardware, largest: int, coords: dict[int, tuple[int, ...]] | None,
             ) -> tuple[Placement, Callable[[int], tuple[int, ...]]]:
    chips_per = max(hw.devices_per_chip, 1)
    placement = placement_for(hw, largest // chips_per + 1)
    if coords is not None:
        return placement, lambda d: tuple(coords[d])
    return placement, lambda d: placement.coord(d // chips_per)


def place_groups(groups: Sequence[Sequence[int]], hw: Hardware,
                 coords: dict[int, tuple[int, ...]] | None = None) -> GroupPlacement:
    """Place the first of a collective's concurrent groups, counting per spanned axis how
    many groups run their rings over the same links (interleaved groups share bandwidth)."""
    first = place_group(groups[0], hw, coords)
    if first.kind != "torus" or first.leaves_domain or len(groups) < 2 or not first.axes:
        return first
    largest = max(d for g in groups for d in g)
    placement, where = _locator(hw, largest, coords)
    chips_per = max(hw.devices_per_chip, 1)
    home = placement.domain(groups[0][0] // chips_per)
    others = [[where(d) for d in g] for g in groups[1:_MAX_GROUPS]
              if coords is not None or all(placement.domain(d // chips_per) == home for d in g)]
    mine = [where(d) for d in groups[0]]
    axes = tuple(replace(a, shared_by=1 + sum(_shares(mine, theirs, AXIS_NAMES.index(a.name), a.wraparound)
                                              for theirs in others)) for a in first.axes)
    return replace(first, axes=axes)


_MAX_GROUPS = 4096  # enough to see every group of any real slice


def _segments(points: list[tuple[int, ...]], i: int) -> dict[tuple[int, ...], tuple[int, int]]:
    """Per line along axis i (keyed by the other coordinates): the extent the group covers."""
    out: dict[tuple[int, ...], tuple[int, int]] = {}
    for p in points:
        key = p[:i] + p[i + 1:]
        lo, hi = out.get(key, (p[i], p[i]))
        out[key] = (min(lo, p[i]), max(hi, p[i]))
    return out


def _shares(mine: list[tuple[int, ...]], theirs: list[tuple[int, ...]], i: int, ring: bool) -> bool:
    """True when the other group's ring uses a link of axis i that this group's ring uses."""
    other = _segments(theirs, i)
    for key, (lo, hi) in _segments(mine, i).items():
        if key in other and (ring or max(lo, other[key][0]) < min(hi, other[key][1])):
            return True
    return False


def _distance(a: tuple[int, ...], b: tuple[int, ...], placement: Placement) -> int:
    total = 0
    for i, (p, q) in enumerate(zip(a, b)):
        d = abs(p - q)
        if i < len(placement.wraparound) and placement.wraparound[i]:
            d = min(d, placement.shape[i] - d)
        total += d
    return total


def _bounding_shape(points: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(max(p[i] for p in points) + 1 for i in range(len(points[0])))


def _axis_span(i: int, shape: Sequence[int], wrap: Sequence[bool],
               points: list[tuple[int, ...]]) -> AxisSpan:
    values = sorted({p[i] for p in points})
    n, length = len(values), shape[i]
    closes = bool(wrap[i]) and n == length
    hops = n // 2 if closes else values[-1] - values[0]
    name = AXIS_NAMES[i] if i < len(AXIS_NAMES) else f"a{i}"
    return AxisSpan(name, n, length, closes, hops)
