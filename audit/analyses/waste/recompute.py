"""Forward work executed again in the backward pass: rematerialisation.

JAX's `jax.checkpoint` (remat) names the forward ops it re-executes for the backward pass
`.../rematted_computation/...`; XLA's own rematerialisation pass (under memory pressure) names its
clones `<op>.remat`. Re-executing is waste only where the forward also ran: when nothing but the
gradient is used, XLA drops the forward and the rematerialised ops are its only run. The forward
ran when some re-executed op computes what an op outside the backward pass computed (the same
primitive at the same source line, fused or not), or, for XLA's clones, when the original is there. Counted: the
time of the re-executed ops, and executed against useful FLOPs (executed less the re-executed).
It trades time for memory by design: the finding says what the memory saving costs.
"""

from __future__ import annotations

from ...costmodel.units import human, percent
from ...parsers.hlo.model import Instruction, Module
from ...reports.model.findings import Finding
from .program import ProgramView, Timing, evidence, finding

CAUSE = "waste:recompute"
_REMATTED = "rematted_computation"


def detect(view: ProgramView, timing: Timing) -> list[Finding]:
    ops = [i for comp in view.running() for i in comp.instructions if i.opcode not in ("parameter", "constant")]
    again = [i for i in ops if _rematted(i)]
    ran = _forward_keys(view.module) if again else set()
    if not any(_redone(view, i, ran) for i in again):
        return []  # the forward was dropped: these are its only run
    seconds = timing.of_ops(view.program, (i.name for i in again))
    if not again or seconds <= 0:
        return []
    executed = _flops(view, ops)
    redone = _flops(view, again)
    useful = f"; executed {human(executed, 'FLOP')}, useful {human(executed - redone, 'FLOP')} " \
             f"({percent(redone / executed)} re-executed)" if executed else ""
    return [finding(view, timing, cause=CAUSE, seconds=seconds,
                    what=f"{len(again)} forward op{'s' if len(again) > 1 else ''} re-executed in the backward pass{useful}",
                    lines=evidence(sorted(again, key=lambda i: -timing.seconds.get((view.program, i.name), 0.0))),
                    action=("Save these activations instead of recomputing them where memory allows: a "
                            "jax.checkpoint policy that saves the matmuls (jax.checkpoint_policies.dots_saveable, "
                            "or save_only_these_names), or checkpoint fewer layers."))]


def _rematted(instr: Instruction) -> bool:
    return _REMATTED in instr.metadata.op_name or _compiler_clone(instr.name) is not None


def _compiler_clone(name: str) -> str | None:
    """The instruction XLA's rematerialisation cloned `name` from (`fusion.3.remat`, `fusion.3.remat2`)."""
    base, dot, tail = name.rpartition(".remat")
    return base if dot and (not tail or tail.isdigit()) else None


def _key(instr: Instruction) -> tuple[str, str] | None:
    """What an op computes, for matching a re-execution to its first run: its source line and primitive."""
    meta = instr.metadata
    if not meta.source or not meta.op_name:
        return None
    return meta.source, meta.op_name.rsplit("/", 1)[-1]


def _forward_keys(module: Module) -> set[tuple[str, str]]:
    """The keys of the forward work that ran as such: fused or not, outside the backward pass
    (`transpose(...)` in its name) and outside any rematerialisation."""
    out = set()
    for _, instr in module.instructions():
        name = instr.metadata.op_name
        if name and "transpose(" not in name and not _rematted(instr) and (key := _key(instr)) is not None:
            out.add(key)
    return out


def _redone(view: ProgramView, instr: Instruction, ran: set[tuple[str, str]]) -> bool:
    """Whether the forward work `instr` re-executes also ran in the forward pass."""
    clone = _compiler_clone(instr.name)
    if clone is not None:
        return view.get(clone) is not None
    fused = view.fused(instr)
    inner = [i for i in fused.instructions if i.opcode not in ("parameter", "constant")] if fused else [instr]
    return any(key in ran for i in inner if (key := _key(i)) is not None)


def _flops(view: ProgramView, ops: list[Instruction]) -> float:
    if view.costs is None:
        return 0.0
    return sum(c.flops * (c.trip_count or 1) for i in ops if (c := view.costs.get(i.name)) is not None and c.flops)
