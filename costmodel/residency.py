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

from array import array
from dataclasses import fields
from itertools import accumulate, chain, repeat
from operator import attrgetter
from typing import Any, Callable, Mapping

from ..parsers.hlo.model import Computation, Module
from ..parsers.hlo.opcodes import CONTROL_FLOW
from . import residency_walk
from .chips.hardware import Hardware, MemoryLevel
from .ops.base import nbytes
from .costs import OpCost

# Ops that name other buffers without making one: their readers read what they name.
_ALIASES = frozenset({"get-tuple-element", "bitcast", "tuple", "opt-barrier", "add-dependency"})
# Ops that run other computations touch the buffers the ops they run make. An async start is not one
# here: the ops it wraps cost nothing themselves, it carries their bytes as an op of its own.
_KIND = {**{op: residency_walk.ALIAS for op in _ALIASES}, **{op: residency_walk.RUNS for op in CONTROL_FLOW},
         "parameter": residency_walk.FIRST, "constant": residency_walk.FIRST}
_FIELD_VALUES = attrgetter(*(f.name for f in fields(OpCost)))
_RESIDENT = [f.name for f in fields(OpCost)].index("resident")
assert all(f.init for f in fields(OpCost)), "OpCost is rebuilt from its fields in order"


def with_residency(module: Module, costs: Mapping[str, OpCost], hw: Hardware) -> dict[str, OpCost]:
    """`costs` with each op's cache-resident bytes per level of `hw` set from the schedule."""
    out = dict(costs)
    if not hw.caches:
        return out
    footprint = _footprint(module)
    capacities = array("d", [level.capacity_bytes.value for level in hw.caches])
    shared: dict[tuple[float, ...], tuple[tuple[str, float], ...]] = {}  # renamed copies of an op share one
    for comp in module.running():
        names = [i.name for i in comp.instructions]
        found = list(map(costs.get, names))
        distinct = {id(cost): cost for cost in found}  # ops share cost objects: a few per program
        priced = [cost for cost in distinct.values()
                  if cost is not None and cost.bytes_read is not None and cost.bytes_written is not None]
        numbers = dict.fromkeys(distinct, -1) | {id(cost): n for n, cost in enumerate(priced)}
        ops, groups, keys = _walker()(*_arrays(module, comp, footprint, comp.name == module.entry),
                                      capacities, array("i", map(numbers.__getitem__, map(id, found))))
        placed = [_placed(priced[int(key[0])], key[1:], hw.caches, shared) for key in keys]
        out.update(zip(map(names.__getitem__, memoryview(ops).cast("i")),
                       map(placed.__getitem__, memoryview(groups).cast("i"))))
    return out


def _placed(cost: OpCost, signature: tuple[float, ...], levels: tuple[MemoryLevel, ...],
            shared: dict[tuple[float, ...], tuple[tuple[str, float], ...]]) -> OpCost:
    """`cost` with the residency its signature gives (`dataclasses.replace`, without its per-field
    checks: a program of many computations places tens of thousands of costs)."""
    assert cost.bytes_read is not None and cost.bytes_written is not None
    key = (cost.bytes_read, cost.bytes_written, type(cost.bytes_read) is int, type(cost.bytes_written) is int, *signature)
    resident = shared.get(key)
    if resident is None:
        resident = shared[key] = _resident(cost, signature, levels)
    values = list(_FIELD_VALUES(cost))
    values[_RESIDENT] = resident
    return OpCost(*values)


def _resident(cost: OpCost, signature: tuple[float, ...], levels: tuple[MemoryLevel, ...]) -> tuple[tuple[str, float], ...]:
    """Per level, the bytes it may serve: the reads of resident inputs, and the writes of an output
    read again while still resident (an output nobody reads soon streams out)."""
    assert cost.bytes_read is not None and cost.bytes_written is not None
    named, held, kept = signature[0], signature[1:-1], int(signature[-1])
    resident = []
    for level, (memory, bytes_held) in enumerate(zip(levels, held)):
        read = cost.bytes_read * (bytes_held / named) if named else cost.bytes_read
        resident.append((memory.name, read + (cost.bytes_written if kept >> level & 1 else 0.0)))
    return tuple(resident)


def _footprint(module: Module) -> dict[str, float]:
    """Distinct bytes each loop, call or conditional touches: the buffers one pass of the
    computations it runs produces (XLA reuses them from one iteration to the next)."""
    reach: dict[str, frozenset[str]] = {}
    own: dict[str, float] = {}
    out: dict[str, float] = {}
    for comp in module.computations.values():
        for instr in comp.instructions:
            if instr.opcode not in CONTROL_FLOW:
                continue
            runs = frozenset().union(*(_reach(module, c.name, reach, own) for c in module.run_by(instr)))
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


def _walker() -> Callable[..., tuple[bytes, bytes, list[tuple[float, ...]]]]:
    """The C build of the walk (costmodel/_recency.c) where pip built one, else residency_walk's."""
    try:
        from ._recency import walk  # type: ignore[import-not-found]
    except ImportError:  # installed without a C compiler
        return residency_walk.walk
    compiled: Callable[..., tuple[bytes, bytes, list[tuple[float, ...]]]] = walk
    return compiled


def _arrays(module: Module, comp: Computation, footprint: Mapping[str, float], entry: bool) -> tuple[Any, ...]:
    """The computation as `residency_walk.walk` takes it, up to the capacities and costs."""
    instructions = comp.instructions
    n = len(instructions)
    names = [i.name for i in instructions]
    ids = dict(zip(names, range(n)))
    listed = list(chain.from_iterable(i.operands for i in instructions))
    try:
        operands = array("i", map(ids.__getitem__, listed))
    except KeyError:  # an operand named for a tuple element (`%t#0`) or from elsewhere: a buffer of size 0
        for name in listed:
            if name not in ids:
                ids[name] = len(names)
                names.append(name)
        operands = array("i", map(ids.__getitem__, listed))
    scheduled = module.schedule.get(comp.name)
    order = array("i", map(ids.__getitem__, scheduled) if scheduled and len(scheduled) == n else range(n))
    starts = array("i", accumulate((len(i.operands) for i in instructions), initial=0))
    kinds = bytes(map(_KIND.get, [i.opcode for i in instructions], repeat(residency_walk.PRODUCES, n)))
    shapes = [i.shape for i in instructions]
    distinct = {id(shape): shape for shape in shapes}  # parsers share shape objects: a few per program
    bytes_of = {key: float(nbytes(shape)) for key, shape in distinct.items()}
    sizes = array("d", map(bytes_of.__getitem__, map(id, shapes)))
    sizes.extend(repeat(0.0, len(names) - n))
    body = array("i", repeat(-1, n))
    for k in [k for k, kind in enumerate(kinds) if kind == residency_walk.RUNS]:
        body[k] = len(sizes)  # what a loop or call touches: a buffer of its own
        sizes.append(footprint.get(names[k], 0.0))
    hidden = bytearray(len(sizes))
    params = {k: int(instructions[k].attr("parameter_number") or -1) for k in order
              if instructions[k].opcode == "parameter"}
    for k in params:
        hidden[k] = not entry
    donated = array("i")  # (parameter, the root operand whose buffer the next run reads as it)
    root = comp.root_instruction
    if entry and module.aliased_outputs and root.opcode == "tuple":
        for k, number in params.items():
            index = module.aliased_outputs.get(number)
            if index is not None and index < len(root.operands):
                donated += array("i", [k, ids[root.operands[index]]])
    by_name = array("i", sorted(range(len(names)), key=names.__getitem__))
    return (kinds, order, starts, operands, body, sizes, bytes(hidden), by_name, array("i", params), donated,
            ids[root.name], int(entry))
