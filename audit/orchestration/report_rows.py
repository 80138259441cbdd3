"""Report rows built from the joined op table: one dict per op, collectives, per-host views."""

from __future__ import annotations

from ..analyses.steps import CONTAINER_OPCODES, step_time_stats
from ..costmodel.chips.hardware import Hardware
from ..costmodel.optable import OpRow, Thresholds, op_quantities, safe_ratio
from ..analyses.suggestions import suggest
from .overlap import window_fields


def op_dicts(rows: list[OpRow], hw: Hardware, thresholds: Thresholds, per_device) -> list[dict]:
    from ..costmodel.roofline import flag_reasons, judge

    total_self = sum(r.self_s or 0.0 for r in rows if r.opcode not in CONTAINER_OPCODES) or None
    by_key = _per_device_lists(per_device) if per_device is not None else {}
    ops = []
    for r in rows:
        q = op_quantities(r)
        container = r.opcode in CONTAINER_OPCODES
        share = safe_ratio(r.self_s, total_self)
        flagged, efficiency = False, safe_ratio(q["expected_s"], r.measured_s)
        reasons: list[str] = []
        unjudged = not_judged(r, hw) if r.measured_s is not None and not container else ""
        if unjudged:
            reasons = [unjudged] + (list(r.expectation.reasons) if r.expectation is not None else [])
        elif r.measured_s is not None and not container:
            flagged, efficiency = judge(q["expected_s"], r.measured_s, share or 0.0,
                                        min_efficiency=thresholds.min_efficiency,
                                        min_share=thresholds.min_share)
            if r.cost is not None and r.expectation is not None:
                per_exec = r.measured_s / r.occurrences if r.occurrences else r.measured_s
                reasons = list(flag_reasons(r.cost, r.expectation, per_exec, hw))
        elif r.expectation is not None:
            reasons = list(r.expectation.reasons)
        if r.cost is None:
            reasons.append("not in the program's HLO: no cost available" if not r.instr_found
                           else "no cost computed for this op")
        elif not r.cost.modeled and r.cost.reason:
            reasons.append(r.cost.reason)
        op = {
            "key": r.key, "program_id": r.program_id, "module": r.module, "name": r.name,
            "opcode": r.opcode, "category": r.category, "framework_op": r.framework_op,
            "source": r.source, "shape": r.shape, "fingerprint": r.fingerprint, "position": r.position,
            "custom_call_target": r.custom_call_target,
            "devices": r.devices, "occurrences": r.occurrences,
            "measured_s": r.measured_s, "measured_s_max": r.measured_s_max, "self_s": r.self_s,
            **{k: q[k] for k in ("flops", "transcendentals", "bytes", "comm_bytes", "dtype",
                                 "compute_s", "memory_s", "comm_s", "expected_s", "bound_by", "memory_level",
                                 "launches_work")},
            "efficiency": efficiency,
            "verdict": _verdict(flagged and not container, unjudged, q["expected_s"], r.measured_s, container),
            "lower_bound": (r.cost.lower_bound or None) if r.cost is not None else None,
            "flagged": bool(flagged and not container),
            "reasons": _dedupe(reasons),
            "provenance": q["provenance"],
            "share": share,
            "wasted_s": (None if q["expected_s"] is None or r.measured_s is None or container
                         else max(r.self_s - q["expected_s"], 0.0)),
            "intensity": safe_ratio(q["flops"], q["bytes"]),
            "achieved_flops_per_s": safe_ratio(q["flops"], r.measured_s),
            "achieved_bytes_per_s": safe_ratio(q["bytes"], r.measured_s),
            "container": container,
            "peak_flops_per_s": (r.expectation.peak_flops_per_s
                                 if r.expectation is not None and q["flops"] else None),
        }
        if r.cost is not None and r.cost.collective is not None:
            placed = r.expectation.details.get("collective") if r.expectation is not None else None
            op["collective"] = (r.cost.collective, placed or {})
        if by_key:
            op["per_device"] = by_key.get((r.program_id, r.name), [])
            op.update(_spread(op["per_device"]))
        ops.append(op)
    ops.sort(key=lambda o: -(o["self_s"] if o["self_s"] is not None else (o["expected_s"] or 0.0)))
    ridge = _ridge(hw)
    for op in ops:
        op["suggestion"] = suggest(op, ridge, hw.kind) if op["flagged"] else ""
    return ops


SIMULATED_COLLECTIVE = ("collective between simulated CPU devices: its time is a rendezvous wait for the "
                        "other devices' work on the shared cores, not communication, so it is not judged")
WAIT_ONLY = ("launches no work of its own: its measured time is a wait (for asynchronous work or other "
             "devices), so it is not judged")


def not_judged(row: OpRow, hw: Hardware) -> str:
    """Why a measured op's expected time cannot be compared with its measured time ("" if it can)."""
    from ..costmodel.roofline import launches_work

    cost = row.cost
    if cost is None:
        return ""
    if hw.kind == "cpu" and (cost.collective is not None or cost.comm_bytes):
        return SIMULATED_COLLECTIVE
    if launches_work(cost) is False and row.measured_s:
        return WAIT_ONLY
    return ""


def _verdict(flagged: bool, unjudged: str, expected_s: float | None, measured_s: float | None,
             container: bool) -> str:
    """flagged | ok | not judged | unknown (no expected time) | not measured (a prediction)."""
    if container or unjudged:
        return "not judged"
    if expected_s is None:
        return "unknown"
    if measured_s is None:
        return "not measured"
    return "flagged" if flagged else "ok"


def _per_device_lists(per_device) -> dict:
    out: dict = {}
    for host, dev, pid, op, occ, dur, self_ in zip(per_device["host"], per_device["device"],
                                                   per_device["program_id"], per_device["op"],
                                                   per_device["occurrences"], per_device["dur_ps"],
                                                   per_device["self_ps"]):
        out.setdefault((int(pid), str(op)), []).append(
            {"host": str(host), "device": int(dev), "occurrences": int(occ),
             "measured_s": float(dur) * 1e-12, "self_s": float(self_) * 1e-12})
    return out


def _spread(per_device: list[dict]) -> dict:
    """Straggler view of one op: median over devices, slowest/median, and per-host means."""
    times = sorted(d["measured_s"] for d in per_device)
    if not times:
        return {}
    median = times[len(times) // 2] if len(times) % 2 else (times[len(times) // 2 - 1] + times[len(times) // 2]) / 2
    out: dict = {"measured_s_median": median, "straggler_ratio": safe_ratio(times[-1], median)}
    hosts: dict[str, list[float]] = {}
    for d in per_device:
        hosts.setdefault(d["host"], []).append(d["measured_s"])
    if len(hosts) > 1:
        out["per_host"] = {h: {"measured_s": sum(v) / len(v), "measured_s_max": max(v)} for h, v in hosts.items()}
    return out


def _ridge(hw: Hardware) -> float | None:
    try:
        return hw.ridge("bf16")
    except (ZeroDivisionError, StopIteration):
        return None


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def collective_rows(ops: list[dict], overlap: dict[str, bool]) -> list[dict]:
    """One row per collective op: what moves, where on the topology, predicted vs measured."""
    out = []
    for op in ops:
        entry = op.pop("collective", None)
        if entry is None:
            continue
        info, placed = entry
        occ = op["occurrences"]
        measured = op["measured_s"]
        per_exec = measured / occ if measured is not None and occ else None
        exp = op["expected_s"] / occ if op["expected_s"] is not None and occ else None
        moved = placed.get("bytes_moved", info.bytes)
        out.append({
            "name": op["name"], "key": op["key"], "module": op["module"], "kind": info.kind,
            "bytes": info.bytes, "bytes_moved": moved,
            "group_size": info.group_size, "groups": [list(g) for g in info.groups[:16]],
            "axes": placed.get("axes", list(info.axes)), "physical_axes": placed.get("physical_axes", []),
            "hops": placed.get("hops", info.hops), "wraparound": placed.get("wraparound", info.wraparound),
            "link": placed.get("link"), "approximate": placed.get("approximate", False),
            "expected_s": exp, "measured_s": per_exec, "occurrences": occ,
            "bound_by": op["bound_by"],
            "achieved_bytes_per_s": safe_ratio(moved, per_exec),
            "peak_bytes_per_s": placed.get("bandwidth_bytes_per_s"),
            "overlapped": overlap.get(op["name"], False) if per_exec is not None else None,
            **window_fields(op),
            "note": "; ".join(n for n in [info.note, *placed.get("notes", [])] if n),
        })
        op["overlapped"] = overlap.get(op["name"], False)
    return out


def host_summary(per_device, steps: list[dict], hosts) -> list[dict]:
    out = []
    for h in hosts:
        host_rows = per_device[per_device["host"] == h.host]
        step_times = [s.get("per_host_s", {}).get(h.host) for s in steps]
        step_times = [t for t in step_times if t is not None]
        out.append({"host": h.host, "devices": int(host_rows["device"].nunique()),
                    "busy_s": float(host_rows["self_ps"].sum()) * 1e-12,
                    "step_time_s": step_time_stats([{"time_s": t} for t in step_times])})
    return out
