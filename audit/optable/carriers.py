"""Measured time under the name of an op inside a fusion or an async computation, moved to the
op that carries that work in the cost model.

XLA's GPU runtime names some thunks after an instruction that is not a top-level op: the
collective an `async-start` wraps (`reduce-scatter.131` inside `async_computation`), or a
reduction inside a fusion that runs as a kernel of its own before the fusion's main kernel
(`reduce.1842.1` inside `fused_add_reduce.26`). The cost model prices the fusion and the
async-start, and their insides cost nothing; the time of such a thunk is part of its
carrier's, so it is added to the carrier's row (one more kernel of the same executions).
"""

from __future__ import annotations

import pandas as pd

from ..parsers.hlo.model import Module

_CARRYING_OPCODES = frozenset({"fusion", "async-start"})


def carriers(module: Module) -> dict[str, str]:
    """Instruction name -> the top-level op carrying it, for instructions inside fusions and
    async computations (nested fusions resolve to the outermost)."""
    called_by: dict[str, str] = {}
    for _, instr in module.instructions():
        if instr.opcode in _CARRYING_OPCODES:
            for callee in instr.called:
                called_by.setdefault(callee, instr.name)
    owner_of: dict[str, str] = {}
    for comp, instr in module.instructions():
        if comp.name in called_by:
            owner_of[instr.name] = called_by[comp.name]
    out: dict[str, str] = {}
    for name in owner_of:
        carrier, seen = owner_of[name], {name}
        while carrier in owner_of and carrier not in seen:
            seen.add(carrier)
            carrier = owner_of[carrier]
        out[name] = carrier
    return out


def attribute_to_carriers(ops: pd.DataFrame, modules: dict[int, Module]) -> pd.DataFrame:
    """Per-op rows (host, device, program_id, op, occurrences, times...) with inner ops' rows
    merged into their carriers': times and kernels summed, occurrences those of the carrier."""
    if ops.empty or not modules:
        return ops
    names = ops["op"].astype(str).tolist()
    tables = {pid: carriers(module) for pid, module in modules.items()}
    mapped = [tables.get(int(pid), {}).get(name, name) for pid, name in zip(ops["program_id"], names)]
    if mapped == names:
        return ops
    frame = ops.assign(op=mapped)
    keys = [k for k in ("host", "device", "program_id", "op") if k in frame.columns]
    agg: dict[str, tuple[str, str]] = {}
    for col in frame.columns:
        if col in keys:
            continue
        if col == "occurrences":
            agg[col] = (col, "max")
        elif col in ("dur_ps", "self_ps", "dur_min_ps", "dur_max_ps", "kernels"):
            agg[col] = (col, "sum")
        else:
            agg[col] = (col, "first")
    out = frame.groupby(keys, observed=True, sort=False).agg(**agg).reset_index()
    if isinstance(ops["op"].dtype, pd.CategoricalDtype):
        out["op"] = out["op"].astype("category")
    return out[list(ops.columns)]


def carrier_names(frame: pd.DataFrame, modules: dict[int, Module]) -> list[str]:
    """The op each row of a frame of trace events (`program_id`, `op`) is attributed to: its carrier,
    or itself; so an export that keeps the kernels' own names can find the row the report judged."""
    tables = {pid: carriers(module) for pid, module in modules.items()}
    return [tables.get(int(pid), {}).get(str(name), str(name)) for pid, name in zip(frame["program_id"], frame["op"])]
