"""How many times a while loop runs.

XLA states the count as `known_trip_count` in the while's backend_config when
its analysis proved it. TPU dumps often leave it out even for the plain
counted loops `jax.lax.scan` and `fori_loop` produce, so the canonical form is
also recognised here: the condition is `i < C` for a loop-carried integer i that
starts at a constant and the body increments by exactly 1. Anything else is
unknown (None), never guessed.
"""

from __future__ import annotations

import json

from ...base.errors import InputError
from ...parsers.hlo.model import Computation, Instruction, Module
from ...base.ranges import MAX_TRIP_COUNT
from .base import backend_json
from ..units import count

_TRANSPARENT = ("copy", "bitcast", "reshape", "convert")


def stated_trip_count(instr: Instruction) -> int | None:
    """The count from `backend_config={"known_trip_count":{"n":"5"}}` (or the reader's attribute).

    **Raises:** `InputError` naming the while for a count that is not a count (text, negative, huge).
    """
    count = backend_json(instr).get("known_trip_count", {})
    if isinstance(count, dict) and "n" in count:
        return _count(count["n"], instr)
    raw = instr.attr("known_trip_count").strip()
    if raw.isdigit():
        return _count(raw, instr)
    if raw.startswith("{"):
        try:
            return _count(json.loads(raw)["n"], instr)
        except (ValueError, KeyError, TypeError):
            return None
    return None


def _count(value: object, instr: Instruction) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not text.isdigit() or len(text) > 15 \
            or int(text) > MAX_TRIP_COUNT:
        raise InputError(f"HLO instruction {instr.name!r}: known_trip_count {text[:30]!r} is not a trip count "
                         f"(0 to {count(MAX_TRIP_COUNT)})")
    return int(text)


def _int_constant(instr: Instruction | None, comp: Computation) -> int | None:
    while instr is not None and instr.opcode in _TRANSPARENT and instr.operands:
        instr = comp.get(instr.operands[0])
    if instr is None or instr.opcode != "constant":
        return None
    literal = instr.attr("literal").strip()
    try:
        return int(literal)
    except ValueError:
        return None


def _tuple_index(instr: Instruction | None) -> int | None:
    if instr is None or instr.opcode != "get-tuple-element":
        return None
    index = instr.attr("index") or instr.attr("tuple_index")
    return int(index) if index.isdigit() else None


def _bound(cond: Computation) -> tuple[int, int] | None:
    """(tuple index of the counter, exclusive upper bound) when the condition is `counter < C`."""
    root = cond.root_instruction
    if root.opcode != "compare" or len(root.operands) != 2:
        return None
    lhs, rhs = (cond.get(n) for n in root.operands)
    direction = root.attr("direction")
    if direction == "LT":
        index, bound = _tuple_index(lhs), _int_constant(rhs, cond)
    elif direction == "GT":
        index, bound = _tuple_index(rhs), _int_constant(lhs, cond)
    else:
        return None
    return (index, bound) if index is not None and bound is not None else None


def _step(body: Computation, index: int) -> int | None:
    """The constant the body adds to the counter each iteration (XLA's windowed einsum loops, unrolled
    twice, add 2), or None when the update is not `counter + C` with C > 0."""
    root = body.root_instruction
    if root.opcode != "tuple" or index >= len(root.operands):
        return None
    step = body.get(root.operands[index])
    if step is None or step.opcode != "add" or len(step.operands) != 2:
        return None
    a, b = (body.get(n) for n in step.operands)
    for counter, constant in ((a, b), (b, a)):
        by = _int_constant(constant, body)
        if _tuple_index(counter) == index and by is not None and by > 0:
            return by
    return None


def _initial_value(module: Module, loop: Instruction, index: int) -> int | None:
    hit = module.find(loop.operands[0]) if loop.operands else None
    if hit is None:
        return None
    comp, init = hit
    if init.opcode != "tuple" or index >= len(init.operands):
        return None
    return _int_constant(comp.get(init.operands[index]), comp)


def inferred_trip_count(module: Module, loop: Instruction, body: Computation | None,
                        cond: Computation | None) -> int | None:
    """The trip count of a canonical counted loop (`for i in range(c0, C, step)`), else None."""
    if body is None or cond is None:
        return None
    bound = _bound(cond)
    step = _step(body, bound[0]) if bound is not None else None
    if bound is None or step is None:
        return None
    start = _initial_value(module, loop, bound[0])
    return None if start is None else max(0, -(-(bound[1] - start) // step))


def while_parts(module: Module, loop: Instruction) -> tuple[Computation | None, Computation | None]:
    """(body, condition) of a while; `called` lists the body first, as XLA does."""
    return module.while_parts(loop)


def trip_count(module: Module, loop: Instruction) -> tuple[int | None, str]:
    """The loop's trip count and where it came from: `known_trip_count`, `inferred` or `unknown`."""
    stated = stated_trip_count(loop)
    if stated is not None:
        return stated, "known_trip_count"
    inferred = inferred_trip_count(module, loop, *while_parts(module, loop))
    return (inferred, "inferred from the loop condition") if inferred is not None else (None, "unknown")
