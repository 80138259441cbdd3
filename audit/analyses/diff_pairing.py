"""Pair the ops of two compilations structurally, since HLO names are not stable between compiles.

By fingerprint, then by opcode, framework op and shape, then (uncertain) by framework op alone
or by name with the same opcode and dtype; within each key by position in the schedule. The
rest are added or removed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..reports.model.diff import Pairing


@dataclass(frozen=True, eq=False)  # two ops of one program may agree in every field: each is itself
class ProgramOp:
    """One op of a side's program as the diff compares it, quantities summed over the report's steps.

    A type of its own, not an `OpRecord`: a side's program also counts the ops a command buffer ran
    (the `BufferOp`s of the report's `command_buffers` part), which have no record; this is the one
    view both are paired in, each instance itself (two identical ops of one program pair separately).
    """

    name: str
    module: str
    opcode: str
    category: str
    framework_op: str
    shape: str | None
    dtype: str
    fingerprint: str
    position: float | None  # 0..1 in its computation's schedule
    flops: float | None
    bytes: float | None
    comm_bytes: float
    expected_s: float | None
    self_s: float | None  # [trace] None where the op is not timed on its own


Key = Callable[[ProgramOp], tuple[Any, ...] | None]
# Matching passes, surest first: (name, key of an op, whether a pair found this way is uncertain).
# Within one key, ops pair by their position in the schedule. The name pass needs the same
# opcode and dtype, so an all-reduce of f32[33] is never paired with an unrelated bf16 one.
_PASSES: tuple[tuple[str, Key, bool], ...] = (
    ("fingerprint", lambda o: (o.fingerprint,), False),
    ("shape", lambda o: (o.opcode, o.framework_op, o.shape) if o.shape else None, False),
    ("framework op", lambda o: (o.opcode, o.framework_op) if o.framework_op else None, True),
    ("name", lambda o: (o.opcode, o.name, o.dtype), True),
)
_MAX_GREEDY = 250_000  # candidate pairs in one group beyond which ops pair in schedule order

PairedOps = list[tuple[ProgramOp, ProgramOp, Pairing]]


def _order(op: ProgramOp) -> tuple[float, str]:
    return (op.position if op.position is not None else 2.0, op.name)


def _pair_group(bs: list[ProgramOp], hs: list[ProgramOp]) -> list[tuple[ProgramOp, ProgramOp]]:
    """Pair two groups of interchangeable ops by nearest schedule position (ties: name order)."""
    bs, hs = sorted(bs, key=_order), sorted(hs, key=_order)
    if len(bs) == len(hs) or len(bs) * len(hs) > _MAX_GREEDY or any(o.position is None for o in bs + hs):
        return list(zip(bs, hs))
    candidates = sorted((abs((b.position or 0.0) - (h.position or 0.0)), i, j)
                        for i, b in enumerate(bs) for j, h in enumerate(hs))
    used_b: set[int] = set()
    used_h: set[int] = set()
    pairs = []
    for _, i, j in candidates:
        if i in used_b or j in used_h:
            continue
        used_b.add(i)
        used_h.add(j)
        pairs.append((bs[i], hs[j]))
    return sorted(pairs, key=lambda p: _order(p[0]))


def pair_ops(base: Sequence[ProgramOp], head: Sequence[ProgramOp]) -> tuple[PairedOps, list[ProgramOp], list[ProgramOp]]:
    """Pair ops structurally, pass by pass: (base, head, pairing) triples, then the removed and added ops."""
    left_b, left_h = list(base), list(head)
    out: PairedOps = []
    for how, key, uncertain in _PASSES:
        groups: dict[tuple[str, Any], tuple[list[ProgramOp], list[ProgramOp]]] = defaultdict(lambda: ([], []))
        for side, ops in ((0, left_b), (1, left_h)):
            for op in ops:
                k = key(op)
                if k is not None:
                    groups[(op.module or "?", k)][side].append(op)
        paired: set[int] = set()
        for k in sorted(groups, key=str):
            bs, hs = groups[k]
            # One op of a framework op on each side is that op, whatever its new shape.
            unsure = uncertain and not (how == "framework op" and len(bs) == len(hs) == 1)
            for b, h in _pair_group(bs, hs):
                distance = None if b.position is None or h.position is None else abs(b.position - h.position)
                out.append((b, h, Pairing(how, unsure, distance)))
                paired.update((id(b), id(h)))
        left_b = [o for o in left_b if id(o) not in paired]
        left_h = [o for o in left_h if id(o) not in paired]
    return out, left_b, left_h
