"""Which ops do the same work: a name-independent identity of an op and the computations it calls.

Two ops share an identity when they run the same computation on the same shapes: the same
opcode, fusion kind, custom-call target and work-setting backend config, the same output and
operand shapes with their layouts, and called computations whose instructions match one for one
(opcodes, shapes, layouts, attributes, and which earlier instruction each operand is). Names,
metadata, ids, channels and the scheduling fields of a backend config (which stream, what to wait
for, XLA's own cost estimate) are left out: they differ between the copies of one computation (the
layers of a model, the devices of a job) without changing what the kernel does.

Unlike `hlo_category.fingerprint` (a looser match of an op across two compiles) the layouts,
attributes and backend config count, so a transposing copy and a plain one, or a causal and a
full attention kernel, are told apart.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache

from .model import Computation, Instruction, Module, Shape

# Attributes that name computations (walked through `called`) or carry no work.
_NAMING = frozenset({"calls", "to_apply", "body", "condition", "branch_computations", "called_computations",
                     "true_computation", "false_computation", "stack_frame_id", "frontend_attributes",
                     "statistics", "metadata", "schedule"})
# Backend-config fields that schedule an op or estimate it, not what it computes.
_SCHEDULING = frozenset({"operation_queue_id", "wait_on_operation_queues", "force_earliest_schedule",
                         "reification_cost"})


def identity(module: Module, instr: Instruction) -> str:
    """The op's identity: equal for ops that run the same computation on the same shapes."""
    memo: dict[str, str] = module.__dict__.setdefault("_identity_memo", {})
    called = [_computation(module, name, memo) for name in instr.called]
    operands = []
    for name in instr.operands:
        found = module.find(name)
        operands.append(_shape(found[1].shape) if found is not None else "?")
    text = "|".join([_own(instr, {}), ",".join(operands), ",".join(called)])
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _computation(module: Module, name: str, memo: dict[str, str]) -> str:
    """A computation's identity, each computation walked once (iteratively: nesting may be deep)."""
    if name in memo:
        return memo[name]
    stack, entered = [name], set()
    while stack:
        current = stack[-1]
        comp = module.computations.get(current)
        pending = [c for i in comp.instructions for c in i.called
                   if c not in memo and c not in entered and c in module.computations] if comp else []
        if current not in entered and pending:
            entered.add(current)
            stack.extend(dict.fromkeys(pending))
            continue
        stack.pop()
        if current not in memo:
            memo[current] = _hash_computation(comp, memo) if comp is not None else "?"
    return memo[name]


def _hash_computation(comp: Computation, memo: dict[str, str]) -> str:
    position = {i.name: n for n, i in enumerate(comp.instructions)}
    lines = []
    for instr in comp.instructions:
        called = ",".join(memo.get(c, "cycle") for c in instr.called)
        lines.append(f"{_own(instr, position)}|{called}")
    lines.append(f"root={position.get(comp.root, -1)}")
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:16]


def _own(instr: Instruction, position: dict[str, int]) -> str:
    """What one instruction does, its operands named by their place in the computation."""
    operands = ",".join(str(position.get(o, "p")) for o in instr.operands)
    attrs = ";".join(f"{k}={v}" for k, v in sorted(instr.attributes) if k not in _NAMING)
    return "|".join([instr.opcode, instr.fusion_kind, _shape(instr.shape), operands, repr(instr.dot), repr(instr.conv),
                     repr(instr.dimensions), repr(instr.slice), repr(instr.replica_groups),
                     repr(instr.source_target_pairs), instr.custom_call_target, _work_config(instr.backend_config),
                     attrs])


@lru_cache(maxsize=4096)
def _shape(shape: Shape) -> str:
    """A shape with its layout, tiles and memory space (a module repeats a few shapes many times)."""
    if shape.is_tuple:
        return "(" + ",".join(_shape(s) for s in shape.tuple_shapes) + ")"
    return f"{shape.dtype}{list(shape.dims)}{shape.layout}{shape.tiles}S{shape.memory_space}"


def _work_config(config: str) -> str:
    """The backend config without its scheduling fields (as written, when it is not JSON)."""
    if not config:
        return ""
    try:
        parsed = json.loads(config)
        if not isinstance(parsed, dict):
            return config
        return json.dumps({k: v for k, v in parsed.items() if k not in _SCHEDULING}, sort_keys=True)
    except (ValueError, RecursionError):
        return config
