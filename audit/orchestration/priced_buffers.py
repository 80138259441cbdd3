"""The report's `command_buffers` part: each command buffer the op table judged, and the ops it ran."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..costmodel.costs import Expectation, OpCost
from ..optable.command_buffers import OPCODE, contents
from ..optable.record import OpRecord
from ..parsers.hlo.category import category, fingerprint
from ..parsers.hlo.model import Module
from ..reports.model.buffer_contents import BufferContents, BufferOp


def buffer_contents(ops: Sequence[OpRecord], modules: Mapping[int, Module],
                    costs: Mapping[int, Mapping[str, OpCost]],
                    expectations: Mapping[tuple[int, str], Expectation]) -> list[BufferContents]:
    """Every priced command buffer among `ops` with the ops it ran, summed over the buffer's runs."""
    buffers = [o for o in ops if o.opcode == OPCODE and o.expected_s is not None and o.program_id in modules]
    out: list[BufferContents] = []
    for pid in sorted({o.program_id for o in buffers}):
        module, priced = modules[pid], costs.get(pid, {})
        ran = contents(module, priced, {o.name for o in ops if o.program_id == pid})
        for buffer in (o for o in buffers if o.program_id == pid):
            found = ran.get(buffer.name)
            if found is None or found.problem:
                continue
            rows = [_row(module, name, runs * buffer.occurrences, runs, priced[name], expectations.get((pid, name)))
                    for name, runs in found.ops.items()]
            out.append(BufferContents(buffer.key, pid, buffer.name, tuple(r for r in rows if r is not None)))
    return out


def _row(module: Module, name: str, executions: float, runs: int, cost: OpCost,
         expectation: Expectation | None) -> BufferOp | None:
    found = module.find(name)
    if found is None:
        return None
    instr = found[1]

    def summed(value: float | None) -> float | None:
        return None if value is None else value * executions

    info = cost.collective
    return BufferOp(
        name=name, opcode=instr.opcode, category=category(instr), framework_op=instr.metadata.op_name,
        shape=str(instr.shape), dtype=cost.dtype, fingerprint=fingerprint(module, instr),
        position=module.position(name), runs=runs, flops=summed(cost.flops), bytes=summed(cost.bytes),
        comm_bytes=cost.comm_bytes * executions,
        expected_s=summed(expectation.expected_s if expectation is not None else None),
        collective=info.kind if info is not None else "", collective_bytes=info.bytes if info is not None else None)
