"""Fused attention: the work a problem holds, and the time good attention kernels take for it.

FLOPs follow the FlashAttention papers' convention: forward 2 * B * H * pairs * (D + Dv) for Q.K^T and
P.V, where `pairs` counts the (query, key) pairs the mask lets through; backward 2.5x forward (it
recomputes Q.K^T, then computes dP, dV, dK and dQ: five matmuls against the forward's two), each
matmul over D or Dv as its operands are; a backward split in two kernels counts the matmuls of each.

Flash kernels do not reach a large GEMM's rate: each block of queries pays a fixed cost (loading Q,
the softmax rescaling, writing O) that only a long run of keys amortizes, and masked blocks add
imbalance. The achievable time takes the chip's measured or published attention rate for the pass
and mask at long sequences (`Achievable.attention_flops_per_s`) and derates it by how many keys a
query attends: rate * L / (L + L_half), L the mean keys per query and L_half the length at which
the kernels reach half their rate (`Achievable.attention_half_rate_keys`). On a GPU the blocks of
128 queries (keys, backward) are also spread over the compute units in whole waves.
"""

from __future__ import annotations

import math

from .chips.hardware import Achievable, Hardware, Quantity
from .costs import AttentionProblem, OpCost
from .units import count, human, percent, whole, whole_percent

# The matmuls of each kernel, as (over D, over Dv): forward Q.K^T and P.V; backward recomputes Q.K^T,
# then dP = dO.V^T, dV = P^T.dO, dK = dS^T.Q, dQ = dS.K.
MATMULS = {"forward": (1, 1), "backward": (3, 2), "backward dK dV": (2, 2), "backward dQ": (2, 1)}
# Rows of queries (forward) or keys (backward) one thread block of a flash kernel takes (estimate:
# FlashAttention-2/3 and cuDNN's flash kernels use 128 at head dims 64 to 128).
BLOCK_ROWS = 128


# The largest length, head count or head dimension a config or shape may state (a real one is below
# 2^20; shapes already hold at most 2^50 elements): beyond it, a number is a crafted or damaged config.
MAX_EXTENT = 1 << 40


def unreadable(p: AttentionProblem) -> str | None:
    """Why a problem read from a config or shapes cannot be priced (a size out of range), or None."""
    sizes = {"batch": p.batch, "heads": p.heads, "KV heads": p.kv_heads, "head dim": p.qk_dim, "value head dim":
             p.v_dim, "segments": p.segments}
    lengths = {"query length": p.q_len, "key length": p.kv_len, "window left": p.window[0],
               "window right": p.window[1]}
    for name, value in sizes.items():
        if not isinstance(value, int) or not 1 <= value <= MAX_EXTENT:
            return f"its {name} {value} is out of range (1 to {count(MAX_EXTENT)})"
    for name, value in lengths.items():
        low = -1 if name.startswith("window") else 0
        if not isinstance(value, int) or not low <= value <= MAX_EXTENT:
            return f"its {name} {value} is out of range ({low} to {count(MAX_EXTENT)})"
    return None


def pairs(p: AttentionProblem) -> int:
    """(query, key) pairs one batch entry and head computes: every key a query may attend, by the
    mask (causal, top-left or bottom-right aligned) and the window around its diagonal.

    Counted in closed form, in constant time and memory: query i attends keys max(0, i + b) to
    min(K - 1, i + a), a sum of linear pieces (lengths come from the input, so no array is sized by them).
    """
    if p.q_len <= 0 or p.kv_len <= 0:
        return 0
    left, right = p.window
    offset = p.kv_len - p.q_len if p.bottom_right else 0
    top = p.kv_len - 1
    a = offset + (0 if p.causal else right) if p.causal or right >= 0 else None  # last key: i + a
    b = offset - left if left >= 0 else None  # first key: i + b
    cuts = sorted({0, p.q_len, *(min(max(x, 0), p.q_len) for x in
                                 ((top - a + 1) if a is not None else p.q_len, (1 - b) if b is not None else 0))})
    total = 0
    for x0, x1 in zip(cuts, cuts[1:]):
        capped = a is None or x0 + a >= top  # the last key is K - 1 over this piece, else i + a
        floored = b is None or x0 + b <= 0  # the first key is 0 over this piece, else i + b
        slope = (0 if capped else 1) - (0 if floored else 1)
        last = top if capped or a is None else a
        first = 0 if floored or b is None else b
        constant = last - first + 1  # keys of query i: constant + slope * i
        total += _positive_sum(constant, slope, x0, x1)
    return total


def _positive_sum(c: int, slope: int, start: int, stop: int) -> int:
    """Sum of max(0, c + slope * i) over start <= i < stop, slope -1, 0 or 1."""
    if slope > 0:
        start = max(start, 1 - c)
    elif slope < 0:
        stop = min(stop, c)
    n = stop - start
    if n <= 0:
        return 0
    return n * c + slope * (start + stop - 1) * n // 2 if slope else n * max(c, 0)


def flops(p: AttentionProblem) -> float:
    over_d, over_dv = MATMULS[p.kernel]
    return 2.0 * p.batch * p.heads * pairs(p) * (over_d * p.qk_dim + over_dv * p.v_dim)


def exponentials(p: AttentionProblem) -> float:
    """exp() per pair: the forward's softmax, recomputed once by the backward."""
    return float(p.batch * p.heads * pairs(p))


def mask_name(p: AttentionProblem) -> str:
    parts = ["padding"] if p.padded else []
    if p.causal:
        parts.append("causal" + (" bottom-right" if p.bottom_right else ""))
    left, right = p.window
    if left >= 0 or right >= 0:
        reach = [f"{left} keys back"] if left >= 0 else []
        parts.append("sliding window of " + ", ".join(reach + ([f"{right} ahead"] if right >= 0 else [])))
    return ", ".join(parts) or "no mask"


def describe(p: AttentionProblem) -> tuple[str, ...]:
    """The notes that say what was counted and from what."""
    heads = f"H={p.heads}" + (f" ({p.kv_heads} KV heads)" if p.kv_heads != p.heads else "")
    dims = f"D={p.qk_dim}" + (f", Dv={p.v_dim}" if p.v_dim != p.qk_dim else "")
    share = pairs(p) / (p.q_len * p.kv_len) if p.q_len and p.kv_len else 0.0
    notes = [f"attention {p.kernel}: B={p.batch}, {heads}, S_q={p.q_len}, "
             f"S_kv={p.kv_len}, {dims}, {mask_name(p)} ({percent(share)} of the score matrix); read from {p.config}",
             _formula(p.kernel)]
    if p.padded:
        notes.append("the valid lengths are runtime operands (sequence lengths or offsets), so every position "
                     "up to the stated lengths is counted: the most work the op can hold, and it runs faster "
                     "on shorter sequences")
    if p.segments > 1:
        notes.append(f"up to {p.segments} sequences per row: counted as one per row; {p.segments} of equal length "
                     f"would be {p.segments}x less work")
    return tuple(notes)


def _formula(kernel: str) -> str:
    if kernel == "forward":
        return "FLOPs 2*B*H*pairs*(D+Dv): Q.K^T and P.V"
    if kernel == "backward":
        return "FLOPs 2*B*H*pairs*(3D+2Dv), 2.5x the forward: Q.K^T recomputed, then dP, dV, dK, dQ"
    over_d, over_dv = MATMULS[kernel]
    return f"FLOPs 2*B*H*pairs*({over_d}D+{over_dv}Dv): Q.K^T recomputed, then the matmuls of {kernel[9:]}"


def figure_key(p: AttentionProblem) -> str:
    """The `attention_flops_per_s` key that prices a problem: pass, and whether a mask cuts blocks."""
    masked = p.causal or p.window != (-1, -1)
    return ("backward" if p.backward else "forward") + ("_causal" if masked else "")


def achievable_compute(cost: OpCost, compute_s: float, hw: Hardware, ach: Achievable, notes: list[str],
                       sources: list[str]) -> float:
    """The compute time of an attention call at what flash kernels reach on this chip (never below
    the roofline's `compute_s`); `compute_s` where the chip states no attention figure."""
    p = cost.attention
    rate_q = ach.attention_flops_per_s.get(figure_key(p)) if p is not None else None
    if p is None or rate_q is None or not cost.flops or not p.q_len:
        return compute_s
    rate = rate_q.value * _dtype_scale(cost.dtype, hw, ach) / max(hw.devices_per_chip, 1)
    keys = pairs(p) / p.q_len
    half = ach.attention_half_rate_keys.get("backward" if p.backward else "forward")
    length = (keys + half.value) / keys if half is not None and keys > 0 else 1.0
    waves = _waves(p, hw, ach)
    sources.append(f"{figure_key(p).replace('_', ' ')} attention {human(rate_q.value, 'FLOP/s')} ({_cite(rate_q)})")
    if rate_q.estimate and hw.vendor != "NVIDIA":
        notes.append(f"{hw.name}'s flash attention rate is an estimate carried over from NVIDIA measurements (cuDNN "
                     f"on H100, scaled to this chip's matmul rate): no {hw.vendor or hw.name} attention kernel has "
                     "been measured for it yet")
    if length > 1.005 and half is not None:
        notes.append(f"{whole(keys)} keys per query on average: flash kernels reach {whole_percent(1 / length)} of "
                     f"their long-sequence rate (half of it at {whole(half.value)} keys, {_cite(half)})")
    if waves > 1.005:
        blocks, units = _blocks(p), _units(ach)
        notes.append(f"{whole(blocks)} blocks of {BLOCK_ROWS} {'keys' if _by_keys(p) else 'queries'} take "
                     f"{math.ceil(blocks / units)} waves over {units} compute units: {whole_percent(1 / waves)} of their slots "
                     "do work")
    return max(compute_s, cost.flops * length * waves / rate)


def _cite(q: Quantity) -> str:
    return f"{q.source}, {q.kind}" if q.kind else q.source


def _dtype_scale(dtype: str, hw: Hardware, ach: Achievable) -> float:
    """Attention figures are for 16-bit inputs; other input types scale them as the chip's matmul
    rates do (FP8 attention runs on the FP8 tensor-core rate)."""
    if dtype in ("bf16", "f16", ""):
        return 1.0
    base = ach.matmul_flops_per_s.get("bf16")
    peak = hw.peak(dtype)
    key = next((k for k, q in hw.peak_flops.items() if q is peak), "")
    other = ach.matmul_flops_per_s.get(key)
    if base is None or other is None or not base.value:
        return 1.0
    return other.value / base.value


def _by_keys(p: AttentionProblem) -> bool:
    """Whether the kernel's blocks are rows of keys (a backward that computes dK and dV) or of queries."""
    return p.kernel in ("backward", "backward dK dV")


def _blocks(p: AttentionProblem) -> int:
    rows = p.kv_len if _by_keys(p) else p.q_len
    return p.batch * p.heads * math.ceil(rows / BLOCK_ROWS)


def _units(ach: Achievable) -> int:
    return int(ach.compute_units.value) if ach.compute_units is not None else 0


def _waves(p: AttentionProblem, hw: Hardware, ach: Achievable) -> float:
    """Work in whole waves of blocks over the GPU's compute units / useful work (1 off a GPU)."""
    units, blocks = _units(ach), _blocks(p)
    if hw.kind != "gpu" or units < 1 or blocks < 1:
        return 1.0
    return math.ceil(blocks / units) * units / blocks
