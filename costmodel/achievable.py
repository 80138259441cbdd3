"""The achievable time of an op: what good kernels take on the chip, the second ceiling.

The roofline (costmodel.roofline) prices an op at the datasheet peaks: a lower bound no
kernel beats. The achievable time prices the same cost at what real kernels reach
(`Hardware.achievable`: measured GEMM rates, streaming and cache bandwidths, collective bus
bandwidth and per-message latency, the shortest op), with the shape effects no kernel escapes
(costmodel.shape_effects): whole tiles and waves and a latency-bound K loop on a GPU, MXU padding
and pipeline fill on a TPU. Each achievable figure is at or below the ceiling it derates (the
catalog's tests hold every file to it), so each term is the roofline's or slower and the
achievable time is never below the roofline time; nothing here clamps it there, so a figure
above its ceiling shows instead of hiding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .attention import achievable_compute
from .chips.hardware import Achievable, Hardware, Quantity
from .chips.precision import matmul_mode
from .network.collectives import CollectiveTime
from .costs import Expectation, OpCost
from .shape_effects import cite as _cite, implicit_gemm, k_loop_seconds, pipeline_fill, shape_factor
from .units import count, human, whole

__all__ = ["AchievableTime", "achievable_time", "collective_seconds", "implicit_gemm", "shape_factor"]


@dataclass(frozen=True)
class AchievableTime:
    """One execution of an op at what good kernels reach; terms as in `Expectation`."""

    seconds: float | None
    compute_s: float | None
    memory_s: float | None
    comm_s: float | None
    launch_s: float
    source: str  # which figures set it
    notes: tuple[str, ...] = ()


def achievable_time(cost: OpCost | None, exp: Expectation | None, hw: Hardware) -> AchievableTime:
    """Achievable time of one execution of an op whose roofline expectation is `exp`."""
    if exp is None or exp.expected_s is None or cost is None:
        return AchievableTime(None, None, None, None, 0.0, "")
    ach = hw.achievable
    if ach is None:
        return AchievableTime(exp.expected_s, exp.compute_s, exp.memory_s, exp.comm_s, exp.overhead_s,
                              f"roofline: {hw.name} states no achievable figures",
                              ("no achievable figures for this chip: judged against the roofline",))
    if exp.expected_s == 0 and exp.overhead_s == 0:
        return AchievableTime(0.0, exp.compute_s, exp.memory_s, exp.comm_s, 0.0, "launches nothing")
    notes: list[str] = []
    sources: list[str] = []
    compute, on_matrix_unit = _compute(cost, exp, hw, ach, notes, sources)
    memory = _memory(cost, exp, hw, ach, sources)
    memory = _atomics(cost, memory, ach, notes, sources)
    comm = _comm(exp, hw, ach, sources)
    fill = 0.0
    if on_matrix_unit and compute is not None and memory is not None:
        fill, why = pipeline_fill(compute, memory, hw, ach)
        notes += [why] if why else []
    launch = _launch(exp, hw, ach, sources) + _more_outputs(cost, exp, ach, sources)
    terms = [t for t in (compute, memory, comm) if t is not None]
    seconds = (max(terms) if terms else 0.0) + fill + launch
    return AchievableTime(seconds, compute, memory, comm, launch, "; ".join(dict.fromkeys(sources)),
                          tuple(dict.fromkeys(notes)))


def _launch(exp: Expectation, hw: Hardware, ach: Achievable, sources: list[str]) -> float:
    """The fixed cost of an op that runs anything: the chip's shortest op where it states one, else
    the roofline's per-op overhead. A catalog file states the first at or above the second (its
    tests hold it there); a per-op overhead a user sets above it for one run is taken as it is."""
    if ach.launch_s is None or ach.launch_s.value < exp.overhead_s:
        return exp.overhead_s
    what = {"gpu": "shortest kernel", "tpu": "fixed cost per op"}.get(hw.kind, "shortest op")
    sources.append(f"{what} {human(ach.launch_s.value, 's')} ({_cite(ach.launch_s)})")
    return ach.launch_s.value


def _more_outputs(cost: OpCost, exp: Expectation, ach: Achievable, sources: list[str]) -> float:
    """What the outputs of a multi-output fusion beyond the first add to its fixed cost: each is one
    more write stream the kernel drains before it ends (0 where the chip states no figure)."""
    extra = ach.output_stream_s
    if cost.outputs <= 1 or extra is None or not exp.overhead_s:
        return 0.0
    sources.append(f"{cost.outputs - 1} more outputs at {human(extra.value, 's')} each ({_cite(extra)})")
    return (cost.outputs - 1) * extra.value


def _atomics(cost: OpCost, memory: float | None, ach: Achievable, notes: list[str],
             sources: list[str]) -> float | None:
    """A scatter-add's memory time, at least its read-modify-write updates at the rate the chip's
    atomics of that element type reach (where the chip states one)."""
    if cost.atomics is None:
        return memory
    dtype, updates = cost.atomics
    rate = ach.atomic_updates_per_s.get(dtype)
    if rate is None or not rate.value > 0:
        return memory
    seconds = updates / rate.value
    return _at_least(memory, seconds, f"{dtype} atomic updates {human(rate.value, 'updates/s')} ({_cite(rate)})",
                     f"atomics: {whole(updates)} {dtype} read-modify-write updates of a scatter-add at "
                     f"{human(rate.value, 'updates/s')}: {human(seconds, 's')}", notes, sources)


def _compute(cost: OpCost, exp: Expectation, hw: Hardware, ach: Achievable, notes: list[str],
             sources: list[str]) -> tuple[float | None, bool]:
    """(compute seconds, whether they run on the matrix unit at a measured matmul rate)."""
    if exp.compute_s is None or cost.flops is None:
        return exp.compute_s, False
    if cost.attention is not None:
        return achievable_compute(cost, exp.compute_s, hw, ach, notes, sources), False
    if not (cost.precision or cost.gemm or cost.convolution):
        # vector work: no published achievable rate, priced at the peak, or its longest serial reduce
        return _serial_reduce(cost, _at_peak(exp, sources), ach, notes, sources), False
    # The mode the roofline priced it in: a dot that states no precision runs on its dtype's peak.
    mode = matmul_mode(hw, cost.dtype, cost.precision) if cost.precision else None
    key = mode.base if mode is not None and not mode.plain else _peak_key(hw, cost.dtype or "bf16")
    rate_q = ach.matmul_flops_per_s.get(key)
    if rate_q is None:
        return _at_peak(exp, sources), False
    rate = rate_q.value / (mode.passes if mode is not None else 1) / max(hw.devices_per_chip, 1)
    gemm = cost.gemm or implicit_gemm(cost.convolution)
    factor, how = shape_factor(gemm, hw, ach)
    if how:
        notes.append(how)
    sources.append(f"{key} matmul {human(rate_q.value, 'FLOP/s')} ({_cite(rate_q)})")
    seconds = cost.flops * factor / rate
    # A convolution may run as another algorithm than an implicit GEMM's K loop: no floor for it.
    loop, why = k_loop_seconds(cost.gemm, ach) if hw.kind == "gpu" else (0.0, "")
    if loop > seconds:
        notes.append(why)
        seconds = loop
    return seconds, True


def _serial_reduce(cost: OpCost, compute: float | None, ach: Achievable, notes: list[str],
                   sources: list[str]) -> float | None:
    """A loop fusion's compute time, at least its longest reduce loop at one dependent add a step."""
    step = ach.reduce_step_s
    if not cost.serial_reduce or step is None:
        return compute
    seconds = cost.serial_reduce * step.value
    return _at_least(compute, seconds, f"reduce loop step {human(step.value, 's')} ({_cite(step)})",
                     f"serial reduce: a loop fusion reduces {count(cost.serial_reduce)} elements into each output "
                     f"element one after another, at least {human(step.value, 's')} each: {human(seconds, 's')}",
                     notes, sources)


def _at_least(time: float | None, floor: float, source: str, note: str, notes: list[str],
              sources: list[str]) -> float | None:
    """`time`, or `floor` where that is longer, its source and note then said (a floor that binds)."""
    if time is not None and floor <= time:
        return time
    sources.append(source)
    notes.append(note)
    return floor


def _at_peak(exp: Expectation, sources: list[str]) -> float | None:
    """The roofline's compute time, with its source named: no achievable rate is known for this work."""
    if exp.compute_s and exp.peak_flops_per_s:
        sources.append(f"compute at the peak {human(exp.peak_flops_per_s, 'FLOP/s')} (no achievable rate for this op)")
    return exp.compute_s


def _peak_key(hw: Hardware, dtype: str) -> str:
    """The peak_flops key that prices `dtype` (the one `Hardware.peak` falls back to)."""
    peak = hw.peak(dtype)
    return next((k for k, q in hw.peak_flops.items() if q is peak), dtype)


def _memory(cost: OpCost, exp: Expectation, hw: Hardware, ach: Achievable, sources: list[str]) -> float | None:
    """The roofline's memory time at the achievable rate of each level it used. Where the
    schedule says part of the bytes can be in a cache (`cost.resident`), the split is redone
    at achievable rates, as the roofline does at peak ones, and the best split taken."""
    if exp.memory_s is None:
        return None
    level = exp.memory_level or hw.main_memory
    scaled = exp.memory_s * _derate(level, hw, ach, sources)
    total = cost.bytes
    if cost.resident is None or total is None or level not in (hw.main_memory, *(c.name for c in hw.caches)):
        from_main = total if level == hw.main_memory and total is not None else 0.0
        return _at_least_small_stream(scaled, from_main, hw, ach, sources)
    share = max(hw.devices_per_chip, 1)
    main = _reach(hw.main_memory, hw, ach)
    if main is None:
        return scaled
    splits = [(total, 0.0)]  # (bytes from main memory, seconds in the cache)
    for name, served in cost.resident:
        rate = _reach(name, hw, ach)
        cache = next((c for c in hw.caches if c.name == name), None)
        if rate is None or cache is None or total > cache.capacity_bytes.value or served <= 0:
            continue
        splits.append((total - min(served, total), total / (rate / share)))
    best, small = math.inf, False
    for from_main, cache_s in splits:
        floor = _small_stream(from_main, hw, ach)
        seconds = max(from_main / (main / share), cache_s, floor)
        if seconds < best:
            best, small = seconds, floor >= seconds > 0
    if small:
        _cite_small_stream(ach, sources)
    return best


def _small_stream(from_main: float, hw: Hardware, ach: Achievable) -> float:
    """The least time a GPU kernel moving `from_main` bytes of main memory takes for them: a kernel
    too small to keep the memory pipeline full streams, up to `small_stream_bytes`, at the small
    kernels' rate; past that size its bytes at the sustained rate take longer (0 without figures)."""
    rate, size = ach.small_stream_bytes_per_s, ach.small_stream_bytes
    if rate is None or size is None or not rate.value > 0 or from_main <= 0:
        return 0.0
    return min(from_main, size.value) / (rate.value / max(hw.devices_per_chip, 1))


def _at_least_small_stream(seconds: float, from_main: float, hw: Hardware, ach: Achievable,
                           sources: list[str]) -> float:
    floor = _small_stream(from_main, hw, ach)
    if floor <= seconds:
        return seconds
    _cite_small_stream(ach, sources)
    return floor


def _cite_small_stream(ach: Achievable, sources: list[str]) -> None:
    rate, size = ach.small_stream_bytes_per_s, ach.small_stream_bytes
    if rate is not None and size is not None:
        sources.append(f"small kernels stream {human(rate.value, 'B/s')} up to {human(size.value, 'B')} "
                       f"({_cite(rate)})")


def _reach(level: str, hw: Hardware, ach: Achievable) -> float | None:
    """The achievable bytes/s of a memory level (None where no figure is stated)."""
    q = ach.memory_bytes_per_s if level == hw.main_memory else ach.cache_bytes_per_s.get(level)
    return q.value if q is not None and q.value > 0 else None


def _derate(level: str, hw: Hardware, ach: Achievable, sources: list[str]) -> float:
    """How much slower than its roof good kernels stream at `level` (1 where no figure says)."""
    roof: Quantity | None
    reach: Quantity | None
    if level == hw.main_memory:
        roof, reach = hw.hbm_bytes_per_s, ach.memory_bytes_per_s
    else:
        cache = next((c for c in hw.caches if c.name == level), None)
        roof = cache.bytes_per_s if cache is not None else None
        reach = ach.cache_bytes_per_s.get(level)
    if roof is None or reach is None or not reach.value > 0 or not math.isfinite(roof.value):
        return 1.0
    sources.append(f"{level} {human(reach.value, 'B/s')} ({_cite(reach)})")
    return roof.value / reach.value


def _comm(exp: Expectation, hw: Hardware, ach: Achievable, sources: list[str]) -> float | None:
    comm = exp.collective
    if exp.comm_s is None or comm is None:
        return exp.comm_s
    seconds, source = collective_seconds(comm, ach, hw)
    sources.extend(source)
    return seconds


def collective_seconds(comm: CollectiveTime, ach: Achievable, hw: Hardware) -> tuple[float, list[str]]:
    """A placed collective at the bus bandwidth real collective libraries reach on its link level,
    plus their per-message latency, with the figures used. The bus bandwidth is per device on a
    switch and per link on a torus, as the link rate it derates (`interconnect.link_bytes_per_s`,
    or `dcn_bytes_per_s` between nodes and slices): every link of the placement runs at that share."""
    if comm.link in ("memory", "none"):
        return comm.time_s, []
    sources: list[str] = []
    scale_out = comm.link == "dcn"
    level = "scale_out" if scale_out else "scale_up"
    reach = ach.collective_bytes_per_s.get(level)
    rated = hw.interconnect.dcn_bytes_per_s if scale_out else hw.interconnect.link_bytes_per_s
    bandwidth_s = comm.bandwidth_s
    if reach is not None and reach.value > 0 and rated is not None and rated.value > 0:
        bandwidth_s = comm.bandwidth_s * (rated.value / reach.value)
        sources.append(f"{level} bus {human(reach.value, 'B/s')} ({_cite(reach)})")
    latency_s = comm.latency_s
    if ach.collective_latency_s is not None:
        # The measured time of one short message, or the placement's hops if they take longer.
        latency_s = max(latency_s, ach.collective_latency_s.value)
        sources.append(f"per-message latency {human(ach.collective_latency_s.value, 's')} "
                       f"({_cite(ach.collective_latency_s)})")
    return bandwidth_s + latency_s, sources
