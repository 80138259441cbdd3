"""What crosses a fusion's boundary: each input by the part the fused code uses, each output.

Inside a fusion intermediate values stay in registers or on-chip memory, so
only the fusion's inputs and outputs touch HBM, and each input only as far as
the fused code uses it (XLA's operand utilization): an input that is sliced,
dynamic-sliced or gathered, directly or after elementwise ops, costs the part
selected; a broadcast input is read once. An output that is a
dynamic-update-slice or scatter into an input is updated in place, so that
input is not read and only the update is written.
"""

from __future__ import annotations

from ...parsers.hlo.model import Computation, Instruction, Shape
from ...parsers.hlo.opcodes import ELEMENTWISE
from .base import CostContext, nbytes

_SLICING = ("slice", "dynamic-slice", "gather")
_IN_PLACE = ("dynamic-update-slice", "scatter")
_PASS_THROUGH = ("bitcast",)
# Ops whose output element i needs only operand element i (or a same-size rearrangement of
# them): the fraction of the output that is used is the fraction of each operand that is read.
_PROPORTIONAL = ELEMENTWISE | {"bitcast", "reshape", "copy", "transpose", "reverse", "tuple",
                               "get-tuple-element"}


def parameters_by_index(comp: Computation) -> dict[int, Instruction]:
    """Parameters keyed by parameter number (stated by the reader, else order of appearance)."""
    params = [i for i in comp.instructions if i.opcode == "parameter"]
    out: dict[int, Instruction] = {}
    for position, p in enumerate(params):
        stated = p.attr("parameter_number")
        out[int(stated) if stated.isdigit() else position] = p
    return out


def _through_bitcasts(name: str, comp: Computation) -> str:
    instr = comp.get(name)
    while instr is not None and instr.opcode in _PASS_THROUGH and instr.operands:
        name = instr.operands[0]
        instr = comp.get(name)
    return name


def _outputs(comp: Computation) -> list[Instruction | None]:
    root = comp.root_instruction
    return [comp.get(n) for n in root.operands] if root.opcode == "tuple" else [root]


def _in_place_updates(comp: Computation) -> dict[int, tuple[str, float]]:
    """Output index -> (aliased parameter name, bytes written) for outputs that update a fused
    input in place: a dynamic-update-slice writes its update, a scatter its updates."""
    found: dict[int, tuple[str, float]] = {}
    for index, out in enumerate(_outputs(comp)):
        if out is None or out.opcode not in _IN_PLACE or len(out.operands) < 2:
            continue
        target = comp.get(_through_bitcasts(out.operands[0], comp))
        if out.opcode == "dynamic-update-slice":
            names = [out.operands[1]]
        else:  # scatter(operand, indices, update): the single-operand form fusions hold
            names = list(out.operands[len(out.operands) // 2 + 1:])
        updates = [u for u in (comp.get(n) for n in names) if u is not None]
        if target is not None and target.opcode == "parameter" and updates and len(updates) == len(names):
            found[index] = (target.name, float(sum(nbytes(u.shape) for u in updates)))
    return found


def _ratio(part: Shape, whole: Shape) -> float:
    return part.elements / whole.elements if whole.elements else 1.0


def utilization(comp: Computation, ctx: CostContext, in_place: frozenset[str] = frozenset(),
                passed: frozenset[int] = frozenset()) -> dict[str, float]:
    """Fraction of each value of a fused computation that the fusion's outputs need, walked
    from the root back: a slice, dynamic-slice or gather needs the part it selects, an
    elementwise op what its users need, a broadcast its operand once, any other op its whole
    operands. Uses add up (capped at 1). `in_place` names root updates (dynamic-update-slice,
    scatter) whose target buffer is updated in place and so not read; `passed` are positions of
    the root tuple that hand an input through untouched, which reads nothing."""
    root = comp.root_instruction
    util: dict[str, float] = {root.name: 1.0}
    for instr in reversed(comp.instructions):
        used = min(util.get(instr.name, 0.0), 1.0)
        if used <= 0.0:
            continue
        for position, name in enumerate(instr.operands):
            operand = comp.get(name)
            if instr.name == root.name and position in passed:
                continue
            if operand is not None:
                share = _operand_share(instr, position, operand, used, ctx, in_place)
                util[name] = util.get(name, 0.0) + share
    return util


def _operand_share(instr: Instruction, position: int, operand: Instruction, used: float,
                   ctx: CostContext, in_place: frozenset[str]) -> float:
    """Fraction of `operand` that `instr` reads when `used` of its output is needed."""
    opcode = instr.opcode
    if opcode in _IN_PLACE and instr.name in in_place and position == 0:
        return 0.0
    if opcode in _SLICING:
        return min(1.0, used * _ratio(instr.shape, operand.shape)) if position == 0 else 1.0
    if opcode == "broadcast":
        return min(1.0, used * _ratio(instr.shape, operand.shape))
    if opcode in _PROPORTIONAL and not operand.shape.is_tuple and not instr.shape.is_tuple:
        return used
    if opcode == "fusion":
        inner = ctx.called(instr, "calls", 0)
        params = parameters_by_index(inner) if inner is not None else {}
        if inner is not None and position in params:
            return min(1.0, _inner_utilization(inner, ctx).get(params[position].name, 0.0))
    return 1.0


def _inner_utilization(comp: Computation, ctx: CostContext) -> dict[str, float]:
    """`utilization` of a nested fused computation, once per computation however many fusions call it."""
    key = ("utilization", comp.name)
    if key not in ctx.memo:
        ctx.memo[key] = utilization(comp, ctx)
    found: dict[str, float] = ctx.memo[key]
    return found


def passed_through(comp: Computation) -> frozenset[int]:
    """Positions of the root tuple that are a parameter of the fusion (through bitcasts): buffers
    threaded through it unchanged, as TPU async collective fusions thread the collective's."""
    root = comp.root_instruction
    if root.opcode != "tuple":
        return frozenset()
    return frozenset(i for i, name in enumerate(root.operands)
                     if (found := comp.get(_through_bitcasts(name, comp))) is not None
                     and found.opcode == "parameter")


def fusion_bytes(instr: Instruction, comp: Computation, ctx: CostContext,
                 passed: frozenset[int] = frozenset()) -> tuple[float, float]:
    """(bytes read, bytes written) across the boundary of one fusion: each input by the
    fraction of it the fused code uses, each output whole unless it updates an input in place
    or is an input handed through (`passed`, positions of the root tuple)."""
    in_place = _in_place_updates(comp)
    outputs = _outputs(comp)
    util = utilization(comp, ctx, frozenset(o.name for i in in_place if (o := outputs[i]) is not None), passed)
    params = parameters_by_index(comp)
    read = sum(nbytes(shape) * (min(util.get(params[i].name, 0.0), 1.0) if i in params else 1.0)
               for i, shape in enumerate(ctx.operand_shapes(instr)))
    # An in-place scatter combines each update with the element it replaces, so reads that too.
    read += sum(b for i, (_, b) in in_place.items() if (o := outputs[i]) is not None and o.opcode == "scatter")
    leaves = list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]
    written = sum(0.0 if i in passed else in_place[i][1] if i in in_place else float(nbytes(leaf))
                  for i, leaf in enumerate(leaves))
    return read, written


