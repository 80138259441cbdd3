"""One row of the per-op table: what the trace measured, what the model expects, and the verdict.

An `OpRecord` is complete when built (audit.optable.judge): nothing is added to it
later and nothing reads it back by key. It becomes JSON only at the edge (`to_json`),
field for field the `ops[]` entries of schema `audit.report/v1`; `from_json` reads
such an entry back (a report written earlier, `audit diff`, tests).

Per-op quantities are per device: the mean over the devices that ran the op, summed
over that device's occurrences in the analysed steps.
"""

from __future__ import annotations

from operator import attrgetter
from dataclasses import MISSING, dataclass, fields
from collections.abc import Sequence
from typing import Any, Literal, Mapping

from ..costmodel.network.collectives import CollectiveTime
from ..costmodel.costs import Bound, CollectiveInfo, Origin
from ..base.timebase import PS
from .interference import Identical

__all__ = ["JUDGED", "CollectiveRow", "DeviceTime", "OpRecord", "Origin", "Overlap", "Provenance", "Spread", "Verdict",
           "collective_row"]
Verdict = Literal["flagged", "ok", "not judged", "unknown", "not measured", "bound only", "interference"]
"""flagged | ok | not judged (a wait, a container) | unknown (no expected time) | not measured (a prediction)
| bound only (an opaque kernel judged on its bytes alone: a lower bound cannot show it slow)
| interference (identical ops run far faster elsewhere in the capture: what ran beside it, not its kernel)"""
JUDGED: tuple[Verdict, ...] = ("ok", "flagged", "interference")
"""The verdicts of ops measured against an expected time that can show them slow."""
TimeOrigin = Literal["measured", "predicted"]


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where an op's FLOPs, bytes and time came from."""

    flops: Origin
    bytes: Origin
    time: TimeOrigin

    def to_json(self) -> dict[str, str]:
        return {"flops": self.flops, "bytes": self.bytes, "time": self.time}


@dataclass(frozen=True, slots=True)
class DeviceTime:
    """One device's share of an op [trace]."""

    host: str
    device: int
    occurrences: int
    measured_s: float
    self_s: float
    run_min_s: float | None = None  # its fastest run (None where the trace aggregates runs unseen)
    run_max_s: float | None = None  # its slowest run

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host": self.host, "device": self.device, "occurrences": self.occurrences,
                               "measured_s": self.measured_s, "self_s": self.self_s}
        if self.run_min_s is not None:
            out.update(run_min_s=self.run_min_s, run_max_s=self.run_max_s)
        return out


@dataclass(frozen=True, slots=True)
class Spread:
    """How an op's time spreads over devices [trace]: the straggler view."""

    measured_s_median: float
    straggler_ratio: float | None  # slowest device / median device
    per_host: Mapping[str, tuple[float, float]] | None = None  # host -> (mean, max) over its devices

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"measured_s_median": self.measured_s_median, "straggler_ratio": self.straggler_ratio}
        if self.per_host is not None:
            out["per_host"] = {h: {"measured_s": m, "measured_s_max": x} for h, (m, x) in self.per_host.items()}
        return out


@dataclass(frozen=True, slots=True)
class Overlap:
    """An asynchronous (or synchronous) op in the schedule walk [model], per device over its occurrences."""

    exposed_s: float
    hidden_s: float
    window_compute_s: float | None = None  # None: not an async window (a synchronous collective)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"exposed_s": self.exposed_s, "hidden_s": self.hidden_s}
        if self.window_compute_s is not None:
            out["window_compute_s"] = self.window_compute_s
        return out


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One (program, HLO op) of the per-op table, with its verdict."""

    # What the op is [HLO]
    key: str
    program_id: int
    module: str
    name: str
    opcode: str
    category: str
    framework_op: str
    source: str
    shape: str
    fingerprint: str
    position: float | None  # 0..1 in its computation's schedule, for matching across compiles
    custom_call_target: str
    container: bool  # while, call, conditional...: its time is its children's
    # Measured [trace]; None in a prediction
    devices: int
    occurrences: float
    measured_s: float | None
    measured_s_max: float | None
    self_s: float | None
    # What it costs [model, or trace where the trace states it], summed over occurrences
    flops: float | None
    transcendentals: float | None
    bytes: float | None
    comm_bytes: float
    dtype: str
    # Expected [model], summed over occurrences
    compute_s: float | None
    memory_s: float | None
    comm_s: float | None
    expected_s: float | None
    bound_by: Bound
    memory_level: str | None
    launches_work: bool | None
    peak_flops_per_s: float | None
    lower_bound: str | None  # why the expected time is only a lower bound
    # The verdict
    verdict: Verdict
    flagged: bool
    roofline_fraction: float | None  # expected / measured ("efficiency" in the JSON)
    reasons: tuple[str, ...]
    suggestion: str
    share: float | None  # of the measured op time
    wasted_s: float | None  # self time beyond the achievable time (what flags judge against)
    intensity: float | None
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    provenance: Provenance
    # Present only where they apply
    collective: CollectiveInfo | None = None
    placement: CollectiveTime | None = None  # where the collective runs on the topology
    overlapped: bool | None = None  # [trace] other ops ran inside its start..done window
    overlap: Overlap | None = None
    per_device: tuple[DeviceTime, ...] | None = None
    spread: Spread | None = None
    # The second ceiling [model]: what good kernels take on this chip (costmodel.achievable), summed
    # over occurrences; the verdict, wasted time and suggestion are judged on it.
    achievable_s: float | None = None
    achievable_fraction: float | None = None  # achievable / measured ("achievable_efficiency" in the JSON)
    achievable_source: str = ""  # which figures set the achievable time
    # Among its identical ops [trace] (audit.optable.identical): the kernel at its fastest, and for an
    # `interference` verdict its self time beyond that kernel time, summed over occurrences.
    identical: Identical | None = None
    interference_s: float | None = None

    @property
    def timed(self) -> bool:
        """An op whose own time counts in totals (not a container)."""
        return not self.container

    def to_json(self) -> dict[str, Any]:
        """The `ops[]` entry of `audit.report/v1`."""
        out: dict[str, Any] = dict(zip(_PLAIN_KEYS, _plain_values(self)))
        out["reasons"] = list(self.reasons)
        out["provenance"] = self.provenance.to_json()
        if self.collective is not None:
            out["overlapped"] = None if self.overlapped is None else bool(self.overlapped)
        if self.overlap is not None:
            out.update(self.overlap.to_json())
        if self.per_device is not None:
            out["per_device"] = [d.to_json() for d in self.per_device]
        if self.spread is not None:
            out.update(self.spread.to_json())
        if self.identical is not None:
            out["identical"] = self.identical.to_json()
        return out

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> OpRecord:
        """An `ops[]` entry read back; fields an older or partial report lacks take neutral defaults."""
        values = {f.name: entry.get(JSON_NAMES.get(f.name, f.name), _DEFAULTS.get(f.name)) for f in fields(cls)
                  if f.name not in _NESTED}
        prov = entry.get("provenance") or {}
        per_device = entry.get("per_device")
        per_host = entry.get("per_host")
        return cls(
            **values,
            reasons=tuple(entry.get("reasons") or ()),
            provenance=Provenance(prov.get("flops", "unknown"), prov.get("bytes", "unknown"),
                                  prov.get("time", "measured" if entry.get("measured_s") is not None else "predicted")),
            overlapped=entry.get("overlapped"),
            overlap=(Overlap(entry["exposed_s"], entry.get("hidden_s") or 0.0, entry.get("window_compute_s"))
                     if entry.get("exposed_s") is not None else None),
            per_device=_device_times(per_device),
            identical=Identical.from_json(entry["identical"]) if isinstance(entry.get("identical"), Mapping) else None,
            spread=(Spread(entry["measured_s_median"], entry.get("straggler_ratio"),
                           {h: (v["measured_s"], v["measured_s_max"]) for h, v in per_host.items()}
                           if per_host is not None else None)
                    if entry.get("measured_s_median") is not None else None),
        )


_SETTERS = tuple(getattr(OpRecord, f.name).__set__ for f in fields(OpRecord))


def record_of(values: Sequence[Any]) -> OpRecord:
    """`OpRecord(*values)` for less: a prediction stamps a record for each of a
    program's ops (250,000 in an unrolled one), and the frozen class's `__init__` sets each of
    its 54 fields through `object.__setattr__`."""
    record: OpRecord = object.__new__(OpRecord)
    for set_field, value in zip(_SETTERS, values, strict=True):
        set_field(record, value)
    return record


def _device_times(entries: Any) -> tuple[DeviceTime, ...] | None:
    """`per_device` read back: the fields DeviceTime has (a newer writer may add more); None when an
    entry lacks one it cannot do without."""
    if entries is None:
        return None
    names = [f.name for f in fields(DeviceTime)]
    needed = [f.name for f in fields(DeviceTime) if f.default is MISSING]
    if not all(isinstance(e, Mapping) and all(n in e for n in needed) for e in entries):
        return None
    return tuple(DeviceTime(**{n: e[n] for n in names if n in e}) for e in entries)


JSON_NAMES = {"roofline_fraction": "efficiency", "achievable_fraction": "achievable_efficiency"}
"""Fields whose JSON name (the report's contract, kept) is not the field's own."""
# Fields serialised by hand in to_json (nested records, or tuples that JSON writes as lists).
_NESTED = frozenset({"reasons", "provenance", "collective", "placement", "overlapped", "overlap", "per_device",
                     "spread", "identical"})
# The fields to_json copies as they are, read in one call (a report may hold 200,000 records).
_PLAIN_FIELDS = tuple(f.name for f in fields(OpRecord) if f.name not in _NESTED)
_PLAIN_KEYS = tuple(JSON_NAMES.get(name, name) for name in _PLAIN_FIELDS)
_plain_values = attrgetter(*_PLAIN_FIELDS)
_DEFAULTS: dict[str, Any] = {
    "key": "", "program_id": 0, "module": "", "name": "", "opcode": "", "category": "", "framework_op": "",
    "source": "", "shape": "", "fingerprint": "", "custom_call_target": "", "container": False, "devices": 0,
    "occurrences": 0.0, "comm_bytes": 0.0, "dtype": "", "bound_by": "unknown", "verdict": "unknown",
    "flagged": False, "suggestion": "", "achievable_source": "",
}


@dataclass(frozen=True, slots=True)
class CollectiveRow:
    """One collective of the program: what it moves, where it runs, predicted against measured.

    Times are per execution [model / trace]; `bytes` is the volume V of the book's formulas.
    """

    name: str
    key: str
    module: str
    kind: str
    bytes: float
    bytes_moved: float
    group_size: int
    groups: tuple[tuple[int, ...], ...]  # the first 16 groups
    axes: tuple[str, ...]
    physical_axes: tuple[Mapping[str, Any], ...]
    hops: int | None
    wraparound: bool | None
    link: str | None
    approximate: bool
    expected_s: float | None
    measured_s: float | None
    occurrences: float
    bound_by: Bound
    achieved_bytes_per_s: float | None
    peak_bytes_per_s: float | None
    overlapped: bool | None  # None when not measured
    exposed_s: float | None
    hidden_s: float | None
    window_compute_s: float | None
    note: str
    fused: str = ""  # the fused computation that carries it, "" for a collective op of its own

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["groups"] = [list(g) for g in self.groups]
        out["axes"] = list(self.axes)
        out["physical_axes"] = [dict(a) for a in self.physical_axes]
        return out

    @classmethod
    def from_json(cls, e: Mapping[str, Any]) -> CollectiveRow:
        """A `collectives[]` entry read back; what a partial report lacks takes neutral defaults."""
        return cls(
            name=e.get("name") or "", key=e.get("key") or "", module=e.get("module") or "", kind=e.get("kind") or "",
            bytes=e.get("bytes") or 0.0, bytes_moved=e.get("bytes_moved") or e.get("bytes") or 0.0,
            group_size=e.get("group_size") or 0, groups=tuple(tuple(g) for g in e.get("groups") or ()),
            axes=tuple(e.get("axes") or ()), physical_axes=tuple(e.get("physical_axes") or ()), hops=e.get("hops"),
            wraparound=e.get("wraparound"), link=e.get("link"), approximate=bool(e.get("approximate")),
            expected_s=e.get("expected_s"), measured_s=e.get("measured_s"), occurrences=e.get("occurrences") or 0.0,
            bound_by=e.get("bound_by") or "unknown", achieved_bytes_per_s=e.get("achieved_bytes_per_s"),
            peak_bytes_per_s=e.get("peak_bytes_per_s"), overlapped=e.get("overlapped"), exposed_s=e.get("exposed_s"),
            hidden_s=e.get("hidden_s"), window_compute_s=e.get("window_compute_s"), note=e.get("note") or "",
            fused=e.get("fused") or "")


def collective_row(op: OpRecord) -> CollectiveRow | None:
    """The collectives-table row of an op that is a collective (None for any other op)."""
    info = op.collective
    if info is None:
        return None
    placed = op.placement
    occ = op.occurrences
    per_exec = op.measured_s / occ if op.measured_s is not None and occ else None
    expected = op.expected_s / occ if op.expected_s is not None and occ else None
    moved = placed.bytes_moved if placed is not None else info.bytes
    overlap = op.overlap
    return CollectiveRow(
        name=op.name, key=op.key, module=op.module, kind=info.kind, bytes=info.bytes, bytes_moved=moved,
        group_size=info.group_size, groups=info.groups[:16],
        axes=tuple(a.name for a in placed.axes) if placed is not None else info.axes,
        physical_axes=tuple(a.to_json() for a in placed.axes) if placed is not None else (),
        hops=placed.hops if placed is not None else info.hops,
        wraparound=placed.wraparound if placed is not None else info.wraparound,
        link=placed.link if placed is not None else None,
        approximate=placed.approximate if placed is not None else False,
        expected_s=expected, measured_s=per_exec, occurrences=occ, bound_by=op.bound_by,
        achieved_bytes_per_s=moved / per_exec if per_exec else None,
        peak_bytes_per_s=placed.bandwidth_bytes_per_s if placed is not None else None,
        overlapped=bool(op.overlapped) if per_exec is not None and op.overlapped is not None else None,
        exposed_s=overlap.exposed_s / occ if overlap is not None and occ else None,
        hidden_s=overlap.hidden_s / occ if overlap is not None and occ else None,
        window_compute_s=((overlap.window_compute_s or 0.0) / occ) if overlap is not None and occ else None,
        note="; ".join(n for n in [info.note, *(placed.notes if placed is not None else ())] if n),
        fused=info.fused,
    )


OVERLAP_MODEL = ("schedule walk: one compute stream and collective streams (TPU: one per collective kind; GPU: "
                 "one shared); an async op hides behind the compute scheduled between its start and done")


@dataclass(frozen=True)
class StepOverlap:
    """The summary's overlapped step [model]; all None when a program with async ops has no schedule."""

    expected_step_s: float | None
    exposed_comm_s: float | None
    hidden_comm_s: float | None
    hidden_s: float | None  # communication and asynchronous copies
    unscheduled: tuple[str, ...]  # programs with async ops but no schedule

    def to_json(self) -> dict[str, Any]:
        return {"expected_step_s": self.expected_step_s, "exposed_comm_s": self.exposed_comm_s,
                "hidden_comm_s": self.hidden_comm_s, "hidden_s": self.hidden_s, "overlap_model": OVERLAP_MODEL}

    def per_step(self, steps: int) -> StepOverlap:
        """The same figures for one of `steps` steps (ops' times are summed over the analysed steps),
        with floating-point residue below a picosecond written as 0."""
        n = max(steps, 1)

        def one(value: float | None) -> float | None:
            return None if value is None else _no_residue(value / n)

        return StepOverlap(one(self.expected_step_s), one(self.exposed_comm_s), one(self.hidden_comm_s),
                           one(self.hidden_s), self.unscheduled)

    def warnings(self) -> list[str]:
        if not self.unscheduled:
            return []
        return [f"program(s) {', '.join(self.unscheduled)} run asynchronous ops but the HLO has no schedule: "
                "the overlapped step is unknown (expected_step_s is null)"]


def _no_residue(seconds: float) -> float:
    """0 for the residue of subtracting nearly equal sums (below a picosecond, the traces' resolution)."""
    return 0.0 if abs(seconds) < PS else seconds
