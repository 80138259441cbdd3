"""Where a layout's axes sit on the network, and what their collectives cost at each level.

Axes are laid innermost-first on consecutive chips: TP on neighbouring chips (inside the
fastest domain), then CP, the expert-parallel part of DP, PP, and the rest of DP outermost,
the order Megatron-LM and Llama 3 use. The fast level is the NVLink/xGMI domain of a GPU
(`Interconnect.domain_size` GPUs: 8, or 72 on NVL72-class systems) or the ICI slice of a TPU
(its named topology); beyond it, the per-chip scale-out network (`dcn_bytes_per_s`: the
inter-node NICs of a GPU, DCN between TPU slices). A group that spans both levels runs the
hierarchical algorithm: the part inside the domain on the fast links, the part across it on
the scale-out network with the volume the inner step left, each priced by the book's formulas
in `network.collectives` (torus rings on ICI with their wraparounds and shared links).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...base.errors import InputError
from ..chips.hardware import Hardware
from ..network.collectives import collective_time
from ..network.topology import AXIS_NAMES, AxisSpan, GroupPlacement, torus_wraparound


@dataclass(frozen=True)
class Priced:
    """One collective's seconds per network level (level name -> s), and what it moved."""

    kind: str
    volume_bytes: float
    seconds: dict[str, float]
    group: int
    inside: int  # members inside one fast domain

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())


@dataclass
class Network:
    """The physical placement of one layout: axis name -> size, innermost first."""

    hw: Hardware
    dims: list[tuple[str, int]]
    chips: int
    domain: int = 0
    fast: str = ""
    slow: str = ""
    shape: tuple[int, ...] = ()
    pieces: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    problem: str = ""
    _cache: dict[tuple[str, float, tuple[str, ...]], Priced] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ic = self.hw.interconnect
        self.domain = fast_domain(self.hw, self.chips)
        self.fast, self.slow = ic.link_name, ic.scale_out_name
        if self.hw.kind == "tpu":
            self.shape = tuple(self.hw.topology) if self.hw.topology and \
                math.prod(self.hw.topology) == self.domain else _slice_shape(self.hw, self.domain)
            self._lay_torus()

    def stride(self, name: str) -> int:
        out = 1
        for dim, size in self.dims:
            if dim == name:
                return out
            out *= size
        raise KeyError(name)

    def size(self, names: tuple[str, ...]) -> int:
        return math.prod(s for d, s in self.dims if d in names)

    def inside(self, name: str) -> int:
        """Distinct positions of axis `name` within one fast domain."""
        size, stride = dict(self.dims)[name], self.stride(name)
        if stride >= self.domain:
            return 1
        return min(size, max(1, -(-self.domain // stride)))

    def split(self, names: tuple[str, ...]) -> tuple[int, int]:
        """(members inside one domain, domains) of a group over the axes `names`."""
        group = self.size(names)
        n_in = math.prod(self.inside(n) for n in names if dict(self.dims)[n] > 1)
        n_in = max(1, min(n_in, group))
        return n_in, max(1, -(-group // n_in))  # a domain that does not divide the group: round up

    def price(self, kind: str, volume: float, names: tuple[str, ...]) -> Priced:
        """Seconds per level for collective `kind` of volume V over the axes `names`."""
        key = (kind, volume, names)
        if key not in self._cache:
            self._cache[key] = self._price(kind, volume, names)
        return self._cache[key]

    def _price(self, kind: str, volume: float, names: tuple[str, ...]) -> Priced:
        group = self.size(names)
        if group <= 1 or volume <= 0:
            return Priced(kind, volume, {}, group, group)
        if kind == "collective-permute":
            return self._permute(volume, names[0])
        n_in, n_out = self.split(names)
        seconds: dict[str, float] = {}
        if n_in > 1:  # all-reduce keeps V inside; the others gather or scatter V there too
            seconds[self.fast] = self._time(kind, volume / (n_out if kind == "all-to-all" else 1),
                                            self._inner(names, n_in))
        if n_out > 1:
            outer_volume = volume if kind == "all-to-all" else volume / n_in
            seconds[self.slow] = self._time(kind, outer_volume, self._outer(n_out))
        return Priced(kind, volume, seconds, group, n_in)

    def price_dispatch(self, per_copy: float, copies: float, names: tuple[str, ...]) -> Priced:
        """An MoE dispatch (or combine): each token goes to `copies` experts spread evenly over the
        group. Across domains a token crosses the scale-out network once per remote domain it
        needs, then fans out on the fast links (the hierarchical dispatch of DeepEP)."""
        key = ("dispatch", per_copy * copies, names)
        if key in self._cache:
            return self._cache[key]
        group = self.size(names)
        n_in, n_out = self.split(names)
        seconds: dict[str, float] = {}
        if group > 1 and per_copy > 0:
            if n_in > 1:
                seconds[self.fast] = self._time("all-to-all", per_copy * copies, self._inner(names, n_in))
            if n_out > 1:
                remote = (n_out - 1) * (1 - (1 - 1 / n_out) ** copies)  # distinct other domains per token
                # priced as an all-to-all whose share leaving the device is `remote` copies
                volume = per_copy * remote * n_out / (n_out - 1)
                seconds[self.slow] = self._time("all-to-all", volume, self._outer(n_out))
        self._cache[key] = priced = Priced("all-to-all", per_copy * copies, seconds, group, n_in)
        return priced

    def _permute(self, volume: float, name: str) -> Priced:
        stride, size = self.stride(name), dict(self.dims)[name]
        crosses = stride * size > self.domain  # some neighbouring stages sit in different domains
        if crosses:
            placement = self._outer(2)
            level = self.slow
        elif self.hw.kind == "tpu":
            axis, _, _ = self.pieces[name][0]
            span = AxisSpan(AXIS_NAMES[axis], 2, self.shape[axis], False, 1)
            placement = GroupPlacement("torus", (0, 1), (span,), 1, path_hops=1)
            level = self.fast
        else:
            placement, level = GroupPlacement("switch", (0, 1), (), 1), self.fast
        return Priced("collective-permute", volume, {level: self._time("collective-permute", volume, placement)},
                      2, 1 if crosses else 2)

    def _time(self, kind: str, volume: float, placement: GroupPlacement) -> float:
        return collective_time(kind, volume, placement, self.hw).time_s

    def _outer(self, n: int) -> GroupPlacement:
        kind = "torus" if self.hw.kind == "tpu" else "switch"
        return GroupPlacement(kind, tuple(range(n)), (), n)

    def _inner(self, names: tuple[str, ...], n_in: int) -> GroupPlacement:
        if self.hw.kind != "tpu":
            return GroupPlacement("switch", tuple(range(n_in)), (), 1)
        return GroupPlacement("torus", tuple(range(n_in)), self._spans(names), 1)

    # --- TPU slices: each axis' inner part laid on the torus, innermost first ---------------

    def _lay_torus(self) -> None:
        """Each axis' inner part on the torus axes with room left, x first: (axis, stride, extent)."""
        used = [1] * len(self.shape)
        for name, size in self.dims:
            remaining, pieces = self.inside(name), []
            for axis, length in enumerate(self.shape):
                take = math.gcd(remaining, length // used[axis])
                if take > 1:
                    pieces.append((axis, used[axis], take))
                    used[axis] *= take
                    remaining //= take
            if remaining > 1:
                self.problem = (f"{name}={size} does not tile the {'x'.join(map(str, self.shape))} "
                                f"slice beside the axes inside it")
                return
            self.pieces[name] = pieces

    def _spans(self, names: tuple[str, ...]) -> tuple[AxisSpan, ...]:
        wrap = torus_wraparound(self.shape, self.hw)
        by_axis: dict[int, list[tuple[int, int]]] = {}
        for name in names:
            for axis, stride, extent in self.pieces.get(name, []):
                by_axis.setdefault(axis, []).append((stride, extent))
        spans = []
        for axis, parts in sorted(by_axis.items()):
            extent = math.prod(e for _, e in parts)
            stride = min(s for s, _ in parts)
            length = self.shape[axis]
            closed = bool(wrap[axis]) and extent * stride == length
            hops = (extent // 2 if closed else extent - 1) * stride
            spans.append(AxisSpan(AXIS_NAMES[axis], extent, length, closed, hops, shared_by=stride))
        return tuple(spans)


def fast_domain(hw: Hardware, chips: int) -> int:
    """Chips joined by the fast links: a GPU's NVLink/xGMI domain, a TPU's ICI slice."""
    ic = hw.interconnect
    if hw.kind == "tpu":
        if hw.topology:
            return min(chips, math.prod(hw.topology))
        return min(chips, math.prod(ic.max_torus)) if ic.max_torus else chips
    if hw.kind != "gpu" or ic.link_bytes_per_s is None:
        raise InputError(f"hardware {hw.name} has no chip-to-chip links in its description",
                         hint="layouts need an interconnect; pick a TPU or GPU")
    size = max(ic.domain_size, 1)
    if len(hw.topology) == 2:  # NODESxGPUS_PER_NODE names the node
        size = min(size, hw.topology[1])
    return min(size, chips)


def _slice_shape(hw: Hardware, chips: int) -> tuple[int, ...]:
    """A slice of `chips` chips when no topology is named: the torus filled x first."""
    dims, left = [], chips
    for limit in hw.interconnect.max_torus or (chips,):
        take = math.gcd(left, limit)
        dims.append(take)
        left //= take
    if left > 1:
        dims[-1] *= left
    return tuple(dims)
