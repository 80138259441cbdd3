"""The achievable time of an op: what good kernels take on the chip, the second ceiling.

The roofline (costmodel.roofline) prices an op at the datasheet peaks: a lower bound no
kernel beats. The achievable time prices the same cost at what real kernels reach
(`Hardware.achievable`: measured GEMM rates, streaming and cache bandwidths, collective bus
bandwidth and per-message latency, the shortest kernel), with the shape effects no kernel
escapes: a matmul's output is computed in whole tiles (padding M and N up to the tile) spread
over the chip's compute units in whole waves (GPU), or padded to the MXU (TPU). Each term is
the roofline's term or slower, so the achievable time is never below the roofline time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .chips.hardware import Achievable, Hardware, Quantity
from .chips.precision import matmul_mode
from .network.collectives import CollectiveTime
from .records import Expectation, OpCost
from .units import human

# The K depth of one main-loop iteration of a GPU matmul kernel, the smallest piece of work a
# compute unit takes (estimate: hipBLASLt's MT256x256x64 and CUTLASS's 128x256x64 tiles).
_K_STEP = 64
# Output tile shapes (rows x columns) a GPU library may pick, from the chip's largest down by
# halving; the best of them for the problem is taken (libraries pick tiles per shape).
_TILE_HALVINGS = 1
# Padding that costs less than this share of the work is not worth a line in the reasons.
_WORTH_SAYING = 1.005
# TPU: the MXU streams the left operand 8 rows (one sublane group) at a time.
_TPU_ROWS = 8


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
    compute = _compute(cost, exp, hw, ach, notes, sources)
    memory = _memory(cost, exp, hw, ach, sources)
    comm = _comm(exp, ach, sources)
    launch = exp.overhead_s
    if launch > 0 and ach.launch_s is not None and ach.launch_s.value > launch:
        launch = ach.launch_s.value
        sources.append(f"shortest kernel {human(launch, 's')} ({_cite(ach.launch_s)})")
    terms = [t for t in (compute, memory, comm) if t is not None]
    seconds = (max(terms) if terms else 0.0) + launch
    # Every term above is the roofline's or slower; float rounding aside, so is their sum.
    seconds = max(seconds, exp.expected_s)
    return AchievableTime(seconds, compute, memory, comm, launch, "; ".join(dict.fromkeys(sources)),
                          tuple(dict.fromkeys(notes)))


def _cite(q: Quantity) -> str:
    """Where a figure comes from, briefly (`audit hardware show` gives each figure's full source)."""
    return f"{q.source}, {q.kind}" if q.kind else q.source


def _compute(cost: OpCost, exp: Expectation, hw: Hardware, ach: Achievable, notes: list[str],
             sources: list[str]) -> float | None:
    if exp.compute_s is None or cost.flops is None:
        return exp.compute_s
    if not (cost.precision or cost.gemm or cost.convolution):
        return _at_peak(exp, sources)  # vector work: no published achievable rate, priced at the peak
    mode = matmul_mode(hw, cost.dtype, cost.precision)
    key = mode.base if not mode.plain else _peak_key(hw, cost.dtype or "bf16")
    rate_q = ach.matmul_flops_per_s.get(key)
    if rate_q is None:
        return _at_peak(exp, sources)
    rate = rate_q.value / mode.passes / max(hw.devices_per_chip, 1)
    factor, how = shape_factor(cost.gemm or implicit_gemm(cost.convolution), hw, ach)
    if how:
        notes.append(how)
    sources.append(f"{key} matmul {human(rate_q.value, 'FLOP/s')} ({_cite(rate_q)})")
    return max(exp.compute_s, cost.flops * factor / rate)


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
        return scaled
    share = max(hw.devices_per_chip, 1)
    main = _reach(hw.main_memory, hw, ach)
    if main is None:
        return scaled
    best = total / (main / share)
    for name, served in cost.resident:
        rate = _reach(name, hw, ach)
        cache = next((c for c in hw.caches if c.name == name), None)
        if rate is None or cache is None or total > cache.capacity_bytes.value or served <= 0:
            continue
        best = min(best, max((total - min(served, total)) / (main / share), total / (rate / share)))
    return max(exp.memory_s, best)


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
    return max(1.0, roof.value / reach.value)


def _comm(exp: Expectation, ach: Achievable, sources: list[str]) -> float | None:
    comm = exp.collective
    if exp.comm_s is None or comm is None:
        return exp.comm_s
    seconds, source = collective_seconds(comm, ach)
    sources.extend(source)
    return max(exp.comm_s, seconds)


def collective_seconds(comm: CollectiveTime, ach: Achievable) -> tuple[float, list[str]]:
    """A placed collective at the bus bandwidth real collective libraries reach on its link level,
    plus their per-message latency; never faster than its roofline time. With the figures used."""
    if comm.link in ("memory", "none"):
        return comm.time_s, []
    sources: list[str] = []
    level = "scale_out" if comm.link == "dcn" else "scale_up"
    reach = ach.collective_bytes_per_s.get(level)
    bandwidth_s = comm.bandwidth_s
    if reach is not None and reach.value > 0:
        bandwidth_s = comm.bandwidth_s * max(1.0, comm.bandwidth_bytes_per_s / reach.value)
        sources.append(f"{level} bus {human(reach.value, 'B/s')} ({_cite(reach)})")
    latency_s = comm.latency_s
    if ach.collective_latency_s is not None:
        latency_s = max(latency_s, ach.collective_latency_s.value)
        sources.append(f"per-message latency {human(ach.collective_latency_s.value, 's')} "
                       f"({_cite(ach.collective_latency_s)})")
    return max(comm.time_s, bandwidth_s + latency_s), sources


def implicit_gemm(conv: tuple[int, tuple[int, ...], int, int, tuple[int, ...]] | None,
                  ) -> tuple[int, int, int, int] | None:
    """The matmul a convolution runs as (implicit GEMM, how cuDNN and MIOpen lower it): M the
    output positions of the batch, N the output channels, K the input channels times the taps."""
    if conv is None:
        return None
    batch, spatial, in_channels, out_channels, kernel = conv
    positions = batch * math.prod(spatial)
    return 1, positions, out_channels, in_channels * math.prod(kernel)


def shape_factor(gemm: tuple[int, int, int, int] | None, hw: Hardware, ach: Achievable) -> tuple[float, str]:
    """(work actually done / useful work, why) for a matmul problem (batch, M, N, K): tile and
    wave quantization on a GPU, MXU padding on a TPU; (1, "") where neither applies."""
    if gemm is None or min(gemm) < 1:
        return 1.0, ""
    if hw.kind == "tpu" and hw.mxu_tile is not None:
        return _mxu_factor(gemm, hw.mxu_tile)
    tile = (ach.gemm_tile_rows, ach.gemm_tile_columns)
    if hw.kind == "gpu" and tile[0] is not None and tile[1] is not None and ach.compute_units is not None:
        return _wave_factor(gemm, int(tile[0].value), int(tile[1].value), int(ach.compute_units.value))
    return 1.0, ""


def _up(n: int, tile: int) -> int:
    return -(-n // tile) * tile


def _mxu_factor(gemm: tuple[int, int, int, int], tile: tuple[int, int]) -> tuple[float, str]:
    batch, m, n, k = gemm
    padded = _up(m, _TPU_ROWS) * _up(n, tile[1]) * _up(k, tile[0])
    factor = max(padded / (m * n * k), 1.0)
    if factor < _WORTH_SAYING:
        return factor, ""
    return factor, (f"MXU padding: M={m}, N={n}, K={k} pads to {_up(m, _TPU_ROWS)}x{_up(n, tile[1])}x"
                    f"{_up(k, tile[0])} on the {tile[0]}x{tile[1]} MXU ({factor:.2f}x the work)")


def _wave_factor(gemm: tuple[int, int, int, int], rows: int, cols: int, units: int) -> tuple[float, str]:
    """Work in whole output tiles (M and N padded up to the tile) and whole K steps, spread
    evenly over the compute units in rounds of one K step each (stream-K scheduling, which
    libraries use so that a partial last wave splits along K): what is left idle in the last
    round is the quantization no kernel escapes. The better of the chip's largest tile and
    tiles halved up to `_TILE_HALVINGS` times per side is taken, as libraries pick per shape."""
    batch, m, n, k = gemm
    useful = batch * m * n * k
    steps = -(-k // _K_STEP)
    best: tuple[float, int, int, int] | None = None
    for i in range(_TILE_HALVINGS + 1):
        for j in range(_TILE_HALVINGS + 1):
            tm, tn = max(rows >> i, 16), max(cols >> j, 16)
            tiles = batch * -(-m // tm) * -(-n // tn)
            rounds = -(-tiles * steps // units)
            work = float(rounds * units * tm * tn * _K_STEP)
            if best is None or work < best[0]:
                best = (work, tm, tn, tiles)
    assert best is not None
    work, tm, tn, tiles = best
    factor = max(work / useful, 1.0)
    if factor < _WORTH_SAYING:
        return factor, ""
    return factor, (f"tile and wave quantization: M={m}, N={n}, K={k}" + (f", batch {batch}" if batch > 1 else "")
                    + f" as {tiles} tiles of {tm}x{tn}, {steps} K steps of {_K_STEP} each, over {units} compute "
                    f"units: {1 / factor:.0%} of the work done is useful")
