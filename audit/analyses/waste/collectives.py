"""The same collective on the same data twice.

Two collectives of one kind over the same device groups, with the same operands, dimensions and
reduction, in one computation, compute the same result: the second moves the bytes again for
nothing. XLA's CSE merges such pairs when it can prove them equal; what it cannot (the operands reach
them through an optimization barrier, a different channel, or an async start) runs twice. An
async pair (`all-gather-start`/`-done`) is compared by its start, and timed by both halves.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...costmodel.units import human
from ...parsers.hlo_model import Instruction
from ...parsers.hlo_opcodes import COLLECTIVES
from ...reports.model.findings import Finding
from .program import ProgramView, Timing, evidence, finding, number

CAUSE = "waste:duplicate-collective"


def detect(view: ProgramView, timing: Timing) -> list[Finding]:
    again: list[tuple[Instruction, Instruction]] = []
    for comp in view.running():
        first: dict[tuple[object, ...], Instruction] = {}
        for instr in view.module.sequence(comp.name):
            key = _key(view, instr)
            if key is None:
                continue
            if key in first:
                again.append((first[key], instr))
            else:
                first[key] = instr
    repeats = [r for _, r in again]
    seconds = timing.of_ops(view.program, _with_done(view, repeats))
    if not again or seconds <= 0:
        return []
    size = sum(r.shape.byte_size for r in repeats)
    return [finding(view, timing, cause=CAUSE, seconds=seconds,
                    what=(f"{len(again)} collective{'s' if len(again) > 1 else ''} repeated on the same data "
                          f"({human(size, 'B')} moved again per run)"),
                    lines=evidence([i for pair in again for i in pair]),
                    action=("Reuse the first collective's result instead of running it again (compute it once "
                            "outside the two uses; an optimization_barrier between them keeps XLA from merging "
                            "them)."))]


def _key(view: ProgramView, instr: Instruction) -> tuple[object, ...] | None:
    opcode = instr.opcode.removesuffix("-start")
    if opcode not in COLLECTIVES or instr.opcode.endswith("-done") or not instr.operands:
        return None
    sources = tuple(_data(view, o) for o in instr.operands)
    return (opcode, sources, instr.replica_groups, instr.dimensions, instr.source_target_pairs, str(instr.shape),
            instr.attr("to_apply"))


def _data(view: ProgramView, operand: str) -> str:
    """The instruction whose data an operand is, through bitcasts, tuple elements and optimization barriers."""
    name = operand.lstrip("%")
    for _ in range(64):
        instr = view.get(name)
        if instr is None or not instr.operands:
            return name
        if instr.opcode in ("bitcast", "copy"):
            name = instr.operands[0].lstrip("%")
        elif instr.opcode == "get-tuple-element":
            base = view.get(instr.operands[0])
            index = number(instr, "index") or 0
            if base is not None and base.opcode in ("opt-barrier", "tuple") and index < len(base.operands):
                inner = view.get(base.operands[0]) if base.opcode == "opt-barrier" else None
                if inner is not None and inner.opcode == "tuple" and index < len(inner.operands):
                    name = inner.operands[index].lstrip("%")
                elif base.opcode == "tuple":
                    name = base.operands[index].lstrip("%")
                else:
                    return name
            else:
                return name
        elif instr.opcode == "opt-barrier" and not instr.shape.is_tuple:
            name = instr.operands[0].lstrip("%")
        else:
            return name
    return name


def _with_done(view: ProgramView, starts: Iterable[Instruction]) -> list[str]:
    names = []
    for start in starts:
        names.append(start.name)
        names += [u.name for u in view.users(start.name) if u.opcode.endswith("-done")]
    return names
