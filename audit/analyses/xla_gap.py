"""Why our predicted step differs from XLA's `optimal_seconds`, in numbers.

XLA's estimate is one number for the module; ours is a sum of per-op rooflines walked
over the schedule. The difference is split into what each side prices: communication
the compute does not hide (XLA prices all-gather, reduce-scatter and all-to-all at
zero and ignores the ICI topology), the fixed per-op overhead we charge each op that
launches work, and the compute and memory rooflines that remain.
"""

from __future__ import annotations


def _human(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def explain_gap(report: dict, xla_s: float | None, overhead_per_op_s: float) -> dict:
    """Split our overlapped step into exposed communication, per-op overhead and roofline time."""
    s = report["summary"]
    # Communication ops' overhead is inside their exposed time already, and asynchronous copies
    # run off the compute stream: count the overhead of the ops the compute stream runs.
    ops = [o for o in report["ops"] if not o["container"] and o["expected_s"] is not None
           and o.get("launches_work") and not o["comm_bytes"] and "hidden_s" not in o]
    launches = sum(o["occurrences"] or 0.0 for o in ops)
    overhead = launches * overhead_per_op_s
    ours = s.get("expected_step_s")
    ours = s["expected_s"] if ours is None else ours
    exposed = s.get("exposed_comm_s") or 0.0
    hidden = s.get("hidden_comm_s") or 0.0
    rest = ours - exposed - overhead
    out = {
        "ours_step_s": ours, "ours_no_overlap_s": s["expected_s"], "xla_optimal_s": xla_s,
        "difference_s": None if xla_s is None else ours - xla_s,
        "exposed_comm_s": exposed, "hidden_comm_s": hidden,
        "op_launches": launches, "overhead_per_op_s": overhead_per_op_s, "overhead_s": overhead,
        "roofline_s": rest,
        "units": "seconds per step per device; ours [model], XLA's [xla]",
    }
    def share(part: float) -> str:
        return f"{100 * part / ours:.0f}%" if ours else "-"

    text = (f"ours {_human(ours)} with async overlap ({_human(s['expected_s'])} with none)"
            + (f", XLA's optimal_seconds {_human(xla_s)} ({ours / xla_s:.2f}x)" if xla_s else "")
            + f". Ours is {_human(exposed)} communication not hidden by compute ({share(exposed)}; "
            f"{_human(hidden)} more hides behind compute; XLA's model prices all-gather, reduce-scatter and "
            f"all-to-all at zero), {_human(overhead)} fixed per-op overhead ({launches:.0f} compute and memory op launches x "
            f"{_human(overhead_per_op_s)}, {share(overhead)}; ops that launch nothing are free) and "
            f"{_human(rest)} compute and memory rooflines and waits for asynchronous copies ({share(rest)}).")
    out["text"] = text
    return out
