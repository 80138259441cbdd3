"""The records of a prediction, judged once per distinct op.

With nothing measured, an op's record follows from its cost, expectation, run count and opcode
alone; the rest is its identity (name, source, shape...). An unrolled program repeats a few
dozen distinct ops over hundreds of thousands of instructions, so each distinct one is judged
once and its record copied with each instruction's identity.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import fields
from operator import attrgetter
from typing import Any

from ..costmodel.costs import Expectation, OpCost
from ..parsers.hlo.model import Module
from ..base.stamping import stamper
from .record import OpRecord, record_of
from .join import IDENTITY, Joined, StaticIdentity, static_row

_NAMES = [f.name for f in fields(OpRecord)]
_SLOTS = [_NAMES.index(name) for name in IDENTITY]
_record_values = attrgetter(*_NAMES)
_identity = attrgetter(*IDENTITY)


class PredictedRecords:
    """`judged(row)`: `judge_one(row)`, once per distinct `(key, judgement)` for rows that carry
    no measurement; a measured row is always judged on its own."""

    def __init__(self, judge_one: Callable[[Joined], OpRecord]):
        self.judge_one = judge_one
        self.seen: dict[Hashable, list[Any]] = {}

    def judged(self, r: Joined, beside: Hashable) -> OpRecord:
        """`beside`: whatever else the record depends on besides the row (None: nothing)."""
        if r.measured_s is not None or r.self_s is not None or r.measured_s_max is not None:
            return self.judge_one(r)
        key = (r.cost, r.expectation, r.occurrences, r.opcode, r.instr_found, r.achievable, r.unjudged,
               r.trace_flops, r.trace_bytes, beside)
        values = self.seen.get(key)
        if values is None:
            record = self.judge_one(r)
            self.seen[key] = list(_record_values(record))
            return record
        values = values.copy()
        for slot, value in zip(_SLOTS, _identity(r)):
            values[slot] = value
        return record_of(values)


def predicted_records(module: Module, pid: int, costs: Mapping[str, OpCost],
                      expectations: Mapping[tuple[int, str], Expectation], devices: int,
                      judge_one: Callable[[Joined], OpRecord], alone: Callable[[str], bool]) -> list[OpRecord]:
    """The records of a module's ops with nothing measured, in `costs` order: `judge_one` on the
    joined row of the first op of each distinct (cost, expectation, runs, opcode), its record
    stamped with the identity of every other. `alone(name)`: an op judged on its own row.

    Equal costs are told apart by value once per object: an unrolled program's copies share one
    object each, which then costs no hashing of its fields per op.
    """
    ident = StaticIdentity(module, pid, devices)
    seen: dict[tuple[int, int, float | None, str], OpRecord] = {}
    one = _Canonical()
    out = []
    # The ops are the instructions of computations that run on their own, never of fused ones.
    index = {i.name: (c, i) for c in module.computations.values() if not c.is_fusion for i in c.instructions}
    for name, cost in costs.items():
        found = index.get(name) or module.find(name)
        if found is None:
            continue
        comp, instr = found
        exp = expectations.get((pid, name))
        if alone(name):
            out.append(judge_one(static_row(ident(name, instr, comp), instr, cost, exp)))
            continue
        key = (id(one(cost)), id(one(exp)), cost.trip_count, instr.opcode)
        template = seen.get(key)
        if template is None:
            template = seen[key] = judge_one(static_row(ident(name, instr, comp), instr, cost, exp))
            out.append(template)
            continue
        out.append(_stamp(template, *ident(name, instr, comp)))
    return out


def _stamp_values(template: OpRecord, *identity: Any) -> OpRecord:
    """`template` with the `IDENTITY` fields set to `identity` (the C stamp's Python twin)."""
    if len(identity) != len(IDENTITY):
        raise TypeError(f"a stamp sets the {len(IDENTITY)} identity fields, not {len(identity)}")
    values = list(_record_values(template))
    for slot, value in zip(_SLOTS, identity):
        values[slot] = value
    return record_of(values)


_stamp: Callable[..., OpRecord] = stamper(OpRecord, IDENTITY) or _stamp_values


class _Canonical:
    """`one(x)`: the first object seen equal to `x`, found by `x`'s identity after the first time
    (the objects stay alive in the caller's mappings, so no other takes their id)."""

    def __init__(self) -> None:
        self.by_id: dict[int, Any] = {}
        self.by_value: dict[Any, Any] = {}

    def __call__(self, x: Any) -> Any:
        found = self.by_id.get(id(x))
        if found is None:
            found = self.by_id[id(x)] = self.by_value.setdefault(x, x)
        return found
