"""What a report must say about its own limits: loops counted once, a topology too small for
the program, ops with no cost model. Each check returns plain warning lines (or raises)."""

from __future__ import annotations

import math
from collections import Counter

from collections.abc import Sequence
from typing import Any

from ..costmodel import units as qty
from ..costmodel.chips.hardware import Hardware
from ..optable.join import Joined
from ..optable.record import OpRecord
from ..base.errors import UsageError
from ..parsers.hlo.model import Module


def capacity(hw: Hardware) -> int | None:
    """Devices the named topology holds (None when no topology was named)."""
    if not hw.topology:
        return None
    return math.prod(hw.topology) * max(hw.devices_per_chip, 1)


def check_partitions(hw: Hardware, spec: str | None, partitions: int | None, allow_smaller: bool) -> list[str]:
    """A `--hardware` topology smaller than the program: exit 2, or a note with --allow-smaller."""
    room = capacity(hw)
    if not spec or room is None or not partitions or partitions <= room:
        return []
    unit = f"{'slices' if hw.kind == 'tpu' else 'nodes'} over the {hw.interconnect.scale_out_name}"
    if not allow_smaller:
        raise UsageError(
            f"the program spans {partitions} devices but --hardware {spec} holds {room}",
            hint=f"name a topology with at least {partitions} devices, or pass --allow-smaller to price the "
                 f"extra devices as further {spec} {unit}")
    copies = math.ceil(partitions / room)
    return [f"--allow-smaller: the program spans {partitions} devices and --hardware {spec} holds {room}; "
            f"collectives are priced as if on {copies} {spec} {unit}, which is slower than one larger "
            f"{hw.interconnect.link_name} domain"]


def loop_caveats(modules: dict[int, Module]) -> tuple[list[str], list[dict[str, Any]]]:
    """Loops with no known trip count: warning lines and one summary entry per loop."""
    from ..costmodel.ops.module import unknown_trip_loops

    found = [(pid, name, ops) for pid, module in modules.items() for name, ops in unknown_trip_loops(module)]
    if not found:
        return [], []
    loops = [{"program_id": pid, "name": name, "ops": ops} for pid, name, ops in found]
    held = sum(ops for _, _, ops in found)
    listed = ", ".join(f"{name} ({ops} ops)" for _, name, ops in found[:6]) + (" ..." if len(found) > 6 else "")
    return [f"{len(loops)} while loop(s) have no known trip count, so the {held} op(s) they hold are "
            f"counted once per run and the expected time is a lower bound: {listed}"], loops


def unmodeled_list(ops: Sequence[OpRecord]) -> list[OpRecord]:
    """Ops without a cost model of their own: no expectation at all, or only a lower bound."""
    return [o for o in ops if not o.container and (o.expected_s is None or o.lower_bound
                                                    or o.provenance.flops == "unknown")]


def unmodeled_groups(unmodeled: Sequence[OpRecord]) -> dict[str, int]:
    """How many of the `unmodeled_list` ops there are, by opcode (custom calls by `custom-call TARGET`)."""
    return dict(Counter(f"{o.opcode} {o.custom_call_target}" if o.custom_call_target
                        else o.opcode or "not in the program's HLO" for o in unmodeled).most_common())


def unmodeled_warning(unmodeled: Sequence[OpRecord]) -> str | None:
    """The `unmodeled_list` ops, grouped by what they are (custom calls by target)."""
    if not unmodeled:
        return None
    groups = Counter(unmodeled_groups(unmodeled))
    kinds = ", ".join(f"{what} x{n}" for what, n in groups.most_common(8)) + (" ..." if len(groups) > 8 else "")
    names = ", ".join(o.name for o in unmodeled[:8]) + (" ..." if len(unmodeled) > 8 else "")
    bounded = sum(1 for o in unmodeled if o.expected_s is not None)
    how = (f"{bounded} priced on a lower bound only (the bytes their operands and results hold, "
           f"FLOPs where the trace states them), {len(unmodeled) - bounded} listed as unknown"
           if bounded else "listed as unknown")
    return f"{len(unmodeled)} op(s) have no cost model, {how}: {kinds} (e.g. {names})"


def not_judged_warning(ops: Sequence[OpRecord]) -> str:
    """Measured ops whose expected time means nothing here, grouped by why."""
    why = Counter((o.reasons[0] if o.reasons else "").split(":")[0] for o in ops)
    parts = "; ".join(f"{n} {reason}" for reason, n in why.most_common())
    return (f"{len(ops)} measured op(s) are not judged and not counted in the roofline fraction ({parts}); "
            "each says why")


def peaks_used(ops: Sequence[OpRecord], hw: Hardware) -> list[dict[str, Any]]:
    """The catalog peaks that priced the ops' FLOPs, most FLOPs first (what the hardware line shows),
    each once; an unknown peak (NaN) priced nothing, so it is not one of them."""
    share = max(hw.devices_per_chip, 1)
    flops: dict[float, list[float]] = {}  # per peak, each op's FLOPs in op order (summed as they come)
    dtypes: set[tuple[float, str]] = set()
    for o in ops:
        rate = o.peak_flops_per_s
        if not rate or not o.flops or o.container:
            continue
        found = flops.get(rate)
        if found is None:
            found = flops[rate] = []
        found.append(o.flops)
        dtypes.add((rate, o.dtype or "?"))
    used: dict[float, dict[str, Any]] = {
        rate: {"flops_per_s": rate * share, "ops": len(each), "flops": sum(each),
               "dtypes": {d for r, d in dtypes if r == rate}}
        for rate, each in flops.items() if math.isfinite(rate)}
    out = []
    for _rate, entry in sorted(used.items(), key=lambda kv: -kv[1]["flops"]):
        key = next((k for k, q in hw.peak_flops.items()
                    if math.isclose(q.value, entry["flops_per_s"], rel_tol=1e-9)), None)
        out.append({"peak": key or "/".join(sorted(entry["dtypes"])), "flops_per_s": entry["flops_per_s"],
                    "source": hw.peak_flops[key].source if key else "catalog, derived",
                    "ops": entry["ops"], "flops": entry["flops"], "dtypes": sorted(entry["dtypes"])})
    return out


# Beyond this relative difference, the trace's and the HLO's FLOP counts disagree.
_FLOPS_TOLERANCE = 0.1


def trace_flops_warning(rows: Sequence[Joined]) -> str | None:
    """Ops whose FLOPs the trace states differently from the program's HLO (the HLO's count is used)."""
    off = []
    for r in rows:
        cost = r.cost
        if r.trace_flops is None or cost is None or not cost.modeled or cost.lower_bound or not cost.flops:
            continue
        ratio = r.trace_flops / cost.flops
        if abs(ratio - 1) > _FLOPS_TOLERANCE:
            off.append((abs(math.log(ratio)) if ratio > 0 else math.inf, r, ratio))
    if not off:
        return None
    off.sort(key=lambda x: -x[0])
    worst = "; ".join(f"{r.name} ({r.module}): trace {qty.flops(r.trace_flops)}, HLO {qty.flops(r.cost.flops)}"
                      f" ({qty.ratio(ratio)})" for _, r, ratio in off[:3] if r.cost is not None)
    return (f"{len(off)} op(s) whose FLOPs the trace states differently from the program's HLO (by more than "
            f"{qty.percent(_FLOPS_TOLERANCE)}): the HLO count is used; {worst}")
