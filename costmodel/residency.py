"""Which of an op's bytes can come from a cache, by the data's history in the schedule.

A cache roof is only a roof where the data can be in the cache. Each computation is
walked in the order it runs, keeping the buffers it touches in least-recently-used order.
An input is resident in a level when the distinct bytes touched since it was produced or
last read, plus its own size, fit in the level (its LRU stack distance); an output stays in
the level when its first reader comes that soon, else it streams out to main memory (the
program's result included, unless the next run reads it as a donated parameter). A loop or
a call counts as touching the buffers one pass of its body makes.

The entry computation's parameters are first touches, read from main memory, with one
exception the program states: a donated parameter that an output reuses
(`input_output_alias`, a training step updating its state in place) was produced by the
previous run of the program, so the walk runs the program twice and reads such a parameter
where the previous run left it. The parameters of a loop body or a called computation have
a history the walk cannot see, so they count as resident wherever they fit (the roof must
stay a lower bound).

The result is per op and per level: the bytes that may be served by that level
(`OpCost.resident`); the roofline (costmodel.roofline) charges the rest to main memory.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..parsers.hlo_model import Computation, Instruction, Module
from .chips.hardware import Hardware, MemoryLevel
from .ops.base import nbytes
from .ops.module import execution_plan
from .costs import OpCost

# Ops that name other buffers without making one: their readers read what they name.
_ALIASES = frozenset({"get-tuple-element", "bitcast", "tuple", "opt-barrier", "add-dependency"})
# Ops that run other computations: they touch the buffers the ops they run make.
_RUNS_OTHERS = frozenset({"while", "call", "conditional"})


def with_residency(module: Module, costs: Mapping[str, OpCost], hw: Hardware) -> dict[str, OpCost]:
    """`costs` with each op's cache-resident bytes per level of `hw` set from the schedule."""
    out = dict(costs)
    if not hw.caches:
        return out
    footprint = _footprint(module)
    placed: dict[tuple[OpCost, tuple[tuple[str, float], ...]], OpCost] = {}  # many ops share both
    for name in execution_plan(module):
        comp = module.computations[name]
        for op, resident in _walk(module, comp, costs, footprint, hw.caches, comp.name == module.entry).items():
            key = (out[op], resident)
            found = placed.get(key)
            if found is None:
                found = placed[key] = replace(out[op], resident=resident)
            out[op] = found
    return out


def _footprint(module: Module) -> dict[str, float]:
    """Distinct bytes each loop, call or conditional touches: the buffers one pass of the
    computations it runs produces (XLA reuses them from one iteration to the next)."""
    reach: dict[str, frozenset[str]] = {}
    own: dict[str, float] = {}
    out: dict[str, float] = {}
    for comp in module.computations.values():
        for instr in comp.instructions:
            if instr.opcode not in _RUNS_OTHERS:
                continue
            names = [c.lstrip("%") for c in instr.called] + [instr.attr(k).lstrip("%") for k in
                                                              ("body", "condition", "to_apply")]
            runs = frozenset().union(*(_reach(module, n, reach, own) for n in names))
            out[instr.name] = sum(own[n] for n in runs)
    return out


def _reach(module: Module, name: str, reach: dict[str, frozenset[str]], own: dict[str, float]) -> frozenset[str]:
    """`name` and every computation it runs (fused ones excluded), each found once however many
    paths lead to it; `own` gets the bytes each of them produces itself."""
    if name in reach:
        return reach[name]
    comp = module.computations.get(name)
    if comp is None or comp.is_fusion:
        return frozenset()
    own[name] = sum(float(nbytes(op.shape)) for op in comp.instructions if op.opcode not in _ALIASES)
    inner = [_reach(module, c.lstrip("%"), reach, own) for op in comp.instructions for c in op.called]
    reach[name] = frozenset({name}).union(*inner)
    return reach[name]


class _Recency:
    """Buffers in least-recently-used order: the distinct bytes touched since a buffer's last touch
    (a Fenwick tree over touch times, so each query is O(log n))."""

    def __init__(self, touches: int):
        self.tree = [0.0] * (touches + 2)
        self.time = 0
        self.total = 0.0  # every touch's bytes: the prefix sum up to `time`
        self.last: dict[str, int] = {}
        self.size: dict[str, float] = {}

    def _add(self, at: int, value: float) -> None:
        tree, end = self.tree, len(self.tree)
        self.total += value
        while at < end:
            tree[at] += value
            at += at & -at

    def _prefix(self, at: int) -> float:
        tree, total = self.tree, 0.0
        while at > 0:
            total += tree[at]
            at &= at - 1
        return total

    def touch(self, buffer: str, size: float) -> None:
        last = self.last.get(buffer)
        if last is not None:
            self._add(last, -self.size[buffer])
        self.time += 1
        self.last[buffer], self.size[buffer] = self.time, size
        self._add(self.time, size)

    def forget(self, buffer: str) -> None:
        if buffer in self.last:
            self._add(self.last.pop(buffer), -self.size.pop(buffer))

    def rename(self, old: str, new: str) -> None:
        """`new` is the buffer `old` was (an output the next run reads as its parameter)."""
        if old in self.last:
            self.forget(new)
            self.last[new], self.size[new] = self.last.pop(old), self.size.pop(old)

    def since(self, buffer: str) -> float | None:
        """Distinct bytes touched after `buffer` was; None when it was never touched."""
        last = self.last.get(buffer)
        return None if last is None else self.total - self._prefix(last)


def recency_for(touches: int) -> _Recency:
    """The C build of `_Recency` (costmodel/_recency.c, built by pip at install) where there is one:
    a big program's walk makes millions of touches, a few dozen tree steps each."""
    try:
        from ._recency import Recency  # type: ignore[import-not-found]
    except ImportError:  # installed without a C compiler
        return _Recency(touches)
    compiled: _Recency = Recency(touches)
    return compiled


def _walk(module: Module, comp: Computation, costs: Mapping[str, OpCost], footprint: Mapping[str, float],
          levels: tuple[MemoryLevel, ...], entry: bool) -> dict[str, tuple[tuple[str, float], ...]]:
    order = module.sequence(comp.name)
    size = {i.name: float(nbytes(i.shape)) for i in order}
    aliases: dict[str, frozenset[str]] = {}
    recency = recency_for(2 * sum(len(i.operands) + 2 for i in order))
    params = {i.name: int(i.attr("parameter_number") or -1) for i in order if i.opcode == "parameter"}
    root = comp.root_instruction
    donated = {}  # parameter name -> the root operand whose buffer the next run reads as it
    if entry and module.aliased_outputs and root.opcode == "tuple":
        for name, number in params.items():
            index = module.aliased_outputs.get(number)
            if index is not None and index < len(root.operands):
                donated[name] = root.operands[index]
    reads, first_read = _one_run(order, comp, size, aliases, recency, footprint, entry)
    if donated:  # the next run: donated parameters are last run's outputs, the others first touches
        for name in params:
            recency.forget(name)
        for name, output in donated.items():
            for buffer in sorted(aliases.get(output, frozenset({output}))):
                recency.rename(buffer, name)
        reads, first_read = _one_run(order, comp, size, aliases, recency, footprint, entry)
        # An output the next run reads as a donated parameter is read when that parameter first is.
        for name, output in donated.items():
            gap = next((d for op in reads.values() for b, d in op if b == name), None)
            for buffer in sorted(aliases.get(output, frozenset({output}))):
                if gap is not None and buffer not in first_read:
                    first_read[buffer] = gap
    return _resident(order, size, reads, first_read, comp, aliases, costs, levels, entry)


def _one_run(order: list[Instruction], comp: Computation, size: Mapping[str, float],
             aliases: dict[str, frozenset[str]], recency: _Recency, footprint: Mapping[str, float],
             entry: bool) -> tuple[dict[str, list[tuple[str, float | None]]], dict[str, float]]:
    """One run of the computation: each op's operand buffers with their distances (None: a history
    the walk cannot see), and each produced buffer's distance at its first reader."""
    reads: dict[str, list[tuple[str, float | None]]] = {}
    first_read: dict[str, float] = {}
    produced: set[str] = set()
    for instr in order:
        names = frozenset(b for o in instr.operands for b in aliases.get(o, frozenset({o})))
        if instr.opcode in _ALIASES:
            aliases[instr.name] = names
            continue
        ordered = sorted(names)  # a set's order changes with the hash seed: the touches must not
        reads[instr.name] = [(b, _distance(b, recency, comp, entry)) for b in ordered]
        for b in ordered:
            if b in produced and b not in first_read:
                first_read[b] = recency.since(b) or 0.0
            recency.touch(b, size.get(b, 0.0))
        if instr.opcode in _RUNS_OTHERS:
            recency.touch(f"{instr.name}/body", footprint.get(instr.name, 0.0))
        if instr.opcode not in ("parameter", "constant"):
            recency.touch(instr.name, size[instr.name])
            produced.add(instr.name)
    return reads, first_read


def _resident(order: list[Instruction], size: Mapping[str, float],
              reads: Mapping[str, list[tuple[str, float | None]]], first_read: Mapping[str, float],
              comp: Computation, aliases: Mapping[str, frozenset[str]], costs: Mapping[str, OpCost],
              levels: tuple[MemoryLevel, ...], entry: bool) -> dict[str, tuple[tuple[str, float], ...]]:
    """Per op and level, the bytes that level may serve: the reads of resident inputs, and the writes
    of an output read again while still resident (an output nobody reads soon streams out)."""
    out: dict[str, tuple[tuple[str, float], ...]] = {}
    for instr in order:
        cost = costs.get(instr.name)
        if instr.name not in reads or cost is None or cost.bytes_read is None or cost.bytes_written is None:
            continue
        operands = reads[instr.name]
        named = sum(size.get(b, 0.0) for b, _ in operands)
        gap = first_read.get(instr.name)
        # A loop body's or a call's result goes back to a caller whose history the walk cannot see.
        unseen = gap is None and not entry and _is_result(instr, comp.root, aliases)
        resident = []
        for level in levels:
            capacity = level.capacity_bytes.value
            held = sum(size.get(b, 0.0) for b, d in operands
                       if size.get(b, 0.0) <= capacity and (d is None or d + size.get(b, 0.0) <= capacity))
            read = cost.bytes_read * (held / named) if named else cost.bytes_read
            kept = size[instr.name] <= capacity and (unseen or (gap is not None and gap + size[instr.name] <= capacity))
            resident.append((level.name, read + (cost.bytes_written if kept else 0.0)))
        out[instr.name] = tuple(resident)
    return out


def _distance(buffer: str, recency: _Recency, comp: Computation, entry: bool) -> float | None:
    """Distinct bytes touched since `buffer` was last produced or read; inf for a first touch, None
    for a parameter of a computation whose caller's history the walk cannot see."""
    since = recency.since(buffer)
    if since is not None:
        return since
    instr: Instruction | None = comp.get(buffer)
    if instr is not None and instr.opcode == "parameter" and not entry:
        return None
    return float("inf")


def _is_result(instr: Instruction, root: str, aliases: Mapping[str, frozenset[str]]) -> bool:
    return instr.name == root or instr.name in aliases.get(root, frozenset())
