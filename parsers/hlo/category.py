"""Op categories as XProf names them (HloInstruction::ToCategory), and a structural fingerprint."""

from __future__ import annotations

import hashlib

from .model import Computation, Instruction, Module, Shape
from .opcodes import ELEMENTWISE

_FUSION_CATEGORY = {
    "kLoop": "loop fusion",
    "kInput": "input fusion",
    "kOutput": "output fusion",
    "kCustom": "custom fusion",
}
_DATA_FORMATTING = {"transpose", "copy", "reshape"}


def category(instr: Instruction) -> str:
    """XProf's category string for an instruction."""
    if instr.opcode == "fusion":
        return _FUSION_CATEGORY.get(instr.fusion_kind, "fusion")
    if instr.opcode in _DATA_FORMATTING:
        return "data formatting"
    if instr.opcode in ELEMENTWISE:
        return "non-fusion elementwise"
    return instr.opcode


def fingerprint(module: Module, instr: Instruction, comp: Computation | None = None) -> str:
    """A name-independent identity for matching an op across compilations (`comp`: the
    computation holding `instr`, where its operands are looked up first).

    Built from the opcode, fusion kind, framework op name, output and operand shapes,
    custom-call target, and the opcodes of a fused computation; never from HLO names,
    which change between compiles (`fusion.12` becomes `fusion.13`).
    """
    operand_shapes = tuple(o.shape for name in instr.operands if (o := _operand(module, comp, name)) is not None)
    # An unrolled program's copies share their reader's shape and metadata objects, so those are
    # told apart by identity (each kept in the memo, so that no other object takes its id).
    memo = module.__dict__.setdefault("_fingerprints", {})
    key = (instr.opcode, instr.fusion_kind, id(instr.metadata), id(instr.shape), instr.custom_call_target,
           _callees(module, instr.called), tuple(map(id, operand_shapes)))
    known = memo.get(key)
    if known is None:
        known = memo[key] = (_fingerprint(module, instr, operand_shapes), instr.metadata, instr.shape, operand_shapes)
    return str(known[0])


def _callees(module: Module, called: tuple[str, ...]) -> tuple[int | str, ...]:
    """The called computations by content where the reader numbered it (the copies of one fused
    computation give their callers one fingerprint, worked out once), else by name."""
    if not called:
        return called
    computations = module.computations
    return tuple([c.content if (c := computations.get(name)) is not None and c.content is not None else name
                  for name in called])


def _operand(module: Module, comp: Computation | None, name: str) -> Instruction | None:
    found = comp.get(name) if comp is not None else None
    if found is None:
        hit = module.find(name)
        found = hit[1] if hit is not None else None
    return found


def _fingerprint(module: Module, instr: Instruction, operand_shapes: tuple[Shape, ...]) -> str:
    parts = [instr.opcode, instr.fusion_kind, instr.metadata.op_name, str(instr.shape),
             instr.custom_call_target, ",".join(str(s) for s in operand_shapes)]
    fused = module.__dict__.setdefault("_fused_opcodes", {})  # one string per computation, not per caller
    for called in instr.called:
        text = fused.get(called)
        if text is None:
            comp = module.computations.get(called)
            text = fused[called] = " ".join(i.opcode for i in comp.instructions) if comp and comp.is_fusion else ""
        if text:
            parts.append(text)
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]
