"""The records of a prediction, judged once per distinct op.

With nothing measured, an op's record follows from its cost, expectation, run count and opcode
alone; the rest is its identity (name, source, shape...). An unrolled program repeats a few
dozen distinct ops over hundreds of thousands of instructions, so each distinct one is judged
once and its record copied with each instruction's identity.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import fields
from operator import attrgetter
from typing import Any

from ..reports.model.record import OpRecord
from .join import Joined

# Fields of a record copied from its joined row as they are.
IDENTITY = ("key", "program_id", "module", "name", "category", "framework_op", "source", "shape",
            "fingerprint", "position", "custom_call_target", "devices")
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
        return OpRecord(*values)
