"""The per-opcode dispatch table and what every handler shares.

A handler takes one instruction and the context it runs in and returns its
`OpCost` for one execution on one device. `@handles("dot")` registers it in
`HANDLERS`, the one table; opcodes deliberately left unmodeled are listed in
`UNMODELED` with the reason. Both are filled when `costmodel.ops.module` imports
the handler modules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ...parsers.hlo.model import Computation, Instruction, Module, Shape
from .layout import host_bytes, on_chip_bytes, shape_bytes
from ..costs import OpCost, Origin

Handler = Callable[[Instruction, "CostContext"], OpCost]

HANDLERS: dict[str, Handler] = {}
UNMODELED: dict[str, str] = {}


def handles(*opcodes: str) -> Callable[[Handler], Handler]:
    """Register a handler for one or more HLO opcodes (each opcode has exactly one handler)."""

    def register(fn: Handler) -> Handler:
        for opcode in opcodes:
            if opcode in HANDLERS:
                raise ValueError(f"opcode {opcode!r} already has a handler: {HANDLERS[opcode].__name__}")
            HANDLERS[opcode] = fn
        return fn

    return register


def unmodeled_opcode(opcode: str, reason: str) -> None:
    UNMODELED[opcode] = reason


@dataclass(frozen=True)
class CostContext:
    """Where an instruction runs: its module, its computation, and how many devices run the program.

    `memo` holds what is known of each computation of the module, shared by every context made
    `within` this one: a computation called from several places (a fused computation two fusions
    call, a reducer) is costed once, not once per path to it (which grows exponentially with
    the nesting of such sharing). `fusions` keeps the cost of each fused computation for the
    operand and result shapes it was priced at: an unrolled program calls one deduplicated
    computation from thousands of fusions.
    """

    module: Module
    computation: Computation
    num_devices: int | None = None
    memo: dict[tuple[str, str], Any] = field(default_factory=dict, compare=False, repr=False)
    fusions: dict[tuple[Any, ...], "OpCost"] = field(default_factory=dict, compare=False, repr=False)

    def within(self, computation: Computation) -> "CostContext":
        return CostContext(self.module, computation, self.num_devices, self.memo, self.fusions)

    def instruction(self, name: str) -> Instruction:
        found = self.computation.get(name)
        if found is not None:
            return found
        hit = self.module.find(name)
        if hit is None:
            raise KeyError(f"operand {name} not found in module {self.module.name}")
        return hit[1]

    def operands(self, instr: Instruction) -> list[Instruction]:
        return [self.instruction(name) for name in instr.operands]

    def operand_shapes(self, instr: Instruction) -> list[Shape]:
        return [op.shape for op in self.operands(instr)]

    def computation_named(self, name: str) -> Computation | None:
        return self.module.computations.get(name.lstrip("%")) if name else None

    def called(self, instr: Instruction, key: str = "", index: int = 0) -> Computation | None:
        """A called computation, by attribute name (`to_apply`, `body`, ...) or position in `called`."""
        if key:
            comp = self.computation_named(instr.attr(key))
            if comp is not None:
                return comp
        if index < len(instr.called):
            return self.computation_named(instr.called[index])
        return None


def nbytes(shape: Shape) -> int:
    """HBM bytes of a shape (tile padding included, on-chip memory spaces excluded)."""
    return shape_bytes(shape)


def first_dtype(shape: Shape) -> str:
    for leaf in shape.leaves():
        if leaf.dtype not in ("token", "opaque"):
            return leaf.dtype
    return ""


def on_chip_note(shapes: list[Shape]) -> tuple[str, ...]:
    total = sum(on_chip_bytes(s) for s in shapes)
    if not total:
        return ()
    return (f"{total} bytes in on-chip memory spaces (S(n), n>0) not counted as HBM traffic",)


def cost(
    flops: float,
    read: float,
    written: float,
    *,
    transcendentals: float = 0.0,
    dtype: str = "",
    notes: tuple[str, ...] = (),
    provenance: Origin = "model",
) -> OpCost:
    return OpCost(flops=float(flops), bytes_read=float(read), bytes_written=float(written),
                  transcendentals=float(transcendentals), dtype=dtype, provenance=provenance,
                  notes=notes)


def zero_cost(note: str, dtype: str = "") -> OpCost:
    """An op that moves no data and does no arithmetic (metadata, aliasing, control)."""
    return cost(0, 0, 0, dtype=dtype, notes=(note,))


def unknown_cost(reason: str, dtype: str = "") -> OpCost:
    """An op whose cost this model cannot state: listed as unmodeled, never a silent 0."""
    return OpCost(flops=None, bytes_read=None, bytes_written=None, transcendentals=None,
                  dtype=dtype, provenance="unknown", reason=reason)


def io_cost(instr: Instruction, ctx: CostContext, flops: float = 0.0, *,
            transcendentals: float = 0.0, note: str = "") -> OpCost:
    """Read every operand once and write the output once: the cost of an unfused op."""
    shapes = ctx.operand_shapes(instr)
    notes = on_chip_note(shapes + [instr.shape]) + ((note,) if note else ())
    out = cost(flops, sum(nbytes(s) for s in shapes), nbytes(instr.shape),
               transcendentals=transcendentals, dtype=first_dtype(instr.shape), notes=notes)
    return with_host_bytes(out, shapes + [instr.shape])


def with_host_bytes(out: OpCost, shapes: list[Shape]) -> OpCost:
    """The cost with the bytes its arrays in host memory (`S(5)`) move over the host link."""
    moved = sum(host_bytes(s) for s in shapes)
    if not moved:
        return out
    note = f"{moved} bytes in host memory (S(5)) cross the host link"
    return replace(out, host_bytes=float(moved), notes=out.notes + (note,))


def backend_json(instr: Instruction) -> dict[str, Any]:
    """The instruction's backend_config as a dict ({} when absent or not JSON)."""
    text = instr.backend_config.strip()
    if not text.startswith("{"):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def cost_instruction(instr: Instruction, ctx: CostContext) -> OpCost:
    """Dispatch one instruction to its handler; an opcode without one is unmodeled, with why."""
    handler = HANDLERS.get(instr.opcode)
    if handler is None:
        reason = UNMODELED.get(instr.opcode, f"no cost handler for opcode {instr.opcode!r}")
        return unknown_cost(reason, first_dtype(instr.shape))
    try:
        return handler(instr, ctx)
    except (KeyError, ValueError, IndexError, ZeroDivisionError) as exc:
        return unknown_cost(f"could not cost {instr.opcode} {instr.name}: {exc}", first_dtype(instr.shape))


def computation_flops(comp: Computation, ctx: CostContext) -> tuple[float | None, float | None]:
    """Flops and transcendentals of one application of a computation (a reducer, a fusion body)."""
    key = ("flops", comp.name)
    if key not in ctx.memo:
        ctx.memo[key] = _computation_flops(comp, ctx)
    result: tuple[float | None, float | None] = ctx.memo[key]
    return result


def _computation_flops(comp: Computation, ctx: CostContext) -> tuple[float | None, float | None]:
    inner = ctx.within(comp)
    flops = trans = 0.0
    for instr in comp.instructions:
        c = cost_instruction(instr, inner)
        if c.flops is None or c.transcendentals is None:
            return None, None
        flops += c.flops
        trans += c.transcendentals
    return flops, trans
