"""A command buffer (a CUDA graph XLA forms from a run of ops) priced as the ops it runs.

On NVIDIA GPUs XLA records runs of consecutive ops into command buffers and launches each as one
CUDA graph; the trace times the graph as one op. Two spellings reach the trace:

- XLA until 2025 outlined each run into a computation named `command_buffer` and called it
  (`call(...), to_apply=%command_buffer.3`): the trace names the call, and the ops it runs are
  that computation's;
- XLA since (JAX 0.11 by default) forms them from the thunks after compilation, so the HLO has
  no trace of them: the trace names `command_buffer_N`, and the ops it runs are those of the
  program that the trace does not time on their own, in schedule order. With one buffer that
  is all of them; with several, the runs between ops timed on their own go to the buffers in
  the order XLA numbered them, and where the counts differ nothing is guessed.

The buffer's roofline and achievable times are the sums of its ops' (each op once per run, its
launch term included), so it is judged as one op; its record's opcode is `command-buffer`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import pandas as pd

from ..costmodel.achievable import AchievableTime, achievable_time
from ..costmodel.chips.hardware import Hardware
from ..costmodel.costs import BOUNDS, Bound, Expectation, OpCost
from ..costmodel.roofline import launches_work
from ..parsers.hlo.model import Module
from ..parsers.hlo.opcodes import CONTROL_FLOW
from ..costmodel.units import count
from .join import Joined

OPCODE = "command-buffer"
_THUNK_BUFFER = re.compile(r"^command_buffer(?:_(\d+))?$")
RECAPTURE = ("per-op times need a capture taken with XLA_FLAGS=--xla_gpu_enable_command_buffer= (which `audit run "
             "--platform cuda` sets)")


@dataclass(frozen=True)
class Contents:
    """What one buffer runs: op name -> runs per run of the buffer; `problem` when that is unknown."""

    ops: Mapping[str, int]
    how: str
    problem: str = ""
    unknown_runs: tuple[str, ...] = ()  # ops in loops of unknown trip count, counted once


def buffer_names(module: Module, measured: Iterable[str]) -> list[str]:
    """The measured ops of a program that are command buffers, in the order XLA formed them."""
    out = [n for n in measured if (_THUNK_BUFFER.match(n) and module.find(n) is None) or _called_buffer(module, n)]
    return sorted(out, key=lambda n: (int(m[1]) if (m := _THUNK_BUFFER.match(n)) and m[1] else -1, n))


def _called_buffer(module: Module, name: str) -> str | None:
    """The computation a `call` outlined as a command buffer runs, else None."""
    found = module.find(name)
    if found is None or found[1].opcode != "call":
        return None
    return next((c for c in found[1].called if c.lstrip("%").startswith("command_buffer")), None)


def contents(module: Module, costs: Mapping[str, OpCost], measured: set[str]) -> dict[str, Contents]:
    """What each command buffer among `measured` (the program's timed ops) runs."""
    buffers = buffer_names(module, measured)
    timed = measured - set(buffers)
    out: dict[str, Contents] = {}
    thunk_level = [b for b in buffers if module.find(b) is None]
    for name in buffers:
        if name not in thunk_level:
            called = _called_buffer(module, name) or ""
            inner = [n for n in _inside(module, [called]) if n not in timed]
            out[name] = _counted(inner, costs, f"the ops of {called.lstrip('%')}, the computation it calls")
    if thunk_level:
        out.update(_thunk_level(module, costs, timed, thunk_level))
    return out


def _thunk_level(module: Module, costs: Mapping[str, OpCost], timed: set[str],
                 buffers: list[str]) -> dict[str, Contents]:
    runs: list[list[str]] = [[]]
    for unit in _entry_units(module):
        inner = [n for n in unit if _launches(costs.get(n))]
        if not inner:
            continue
        if any(n in timed for n in unit):
            if not all(n in timed for n in inner):
                return {b: Contents({}, "", "the program's loops or calls hold both ops the trace times on their "
                                            "own and ops run in command buffers: which buffer runs which is "
                                            "not known") for b in buffers}
            runs.append([])
        else:
            runs[-1].extend(inner)
    runs = [r for r in runs if r]
    how = "the program's ops the trace does not time on their own"
    if len(buffers) == 1:
        return {buffers[0]: _counted([n for r in runs for n in r], costs, how)}
    if len(runs) == len(buffers):
        return {b: _counted(r, costs, f"{how}, run {i + 1} of {len(runs)} in schedule order")
                for i, (b, r) in enumerate(zip(buffers, runs))}
    problem = (f"{len(buffers)} command buffers and {len(runs)} runs of ops between the ops timed on their own: "
               "which buffer runs which ops is not known")
    return {b: Contents({}, how, problem) for b in buffers}


def _entry_units(module: Module) -> list[list[str]]:
    """The entry's ops in schedule order, each with the ops of the loops, calls and branches it runs."""
    entry = module.entry_computation
    order = module.schedule.get(entry.name) or tuple(i.name for i in entry.instructions)
    units = []
    for name in order:
        instr = entry.get(name)
        if instr is not None:
            units.append([name] + (_inside(module, instr.called) if instr.opcode in CONTROL_FLOW else []))
    return units


def _inside(module: Module, computations: Iterable[str]) -> list[str]:
    """Every op the computations run, nested loops, calls and branches followed (fusions' insides are
    their fusion's, and reducers run inside their op)."""
    pending = [c.lstrip("%") for c in computations]
    seen: set[str] = set()
    out: list[str] = []
    while pending:
        name = pending.pop(0)
        body = module.computations.get(name)
        if body is None or name in seen or body.is_fusion:
            continue
        seen.add(name)
        for op in body.instructions:
            out.append(op.name)
            if op.opcode in CONTROL_FLOW:
                pending += [c.lstrip("%") for c in op.called]
    return out


def _launches(cost: OpCost | None) -> bool:
    return bool(launches_work(cost))


def _counted(names: list[str], costs: Mapping[str, OpCost], how: str) -> Contents:
    """Each op once, with its runs per run of the program (its loops' trip counts)."""
    ops = {n: costs[n].trip_count or 1 for n in dict.fromkeys(names) if _launches(costs.get(n))}
    unknown = tuple(n for n in ops if costs[n].trip_count is None)
    if not ops:
        return Contents({}, how, "no op that launches work is left for it to run")
    return Contents(ops, how, unknown_runs=unknown)


def price_command_buffers(rows: list[Joined], modules: Mapping[int, Module],
                          costs: Mapping[int, Mapping[str, OpCost]],
                          expectations: Mapping[tuple[int, str], Expectation], hw: Hardware,
                          per_device: pd.DataFrame) -> tuple[list[Joined], list[str]]:
    """Measured rows with every command buffer priced as the ops it runs, and the report's note."""
    measured: dict[int, set[str]] = {}
    for r in rows:
        measured.setdefault(r.program_id, set()).add(r.name)
    found: dict[tuple[int, str], Contents] = {}
    for pid, names in measured.items():
        module = modules.get(pid)
        if module is not None and buffer_names(module, names):
            found.update({(pid, b): c for b, c in contents(module, costs.get(pid, {}), names).items()})
    if not found:
        return rows, []
    kernels = _kernels_per_run(per_device)
    out = [_priced(r, found[(r.program_id, r.name)], modules[r.program_id], costs[r.program_id], expectations, hw,
                   kernels.get((r.program_id, r.name))) if (r.program_id, r.name) in found else r for r in rows]
    listed = ", ".join(sorted({name for _, name in found}))
    return out, [f"{len(found)} command buffer(s) ran as CUDA graphs ({listed}): each is timed as one op, so it is "
                 f"priced as the sum of the ops it runs and judged as one; {RECAPTURE}"]


def _kernels_per_run(per_device: pd.DataFrame) -> dict[tuple[int, str], float]:
    if per_device.empty or "kernels" not in per_device.columns:
        return {}
    sums = per_device.groupby(["program_id", "op"], observed=True)[["kernels", "occurrences"]].sum().reset_index()
    return {(int(pid), str(op)): float(k) / float(n)
            for pid, op, k, n in zip(sums["program_id"], sums["op"], sums["kernels"], sums["occurrences"]) if n > 0}


def _priced(r: Joined, c: Contents, module: Module, costs: Mapping[str, OpCost],
            expectations: Mapping[tuple[int, str], Expectation], hw: Hardware, kernels: float | None) -> Joined:
    graph = f"one CUDA graph of {count(kernels)} kernels per run" if kernels else "one CUDA graph"
    base = replace(r, opcode=OPCODE, category="command buffer")
    unpriced = [n for n in c.ops if (expectations.get((r.program_id, n)) or _NONE).expected_s is None]
    problem = c.problem or (f"{len(unpriced)} of the {len(c.ops)} ops it runs have no expected time "
                            f"({', '.join(unpriced[:3])}{' ...' if len(unpriced) > 3 else ''}), so its own is unknown"
                            if unpriced else "")
    if problem:
        reason = f"command buffer ({graph}): {problem}; {RECAPTURE}"
        cost = OpCost(None, None, None, provenance="unknown", reason=reason)
        return replace(base, cost=cost, expectation=Expectation(None, None, None, None, "unknown", (reason,)))
    terms = [(n, runs, costs[n], expectations[(r.program_id, n)]) for n, runs in c.ops.items()]
    reaches = [achievable_time(cost, exp, hw) for _, _, cost, exp in terms]
    reason = (f"command buffer ({graph}) running {len(terms)} ops ({_kinds(module, c.ops)}: {c.how}); its roofline "
              "and achievable times are the sums of theirs, each op's launch included")
    if c.unknown_runs:
        reason += f"; {len(c.unknown_runs)} of them in loops of unknown trip count, counted once"
    waits = [n for n, _, cost, _ in terms if cost.collective is not None]
    unjudged = (f"holds {len(waits)} collective(s) ({', '.join(waits[:3])}), whose time includes waiting for "
                "other ranks, so it is not judged" if waits else "")
    return replace(base, cost=_summed_cost(terms, reason), expectation=_summed_expectation(terms, reason),
                   achievable=_summed_reach(terms, reaches), unjudged=unjudged)


_NONE = Expectation(None, None, None, None, "unknown")


def _kinds(module: Module, ops: Mapping[str, int]) -> str:
    """"270 fusions, 32 custom-calls": what the buffer runs, by opcode, most first."""
    kinds = Counter((found[1].opcode if (found := module.find(n)) else "op") for n in ops)
    return ", ".join(f"{k} {kind}{'es' if kind.endswith('h') else 's'}" if k > 1 else f"1 {kind}"
                     for kind, k in kinds.most_common())


_Term = tuple[str, int, OpCost, Expectation]


def _cost_sum(terms: list[_Term], field: str) -> float:
    return sum(runs * float(getattr(cost, field) or 0.0) for _, runs, cost, _ in terms)


def _time_sum(terms: list[_Term], field: str) -> float:
    return sum(runs * float(getattr(exp, field) or 0.0) for _, runs, _, exp in terms)


def _summed_cost(terms: list[_Term], reason: str) -> OpCost:
    flops_by_dtype: dict[str, float] = {}
    for _, runs, cost, _ in terms:
        flops_by_dtype[cost.dtype] = flops_by_dtype.get(cost.dtype, 0.0) + runs * (cost.flops or 0.0)
    dtype = max(flops_by_dtype, key=lambda d: flops_by_dtype[d]) if flops_by_dtype else ""
    return OpCost(flops=_cost_sum(terms, "flops"), bytes_read=_cost_sum(terms, "bytes_read"),
                  bytes_written=_cost_sum(terms, "bytes_written"),
                  transcendentals=_cost_sum(terms, "transcendentals"), comm_bytes=_cost_sum(terms, "comm_bytes"),
                  host_bytes=_cost_sum(terms, "host_bytes"), dtype=dtype, notes=(reason,))


def _summed_expectation(terms: list[_Term], reason: str) -> Expectation:
    by_bound: dict[Bound, float] = dict.fromkeys(BOUNDS, 0.0)
    for _, runs, _, exp in terms:
        by_bound[exp.bound_by] += runs * (exp.expected_s or 0.0)
    comm = [runs * exp.comm_s for _, runs, _, exp in terms if exp.comm_s is not None]
    return Expectation(compute_s=_time_sum(terms, "compute_s"), memory_s=_time_sum(terms, "memory_s"),
                       comm_s=sum(comm) if comm else None, expected_s=_time_sum(terms, "expected_s"),
                       bound_by=max(by_bound, key=lambda b: by_bound[b]), reasons=(reason,),
                       overhead_s=_time_sum(terms, "overhead_s"))


def _summed_reach(terms: list[_Term], reaches: list[AchievableTime]) -> AchievableTime:
    def total(field: str) -> float:
        return sum(runs * float(getattr(reach, field) or 0.0) for (_, runs, _, _), reach in zip(terms, reaches))

    comm = [reach.comm_s for reach in reaches if reach.comm_s is not None]
    sources = Counter(s for reach in reaches for s in reach.source.split("; ") if s)
    cited = "; ".join(s for s, _ in sources.most_common(3))
    return AchievableTime(total("seconds"), total("compute_s"), total("memory_s"), total("comm_s") if comm else None,
                          total("launch_s"), f"the sum of its {len(terms)} ops' achievable times ({cited})")
