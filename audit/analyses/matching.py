"""How much measured GPU time was matched to HLO ops, and what the rest is.

An op is matched when its name is an instruction of its program's HLO with an expected
time. The rest is either explained (a container whose time is its body's: a while loop, or a
command buffer that runs its ops as one CUDA graph; a range XLA names that is not an
instruction: NCCL, runtime copies) or unmatched, and the largest of both are listed with
what they are, so a reader sees what the per-op verdicts leave out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..optable.record import OpRecord
from ..base.options import DEFAULTS

TOP = DEFAULTS.unmatched_kept
_KNOWN_RANGES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"command.?buffer|cuda.?graph", re.I),
     "command buffer: its ops run as one CUDA graph and are timed together"),
    (re.compile(r"^NCCL:|nccl", re.I), "NCCL range outside a thunk: collective launch or wait"),
    (re.compile(r"memcpy|memset|copy", re.I), "runtime copy or memset XLA issues outside the program's ops"),
)
# What each control-flow container runs (`hlo_opcodes.CONTROL_FLOW`); the other containers only wait.
_CONTAINERS = {"while": "while loop: its time is its body's ops', counted there",
               "call": "call (a command buffer on GPU): its ops run inside it as one CUDA graph",
               "conditional": "conditional: its time is the taken branch's ops'"}


def matching(ops: Sequence[OpRecord]) -> dict[str, Any] | None:
    """Measured time split into matched, explained and unmatched, seconds per device [trace]."""
    measured = [o for o in ops if o.measured_s is not None]
    if not measured:
        return None
    matched = explained = unmatched = 0.0
    rest: list[dict[str, Any]] = []
    for op in measured:
        time = float(op.measured_s or 0.0)
        status, what = _classify(op)
        if status == "matched":
            matched += time
            continue
        if status == "explained":
            explained += time
        else:
            unmatched += time
        rest.append({"name": op.name, "module": op.module, "measured_s": time, "status": status, "what": what})
    total = matched + explained + unmatched
    rest.sort(key=lambda r: -r["measured_s"])
    return {"measured_s": total, "matched_s": matched, "explained_s": explained, "unmatched_s": unmatched,
            "matched_share": matched / total if total else None,
            "covered_share": (matched + explained) / total if total else None,
            "ops": len(measured), "largest": rest[:TOP]}


def _classify(op: OpRecord) -> tuple[str, str]:
    if op.container:
        return "explained", _CONTAINERS.get(op.opcode, f"{op.opcode}: its time is its children's")
    if op.opcode and op.expected_s is not None:
        return "matched", ""
    if op.opcode:
        return "unmatched", f"{op.opcode} in the HLO, without an expected time"
    for pattern, what in _KNOWN_RANGES:
        if pattern.search(op.name):
            return "explained", what
    return "unmatched", "not an instruction of the program's HLO"
