"""Plan with the user's own measured rates: per op class, how much slower than its roofline each kind of
op ran in their `inspect` report.

An inspect report prices every op at the roofline (`expected_s`) and measures it (`measured_s`),
both over all its executions in the step. Summed over the ops of one class, measured over expected is how
far their kernels and fabric stand from the peaks: compute-bound ops (their GEMMs and attention),
memory-bound ops (norms, activations, copies), and collectives. A plan calibrated by a report prices
each op at its roofline times its class's factor instead of the catalog's achievable tables, and
stretches the exposed communication by the collectives' factor; what it took from the profile says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...base.errors import InputError

CLASSES = ("compute", "memory", "collective")
MIN_OPS = 1  # a class is calibrated from at least this many timed ops


@dataclass(frozen=True)
class Calibration:
    """Measured over roofline time per bound class, the ops behind each, and the report's hardware."""

    factors: dict[str, float]
    ops: dict[str, int]
    hardware: str
    source: str

    def factor(self, bound: str) -> float | None:
        return self.factors.get("collective" if bound in ("collective", "latency") else bound)

    def to_json(self) -> dict[str, Any]:
        return {"factors": self.factors, "ops": self.ops, "hardware": self.hardware, "source": self.source,
                "note": "measured time over roofline time per bound class, from the report's timed ops"}


def _number(op: dict[str, Any], key: str) -> float | None:
    v = op.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None


def from_report(report: Any, name: str) -> Calibration:
    """The factors of an inspect JSON report; InputError when it is not one or times nothing."""
    if not isinstance(report, dict) or not isinstance(report.get("ops"), list):
        raise InputError(f"{name} is not an audit inspect JSON report (no ops list)",
                         hint="write one with: audit inspect PROFILE --json report.json")
    measured: dict[str, float] = {}
    expected: dict[str, float] = {}
    counted: dict[str, int] = {}
    for op in report["ops"]:
        if not isinstance(op, dict) or op.get("container"):
            continue
        bound = op.get("bound_by")
        cls = "collective" if bound in ("collective", "latency") and op.get("comm_s") else bound
        took, exp = _number(op, "measured_s"), _number(op, "expected_s")
        if cls not in CLASSES or not took or not exp:
            continue
        measured[cls] = measured.get(cls, 0.0) + took
        expected[cls] = expected.get(cls, 0.0) + exp
        counted[cls] = counted.get(cls, 0) + 1
    # never below the roofline: a plan calibrated by it keeps its bound below its estimate
    factors = {c: max(1.0, measured[c] / expected[c]) for c in CLASSES
               if counted.get(c, 0) >= MIN_OPS and expected.get(c)}
    if not factors:
        raise InputError(f"{name} times no op with a roofline expectation: nothing to calibrate from")
    hw = report.get("hardware")
    return Calibration(factors, {c: counted[c] for c in factors},
                       str(hw.get("name", "")) if isinstance(hw, dict) else "", f"calibration: {name}")
