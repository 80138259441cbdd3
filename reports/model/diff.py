"""The `audit diff` document: one typed `DiffModel`, JSON (`audit.diff/v1`) only at the edge.

The analysis (`audit.analyses.diff_verdict.diff_reports`) builds it; every format renders it
(`reports.diff_sections`) and `to_json` writes the contract's field names. Quantities are per
step and per device, in SI base units, as in the reports compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .findings import Finding

SCHEMA = "audit.diff/v1"
JSON = dict[str, Any]
PROGRAM_FIELDS = ("flops", "bytes", "comm_bytes")
"""What says the program changed; expected times are reported beside them but do not count (they
also move with the hardware's figures, a calibration taken on each machine)."""


@dataclass(frozen=True)
class Gates:
    """What makes `audit diff` exit 1."""

    fail_on_slowdown: float | None = None  # relative step-time change that counts, e.g. 0.05; None: the default
    fail_on_flops: bool = False
    fail_on_comm_bytes: bool = False
    strict: bool = False  # an inconclusive step-time verdict also exits 1


@dataclass(frozen=True)
class DiffSide:
    """One side of the comparison: its first report's source and chip, and how many runs it holds."""

    source: Mapping[str, Any] | None
    hardware: str
    runs: int

    def to_json(self) -> JSON:
        return {"source": None if self.source is None else dict(self.source), "hardware": self.hardware,
                "runs": self.runs}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DiffSide:
        return cls(d.get("source"), str(d.get("hardware") or ""), int(d.get("runs") or 0))


@dataclass(frozen=True)
class Total:
    """A per-step total of each side's program, and whether it changed beyond float summation order."""

    base: float
    head: float
    changed: bool

    @property
    def delta(self) -> float:
        return self.head - self.base

    def to_json(self) -> JSON:
        return {"base": self.base, "head": self.head, "delta": self.delta, "changed": self.changed}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Total:
        return cls(float(d["base"]), float(d["head"]), bool(d["changed"]))


@dataclass(frozen=True)
class BaseHead:
    """One quantity of a paired op on each side, per step (None where that side does not know it)."""

    base: float | None
    head: float | None

    def to_json(self) -> JSON:
        return {"base": self.base, "head": self.head}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BaseHead:
        return cls(d.get("base"), d.get("head"))


@dataclass(frozen=True)
class Pairing:
    """How a base op was paired with a head op, and whether the pairing may be wrong."""

    how: str  # fingerprint | shape | framework op | name
    uncertain: bool
    distance: float | None  # difference of schedule positions (0..1), None when unknown


OP_QUANTITIES = ("flops", "bytes", "comm_bytes", "expected_s")


@dataclass(frozen=True)
class ChangedOp:
    """A paired op whose FLOPs, bytes or communicated bytes per step changed.

    A type of its own, not an `OpRecord`: an entry of `audit.diff/v1`'s changed list, two ops (the base's
    and the head's names and shapes, each quantity on both sides) and how they were paired.
    """

    name: str
    base_name: str
    module: str
    opcode: str
    framework_op: str
    shape_base: str | None
    shape_head: str | None
    quantities: Mapping[str, BaseHead]  # each of OP_QUANTITIES
    pairing: Pairing | None = None

    @property
    def uncertain(self) -> bool:
        return self.pairing is not None and self.pairing.uncertain

    @property
    def flops(self) -> BaseHead:
        return self.quantities["flops"]

    def to_json(self) -> JSON:
        out: JSON = {"name": self.name, "base_name": self.base_name, "module": self.module, "opcode": self.opcode,
                     "framework_op": self.framework_op, "shape_base": self.shape_base, "shape_head": self.shape_head,
                     **{k: v.to_json() for k, v in self.quantities.items()}}
        p = self.pairing
        if p is not None:
            out.update(pairing=p.how, uncertain=p.uncertain, position_distance=p.distance)
            if p.uncertain:
                out["pairing_note"] = (f"paired by {p.how} only: {self.base_name} ({self.shape_base}) and "
                                       f"{self.name} ({self.shape_head}) may be different ops")
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ChangedOp:
        pairing = (Pairing(d["pairing"], bool(d.get("uncertain")), d.get("position_distance"))
                   if d.get("pairing") is not None else None)
        return cls(d["name"], d["base_name"], d["module"], d["opcode"], d["framework_op"], d.get("shape_base"),
                   d.get("shape_head"), {k: BaseHead.from_json(d[k]) for k in OP_QUANTITIES if k in d}, pairing)


@dataclass(frozen=True)
class OpBrief:
    """An op only one side has (added or removed), per step.

    A type of its own, not an `OpRecord`: an entry of `audit.diff/v1`'s added and removed lists, the
    fields that format fixes, per step rather than summed over the steps, read back from a diff's JSON
    where no report and no record exist.
    """

    name: str
    module: str
    opcode: str
    category: str
    framework_op: str
    shape: str | None
    flops: float | None
    comm_bytes: float
    expected_s: float | None

    def to_json(self) -> JSON:
        return {"name": self.name, "module": self.module, "opcode": self.opcode, "category": self.category,
                "framework_op": self.framework_op, "shape": self.shape, "flops": self.flops,
                "comm_bytes": self.comm_bytes, "expected_s": self.expected_s}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> OpBrief:
        return cls(d["name"], d["module"], d["opcode"], d["category"], d["framework_op"], d.get("shape"),
                   d.get("flops"), float(d.get("comm_bytes") or 0.0), d.get("expected_s"))


@dataclass(frozen=True)
class OpCounts:
    """What a side's program is made of: ops by category, fusions, collectives by kind and size."""

    by_category: Mapping[str, int]
    fusions: int
    collectives: Mapping[str, int]  # "all-reduce 4096 B" -> how many

    def to_json(self) -> JSON:
        return {"by_category": dict(self.by_category), "fusions": self.fusions,
                "collectives": dict(self.collectives)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> OpCounts:
        return cls(dict(d.get("by_category") or {}), int(d.get("fusions") or 0), dict(d.get("collectives") or {}))


@dataclass(frozen=True)
class OpenedBuffer:
    """A command buffer of one side compared as the ops it ran, not as one op."""

    side: str  # base | head
    name: str
    ops: int


@dataclass(frozen=True)
class CompileTimeChanges:
    """What changed in the program, per step: exact, since compile-time quantities are deterministic."""

    totals_per_step: Mapping[str, Total]  # flops, bytes, comm_bytes, expected_s[, expected_step_s]
    counts_base: OpCounts
    counts_head: OpCounts
    changed_ops: Sequence[ChangedOp]  # most FLOPs changed first
    pairing_counts: Mapping[str, int]  # pairs found by each pass
    added_ops: Sequence[OpBrief]
    removed_ops: Sequence[OpBrief]
    command_buffers: Sequence[OpenedBuffer] = ()

    @property
    def counts_changed(self) -> bool:
        return self.counts_base != self.counts_head

    @property
    def uncertain_pairs(self) -> int:
        return sum(1 for r in self.changed_ops if r.uncertain)

    @property
    def changed(self) -> bool:
        return (any(self.totals_per_step[f].changed for f in PROGRAM_FIELDS) or bool(self.changed_ops)
                or bool(self.added_ops) or bool(self.removed_ops) or self.counts_changed)

    def to_json(self) -> JSON:
        out: JSON = {
            "totals_per_step": {k: v.to_json() for k, v in self.totals_per_step.items()},
            "counts": {"base": self.counts_base.to_json(), "head": self.counts_head.to_json(),
                       "changed": self.counts_changed},
            "changed_ops": [r.to_json() for r in self.changed_ops], "uncertain_pairs": self.uncertain_pairs,
            "pairing_counts": dict(self.pairing_counts), "added_ops": [r.to_json() for r in self.added_ops],
            "removed_ops": [r.to_json() for r in self.removed_ops], "changed": self.changed,
        }
        if self.command_buffers:
            out["command_buffers"] = [_plain(b) for b in self.command_buffers]
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CompileTimeChanges:
        counts = d.get("counts") or {}
        return cls({k: Total.from_json(v) for k, v in (d.get("totals_per_step") or {}).items()},
                   OpCounts.from_json(counts.get("base") or {}), OpCounts.from_json(counts.get("head") or {}),
                   [ChangedOp.from_json(r) for r in d.get("changed_ops") or []], dict(d.get("pairing_counts") or {}),
                   [OpBrief.from_json(r) for r in d.get("added_ops") or []],
                   [OpBrief.from_json(r) for r in d.get("removed_ops") or []],
                   [OpenedBuffer(**b) for b in d.get("command_buffers") or []])


@dataclass(frozen=True)
class RunRow:
    """One run of a side [trace]: where it came from, its steps, its median step and its noise."""

    source: str
    steps: int
    median_s: float
    noise_rel_mad: float
    step_times_s: Sequence[float] = ()  # every step's time, in order (empty in a diff written before)

    def to_json(self) -> JSON:
        return {"source": self.source, "steps": self.steps, "median_s": self.median_s,
                "noise_rel_mad": self.noise_rel_mad, "step_times_s": list(self.step_times_s)}

    @property
    def slowest_s(self) -> float | None:
        return max(self.step_times_s) if self.step_times_s else None


@dataclass(frozen=True)
class UnstableRun:
    """The run of a side whose median stands apart from the side's other runs: the machine, not the code."""

    side: str
    run: int  # 1-based
    runs: int
    source: str
    median_s: float
    others_median_s: float
    off_by: float  # relative to the others' median
    spread: float  # slowest run median over fastest, minus 1
    explained_by_steps: float  # what the runs' own steps explain (4 standard errors)
    allowed: float  # the larger of that and ordinary run-to-run variation


@dataclass(frozen=True)
class MovedOp:
    """A paired op whose measured time per step moved beyond noise and the threshold [trace]."""

    name: str
    base_name: str
    module: str
    base_s: float
    head_s: float
    change: float  # head / base - 1


@dataclass(frozen=True)
class StepTimeChange:
    """The step-time comparison of two sides that both have measured steps [trace]."""

    base_median_s: float  # mean of the runs' medians
    head_median_s: float
    change: float  # head / base - 1
    interval: tuple[float, float]  # 95% interval of the change
    verdict_reason: str
    weak: bool  # one run a side: no run-to-run variance measured
    unstable: Sequence[UnstableRun]
    runs_base: Sequence[RunRow]
    runs_head: Sequence[RunRow]
    noise_rel_mad: float
    changed_ops: Sequence[MovedOp]
    method: str

    @property
    def beyond_noise(self) -> bool:
        return self.interval[0] > 0 or self.interval[1] < 0


@dataclass(frozen=True)
class MeasuredChanges:
    """What changed in time: the verdict against noise and the threshold, or why nothing was compared."""

    base_steps: int
    head_steps: int
    base_runs: int
    head_runs: int
    threshold: float
    threshold_given: bool
    verdict: str  # regression | improvement | no change | inconclusive | not compared
    compared: StepTimeChange | None
    reason: str = ""  # why not compared

    @property
    def available(self) -> bool:
        return self.compared is not None

    @property
    def regression(self) -> bool:
        return self.verdict == "regression"

    def to_json(self) -> JSON:
        out: JSON = {"base_steps": self.base_steps, "head_steps": self.head_steps, "base_runs": self.base_runs,
                     "head_runs": self.head_runs, "threshold": self.threshold, "threshold_given": self.threshold_given,
                     "available": self.available, "regression": self.regression, "verdict": self.verdict}
        c = self.compared
        if c is None:
            return {**out, "reason": self.reason}
        return {**out, "base_median_s": c.base_median_s, "head_median_s": c.head_median_s, "change": c.change,
                "interval": list(c.interval), "beyond_noise": c.beyond_noise, "verdict_reason": c.verdict_reason,
                "weak": c.weak, "unstable": [_plain(u) for u in c.unstable],
                "runs": {"base": [r.to_json() for r in c.runs_base], "head": [r.to_json() for r in c.runs_head]},
                "noise_rel_mad": c.noise_rel_mad, "changed_ops": [_plain(m) for m in c.changed_ops],
                "method": c.method}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MeasuredChanges:
        compared = None
        if d.get("available"):
            runs = d.get("runs") or {}
            compared = StepTimeChange(
                d["base_median_s"], d["head_median_s"], d["change"], (d["interval"][0], d["interval"][1]),
                d.get("verdict_reason") or "", bool(d.get("weak")), [UnstableRun(**u) for u in d.get("unstable") or []],
                [RunRow(**r) for r in runs.get("base") or []], [RunRow(**r) for r in runs.get("head") or []],
                float(d.get("noise_rel_mad") or 0.0), [MovedOp(**m) for m in d.get("changed_ops") or []],
                d.get("method") or "")
        return cls(int(d.get("base_steps") or 0), int(d.get("head_steps") or 0), int(d.get("base_runs") or 0),
                   int(d.get("head_runs") or 0), float(d["threshold"]), bool(d.get("threshold_given")),
                   str(d.get("verdict") or "not compared"), compared, d.get("reason") or "")


def _plain(record: Any) -> JSON:
    return {f: getattr(record, f) for f in record.__dataclass_fields__}


@dataclass(frozen=True)
class FindingChanges:
    """Findings of the step diagnosis (reports.model.findings) in the head and not the base, and the
    other way round, paired by cause and program; each side's ranking kept."""

    appeared: tuple[Finding, ...] = ()
    disappeared: tuple[Finding, ...] = ()

    def to_json(self) -> JSON:
        return {"appeared": [f.to_json() for f in self.appeared],
                "disappeared": [f.to_json() for f in self.disappeared]}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> FindingChanges:
        return cls(tuple(Finding.from_json(f) for f in doc.get("appeared") or ()),
                   tuple(Finding.from_json(f) for f in doc.get("disappeared") or ()))


@dataclass(frozen=True)
class DiffModel:
    """What changed between two sides of runs: in the program (exact), in time (beyond noise), and
    which gates tripped."""

    base: DiffSide
    head: DiffSide
    matched_ops: int
    compile_time: CompileTimeChanges
    measured: MeasuredChanges
    gates: Gates = Gates()
    tripped: tuple[str, ...] = ()  # each gate that tripped, in one line
    findings: FindingChanges = FindingChanges()  # the step diagnosis: causes new in the head, and gone

    @property
    def verdict(self) -> str:
        """The step-time verdict: regression, improvement, no change, inconclusive or not compared."""
        return self.measured.verdict

    @property
    def regression(self) -> bool:
        """True when a gate tripped (the CLI then exits 1)."""
        return bool(self.tripped)

    def to_json(self) -> JSON:
        """Schema `audit.diff/v1`."""
        g = self.gates
        return {
            "schema": SCHEMA, "base": self.base.to_json(), "head": self.head.to_json(),
            "matched_ops": self.matched_ops, "compile_time": self.compile_time.to_json(),
            "measured": self.measured.to_json(), "verdict": self.verdict,
            "gates": {"fail_on": g.fail_on_slowdown, "fail_on_flops": g.fail_on_flops,
                      "fail_on_comm_bytes": g.fail_on_comm_bytes, "strict": g.strict, "tripped": list(self.tripped)},
            "regression": self.regression, "findings": self.findings.to_json(),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> DiffModel:
        """A diff document read back (as `audit diff --json` wrote it)."""
        g = doc.get("gates") or {}
        return cls(DiffSide.from_json(doc.get("base") or {}), DiffSide.from_json(doc.get("head") or {}),
                   int(doc.get("matched_ops") or 0), CompileTimeChanges.from_json(doc.get("compile_time") or {}),
                   MeasuredChanges.from_json(doc.get("measured") or {"threshold": 0.0}),
                   Gates(g.get("fail_on"), bool(g.get("fail_on_flops")), bool(g.get("fail_on_comm_bytes")),
                         bool(g.get("strict"))), tuple(g.get("tripped") or ()),
                   FindingChanges.from_json(doc.get("findings") or {}))
