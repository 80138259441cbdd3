"""Expected time per op: the roofline of book ch. 1 plus the collectives of ch. 3.

compute_s = FLOPs / peak(dtype), memory_s = the op's bytes at the memory levels its data can be
in by the schedule (costmodel.residency: cache-resident bytes at the cache's bandwidth, first
touches and streams at HBM's or DRAM's; an op priced on its own takes the fastest level that
holds its working set), comm_s = the collective's time on its placement; expected = the largest term that applies, plus
the platform's fixed per-op overhead. This is the only place hardware rates meet costs.
"""

from __future__ import annotations

from ..base.errors import AuditError
from ..parsers.hlo.dtypes import real_part
from .network.collectives import CollectiveTime, collective_time
from .units import human
from .chips.hardware import Hardware, Quantity
from .chips.precision import matmul_peak
from .costs import Bound, Expectation, OpCost
from .network.topology import place_groups, place_pairs

# An op doing at least this many FLOPs per byte is a contraction (dot, conv), not elementwise.
_CONTRACTION_INTENSITY = 2.0


def expect(cost: OpCost, hw: Hardware, *, coords: dict[int, tuple[int, ...]] | None = None) -> Expectation:
    """Expected time of one execution of an op with `cost` on one device of `hw`."""
    if not cost.modeled:
        reason = cost.reason or "opaque op: no cost available"
        return Expectation(None, None, None, None, "unknown", (reason,))
    peak = flops_peak(cost, hw)
    peak_s = peak.value / max(hw.devices_per_chip, 1)
    level, hbm_s, memory_s, level_note, level_bytes = memory_time(hw, cost)
    compute_s = None if cost.flops is None else cost.flops / peak_s
    host_s, host_note = _host_link(cost, hw)
    link = hw.interconnect.pcie_bytes_per_s  # _host_link gives no time without it
    if host_s is not None and link is not None and (memory_s is None or host_s > memory_s):
        memory_s, level, hbm_s, level_note, level_bytes = host_s, "host link", link.value, "", cost.host_bytes
    reasons: list[str] = list(cost.notes) + ([host_note] if host_note else [])
    if cost.precision and real_part(cost.dtype) in ("f32", "f64") and hw.kind != "cpu":
        reasons.append(f"priced at {human(peak.value, 'FLOP/s')} per chip: {peak.note}")
    comm, comm_reason = _collective(cost, hw, coords)
    comm_s = None if comm is None else comm.time_s
    if comm is not None:
        reasons.extend(n for n in comm.notes if n)
    elif comm_reason:
        reasons.append(comm_reason)
    overhead = hw.op_overhead_s.value if hw.op_overhead_s is not None else 0.0
    if launches_nothing(cost):
        overhead = 0.0
        reasons.append("launches nothing (no FLOPs, no bytes, no communication): costs nothing")
    terms: dict[Bound, float | None] = {"compute": compute_s, "memory": memory_s, "collective": comm_s}
    known: dict[Bound, float] = {k: v for k, v in terms.items() if v is not None}
    if not known or (cost.collective is not None and comm_s is None):
        why = comm_reason or cost.reason or "neither FLOPs nor bytes are known"
        return Expectation(compute_s, memory_s, comm_s, None, "unknown", tuple(_dedupe(reasons + [why])),
                           peak_s, hbm_s, memory_level=level, overhead_s=overhead, collective=comm,
                           memory_bytes=level_bytes)
    bound: Bound = max(known, key=lambda k: known[k])
    if bound == "collective" and comm is not None and comm.bound_by == "latency":
        bound = "latency"
    if overhead > known[max(known, key=lambda k: known[k])] or launches_nothing(cost):
        bound = "latency"
    if bound == "memory" and level_note:
        reasons.append(level_note)
    if cost.flops is None or cost.bytes is None:
        reasons.append("FLOPs or bytes unknown: expected time is a lower bound")
    reasons.extend(_mxu_reasons(cost, hw))
    expected = max(known.values()) + overhead
    peak_bytes = comm.bandwidth_bytes_per_s if comm is not None and bound in ("collective", "latency") \
        else hbm_s
    return Expectation(compute_s, memory_s, comm_s, expected, bound, tuple(_dedupe(reasons)),
                       peak_s, peak_bytes, memory_level=level, overhead_s=overhead, collective=comm,
                       memory_bytes=level_bytes)


def _host_link(cost: OpCost, hw: Hardware) -> tuple[float | None, str]:
    """Seconds to move an op's host-memory bytes over the chip's host link, and how it was priced."""
    if not cost.host_bytes:
        return None, ""
    link = hw.interconnect.pcie_bytes_per_s
    if link is None or not link.value:
        return None, f"{human(cost.host_bytes, 'B')} to or from host memory, but {hw.name} states no host link speed"
    seconds = cost.host_bytes / link.value
    return seconds, (f"{human(cost.host_bytes, 'B')} to or from host memory over the host link at "
                     f"{human(link.value, 'B/s')} ({link.source}: {link.note}): {human(seconds, 's')}")


def launches_nothing(cost: OpCost) -> bool:
    """Parameters, tuples, bitcasts, a done waiting on its start, an op costed on the async-start
    that wraps it: no kernel, so no per-op overhead and an expected time of 0."""
    return (cost.flops == 0 and cost.bytes == 0 and not cost.comm_bytes and not cost.transcendentals
            and not cost.host_bytes and cost.collective is None)


def flops_peak(cost: OpCost, hw: Hardware) -> Quantity:
    """The peak (per chip) that prices an op's FLOPs: its dtype's, or for a dot or convolution
    the matrix-unit mode its precision asks for (chips.precision)."""
    if cost.precision:
        return matmul_peak(hw, cost.dtype, cost.precision)
    return hw.peak(cost.dtype or "bf16")


def launches_work(cost: OpCost | None) -> bool | None:
    """The one predicate every part of the tool uses for "this op runs a kernel or moves data"
    (None when the op has no cost at all). An op whose cost is unknown still launches work."""
    if cost is None:
        return None
    return not cost.modeled or not launches_nothing(cost)


def per_device_rates(hw: Hardware, dtype: str) -> tuple[float, float]:
    """(peak FLOP/s, HBM bytes/s) of one JAX device: the chip's share where a chip holds
    several devices (TPU v2/v3 cores)."""
    share = max(hw.devices_per_chip, 1)
    return hw.peak(dtype).value / share, hw.hbm_bytes_per_s.value / share


def memory_rate(hw: Hardware, working_set: float | None) -> tuple[str, Quantity, float]:
    """(level name, its bandwidth, bytes/s for one JAX device) of the smallest memory level
    that holds an op's working set (the bytes it reads and writes): the level of an op priced
    without a history (`audit calc`), whose data could be in any level it fits."""
    name, bandwidth = hw.memory_level(working_set)
    return name, bandwidth, bandwidth.value / max(hw.devices_per_chip, 1)


def memory_time(hw: Hardware, cost: OpCost) -> tuple[str, float, float | None, str, float | None]:
    """(level, its bytes/s, seconds, how, bytes it moves) for an op's bytes on one device: the level
    whose traffic binds the op, and a note on where the bytes come from.

    Without a history (`cost.resident` None) the fastest level that holds the working set judges
    it. With one, the bytes a level may serve (costmodel.residency) go at its rate and the rest
    (first touches, data evicted since its last use) at main memory's, both at once: the time is
    the larger of the two, at the level that gives the lowest such bound.
    """
    share = max(hw.devices_per_chip, 1)
    total = cost.bytes
    if cost.resident is None or total is None:
        level, _, rate = memory_rate(hw, total)
        return level, rate, None if total is None else total / rate, "", total
    main = hw.hbm_bytes_per_s.value / share
    best: tuple[str, float, float | None, str, float | None] = (hw.main_memory, main, total / main, "", total)
    by_name = {c.name: c for c in hw.caches}
    for name, served in cost.resident:
        cache = by_name.get(name)
        if cache is None or total > cache.capacity_bytes.value or served <= 0:
            continue
        rate = cache.bytes_per_s.value / share
        streamed = total - min(served, total)
        streamed_s, cached_s = streamed / main, total / rate
        if max(streamed_s, cached_s) >= (best[2] or 0.0):
            continue
        if cached_s >= streamed_s:
            best = (name, rate, cached_s, f"all {human(total, 'B')} it reads and writes can be in {name} by the "
                    "schedule (inputs produced or read recently enough, outputs it holds)", total)
        else:
            best = (hw.main_memory, main, streamed_s,
                    f"{human(streamed, 'B')} of its {human(total, 'B')} go through {hw.main_memory} (first "
                    f"touches, data evicted since it was last used, outputs not read again soon) and bound it; "
                    f"the rest can be in {name}",
                    streamed)
    if best[0] == hw.main_memory and not best[3] and any(c.capacity_bytes.value >= total for c in hw.caches):
        best = (*best[:3], f"judged at {hw.main_memory} though it would fit a cache: its inputs are first "
                           "touches or were evicted since they were last used, and its output is not read "
                           "again while a cache could hold it", best[4])
    return best


def _collective(cost: OpCost, hw: Hardware, coords: dict[int, tuple[int, ...]] | None,
                ) -> tuple[CollectiveTime | None, str]:
    info = cost.collective
    if info is None:
        return None, ""
    groups = info.groups or (tuple(range(max(info.group_size, 1))),)
    try:
        if info.kind.startswith("collective-permute") and info.groups:
            placement = place_pairs(info.groups, hw, coords)
        else:
            placement = place_groups(groups, hw, coords)
        return collective_time(info.kind, info.bytes, placement, hw), ""
    except AuditError as exc:
        return None, f"{info.kind}: {exc}"


def _mxu_reasons(cost: OpCost, hw: Hardware) -> list[str]:
    intensity = cost.intensity
    if hw.kind != "tpu" or intensity is None or intensity < _CONTRACTION_INTENSITY:
        return []
    if cost.dtype == "f64" or cost.dtype == "f32" and not cost.precision:
        peak = hw.peak(cost.dtype)
        how = f": {peak.note}" if peak.note else ""
        return [f"{cost.dtype} matmul on the MXU, priced at {human(peak.value, 'FLOP/s')} per chip{how}"]
    return []


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))
