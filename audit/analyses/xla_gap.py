"""Why our predicted step differs from XLA's `optimal_seconds`, in numbers.

XLA's estimate is one number for the module; ours is a sum of per-op rooflines walked
over the schedule. The difference is split into what each side prices: communication
the compute does not hide (XLA prices all-gather, reduce-scatter and all-to-all at
zero and ignores the ICI topology), the fixed per-op overhead we charge each op that
launches work, and the compute and memory rooflines that remain.
"""

from __future__ import annotations

from typing import Any

from ..costmodel.chips.hardware import Quantity
from ..costmodel.units import count, ratio, seconds, share as share_of
from ..reports.model.report import ReportModel


def explain_gap(report: ReportModel, xla_s: float | None, overhead_per_op: Quantity | None) -> dict[str, Any]:
    """Split our overlapped step into exposed communication, per-op overhead (the chip's figure,
    with its source) and roofline time."""
    overhead_per_op_s = overhead_per_op.value if overhead_per_op is not None else 0.0
    overhead_source = overhead_per_op.source if overhead_per_op is not None else "none"
    s = report.summary
    # Communication ops' overhead is inside their exposed time already, and asynchronous copies
    # run off the compute stream: count the overhead of the ops the compute stream runs.
    ops = [o for o in report.timed_ops if o.expected_s is not None
           and o.launches_work and not o.comm_bytes and o.overlap is None]
    launches = sum(o.occurrences or 0.0 for o in ops)
    overhead = launches * overhead_per_op_s
    ours = s.overlap.expected_step_s
    ours = (s.expected_s or 0.0) if ours is None else ours
    exposed = s.overlap.exposed_comm_s or 0.0
    hidden = s.overlap.hidden_comm_s or 0.0
    rest = ours - exposed - overhead
    out = {
        "ours_step_s": ours, "ours_no_overlap_s": s.expected_s, "xla_optimal_s": xla_s,
        "difference_s": None if xla_s is None else ours - xla_s,
        "exposed_comm_s": exposed, "hidden_comm_s": hidden,
        "op_launches": launches, "overhead_per_op_s": overhead_per_op_s,
        "overhead_per_op_source": overhead_source, "overhead_s": overhead,
        "roofline_s": rest,
        "units": "seconds per step per device; ours [model], XLA's [xla]",
    }
    def share(part: float) -> str:
        return share_of(part, ours)

    text = (f"ours {seconds(ours)} with async overlap ({seconds(s.expected_s)} with none)"
            + (f", XLA's optimal_seconds {seconds(xla_s)} ({ratio(ours / xla_s)})" if xla_s else "")
            + f". Ours is {seconds(exposed)} communication not hidden by compute ({share(exposed)}; "
            f"{seconds(hidden)} more hides behind compute; XLA's model prices all-gather, reduce-scatter and "
            f"all-to-all at zero), {seconds(overhead)} fixed per-op overhead ({count(launches)} compute and memory op launches x "
            f"{seconds(overhead_per_op_s)} [{overhead_source}], {share(overhead)}; ops that launch nothing are free) and "
            f"{seconds(rest)} compute and memory rooflines and waits for asynchronous copies ({share(rest)}).")
    out["text"] = text
    return out
