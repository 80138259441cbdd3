"""What every HLO module must satisfy before the cost model walks it, checked once after reading.

XLA's HLO is not recursive: no computation calls itself, directly or through others (a
fusion, a while body, a reducer). A module that does would send any walk over the call graph
into endless recursion, so it is refused here, naming the instruction that closes the cycle.
Shapes are checked too: a rank or an element count beyond any machine's memory is a crafted
or damaged file, not a program.
"""

from __future__ import annotations

from ..errors import InputError
from .hlo_model import Instruction, Module, Shape
from .ranges import MAX_ELEMENTS, MAX_RANK


def check_module(module: Module, origin: str = "") -> None:
    """**Raises:** `InputError` naming the instruction, for a call cycle or an impossible shape."""
    checked: set[int] = set()  # shape objects, by identity: the readers share one per distinct shape
    for comp in module.computations.values():
        for instr in comp.instructions:
            if id(instr.shape) not in checked:
                _check_shape(instr.shape, instr, comp.name, origin)
                checked.add(id(instr.shape))
    _check_acyclic(module, origin)


def _check_shape(shape: Shape, instr: Instruction, comp: str, origin: str) -> None:
    for leaf in _leaves(shape):
        if len(leaf.dims) > MAX_RANK:
            raise _error(instr, comp, f"has a shape of rank {len(leaf.dims)} (at most {MAX_RANK})", origin)
        if any(d < -1 for d in leaf.dims):
            raise _error(instr, comp, f"has a negative dimension in {leaf.dtype}{list(leaf.dims)}", origin)
        elements = 1
        for d in leaf.dims:
            elements *= max(d, 1)
            if elements > MAX_ELEMENTS:
                raise _error(instr, comp, f"has a shape of more than 2^50 elements ({leaf.dtype}"
                                          f"{list(leaf.dims)[:8]}{'...' if len(leaf.dims) > 8 else ''})", origin)


def _leaves(shape: Shape) -> list[Shape]:
    """Array shapes inside `shape`, without recursing (a crafted tuple may nest thousands deep)."""
    out, todo = [], [shape]
    while todo:
        s = todo.pop()
        if s.is_tuple:
            todo.extend(s.tuple_shapes)
        else:
            out.append(s)
    return out


def _check_acyclic(module: Module, origin: str) -> None:
    """Depth-first over the call graph with an explicit stack; a callee on the current path is a cycle."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in module.computations:
        if root in state:
            continue
        state[root] = 1
        stack: list[tuple[str, list[tuple[str, Instruction]]]] = [(root, _calls(module, root))]
        while stack:
            name, pending = stack[-1]
            if not pending:
                state[name] = 2
                stack.pop()
                continue
            callee, instr = pending.pop()
            seen = state.get(callee)
            if seen == 1:
                path = " -> ".join([*(n for n, _ in stack[[n for n, _ in stack].index(callee):]), callee])
                raise _error(instr, name, f"calls {callee!r}, which is already running: a recursive call "
                                          f"({path}); HLO computations never recurse", origin)
            if seen is None:
                state[callee] = 1
                stack.append((callee, _calls(module, callee)))


def _calls(module: Module, name: str) -> list[tuple[str, Instruction]]:
    out = []
    for instr in module.computations[name].instructions:
        for called in instr.called:
            callee = called.lstrip("%")
            if callee in module.computations:
                out.append((callee, instr))
    return out


def _error(instr: Instruction, comp: str, message: str, origin: str) -> InputError:
    return InputError(f"HLO instruction {instr.name!r} in computation {comp!r} {message}", path=origin or None)
