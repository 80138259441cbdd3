"""Shape effects no matmul kernel escapes, priced at the chip's achievable figures.

A matmul's output is computed in whole tiles spread over the compute units in whole waves (GPU)
or padded to the MXU (TPU); its K loop runs step after step on one unit, and a step cannot be
shorter than the latency of its pipeline (GPU); and the matrix unit waits for the first block of
operands and the last block of results to cross between HBM and on-chip memory (TPU pipeline
fill). Each function returns a time or factor that only ever adds to the work, with why.
"""

from __future__ import annotations

import math

from .chips.hardware import Achievable, Hardware, Quantity
from .units import count, human, ratio, whole_percent

# The K depth of one main-loop iteration of a GPU matmul kernel, the smallest piece of work a
# compute unit takes (estimate: hipBLASLt's MT256x256x64 and CUTLASS's 128x256x64 tiles).
K_STEP = 64
# Output tile shapes (rows x columns) a GPU library may pick, from the chip's largest down by
# halving; the best of them for the problem is taken (libraries pick tiles per shape).
_TILE_HALVINGS = 1
# Padding that costs less than this share of the work is not worth a line in the reasons.
_WORTH_SAYING = 1.005
# TPU: the MXU streams the left operand 8 rows (one sublane group) at a time.
_TPU_ROWS = 8


def cite(q: Quantity) -> str:
    """Where a figure comes from, briefly (`audit hardware show` gives each figure's full source)."""
    return f"{q.source}, {q.kind}" if q.kind else q.source


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


def k_loop_seconds(gemm: tuple[int, int, int, int] | None, ach: Achievable) -> tuple[float, str]:
    """(the least time a GPU matmul's K loop takes, why): one output tile's loop runs on one
    compute unit, its operands' first loads and its results' store around it (`gemm_fill_s`) and
    each 64-deep step after the last, at least `gemm_k_step_s` apiece (the latency of loading a
    step's operands, which a small tile's math cannot hide); 0 where the chip states no step time.
    A split-K matmul's K is its split's (XLA writes the splits as a batch dimension)."""
    step, fill = ach.gemm_k_step_s, ach.gemm_fill_s
    if gemm is None or min(gemm) < 1 or step is None:
        return 0.0, ""
    steps = -(-gemm[3] // K_STEP)
    around = fill.value if fill is not None else 0.0
    seconds = around + steps * step.value
    parts = [f"{steps} steps of {K_STEP} that one compute unit runs one after another, each at least "
             f"{human(step.value, 's')} ({cite(step)})"]
    if fill is not None:
        parts.append(f"{human(around, 's')} to start and end it ({cite(fill)})")
    return seconds, f"K loop: K={count(gemm[3])} is " + ", plus ".join(parts) + f": {human(seconds, 's')}"


def pipeline_fill(compute_s: float, memory_s: float, hw: Hardware, ach: Achievable) -> tuple[float, str]:
    """(seconds, why) a TPU matmul's MXU waits beyond the larger of its compute and memory times:
    the first block of operands must reach VMEM before it starts and the last block of results
    leaves after it ends. A problem that fits one block does not overlap its transfers with its
    math at all; a larger one exposes one block's transfer. 0 on other chips."""
    block = ach.pipeline_block_bytes
    if hw.kind != "tpu" or block is None or not ach.memory_bytes_per_s.value > 0:
        return 0.0, ""
    per_device = ach.memory_bytes_per_s.value / max(hw.devices_per_chip, 1)
    fill = min(compute_s, memory_s, block.value / per_device)
    if fill <= 0:
        return 0.0, ""
    return fill, (f"MXU pipeline fill: the first operand block's load and the last result block's store "
                  f"(blocks of at most {human(block.value, 'B')}, {cite(block)}) do not overlap the matrix "
                  f"unit: {human(fill, 's')}")


def _up(n: int, tile: int) -> int:
    return -(-n // tile) * tile


def _mxu_factor(gemm: tuple[int, int, int, int], tile: tuple[int, int]) -> tuple[float, str]:
    batch, m, n, k = gemm
    padded = _up(m, _TPU_ROWS) * _up(n, tile[1]) * _up(k, tile[0])
    factor = max(padded / (m * n * k), 1.0)
    if factor < _WORTH_SAYING:
        return factor, ""
    return factor, (f"MXU padding: M={m}, N={n}, K={k} pads to {_up(m, _TPU_ROWS)}x{_up(n, tile[1])}x"
                    f"{_up(k, tile[0])} on the {tile[0]}x{tile[1]} MXU ({ratio(factor)} the work)")


def _wave_factor(gemm: tuple[int, int, int, int], rows: int, cols: int, units: int) -> tuple[float, str]:
    """Work in whole output tiles (M and N padded up to the tile) and whole K steps, spread
    evenly over the compute units in rounds of one K step each (stream-K scheduling, which
    libraries use so that a partial last wave splits along K): what is left idle in the last
    round is the quantization no kernel escapes. The better of the chip's largest tile and
    tiles halved up to `_TILE_HALVINGS` times per side is taken, as libraries pick per shape."""
    batch, m, n, k = gemm
    useful = batch * m * n * k
    steps = -(-k // K_STEP)
    best: tuple[float, int, int, int] | None = None
    for i in range(_TILE_HALVINGS + 1):
        for j in range(_TILE_HALVINGS + 1):
            tm, tn = max(rows >> i, 16), max(cols >> j, 16)
            tiles = batch * -(-m // tm) * -(-n // tn)
            rounds = -(-tiles * steps // units)
            work = float(rounds * units * tm * tn * K_STEP)
            if best is None or work < best[0]:
                best = (work, tm, tn, tiles)
    assert best is not None
    work, tm, tn, tiles = best
    factor = max(work / useful, 1.0)
    if factor < _WORTH_SAYING:
        return factor, ""
    return factor, (f"tile and wave quantization: M={m}, N={n}, K={k}" + (f", batch {batch}" if batch > 1 else "")
                    + f" as {tiles} tiles of {tm}x{tn}, {steps} K steps of {K_STEP} each, over {units} compute "
                    f"units: {whole_percent(1 / factor)} of the work done is useful")
