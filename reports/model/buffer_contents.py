"""The report part `command_buffers`: what each command buffer (a CUDA graph) ran, op by op, as priced.

The trace times a command buffer as one op, and the report judges it as one; this part keeps
the ops it runs with their HLO identity and cost, so that `audit diff` compares a capture taken
with command buffers against one taken without them op by op, as the same program.
Quantities are summed like the buffer's own record: per device, over its runs in the analysed
steps (an op that runs `runs` times per run of the buffer counts `runs` times per run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True)
class BufferOp:
    """One op a command buffer runs [model]: its HLO identity and what it costs."""

    name: str
    opcode: str
    category: str
    framework_op: str
    shape: str
    dtype: str
    fingerprint: str  # as the op table's (parsers.hlo_category.fingerprint)
    position: float | None  # 0..1 in its computation's schedule
    runs: int  # per run of the buffer
    flops: float | None
    bytes: float | None
    comm_bytes: float
    expected_s: float | None
    collective: str = ""  # a collective's kind, "" for any other op
    collective_bytes: float | None = None  # the collective's volume V per execution


@dataclass(frozen=True)
class BufferContents:
    """A command buffer of the op table (`key`) and the ops it ran."""

    key: str
    program_id: int
    name: str
    ops: Sequence[BufferOp]

    def to_json(self) -> JSON:
        return {"key": self.key, "program_id": self.program_id, "name": self.name,
                "ops": [{f.name: getattr(op, f.name) for f in fields(BufferOp)} for op in self.ops]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BufferContents:
        names = {f.name for f in fields(BufferOp)}
        return cls(str(d["key"]), int(d.get("program_id") or 0), str(d.get("name") or ""),
                   tuple(BufferOp(**{k: v for k, v in op.items() if k in names}) for op in d.get("ops") or ()))
