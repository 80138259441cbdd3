"""Data kept wider than anything reads it: a value converted up (bf16 -> f32, FP8 -> f32) and written
to memory, which every op that reads it converts back down before use, or which only reductions
read (a reduction reads the narrow value and accumulates in f32 inside its kernel just as well).

Inside one fused kernel a convert costs a few instructions and XLA folds a convert pair that
returns to its own type; across kernels the wide copy is written and read back, at twice (f32 for
bf16) or four times (f32 for FP8) the bytes. Counted: the extra bytes of that write and of every
read, at the rate each op moved its bytes. Left out: a reduction that converts and accumulates
inside one kernel (nothing wide is written), and wide values any reader uses wide otherwise.
"""

from __future__ import annotations

from ...costmodel.units import human
from ...parsers.hlo.dtypes import DTYPE_BITS
from ...parsers.hlo.model import Computation, Instruction
from ...reports.model.findings import Finding
from .program import ProgramView, Timing, evidence, finding, number, root

CAUSE = "waste:precision-round-trip"
_FLOATS = frozenset(t for t in DTYPE_BITS if t.startswith(("f", "bf")))  # real floating types, the one table's


def detect(view: ProgramView, timing: Timing) -> list[Finding]:
    rows: list[tuple[Instruction, list[Instruction], str, str, float]] = []
    for comp in view.running():
        for instr in comp.instructions:
            made = _upcast_from(view, instr)
            if made is None:
                continue
            readers = view.users(instr.name)
            narrow = [_read_as(view, instr, r, made) for r in readers]
            if not readers or any(n is None for n in narrow):
                continue
            widest = max(DTYPE_BITS.get(n or "", 0) for n in narrow)
            wide = DTYPE_BITS.get(instr.shape.dtype, 0)
            if widest >= wide:
                continue
            seconds = _extra_seconds(view, timing, instr, readers, 1 - widest / wide)
            rows.append((instr, readers, made, max(narrow, key=lambda n: DTYPE_BITS.get(n or "", 0)) or "", seconds))
    seconds = sum(r[4] for r in rows)
    if not rows or seconds <= 0:
        return []
    first = rows[0]
    reduced = all(_reduces(view, first[0], r) for r in first[1])
    stored = first[0].shape.dtype
    chain = (f"{first[2]} -> {stored} stored, read only by reductions" if reduced else
             f"{first[2]} -> {stored} -> {first[3]} {'round trip' if first[2] == first[3] else 'upcast'}")
    extra = sum(r[0].shape.elements * (DTYPE_BITS.get(r[0].shape.dtype, 0) - DTYPE_BITS.get(r[3], 0)) // 8
                * (1 + len(r[1])) for r in rows)
    return [finding(
        view, timing, cause=CAUSE, seconds=seconds, origin="trace+model" if timing.origin == "trace" else "model",
        what=(f"{len(rows)} value{'s' if len(rows) > 1 else ''} written wider than read "
              f"({chain}; {human(extra, 'B')} extra per run)"),
        lines=evidence([i for r in rows for i in (r[0], *r[1][:1])]),
        action=(f"Keep the value in {first[3]} between the kernels: convert where it is used, not before it is "
                "stored, or fuse the consumer with the producer; a reduction accumulates in f32 inside its kernel "
                "when asked (jnp.sum(x, dtype=jnp.float32) rather than x.astype(jnp.float32).sum())."))]


def _upcast_from(view: ProgramView, instr: Instruction) -> str | None:
    """The narrower float type `instr` converted its result from, when its result is only that:
    a convert, or a fusion whose root is one."""
    if instr.shape.is_tuple or instr.shape.dtype not in _FLOATS or not instr.shape.dims:
        return None
    comp: Computation | None
    last: Instruction | None
    if instr.opcode == "convert":
        comp, last = None, instr
    else:
        comp = view.fused(instr)
        last = root(comp) if comp is not None else None
        if last is None or last.opcode != "convert":
            return None
    source = (comp.get(last.operands[0].lstrip("%")) if comp is not None else view.get(last.operands[0])) \
        if last.operands else None
    if source is None or source.shape.dtype not in _FLOATS:
        return None
    return source.shape.dtype if DTYPE_BITS.get(source.shape.dtype, 0) < DTYPE_BITS.get(instr.shape.dtype, 0) else None


def _read_as(view: ProgramView, value: Instruction, reader: Instruction, made: str) -> str | None:
    """The narrower type `reader` needs `value` in, or None if it uses it wide: the type it converts
    it to before any use, or the type it was made from where only a reduction reads it (a reduction
    can read the narrow value and accumulate wide inside its kernel)."""
    if reader.opcode == "convert":
        return reader.shape.dtype if reader.shape.dtype in _FLOATS else None
    if _reduces(view, value, reader):
        return made
    fused = view.fused(reader)
    if fused is None:
        return None
    types = []
    for param in _params(fused, reader, value):
        users = [i for i in fused.instructions if param.name in (o.lstrip("%") for o in i.operands)]
        if not users:
            return None
        for user in users:
            if user.opcode == "convert" and user.shape.dtype in _FLOATS:
                types.append(user.shape.dtype)
            elif _reduced_input(user, param.name):
                types.append(made)
            else:
                return None
    if not types:
        return None
    return max(types, key=lambda t: DTYPE_BITS.get(t, 0))


def _params(fused: Computation, reader: Instruction, value: Instruction) -> list[Instruction]:
    """The fused computation's parameters that stand for `value`."""
    numbers = [n for n, o in enumerate(reader.operands) if o.lstrip("%") == value.name]
    return [i for i in fused.instructions if i.opcode == "parameter" and number(i, "parameter_number") in numbers]


def _reduced_input(instr: Instruction, name: str) -> bool:
    """`instr` is a reduce that reads `name` as data (its first half of operands), not as its init value."""
    half = len(instr.operands) // 2
    return instr.opcode == "reduce" and name in (o.lstrip("%") for o in instr.operands[:half]) \
        and name not in (o.lstrip("%") for o in instr.operands[half:])


def _reduces(view: ProgramView, value: Instruction, reader: Instruction) -> bool:
    """Only reductions in `reader` read `value` (a reduce, or a fusion whose parameter feeds only reduces)."""
    if reader.opcode == "reduce":
        return _reduced_input(reader, value.name)
    fused = view.fused(reader)
    if fused is None:
        return False
    params = _params(fused, reader, value)
    users = [i for p in params for i in fused.instructions if p.name in (o.lstrip("%") for o in i.operands)]
    return bool(users) and all(_reduced_input(u, p.name) for p in params for u in users
                               if p.name in (o.lstrip("%") for o in u.operands))


def _extra_seconds(view: ProgramView, timing: Timing, value: Instruction, readers: list[Instruction],
                   wasted: float) -> float:
    """The time of the extra bytes: each op's time times the share of its bytes that are the wide
    value's extra width (its write for the producer, its read for each reader)."""
    size = value.shape.byte_size * wasted
    total = 0.0
    for op in (value, *readers):
        seconds = timing.seconds.get((view.program, op.name), 0.0)
        moved = _bytes(view, op)
        if seconds > 0 and moved:
            total += seconds * min(size / moved, 1.0)
    return total


def _bytes(view: ProgramView, op: Instruction) -> float | None:
    cost = view.costs.get(op.name) if view.costs is not None else None
    if cost is None or cost.bytes_read is None or cost.bytes_written is None:
        return None
    return cost.bytes_read + cost.bytes_written
