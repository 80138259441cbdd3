"""One finding of the step diagnosis: a cause of lost step time, what it costs per step, and the evidence.

Every analysis that explains part of a step (kernel gaps, exposed communication, interference, idle
time read from the host side, program waste found in the HLO, what stays unexplained) says it as
`Finding`s; the report ranks them by the step time each costs. Times are seconds per step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

FindingOrigin = Literal["trace", "model", "trace+model"]
"""Where `time_per_step_s` came from: measured in the trace, expected by the cost model (HLO dumps,
predictions), or a measured time judged against an expected one."""
ORIGINS: tuple[FindingOrigin, ...] = get_args(FindingOrigin)


@dataclass(frozen=True, slots=True)
class Finding:
    """One ranked cause of step time.

    `cause` is a stable key (e.g. "host-bound", "kernel-gap", "waste:loop-carry-copy", "unexplained")
    that `audit diff` pairs across reports; `title` is the one line a reader sees first; `evidence`
    names ops, host functions, HLO lines or source lines; `action` says what to do about it."""

    cause: str
    title: str
    time_per_step_s: float
    share: float | None  # of the measured (or, for a dump, expected) step; None when no step is known
    evidence: tuple[str, ...]
    action: str
    origin: FindingOrigin
    program: str | None = None

    def __post_init__(self) -> None:
        if not self.time_per_step_s >= 0.0:
            raise ValueError(f"finding {self.cause!r}: time per step must be >= 0, got {self.time_per_step_s!r}")
        if self.origin not in ORIGINS:
            raise ValueError(f"finding {self.cause!r}: origin {self.origin!r} is not one of {ORIGINS}")

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause, "title": self.title, "time_per_step_s": self.time_per_step_s,
                "share": self.share, "evidence": list(self.evidence), "action": self.action,
                "origin": self.origin, "program": self.program}

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> Finding:
        return cls(str(entry["cause"]), str(entry["title"]), float(entry["time_per_step_s"]),
                   None if entry.get("share") is None else float(entry["share"]),
                   tuple(str(e) for e in entry.get("evidence", ())), str(entry.get("action", "")),
                   entry.get("origin", "trace"), entry.get("program"))


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """Largest cost to the step first; ties by cause, so the order is stable across runs."""
    return sorted(findings, key=lambda f: (-f.time_per_step_s, f.cause, f.program or ""))
