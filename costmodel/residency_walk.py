"""The residency walk over one computation, on integer arrays: the Python build of
`costmodel._recency.walk` (same steps, same floating-point operations in the same order, so the
same result to the last bit; the C build is taken where pip built it).

Op i's buffer is i; names an op reads that no op makes follow, then one buffer per loop or call
for what its body touches. The arguments, n ops in the order the computation lists them:

    kinds       bytes, per op: PRODUCES, ALIAS (names buffers, makes none), RUNS (a loop or a
                call: also touches its body's footprint), FIRST (parameter or constant: makes
                nothing to write)
    order       the ops in the order they run
    starts (n + 1) and operands: each op's operand buffers
    body        per op, the buffer standing for what a loop or call touches (-1: none)
    sizes       bytes per buffer;  hidden: per buffer, 1 where its history is unseen (a parameter
                of a computation other than the entry)
    by_name     the named buffers sorted by name: an op touches its buffers in that order (a set's
                order changes with the hash seed: the touches must not)
    params      the computation's parameters;  donated: (parameter, output) pairs the next run
                reads where this run left them (the walk then runs twice)
    root        the root's buffer;  entry: 1 for the entry;  capacities: bytes per cache level
    costs       per op, which of the program's costs it has (-1: none, or one without bytes)

Ops with the same cost and the same signature (the bytes their operand buffers name, per level
the bytes of those resident in it, and a mask with bit l set where the op's output stays in level
l until its first reader) get the same residency, and a big program has a few dozen of them.
Returns (ops, groups, keys): `ops` the ops with a cost that read (int32 bytes, in order), `groups`
each one's signature (int32 bytes), and `keys` per signature (cost, named bytes, held bytes per
level..., mask).
"""

from __future__ import annotations

import math
from array import array
from typing import Sequence

PRODUCES, ALIAS, RUNS, FIRST = 0, 1, 2, 3


class _Lru:
    """LRU stack distances by buffer number (a Fenwick tree over touch times)."""

    def __init__(self, touches: int, buffers: int):
        self.tree = [0.0] * (touches + 2)
        self.time = 0
        self.total = 0.0
        self.last = [0] * buffers  # 0: never touched (or forgotten)
        self.size = [0.0] * buffers

    def _add(self, at: int, value: float) -> None:
        tree, end = self.tree, len(self.tree)
        self.total += value
        while at < end:
            tree[at] += value
            at += at & -at

    def touch(self, buffer: int, size: float) -> None:
        if self.last[buffer]:
            self._add(self.last[buffer], -self.size[buffer])
        self.time += 1
        self.last[buffer], self.size[buffer] = self.time, size
        self._add(self.time, size)

    def since(self, buffer: int) -> float | None:
        at = self.last[buffer]
        if not at:
            return None
        before = 0.0
        while at > 0:
            before += self.tree[at]
            at &= at - 1
        return self.total - before

    def forget(self, buffer: int) -> None:
        if self.last[buffer]:
            self._add(self.last[buffer], -self.size[buffer])
            self.last[buffer] = 0

    def rename(self, old: int, new: int) -> None:
        if self.last[old]:
            self.forget(new)
            if self.last[old]:
                self.last[new], self.size[new] = self.last[old], self.size[old]
                self.last[old] = 0


def _expand(kinds: bytes, order: Sequence[int], starts: Sequence[int], operands: Sequence[int],
            rank: Sequence[int], aliases: dict[int, list[int]]) -> list[list[int] | None]:
    """Each op's operand buffers through the aliases before it, in name order (None for an alias)."""
    out: list[list[int] | None] = [None] * len(kinds)
    for i in order:
        names: set[int] = set()
        for o in operands[starts[i]:starts[i + 1]]:
            names.update(aliases.get(o, (o,)))
        if kinds[i] == ALIAS:
            aliases[i] = sorted(names, key=rank.__getitem__)
        else:
            out[i] = sorted(names, key=rank.__getitem__)
    return out


def _run(kinds: bytes, order: Sequence[int], body: Sequence[int], sizes: Sequence[float], hidden: bytes,
         reads: list[list[int] | None], lru: _Lru) -> tuple[list[list[float]], list[float]]:
    """One run: each op's operand distances (NaN: unseen history) and each buffer's distance at its
    first reader (NaN: never read)."""
    first = [math.nan] * len(sizes)
    produced = bytearray(len(sizes))
    distances: list[list[float]] = [[] for _ in kinds]
    for i in order:
        names = reads[i]
        if names is None:
            continue
        for b in names:
            since = lru.since(b)
            distances[i].append(since if since is not None else math.nan if hidden[b] else math.inf)
        for b in names:
            if produced[b] and math.isnan(first[b]):
                first[b] = lru.since(b) or 0.0
            lru.touch(b, sizes[b])
        if kinds[i] == RUNS:
            lru.touch(body[i], sizes[body[i]])
        if kinds[i] != FIRST:
            lru.touch(i, sizes[i])
            produced[i] = 1
    return distances, first


def _touches(kinds: bytes, reads: list[list[int] | None]) -> int:
    return sum(len(names) + (kind == RUNS) + (kind != FIRST) for kind, names in zip(kinds, reads) if names is not None)


def walk(kinds: bytes, order: Sequence[int], starts: Sequence[int], operands: Sequence[int], body: Sequence[int],
         sizes: Sequence[float], hidden: bytes, by_name: Sequence[int], params: Sequence[int],
         donated: Sequence[int], root: int, entry: int, capacities: Sequence[float],
         costs: Sequence[int]) -> tuple[bytes, bytes, list[tuple[float, ...]]]:
    rank = [0] * len(sizes)
    for position, b in enumerate(by_name):
        rank[b] = position
    aliases: dict[int, list[int]] = {}
    reads = _expand(kinds, order, starts, operands, rank, aliases)
    again = _expand(kinds, order, starts, operands, rank, aliases) if donated else []
    lru = _Lru(_touches(kinds, reads) + _touches(kinds, again), len(sizes))
    distances, first = _run(kinds, order, body, sizes, hidden, reads, lru)
    if donated:  # the next run: donated parameters are last run's outputs, the others first touches
        for p in params:
            lru.forget(p)
        pairs = list(zip(donated[::2], donated[1::2]))
        for param, output in pairs:
            for b in aliases.get(output, [output]):
                lru.rename(b, param)
        reads = again
        distances, first = _run(kinds, order, body, sizes, hidden, reads, lru)
        # An output the next run reads as a donated parameter is read when that parameter first is.
        for param, output in pairs:
            gap = next((d for i in order for b, d in zip(reads[i] or (), distances[i]) if b == param), None)
            for b in aliases.get(output, [output]):
                if gap is not None and math.isnan(first[b]):
                    first[b] = gap
    results = set(aliases.get(root, ())) | {root}
    ops, groups, keys = array("i"), array("i"), dict[tuple[float, ...], int]()
    for i, names in enumerate(reads):
        if names is None or costs[i] < 0:
            continue
        unseen = entry == 0 and i in results
        key = (costs[i], *_signature(names, distances[i], sizes, sizes[i], first[i], unseen, capacities))
        ops.append(i)
        groups.append(keys.setdefault(key, len(keys)))
    return ops.tobytes(), groups.tobytes(), list(keys)


def _signature(names: list[int], distances: list[float], sizes: Sequence[float], size: float, gap: float,
               unseen: bool, capacities: Sequence[float]) -> list[float]:
    named = 0.0
    for b in names:
        named += sizes[b]
    out, mask = [named], 0
    unseen = unseen and math.isnan(gap)
    for level, capacity in enumerate(capacities):
        held = 0.0
        for b, d in zip(names, distances):
            if sizes[b] <= capacity and (math.isnan(d) or d + sizes[b] <= capacity):
                held += sizes[b]
        out.append(held)
        if size <= capacity and (unseen or (not math.isnan(gap) and gap + size <= capacity)):
            mask |= 1 << level
    return out + [float(mask)]
