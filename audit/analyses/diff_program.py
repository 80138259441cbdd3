"""What changed in the program between two reports, per step: exact, since compile-time quantities are
deterministic (a relative 1e-9 only absorbs float summation order).

A side's program is the ops that launch work, as the HLO prices them: a command buffer (a CUDA
graph the trace times as one op) counts as the ops it ran where the report lists them (its
`command_buffers` part), so a capture taken with CUDA graphs and one taken without them compare
as the same program; ops that launch nothing and were never measured (parameters, bitcasts and
tuples of an HLO dump's prediction) are not part of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..optable.record import OpRecord
from ..reports.model.buffer_contents import BufferContents, BufferOp
from ..reports.model.diff import (OP_QUANTITIES, PROGRAM_FIELDS, BaseHead, ChangedOp, CompileTimeChanges, OpBrief,
                                  OpCounts, OpenedBuffer, Pairing, Total)
from ..reports.model.report import ReportModel
from .diff_pairing import PairedOps, ProgramOp

_REL_EQ = 1e-9


def per_step(report: ReportModel) -> float:
    """What a report's summed quantities are divided by for one step (a prediction is one step)."""
    return float(report.summary.steps or 1)


def measured_ops(report: ReportModel) -> list[ProgramOp]:
    """The ops whose own time counts (containers left out), as the trace timed them."""
    return [_from_record(o) for o in report.timed_ops]


def program_ops(report: ReportModel, timed: list[ProgramOp]) -> list[ProgramOp]:
    """The ops of a side's program (module docstring): command buffers as the ops they ran; `timed`
    itself (`measured_ops` of the report) when that is all of them."""
    buffers = {b.key: b for b in _buffers(report)}
    records = report.timed_ops
    if not buffers and all(_in_program(o) for o in records):
        return timed
    out: list[ProgramOp] = []
    for o, op in zip(records, timed):
        if o.key in buffers:
            out += [_from_buffer_op(x, o.module) for x in buffers[o.key].ops]
        elif _in_program(o):
            out.append(op)
    return out


def _in_program(o: OpRecord) -> bool:
    """False for an op that launches nothing and was never measured (an HLO dump's parameter)."""
    return o.launches_work is not False or o.self_s is not None


def _buffers(report: ReportModel) -> list[BufferContents]:
    return [BufferContents.from_json(b) for b in report.part("command_buffers") or []]


def _from_record(o: OpRecord) -> ProgramOp:
    return ProgramOp(o.name, o.module, o.opcode, o.category, o.framework_op, o.shape, o.dtype, o.fingerprint,
                     o.position, o.flops, o.bytes, o.comm_bytes or 0.0, o.expected_s, o.self_s)


def _from_buffer_op(o: BufferOp, module: str) -> ProgramOp:
    return ProgramOp(o.name, module, o.opcode, o.category, o.framework_op, o.shape, o.dtype, o.fingerprint,
                     o.position, o.flops, o.bytes, o.comm_bytes, o.expected_s, None)


def _changed(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(a - b) > _REL_EQ * max(abs(a), abs(b), 1.0)


def _total(ops: Sequence[ProgramOp], report: ReportModel, quantity: str) -> float:
    return sum((getattr(o, quantity) or 0.0) for o in ops) / per_step(report)


def _counts(ops: Sequence[ProgramOp], report: ReportModel) -> OpCounts:
    collectives = [f"{c.kind} {int(c.bytes)} B" for c in report.collectives]
    collectives += [f"{x.collective} {int(x.collective_bytes or 0)} B" for b in _buffers(report) for x in b.ops
                    if x.collective]
    return OpCounts(dict(Counter(o.category or "unknown" for o in ops)), sum(1 for o in ops if o.opcode == "fusion"),
                    dict(Counter(collectives)))


def _per_step_of(op: ProgramOp, quantity: str, report: ReportModel) -> float | None:
    value = getattr(op, quantity)
    return None if value is None else value / per_step(report)


def _changed_op(b: ProgramOp, h: ProgramOp, pairing: Pairing, base: ReportModel,
                head: ReportModel) -> ChangedOp | None:
    """The pair as a changed op, or None when its FLOPs, bytes and communicated bytes per step agree."""
    quantities = {q: BaseHead(_per_step_of(b, q, base), _per_step_of(h, q, head)) for q in OP_QUANTITIES}
    if not any(_changed(quantities[q].base, quantities[q].head) for q in PROGRAM_FIELDS):
        return None
    return ChangedOp(h.name, b.name, h.module, h.opcode, h.framework_op, b.shape, h.shape, quantities, pairing)


def _brief(op: ProgramOp, report: ReportModel) -> OpBrief:
    return OpBrief(op.name, op.module, op.opcode, op.category, op.framework_op, op.shape,
                   _per_step_of(op, "flops", report), op.comm_bytes / per_step(report),
                   _per_step_of(op, "expected_s", report))


def opened_buffers(base: ReportModel, head: ReportModel) -> list[OpenedBuffer]:
    """The command buffers each side's program counts as the ops they ran."""
    return [OpenedBuffer(side, b.name, len(b.ops)) for side, report in (("base", base), ("head", head))
            for b in _buffers(report) if b.key in {o.key for o in report.timed_ops}]


def compile_time(base: ReportModel, head: ReportModel, ops: tuple[list[ProgramOp], list[ProgramOp]], pairs: PairedOps,
                 removed: list[ProgramOp], added: list[ProgramOp]) -> CompileTimeChanges:
    """Deterministic changes per step: totals, counts, per-op FLOPs and bytes, added and removed ops.

    `ops` are each side's program ops and `pairs` how `diff_pairing.pair_ops` paired them; a changed
    op from an uncertain pairing says so instead of reading as a sure change.
    """
    totals = {}
    for q in (*PROGRAM_FIELDS, "expected_s"):
        tb, th = _total(ops[0], base, q), _total(ops[1], head, q)
        totals[q] = Total(tb, th, _changed(tb, th))
    step_b, step_h = base.summary.overlap.expected_step_s, head.summary.overlap.expected_step_s
    if step_b is not None and step_h is not None:  # the overlapped step of a scheduled program: already one step
        totals["expected_step_s"] = Total(float(step_b), float(step_h), _changed(step_b, step_h))
    changed = [c for b, h, p in pairs if (c := _changed_op(b, h, p, base, head)) is not None]
    changed.sort(key=lambda r: -abs((r.flops.head or 0) - (r.flops.base or 0)))
    return CompileTimeChanges(totals, _counts(ops[0], base), _counts(ops[1], head), changed,
                              dict(Counter(p.how for _, _, p in pairs)), [_brief(o, head) for o in added],
                              [_brief(o, base) for o in removed], opened_buffers(base, head))
