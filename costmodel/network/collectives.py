"""How long a collective should take on its placement: max(latency floor, bandwidth term).

TPU torus (book ch. 3, "A Deeper Dive into TPU Communication Primitives"): on one
axis of n chips a ring with a wraparound sends each shard both ways, so the busiest
link direction carries floor(n/2) shards of V/n; without a wraparound the ring is a
line and the end link carries n-1 shards one way. That gives V / W_bidi with a full
ring and (n-1)/n * V / W_oneway without one. Several axes add their bandwidths. An
AllReduce is a ReduceScatter plus an AllGather (twice the time); an AllToAll moves
floor(n^2/4)/2 chunks of V/n per link direction with a wraparound (a quarter of the
AllGather of the whole array) and twice that on a line. Each hop costs at least the
per-hop latency, so small messages are latency-bound. Concurrent groups whose rings
cross the same links (interleaved groups) split those links' bandwidth.

GPU (NVLink/NVSwitch on NVIDIA, Infinity Fabric/xGMI on AMD): a ring within the domain
sends (n-1)/n * V per GPU at the per-GPU link bandwidth; beyond the domain the inter-node
network's bandwidth applies.
CPU (simulated devices): an in-memory copy at host memory bandwidth, approximate.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass, field, replace

from ...base.errors import InputError, UsageError
from ..chips.hardware import Hardware
from ..units import figure
from ...parsers.hlo.opcodes import COLLECTIVES
from .topology import AxisSpan, GroupPlacement

WRAPAROUND_CHOICES = ("auto", "yes", "no")
# A ragged all-to-all is priced as an all-to-all of its whole input (spread evenly over the group).
KINDS = tuple(k for k in COLLECTIVES if k != "ragged-all-to-all")
_ASYNC_SUFFIXES = ("-start", "-done", "-update")


@dataclass(frozen=True)
class CollectiveTime:
    """Expected time of one collective on one group, with the terms that make it up.

    `bytes_moved` is what the busiest links of one device carry (forwarded shards
    included), so `bandwidth_s = bytes_moved / bandwidth_bytes_per_s`.
    """

    kind: str
    volume_bytes: float
    bytes_moved: float
    bandwidth_bytes_per_s: float
    bandwidth_s: float
    latency_s: float
    time_s: float
    bound_by: str  # "collective" or "latency"
    group_size: int
    hops: int
    wraparound: bool | None
    axes: tuple[AxisSpan, ...]
    link: str  # "ici", "nvlink", "xgmi", "dcn", "memory", "none"
    approximate: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "bytes": self.volume_bytes, "bytes_moved": self.bytes_moved,
            "group_size": self.group_size, "axes": [a.name for a in self.axes],
            "physical_axes": [a.to_json() for a in self.axes], "hops": self.hops,
            "wraparound": self.wraparound, "link": self.link,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "bandwidth_s": self.bandwidth_s,
            "latency_s": self.latency_s, "time_s": self.time_s, "bound_by": self.bound_by,
            "approximate": self.approximate, "notes": list(self.notes),
        }


def base_kind(kind: str) -> str:
    """`all-gather-start` -> `all-gather`; raises InputError for a kind that is not a collective."""
    name = kind.strip().lower().replace("_", "-")
    for suffix in _ASYNC_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    aliases = {"allgather": "all-gather", "allreduce": "all-reduce", "reducescatter": "reduce-scatter",
               "alltoall": "all-to-all", "permute": "collective-permute", "psum": "all-reduce",
               "raggedalltoall": "all-to-all"}
    name = aliases.get(name.replace("-", ""), name)
    if name not in KINDS:
        raise InputError(f"unknown collective {kind!r}", hint=f"one of {', '.join(COLLECTIVES)}")
    return name


def collective_time(kind: str, volume_bytes: float, placement: GroupPlacement, hw: Hardware,
                    wraparound: str = "auto") -> CollectiveTime:
    """Expected time of collective `kind` moving volume V (`volume_bytes`, as one device sees it).

    `wraparound`: "auto" uses the torus rules of `hw`; "yes"/"no" force every spanned axis.
    """
    name = base_kind(kind)
    if wraparound not in WRAPAROUND_CHOICES:
        raise UsageError(f"--wraparound must be one of {', '.join(WRAPAROUND_CHOICES)}, not {wraparound!r}")
    if volume_bytes < 0:
        raise UsageError(f"collective volume must be non-negative, got {volume_bytes} bytes")
    if placement.group_size <= 1:
        return _trivial(name, volume_bytes, placement)
    if placement.kind == "host" or (placement.kind == "torus" and not placement.axes
                                     and not placement.leaves_domain):
        return _host_copy(name, volume_bytes, placement, hw)
    if placement.leaves_domain:
        return _on_estimate(_ring(name, volume_bytes, placement, hw, link="dcn"), hw)
    if placement.kind == "switch":
        return _on_estimate(_ring(name, volume_bytes, placement, hw, link=hw.interconnect.kind or "nvlink"), hw)
    return _on_estimate(_torus(name, volume_bytes, placement, hw, wraparound), hw)


def _on_estimate(result: CollectiveTime, hw: Hardware) -> CollectiveTime:
    """Say so when the term that decides the time was priced on an estimate (the catalog's, or one
    a hardware file marks so), and which `--set` key states the user's own figure (a guess must
    look like one)."""
    ic = hw.interconnect
    if result.bound_by == "latency":
        key, q, what = "collective_latency_s", ic.collective_latency_s, "collective latency"
    elif result.link == "dcn":
        key, q, what = "scale_out_bytes_per_s", ic.dcn_bytes_per_s, f"{ic.scale_out_name} bandwidth"
    else:
        key, q, what = "scale_up_bytes_per_s", ic.link_bytes_per_s, f"{ic.link_name} bandwidth"
    if q is None or not q.estimate:
        return result
    value = f"{figure(q.value)} {q.unit}"
    note = (f"priced on an estimate: the {what} ({value} per device, {q.note or 'catalog'}) decides this time; "
            f"state your system's with --set {key}=VALUE")
    return replace(result, notes=result.notes + (note,))


def _trivial(name: str, volume: float, placement: GroupPlacement) -> CollectiveTime:
    return CollectiveTime(name, volume, 0.0, 0.0, 0.0, 0.0, 0.0, "latency", placement.group_size,
                          0, None, (), "none", notes=("group of one device: nothing to send",))


def _latency_floor(hw: Hardware, hops: int) -> float:
    ic = hw.interconnect
    per_hop = ic.hop_latency_s.value if ic.hop_latency_s is not None else 0.0
    fixed = ic.collective_latency_s.value if ic.collective_latency_s is not None else 0.0
    return fixed + per_hop * hops


def _finish(name: str, volume: float, moved: float, bandwidth: float, hops: int,
            placement: GroupPlacement, hw: Hardware, link: str, *, wraparound: bool | None,
            axes: tuple[AxisSpan, ...], notes: tuple[str, ...], approximate: bool = False) -> CollectiveTime:
    bandwidth_s = moved / bandwidth if bandwidth > 0 else float("inf")
    latency_s = _latency_floor(hw, hops)
    bound = "latency" if latency_s >= bandwidth_s else "collective"
    return CollectiveTime(name, volume, moved, bandwidth, bandwidth_s, latency_s,
                          max(bandwidth_s, latency_s), bound, placement.group_size, hops,
                          wraparound, axes, link, approximate, placement.notes + notes)


def _need(q: object, what: str, hw: Hardware) -> float:
    value = getattr(q, "value", None)
    if value is None or value <= 0:
        raise InputError(f"{hw.name} has no {what} in its hardware description",
                         hint="pick a catalog entry that states it")
    return float(value)


# --- TPU torus -------------------------------------------------------------------------


def _axis_shards(name: str, axis: AxisSpan, wrap: bool) -> float:
    """Shard-sized (V/n) units the busiest link direction of this axis carries."""
    n = axis.size
    if name == "all-to-all":
        chunks = (n * n) // 4
        return chunks / 2 if wrap else float(chunks)
    if name == "collective-permute":
        return float(n)  # one whole buffer (n shards of V/n) per link direction
    if name == "collective-broadcast":  # pipelined from the root, both ways round a full ring
        return n / 2 if wrap else float(n)
    return float(n // 2 if wrap else n - 1)


def _torus(name: str, volume: float, placement: GroupPlacement, hw: Hardware,
           wraparound: str) -> CollectiveTime:
    ic = hw.interconnect
    one_way = _need(ic.link_bytes_per_s, "ICI link bandwidth", hw) * max(ic.links_per_axis, 2) / 2
    axes, notes = _forced_axes(placement.axes, wraparound)
    # Per axis: seconds per byte of V, and the link bandwidth it offers (2x with a full ring).
    per_byte = [_axis_shards(name, a, a.wraparound) / a.size / one_way * a.shared_by for a in axes]
    both_ways = name != "collective-permute"  # a point-to-point stream runs one way
    offered = [one_way * (2 if a.wraparound and both_ways else 1) for a in axes]
    if name == "all-to-all":  # axes carry their own chunks in parallel: the slowest decides
        slowest = max(range(len(axes)), key=lambda i: per_byte[i])
        seconds, bandwidth = volume * per_byte[slowest], offered[slowest]
    else:  # the data splits over the axes, so their bandwidths add (book: W_ICI * n_axes)
        seconds = volume / sum(1 / p for p in per_byte)
        bandwidth = sum(offered)
    hops = placement.path_hops if placement.path_hops is not None else sum(a.hops for a in axes)
    if name == "all-reduce":  # ReduceScatter then AllGather
        seconds, hops = 2 * seconds, 2 * hops
    notes += tuple(_wrap_note(a, hw) for a in axes)
    return _finish(name, volume, seconds * bandwidth, bandwidth, hops, placement, hw, "ici",
                   wraparound=all(a.wraparound for a in axes), axes=axes, notes=notes)


def _forced_axes(axes: tuple[AxisSpan, ...], wraparound: str) -> tuple[tuple[AxisSpan, ...], tuple[str, ...]]:
    if wraparound == "auto":
        return axes, ()
    wrap = wraparound == "yes"
    out = tuple(replace(a, wraparound=wrap and a.size > 2,
                        hops=(a.size // 2) if wrap and a.size > 2 else (a.size - 1 if a.wraparound else a.hops))
                for a in axes)
    return out, (f"wraparound forced to {wraparound!r} on every axis",)


def _wrap_note(axis: AxisSpan, hw: Hardware) -> str:
    ring = f"{axis.size}-chip ring on axis {axis.name}"
    shared = f"; its links carry {axis.shared_by} concurrent groups" if axis.shared_by > 1 else ""
    if axis.wraparound:
        return f"{ring} with a wraparound: bidirectional, {axis.hops} hops{shared}"
    why = ""
    if axis.size == axis.length and axis.size > 2:
        why = f" ({hw.name} wraps axes of {hw.interconnect.wraparound_min} or more"
        why += " on full cubes)" if hw.interconnect.torus_axes >= 3 else ")"
    elif axis.size < axis.length:
        why = f" (the group covers {axis.size} of the axis' {axis.length} chips)"
    return f"{ring} without a wraparound{why}: one-way bandwidth, {axis.hops} hops{shared}"


# --- GPU NVLink / DCN rings, CPU host ------------------------------------------------------


def bytes_sent(name: str, volume: float, n: int) -> float:
    """Bytes each device sends in a ring (or switch) algorithm: what an op's `comm_bytes` counts."""
    if name in ("collective-permute", "collective-broadcast"):
        return volume
    share = volume * (n - 1) / n
    return 2 * share if name == "all-reduce" else share


def _ring(name: str, volume: float, placement: GroupPlacement, hw: Hardware, link: str) -> CollectiveTime:
    ic = hw.interconnect
    n = placement.group_size
    if link != "dcn":
        bandwidth = _need(ic.link_bytes_per_s, f"{ic.link_name} bandwidth", hw)
        notes: tuple[str, ...] = (f"ring over {n} GPUs in one {ic.link_name} domain",)
    else:
        bandwidth = _need(ic.dcn_bytes_per_s, f"{ic.scale_out_name} bandwidth", hw)
        where = "ICI slices" if hw.kind == "tpu" else f"{ic.link_name} domains"
        notes = (f"group spans {placement.domains} {where}: {ic.scale_out_name} bandwidth, flat ring",)
    steps = 1 if name in ("all-to-all", "collective-permute") else n - 1
    if name == "all-reduce":
        steps *= 2
    return _finish(name, volume, bytes_sent(name, volume, n), bandwidth, steps, placement, hw, link,
                   wraparound=None, axes=(), notes=notes)


def _host_copy(name: str, volume: float, placement: GroupPlacement, hw: Hardware) -> CollectiveTime:
    bandwidth = _need(hw.hbm_bytes_per_s, "memory bandwidth", hw)
    moved = 2 * bytes_sent(name, volume, placement.group_size)  # read and write each byte
    where = ("simulated devices on one host" if placement.kind == "host"
             else "cores of one chip")
    return _finish(name, volume, moved, bandwidth, 0, placement, hw, "memory", wraparound=None,
                   axes=(), approximate=True, notes=(f"{where}: an in-memory copy, approximate",))

