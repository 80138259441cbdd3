"""What every waste detector reads: one program's HLO, the time each of its ops costs per step, and
the HLO lines a finding cites as evidence.

Times are per step: for a profile, each op's measured time summed over the analysed steps divided
by them [trace]; for an HLO dump or a compile, each op's expected time [model].
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ...costmodel.chips.hardware import Hardware
from ...costmodel.costs import OpCost
from ...parsers.hlo.model import Computation, Instruction, Module, Shape
from ...reports.model.findings import Finding, FindingOrigin
from ...reports.model.report import ReportModel

# Ops that pass their operand's data through unchanged: a value is followed through them to where it was made.
PASS_THROUGH = frozenset({"bitcast", "get-tuple-element", "reshape"})
# Evidence lines a finding lists at most; the rest are counted.
EVIDENCE_LINES = 6


@dataclass(frozen=True)
class Timing:
    """The time of a report's ops per step, and the step they are a share of."""

    seconds: Mapping[tuple[int, str], float]  # (program, op) -> seconds per step
    step_s: float | None  # the mean measured (or, for a prediction, expected) step; None when no step repeats
    origin: FindingOrigin
    bound: Mapping[tuple[int, str], str] = field(default_factory=dict)  # (program, op) -> what bounds it [model]

    @classmethod
    def of(cls, report: ReportModel) -> Timing:
        predicted = report.predicted
        steps = 1 if predicted else max(report.summary.steps, 1)
        runs = {int(p["program_id"]): max(int(p.get("executions") or 1), 1) for p in report.part("programs") or []}
        seconds: dict[tuple[int, str], float] = {}
        bound: dict[tuple[int, str], str] = {}
        for o in report.ops:
            value = o.expected_s if predicted else o.measured_s
            if o.container or value is None:
                continue
            seconds[(o.program_id, o.name)] = value / runs.get(o.program_id, steps)
            bound[(o.program_id, o.name)] = o.bound_by
        # The mean step, as the times are (summed over the steps, divided by them); a prediction's is its one step.
        times = [float(t) for s in report.steps if isinstance(t := s.get("time_s"), (int, float))]
        step = None if runs else sum(times) / len(times) if times and not predicted else report.summary.step_time_s.median
        return cls(seconds, step if step and step > 0 else None, "model" if predicted else "trace", bound)

    def of_ops(self, program: int, names: Iterable[str]) -> float:
        return sum(self.seconds.get((program, n), 0.0) for n in names)

    def share(self, seconds: float) -> float | None:
        return seconds / self.step_s if self.step_s else None


@dataclass
class ProgramView:
    """One program with the indexes the detectors share: every instruction by name, and its users."""

    program: int
    module: Module
    costs: Mapping[str, OpCost] | None = None
    hw: Hardware | None = None
    _users: dict[str, list[Instruction]] | None = None
    _running: list[Computation] | None = None

    @property
    def label(self) -> str:
        return self.module.name

    def running(self) -> list[Computation]:
        """The computations whose instructions are the program's ops (fused ones left out), found once."""
        if self._running is None:
            self._running = self.module.running()
        return self._running

    def get(self, name: str) -> Instruction | None:
        found = self.module.find(name.lstrip("%"))
        return found[1] if found else None

    def users(self, name: str) -> list[Instruction]:
        """The ops that read `name` (ops of the program: instructions of fused computations left out)."""
        if self._users is None:
            self._users = {}
            for comp in self.running():
                for instr in comp.instructions:
                    for op in instr.operands:
                        self._users.setdefault(_base(op), []).append(instr)
        return self._users.get(name, [])

    def origin(self, name: str) -> Instruction | None:
        """Where the data of `name` was made, through bitcasts, reshapes and tuple elements."""
        instr = self.get(name)
        seen = 0
        while instr is not None and instr.opcode in PASS_THROUGH and instr.operands and seen < 64:
            instr = self.get(instr.operands[0])
            seen += 1
        return instr

    def fused(self, instr: Instruction) -> Computation | None:
        """The fused computation a fusion runs."""
        if instr.opcode != "fusion":
            return None
        name = instr.attr("calls") or (instr.called[0] if instr.called else "")
        return self.module.computations.get(name.lstrip("%"))


def number(instr: Instruction, key: str) -> int | None:
    """An integer attribute (`parameter_number`, `index`), or None where the text holds none."""
    text = instr.attr(key).strip()
    return int(text) if text.lstrip("-").isdigit() else None


def root(comp: Computation) -> Instruction | None:
    """A computation's root, or None for one whose root the file does not hold."""
    return comp.get(comp.root) if comp.root else None


def is_copy(view: ProgramView, instr: Instruction) -> bool:
    """A copy: the `copy` op, or a fusion that only copies its one parameter (XLA:GPU wraps copies so)."""
    if instr.opcode == "copy":
        return True
    fused = view.fused(instr)
    last = root(fused) if fused is not None else None
    if fused is None or last is None or last.opcode != "copy" or len(instr.operands) != 1:
        return False
    return all(i.opcode in ("parameter", "copy", "bitcast") for i in fused.instructions)


def _base(operand: str) -> str:
    name = operand.lstrip("%")
    base, sep, index = name.rpartition("#")
    return base if sep and index.isdigit() else name


def shape_text(shape: Shape) -> str:
    """A shape as HLO prints it, with its layout and memory space (what a layout change changes)."""
    if shape.is_tuple:
        parts = [shape_text(s) for s in shape.tuple_shapes[:3]]
        more = len(shape.tuple_shapes) - len(parts)
        return "(" + ", ".join(parts) + (f", ... {more} more" if more else "") + ")"
    text = f"{shape.dtype}[{','.join(str(d) for d in shape.dims)}]"
    if shape.layout is not None:
        space = f":S({shape.memory_space})" if shape.memory_space else ""
        text += "{" + ",".join(str(d) for d in shape.layout) + space + "}"
    return text


def line(instr: Instruction) -> str:
    """One HLO instruction as evidence: name, shape, opcode, operands, and the source line that made it."""
    operands = ", ".join("%" + o.lstrip("%") for o in instr.operands[:4]) + (", ..." if len(instr.operands) > 4 else "")
    text = f"%{instr.name} = {shape_text(instr.shape)} {instr.opcode}({operands})"
    # file:line by the file's name, as the host functions are named (the Python tracer names them so)
    where = instr.metadata.source.rsplit("/", 1)[-1] if instr.metadata.source else instr.metadata.op_name
    return f"{text}  [{where}]" if where else text


def evidence(instrs: Iterable[Instruction], extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The lines of a finding: the first `EVIDENCE_LINES` instructions, a count of the rest, then `extra`."""
    listed = list(instrs)
    out = [line(i) for i in listed[:EVIDENCE_LINES]]
    if len(listed) > EVIDENCE_LINES:
        out.append(f"... and {len(listed) - EVIDENCE_LINES} more alike")
    return (*out, *extra)


def finding(view: ProgramView, timing: Timing, *, cause: str, what: str, seconds: float,
            lines: tuple[str, ...], action: str, origin: FindingOrigin | None = None) -> Finding:
    """A finding of program waste: its title says what; its time and share of the step are the finding's own
    fields, which every format prints beside the title."""
    return Finding(cause=cause, title=what, time_per_step_s=seconds,
                   share=timing.share(seconds), evidence=lines, action=action, origin=origin or timing.origin,
                   program=view.label)
