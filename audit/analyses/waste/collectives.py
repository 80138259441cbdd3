"""The same collective on the same data twice.

Two collectives of one kind over the same device groups, with the same operands, dimensions and
reduction, in one computation, compute the same result: the second moves the bytes again for
nothing. XLA's CSE merges such pairs when it can prove them equal; what it cannot (the operands reach
them through an optimization barrier, a different channel, or an async start) runs twice. Once XLA's
combiner has merged them, one all-reduce (all-gather, reduce-scatter) sends the same operand twice:
that share of its time counts. An async pair (`all-gather-start`/`-done`) is compared by its start,
and timed by both halves.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...costmodel.units import human
from ...parsers.hlo.model import Instruction
from ...parsers.hlo.opcodes import COLLECTIVES
from ...reports.model.findings import Finding
from .program import ProgramView, Timing, evidence, finding, number

CAUSE = "waste:duplicate-collective"
_COMBINED = frozenset({"all-reduce", "all-gather", "reduce-scatter"})


def detect(view: ProgramView, timing: Timing) -> list[Finding]:
    again: list[tuple[Instruction, Instruction]] = []
    inside: list[tuple[Instruction, float]] = []  # a combined collective, the share of its operands sent twice
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
            if (share := _repeated_operands(view, instr)) > 0:
                inside.append((instr, share))
    seconds = timing.of_ops(view.program, _with_done(view, [r for _, r in again]))
    seconds += sum(timing.of_ops(view.program, _with_done(view, [i])) * share for i, share in inside)
    if not (again or inside) or seconds <= 0:
        return []
    size = sum(r.shape.byte_size for _, r in again) + sum(i.shape.byte_size * share for i, share in inside)
    count = len(again) + len(inside)
    return [finding(view, timing, cause=CAUSE, seconds=seconds,
                    what=(f"{count} collective{'s' if count > 1 else ''} repeated on the same data "
                          f"({human(size, 'B')} moved again per run)"),
                    lines=evidence([i for pair in again for i in pair] + [i for i, _ in inside]),
                    action=("Reuse the first collective's result instead of running it again: compute it once "
                            "and use it at both places (XLA's combiner merges separate collectives into one but "
                            "still sends each operand, the same one twice too)."))]


def _repeated_operands(view: ProgramView, instr: Instruction) -> float:
    """The share of a combined all-reduce's, all-gather's or reduce-scatter's bytes that repeat an
    operand it already sends (its results for the two are the same). An all-to-all sends each operand
    to another device, so one operand twice is not repeated there."""
    if instr.opcode.removesuffix("-start") not in _COMBINED or len(instr.operands) < 2:
        return 0.0
    seen: set[str] = set()
    total = repeated = 0
    for operand in instr.operands:
        data = view.get(operand)
        size = data.shape.byte_size if data is not None else 0
        total += size
        source = _data(view, operand)
        if source in seen:
            repeated += size
        seen.add(source)
    return repeated / total if total else 0.0


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
                return f"{base.name}#{index}" if base is not None else name  # one element, however many GTEs read it
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
