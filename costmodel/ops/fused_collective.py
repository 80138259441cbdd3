"""Fusions that carry a collective, priced as the collective they carry.

XLA puts collectives inside fusions in several ways:

- TPU all-reduce-scatter fusions, `fusion(kind=kCustom, calls=%all-reduce-scatter)`: an
  all-reduce of which each device keeps its 1/n (a dynamic-slice at its partition id). That is
  a reduce-scatter, and XLA runs it as one.
- TPU async collective fusions: a start fusion (the collective beside an `AsyncCollectiveStart`
  custom call), compute fusions (`calls=%async_collective_fusion...`) that carry the transfer
  beside their matmuls and thread its buffers through, and a done fusion (`AsyncCollectiveDone`).
- GPU dynamic-slice fusions around a reduce-scatter or an all-reduce, and Triton collective
  fusions whose root is an all-reduce-start, alone or wrapped in an async-start.

Each is priced as the plain collective of the same data on the same groups (the same volume,
groups and bytes sent, so the same time on the topology), counted once: a start whose transfer
compute fusions carry costs nothing, as does every done, and compute fusions that continue one
collective share it. The fused compute keeps its FLOPs and the fusion's HBM bytes are what
crosses its boundary, so the op is bound by the largest of compute, memory and collective, as a
plain op is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...parsers.hlo.model import Computation, Instruction
from ..costs import CollectiveInfo, OpCost
from ..units import integral, whole_percent
from .base import CostContext, first_dtype, unknown_cost, zero_cost
from .collective import kind_of, price_collective
from .fusion_io import passed_through, utilization

ASYNC_START, ASYNC_DONE = "AsyncCollectiveStart", "AsyncCollectiveDone"


@dataclass(frozen=True)
class Carried:
    """A fusion's collective: the whole cost of the fusion (`whole`, for an async start or done),
    or the transfer it adds to the fusion's own compute and bytes."""

    whole: OpCost | None = None
    transfer: OpCost | None = None

    def onto(self, fused: OpCost) -> OpCost:
        """The fusion's compute-and-memory cost with the transfer it carries."""
        t = self.transfer
        if t is None:
            return fused
        if t.collective is None:
            return unknown_cost(t.reason, fused.dtype)
        return replace(fused, comm_bytes=t.comm_bytes, collective=t.collective, notes=fused.notes + t.notes)


def collectives_in(comp: Computation, ctx: CostContext) -> list[tuple[Instruction, Computation]]:
    """The collectives of a fused computation and of the fusions nested in it, each computation once;
    found once per computation, however many fusions call it."""
    key = ("collectives", comp.name)
    found: list[tuple[Instruction, Computation]] | None = ctx.memo.get(key)
    if found is None:
        found = ctx.memo[key] = _collectives_in(comp, ctx)
    return found


def _collectives_in(comp: Computation, ctx: CostContext) -> list[tuple[Instruction, Computation]]:
    found: list[tuple[Instruction, Computation]] = []
    seen: set[str] = set()
    pending = [comp]
    while pending:
        current = pending.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        for instr in current.instructions:
            if kind_of(instr.opcode):
                found.append((instr, current))
            elif instr.opcode == "fusion":
                pending += [c for name in instr.called if (c := ctx.computation_named(name)) is not None]
    return found


def _targets(comp: Computation) -> set[str]:
    return {i.custom_call_target for i in comp.instructions if i.opcode == "custom-call"}


def carried(instr: Instruction, comp: Computation, ctx: CostContext) -> Carried | None:
    """The collective a fusion carries, None when its computation holds none."""
    found = collectives_in(comp, ctx)
    if not found:
        return None
    first, where = found[0]
    kind = kind_of(first.opcode)
    targets = _targets(comp)
    if ASYNC_DONE in targets:
        return Carried(whole=zero_cost(f"completes the async {kind} started earlier, costed where it runs",
                                       first_dtype(first.shape)))
    if ASYNC_START in targets:
        chain = _continuing(first, ctx)
        if chain:
            return Carried(whole=zero_cost(f"starts the async {kind} that {', '.join(chain)} carry beside "
                                           "their compute", first_dtype(first.shape)))
        plain = _transfer(first, where, ctx, comp.name)
        return Carried(whole=replace(plain, notes=plain.notes + (
            f"TPU async {kind}: its start fusion carries it (no compute fusion continues it)",)))
    share = 1.0
    if passed_through(comp):  # a compute fusion threading an async collective's buffers: it may share it
        chain = _continuing(first, ctx)
        share = 1 / len(chain) if instr.name in chain else 1.0
    return Carried(transfer=_merged([_transfer(i, c, ctx, comp.name) for i, c in found], share))


def _continuing(inner: Instruction, ctx: CostContext) -> list[str]:
    """Fusions beside the op (in its computation) that carry the collective on `inner`'s channel
    and neither start nor finish it: the compute fusions of a TPU async collective fusion."""
    if inner.channel_id is None:
        return []
    out = []
    for instr in ctx.computation.instructions:
        comp = ctx.called(instr, "calls", 0) if instr.opcode == "fusion" else None
        if comp is None or _targets(comp) & {ASYNC_START, ASYNC_DONE}:
            continue
        if any(i.channel_id == inner.channel_id and kind_of(i.opcode) for i, _ in collectives_in(comp, ctx)):
            out.append(instr.name)
    return out


def _transfer(inner: Instruction, where: Computation, ctx: CostContext, fused: str) -> OpCost:
    """One fused collective priced as the plain collective it amounts to."""
    inner_ctx = ctx.within(where)
    kind = kind_of(inner.opcode) or inner.opcode
    note = ""
    if kind == "all-reduce" and (keeps := _kept_share(inner, where, inner_ctx)) is not None:
        kind = "reduce-scatter"
        note = (f"{inner.name} is an all-reduce of which each device keeps 1/{keeps} (a dynamic-slice): "
                "a reduce-scatter, as XLA runs it")
    out = price_collective(inner, inner_ctx, kind)
    if out.collective is None:
        return out
    return replace(out, collective=replace(out.collective, fused=fused), notes=(note,) if note else ())


def _kept_share(inner: Instruction, where: Computation, ctx: CostContext) -> int | None:
    """n when the fusion's outputs use only 1/n of the all-reduce's result, n its group size."""
    n = len(inner.replica_groups[0]) if inner.replica_groups else ctx.num_devices
    used = utilization(where, ctx).get(inner.name, 1.0)
    return n if n and n > 1 and used * n <= 1.0 + 1e-9 else None


def _merged(transfers: list[OpCost], share: float) -> OpCost:
    """Several fused collectives as one: those of the kind and groups that send the most, summed,
    times the share of them this fusion carries."""
    known = [(t, t.collective) for t in transfers if t.collective is not None]
    if len(known) < len(transfers):
        return next(t for t in transfers if t.collective is None)
    by_group: dict[tuple[str, tuple[tuple[int, ...], ...]], list[tuple[OpCost, CollectiveInfo]]] = {}
    for t, info in known:
        by_group.setdefault((info.kind, info.groups), []).append((t, info))
    main = max(by_group.values(), key=lambda group: sum(t.comm_bytes for t, _ in group))
    info = main[0][1]
    sent = sum(t.comm_bytes for t, _ in main) * share
    notes = tuple(dict.fromkeys(n for t, _ in main for n in t.notes))
    if share < 1:
        notes += (f"carries {whole_percent(share)} of the {info.kind}: the compute fusions that continue it share it",)
    others = [i.kind for group in by_group.values() if group is not main for _, i in group]
    if others:
        notes += (f"also holds {', '.join(others)}, not priced on the links beside the {info.kind}",)
    if len(main) > 1 or share < 1:
        info = replace(info, note=f"{len(main)} fused {info.kind}; each device sends {integral(sent)} bytes of them")
    return replace(main[0][0], comm_bytes=sent, notes=notes,
                   collective=replace(info, bytes=sum(i.bytes for _, i in main) * share))
