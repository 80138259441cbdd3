"""What every HLO module must satisfy before the cost model walks it, checked once after reading.

XLA's HLO is not recursive: no computation calls itself, directly or through others (a
fusion, a while body, a reducer). A module that does would send any walk over the call graph
into endless recursion, so it is refused here, naming the instruction that closes the cycle;
so is a nesting of computations deeper than any program's (the walks over the call graph
recurse once per level). Shapes are checked too: a rank or an element count beyond any
machine's memory, a layout that is not a permutation of the dimensions, a parameter without a
number, or a backend_config nested deeper than XLA writes is a crafted or damaged file, not a
program.
"""

from __future__ import annotations

from ...base.errors import InputError
from .model import Instruction, Module, Shape
from ...base.ranges import MAX_CONFIG_DEPTH, MAX_ELEMENTS, MAX_NESTING, MAX_RANK, MAX_TILE


def check_module(module: Module, origin: str = "") -> None:
    """**Raises:** `InputError` naming the instruction, for a call cycle, a nesting deeper than
    `MAX_NESTING`, an impossible shape or layout, a parameter without a number, or a
    backend_config nested deeper than `MAX_CONFIG_DEPTH`."""
    checked: set[int] = set()  # shapes and configs, by identity: the readers share one per distinct value
    for comp in module.computations.values():
        for instr in comp.instructions:
            if id(instr.shape) not in checked:
                _check_shape(instr.shape, instr, comp.name, origin)
                checked.add(id(instr.shape))
            if instr.opcode == "parameter":
                _check_parameter(instr, comp.name, origin)
            if instr.backend_config and id(instr.backend_config) not in checked:
                _check_config(instr, comp.name, origin)
                checked.add(id(instr.backend_config))
    _check_acyclic(module, origin)


def _check_shape(shape: Shape, instr: Instruction, comp: str, origin: str) -> None:
    for leaf in _leaves(shape):
        if len(leaf.dims) > MAX_RANK:
            raise _error(instr, comp, f"has a shape of rank {len(leaf.dims)} (at most {MAX_RANK})", origin)
        if any(d == -1 for d in leaf.dims):  # `?`: a compiled program bounds every dimension (`<=N`)
            raise _error(instr, comp, f"has an unbounded dynamic dimension in {str(leaf).replace('-1', '?')}: its size is not known "
                                      "before run time, so nothing of it can be priced", origin)
        if any(d < 0 for d in leaf.dims):
            raise _error(instr, comp, f"has a negative dimension in {leaf.dtype}{list(leaf.dims)}", origin)
        elements = 1
        for d in leaf.dims:
            elements *= max(d, 1)
            if elements > MAX_ELEMENTS:
                raise _error(instr, comp, f"has a shape of more than 2^50 elements ({leaf.dtype}"
                                          f"{list(leaf.dims)[:8]}{'...' if len(leaf.dims) > 8 else ''})", origin)
        bad_tile = next((t for t in leaf.tiles if not all(v == -1 or 1 <= v <= MAX_TILE for v in t)), None)
        if bad_tile is not None:
            raise _error(instr, comp, f"has a layout tile T{tuple(bad_tile)} in {leaf.dtype}{list(leaf.dims)}: a "
                                      f"tile's side is 1 to {MAX_TILE:,} elements", origin)
        if leaf.layout and sorted(leaf.layout) != list(range(len(leaf.dims))):
            raise _error(instr, comp, f"has a layout {{{','.join(map(str, leaf.layout[:8]))}}} that is not a "
                                      f"permutation of the {len(leaf.dims)} dimensions of {leaf}", origin)


def _check_parameter(instr: Instruction, comp: str, origin: str) -> None:
    if not instr.attr("parameter_number").isdigit():
        raise _error(instr, comp, f"is parameter({instr.attr('parameter_number')[:30]}): a parameter's "
                                  "operand is its number", origin)


def _check_config(instr: Instruction, comp: str, origin: str) -> None:
    config = instr.backend_config
    if config.count("{") + config.count("[") > MAX_CONFIG_DEPTH and _nesting(config) > MAX_CONFIG_DEPTH:
        raise _error(instr, comp, f"has a backend_config nested more than {MAX_CONFIG_DEPTH} deep", origin)


def _nesting(text: str) -> int:
    """How deep brackets nest in JSON-like text, outside strings."""
    depth = deepest = 0
    quoted = escaped = False
    for ch in text:
        if quoted:
            escaped, quoted = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            quoted = True
        elif ch in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "}]":
            depth -= 1
    return deepest


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
    """Depth-first over the call graph with an explicit stack; a callee on the current path is a
    cycle. Each computation's height (the longest chain of computations it calls, itself included)
    is known when it is done, so the nesting is checked on the way."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    height: dict[str, int] = {}
    for root in module.computations:
        if root in state:
            continue
        state[root] = 1
        calls = _calls(module, root)
        stack: list[tuple[str, list[tuple[str, Instruction]], list[tuple[str, Instruction]]]] = [
            (root, calls, list(calls))]
        while stack:
            name, calls, pending = stack[-1]
            if not pending:
                state[name] = 2
                stack.pop()
                _check_height(calls, name, height, origin)
                continue
            callee, instr = pending.pop()
            seen = state.get(callee)
            if seen == 1:
                path = " -> ".join([*(n for n, _, _ in stack[[n for n, _, _ in stack].index(callee):]), callee])
                raise _error(instr, name, f"calls {callee!r}, which is already running: a recursive call "
                                          f"({path}); HLO computations never recurse", origin)
            if seen is None:
                state[callee] = 1
                calls = _calls(module, callee)
                stack.append((callee, calls, list(calls)))


def _check_height(calls: list[tuple[str, Instruction]], name: str, height: dict[str, int], origin: str) -> None:
    deepest = max(calls, key=lambda c: height[c[0]], default=None)
    height[name] = 1 + (height[deepest[0]] if deepest else 0)
    if deepest is not None and height[name] > MAX_NESTING:
        raise _error(deepest[1], name, f"calls {deepest[0]!r}: computations nested more than {MAX_NESTING} deep "
                                       "(fusions, loops, branches or calls inside each other); no program nests "
                                       "so deep", origin)


def _calls(module: Module, name: str) -> list[tuple[str, Instruction]]:
    out = []
    computations = module.computations
    for instr in computations[name].instructions:
        for called in instr.called:
            callee = called.lstrip("%")
            if callee in computations:
                out.append((callee, instr))
    return out


def _error(instr: Instruction, comp: str, message: str, origin: str) -> InputError:
    return InputError(f"HLO instruction {instr.name!r} in computation {comp!r} {message}", path=origin or None)
