"""Copies made only to change a layout between the op that makes a value and the op that reads it.

A `copy` whose result has its operand's element type and dimensions but another layout (the order
of the dimensions in memory) moves every byte and computes nothing: layout assignment put it there
because the producer wrote one layout and the consumer asked for another. A fusion that only copies
a parameter into another layout (a "copy fusion") is the same. Left out: copies of a loop's carry
(`loop_carry`) and of an undonated input (`undonated`), which keep the layout, and logical
transposes (`transpose`), whose consumer may need the order they make.
"""

from __future__ import annotations

from ...costmodel.units import human
from ...parsers.hlo.model import Instruction, Shape
from ...reports.model.findings import Finding
from .program import PASS_THROUGH, ProgramView, Timing, evidence, finding, root

CAUSE = "waste:layout-copy"
ACTION = ("Make the producer write the layout its consumer reads: transposes written into the producer or consumer "
          "(einsum dimension order, a dot's contracting dimensions) let XLA's layout assignment agree instead of "
          "copying; on TPU, keep the minor dimension a multiple of 128.")


def detect(view: ProgramView, timing: Timing) -> list[Finding]:
    copies = [instr for comp in view.running() for instr in comp.instructions if changes_layout(view, instr)]
    seconds = timing.of_ops(view.program, (c.name for c in copies))
    if not copies or seconds <= 0:
        return []
    moved = sum(c.shape.byte_size for c in copies)
    copies.sort(key=lambda c: -timing.seconds.get((view.program, c.name), 0.0))
    return [finding(view, timing, cause=CAUSE, seconds=seconds, action=ACTION,
                    what=(f"{len(copies)} cop{'y' if len(copies) == 1 else 'ies'} only to change a layout "
                          f"({human(moved, 'B')} moved per run)"),
                    lines=evidence(copies))]


def changes_layout(view: ProgramView, instr: Instruction) -> bool:
    """A copy (or a fusion that only copies a parameter) into another layout of the same array."""
    if instr.opcode == "copy" and instr.operands:
        source = view.get(instr.operands[0])
        return source is not None and _relaid(source.shape, instr.shape)
    fused = view.fused(instr)
    if fused is None:
        return False
    last = root(fused)
    if last is None or last.opcode != "copy" or not last.operands:
        return False
    source = fused.get(last.operands[0].lstrip("%"))
    while source is not None and source.opcode in PASS_THROUGH - {"get-tuple-element"} and source.operands:
        source = fused.get(source.operands[0].lstrip("%"))
    if source is None or source.opcode != "parameter":
        return False
    return _relaid(source.shape, last.shape)


def _relaid(before: Shape, after: Shape) -> bool:
    return (not before.is_tuple and not after.is_tuple and before.dtype == after.dtype and before.dims == after.dims
            and len(after.dims) > 1 and before.layout is not None and after.layout is not None
            and _order(before) != _order(after))


def _order(shape: Shape) -> list[int]:
    """The dimensions longer than 1, minor to major: layouts that agree on them hold the same bytes
    in the same order (a bitcast, not a copy)."""
    return [d for d in shape.layout or () if shape.dims[d] > 1]
