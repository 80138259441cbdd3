"""An input copied on every call because it is not donated.

An entry parameter that is not aliased to an output (`input_output_alias`, what `donate_argnums`
asks for) is read-only to XLA: where the program updates it in place (a loop carry, a
dynamic-update-slice) or returns it, copy insertion copies it first, once per call. Donated, the
update reuses the input's buffer and the copy goes. Only a copy that is the input's one reader
counts: where the program also reads the input elsewhere, its old value may stay live past the
update and donating would not remove the copy. A copy that also changes the layout is a layout
copy (`layout`), not this.
"""

from __future__ import annotations

from ...costmodel.units import human
from ...parsers.hlo.model import Instruction
from ...reports.model.findings import Finding
from .program import PASS_THROUGH, ProgramView, Timing, evidence, finding, is_copy, number

CAUSE = "waste:undonated-input"


def detect(view: ProgramView, timing: Timing) -> list[Finding]:
    entry = view.module.computations.get(view.module.entry)
    if entry is None:
        return []
    copies: list[tuple[Instruction, Instruction]] = []
    for instr in entry.instructions:
        if not is_copy(view, instr) or instr.shape.is_tuple or not instr.shape.dims:
            continue
        source = view.origin(instr.operands[0]) if instr.operands else None
        if source is None or source.opcode != "parameter" or view.get(source.name) is None:
            continue
        if not _only_copied(view, source.name, instr.name):
            continue  # read elsewhere too: the old value may stay live, and donating would not remove the copy
        if number(source, "parameter_number") in view.module.aliased_outputs or _layout(view, instr) != _layout(view, source, instr):
            continue
        copies.append((instr, source))
    seconds = timing.of_ops(view.program, (c.name for c, _ in copies))
    if not copies or seconds <= 0:
        return []
    params = sorted({n for _, p in copies if (n := number(p, "parameter_number")) is not None})
    size = sum(c.shape.byte_size for c, _ in copies)
    return [finding(
        view, timing, cause=CAUSE, seconds=seconds,
        what=(f"input{'s' if len(params) > 1 else ''} {', '.join(map(str, params))} copied on every call because "
              f"not donated ({human(size, 'B')} a call)"),
        lines=evidence([c for c, _ in copies] + [p for _, p in copies]),
        action=(f"Donate the buffer (jax.jit(..., donate_argnums=({', '.join(map(str, params))},))) if the caller "
                "does not use it after the call: the program then updates it in place."))]


def _only_copied(view: ProgramView, name: str, copy: str, depth: int = 0) -> bool:
    """Whether the copy is the one reader of the parameter's data (through bitcasts, reshapes and
    tuple elements): then nothing else keeps the input's value live, and donating it lets XLA
    update it in place."""
    readers = view.users(name)
    if not readers or depth > 16:
        return False
    return all(r.name == copy or (r.opcode in PASS_THROUGH and _only_copied(view, r.name, copy, depth + 1))
               for r in readers)


def _layout(view: ProgramView, instr: Instruction, like: Instruction | None = None) -> tuple[int, ...] | None:
    """The layout of `instr`, or for a parameter seen through reshapes, the layout `like` would
    have had (a reshape changes the dims, so compare only where the dims agree)."""
    if like is not None and instr.shape.dims != like.shape.dims:
        return like.shape.layout
    return instr.shape.layout
