"""A loop that copies its carry every iteration instead of updating it in place.

XLA's copy insertion puts a copy on each loop-carried value the body changes (of the parameter and
of the root) and removes those that no live range needs. A copy that survives in the body means the
old carry is still live when the new one is written: the body reads the carry after updating it (or
the scheduler could not order the read first), so the whole array is copied on every iteration. The
copies of scalars (the induction variable) are left out, and so are the copies before the loop (an
undonated input's, `undonated`) and after it.
"""

from __future__ import annotations

from ...costmodel.units import human
from ...parsers.hlo.model import Computation, Instruction
from ...reports.model.findings import Finding
from .program import ProgramView, Timing, evidence, finding, is_copy, root

CAUSE = "waste:loop-carry-copy"
ACTION = ("Let the loop update its carry in place: read what the body needs from the carry before the update "
          "that writes it (or read the updated value instead), so no old value stays live past the update; XLA "
          "then drops the copies.")


def detect(view: ProgramView, timing: Timing) -> list[Finding]:
    found = []
    for comp in view.running():
        for loop in comp.instructions:
            if loop.opcode != "while":
                continue
            body = view.module.computations.get((loop.attr("body") or (loop.called[0] if loop.called else "")).lstrip("%"))
            if body is None:
                continue
            copies = carry_copies(view, body)
            seconds = timing.of_ops(view.program, (c.name for c in copies))
            if not copies or seconds <= 0:
                continue
            size = max(c.shape.byte_size for c in copies)
            found.append(finding(
                view, timing, cause=CAUSE, seconds=seconds, action=ACTION,
                what=(f"the loop %{loop.name} copies its carry every iteration instead of updating it in place "
                      f"({len(copies)} cop{'y' if len(copies) == 1 else 'ies'} of up to {human(size, 'B')} "
                      "per iteration)"),
                lines=evidence([*copies, *(updates := _updates(view, body, copies)),
                                *_old_readers(body, copies, updates), loop])))
    return found


def carry_copies(view: ProgramView, body: Computation) -> list[Instruction]:
    """The body's copies of a loop-carried array: made from the carry (the body's parameter, through
    tuple elements and other copies), or written into the root that becomes the next carry."""
    params = {i.name for i in body.instructions if i.opcode == "parameter"}
    last = root(body)
    if last is None:
        return []
    into_root = {o.lstrip("%") for o in last.operands} if last.opcode == "tuple" else {last.name}
    out = []
    for instr in body.instructions:
        if not is_copy(view, instr) or instr.shape.is_tuple or not instr.shape.dims:
            continue
        if _from_carry(view, body, instr, params) or instr.name in into_root:
            out.append(instr)
    return out


def _from_carry(view: ProgramView, body: Computation, instr: Instruction, params: set[str]) -> bool:
    seen = 0
    current: Instruction | None = instr
    while current is not None and current.operands and seen < 64:
        current = body.get(current.operands[0].lstrip("%"))
        if current is None or current.name in params:
            return current is not None
        if current.opcode not in ("get-tuple-element", "bitcast") and not is_copy(view, current):
            return False
        seen += 1
    return False


def _updates(view: ProgramView, body: Computation, copies: list[Instruction]) -> list[Instruction]:
    """The in-place updates the copies feed (a dynamic-update-slice, or a fusion around one): the
    update the loop could not do on the carry itself."""
    names = {c.name for c in copies}
    out = []
    for instr in body.instructions:
        if instr.name in names or not names & {o.lstrip("%") for o in instr.operands}:
            continue
        fused = view.fused(instr)
        inner = fused.instructions if fused is not None else [instr]
        if any(i.opcode in ("dynamic-update-slice", "scatter") for i in inner):
            out.append(instr)
    return out


def _old_readers(body: Computation, copies: list[Instruction], updates: list[Instruction]) -> list[Instruction]:
    """The other ops that read the old carry or a copy of it: the reads that keep it live past the update."""
    names = {c.name for c in copies} | {o.lstrip("%") for c in copies for o in c.operands}
    skip = {c.name for c in copies} | {u.name for u in updates}
    return [i for i in body.instructions
            if i.name not in skip and i.opcode != "tuple" and names & {o.lstrip("%") for o in i.operands}]
