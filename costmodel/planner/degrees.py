"""Parallelism degrees a real model can run with on a real slice.

The book's closed forms pick the FSDP degree X that minimises communication over any
real number; a program has to shard whole attention heads and whole MLP columns, and a
mesh axis has to sit on physical chips. KV heads fewer than the TP ranks are replicated
(each rank keeps the one its query heads use), as every training and serving stack does,
so a multi-query model may still use TP 12. So a tensor-parallel degree must divide the
query heads and d_ff, divide or be a multiple of the KV heads, divide the chip count, and fit on
one physical axis of the slice (the book gives TP one axis, M_Y = 1): on a TPU it
divides one of the topology's axis lengths, on a GPU the NVLink/xGMI domain size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..chips.hardware import LINK_NAMES
from .chip_numbers import ChipNumbers
from .transformer import ModelConfig


@dataclass(frozen=True)
class TpDegrees:
    """The tensor-parallel degrees allowed on one pod, and why the others are not."""

    allowed: tuple[int, ...]
    rule: str

    def explain(self, degree: int) -> str:
        """Why `degree` is not allowed (empty when it is)."""
        return "" if degree in self.allowed else f"tp={degree} is not allowed: {self.rule}"


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def axis_lengths(chips: ChipNumbers, chips_per_pod: int) -> tuple[int, ...] | None:
    """The physical axis lengths TP may use: the named topology, the full pod, or a GPU domain."""
    if chips.kind != "tpu":
        return (min(chips.domain_chips, chips_per_pod),) if chips.domain_chips > 1 else (chips_per_pod,)
    if chips.topology and math.prod(chips.topology) == chips_per_pod:
        return tuple(chips.topology)
    if chips.max_torus and math.prod(chips.max_torus) == chips_per_pod:
        return tuple(chips.max_torus)
    return None


def kv_shardable(cfg: ModelConfig, degree: int) -> bool:
    """KV heads split evenly over `degree` ranks, or each is replicated on degree/K ranks."""
    return cfg.kv_heads % degree == 0 or degree % cfg.kv_heads == 0


def tp_degrees(cfg: ModelConfig, chips: ChipNumbers, chips_per_pod: int, *, one_axis: bool = True) -> TpDegrees:
    """Degrees that divide heads, KV heads, d_ff and the pod, and (with `one_axis`) fit one
    physical axis; serving shards over the whole slice, so it passes `one_axis=False`."""
    model_gcd = math.gcd(cfg.heads, cfg.d_ff)
    axes = axis_lengths(chips, chips_per_pod) if one_axis else None
    allowed = [d for d in divisors(chips_per_pod) if model_gcd % d == 0 and kv_shardable(cfg, d)]
    rule = (f"a TP degree must divide heads ({cfg.heads}), d_ff ({cfg.d_ff}) and the {chips_per_pod} chips, "
            f"and divide or be a multiple of the KV heads ({cfg.kv_heads})")
    if axes is not None:
        allowed = [d for d in allowed if any(n % d == 0 for n in axes)]
        where = f"the {LINK_NAMES.get(chips.link_kind, 'switch')} domain" if chips.kind != "tpu" \
            else "one axis of the slice"
        rule += f", and fit {where} ({'x'.join(str(n) for n in axes)})"
    return TpDegrees(tuple(allowed), rule)
