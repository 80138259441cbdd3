"""The predicted step with asynchronous collectives overlapped, attached to the report's rows.

`summary.expected_s` stays the no-overlap sum of every op's expected time; the schedule
walk (costmodel.schedule) says how much of each asynchronous op hides behind the compute
scheduled inside its window. Each op's hidden and exposed seconds are per device, summed
over its occurrences like every per-op quantity, so
`expected_step_s = expected_s - sum(hidden_s)`.
"""

from __future__ import annotations

from ..costmodel.schedule import StepWalk


def attach_overlap(ops: list[dict], walks: dict[int, StepWalk | None]) -> tuple[dict, list[str]]:
    """Put hidden/exposed seconds on the ops; return the summary fields and any warnings."""
    windows = {(pid, w.start): w for pid, walk in walks.items() if walk is not None for w in walk.windows}
    hidden = hidden_comm = exposed = 0.0
    for op in ops:
        if op["container"] or op["expected_s"] is None:
            continue
        w = windows.get((op["program_id"], op["name"]))
        occ = op["occurrences"] or 0.0
        if w is not None:
            op["window_compute_s"] = w.window_compute_s * occ
            op["exposed_s"] = w.exposed_s * occ
            op["hidden_s"] = w.hidden_s * occ
            hidden += op["hidden_s"]
        elif op["comm_bytes"]:
            op["exposed_s"], op["hidden_s"] = op["expected_s"], 0.0
        if op["comm_bytes"] and "exposed_s" in op:
            exposed += op["exposed_s"]
            hidden_comm += op["hidden_s"]
    unscheduled = sorted(str(pid) for pid, walk in walks.items() if walk is None)
    warnings = []
    if unscheduled:
        warnings.append(f"program(s) {', '.join(unscheduled)} run asynchronous ops but the HLO has no "
                        "schedule: the overlapped step is unknown (expected_step_s is null)")
    expected = sum(o["expected_s"] for o in ops if not o["container"] and o["expected_s"] is not None)
    known = not unscheduled
    return {
        "expected_step_s": expected - hidden if known else None,
        "exposed_comm_s": exposed if known else None,
        "hidden_comm_s": hidden_comm if known else None,
        "hidden_s": hidden if known else None,  # communication and asynchronous copies
        "overlap_model": ("schedule walk: one compute stream and collective streams (TPU: one per collective "
                          "kind; GPU: one shared); an async op hides behind the compute scheduled between its "
                          "start and done"),
    }, warnings


def window_fields(op: dict) -> dict:
    """Per-execution overlap fields for a collective row (seconds, per device)."""
    occ = op["occurrences"] or 0.0
    if "exposed_s" not in op or not occ:
        return {"exposed_s": None, "hidden_s": None, "window_compute_s": None}
    return {"exposed_s": op["exposed_s"] / occ, "hidden_s": op["hidden_s"] / occ,
            "window_compute_s": op.get("window_compute_s", 0.0) / occ}
