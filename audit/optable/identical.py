"""Identical ops judged together: the spread between them is interference, not the kernel.

Ops that run the same computation on the same shapes (parsers.hlo.identity) with their data at
the same memory level (as the model prices them) do the same work: the layers of a model in one
program, copies across programs, and one op on every device. Each (op, device) is an instance.
The fastest instance's mean run is what the kernel itself does (`kernel_s`); the spread of that
instance's own runs (slowest over fastest) is the run-to-run noise. An op whose mean run is at
least `FAR` times the noise times the kernel time was slowed by what ran beside it, not by its
kernel: its verdict is `interference` (never `flagged`), `interference_s` is its self time beyond
the kernel time, and its reasons say what ran beside it where the exported window shows it.

Why the noise is the fastest instance's own spread, not the spread across identical ops, nor each
op's own: on quiet GPUs both are a few percent (the H100 and A100 captures: an op's own runs
within 1.07-1.16x at the 90th percentile, identical ops within 1.05x), but where devices contend (the
default run: 8 simulated devices on 2 cores) an op's own five runs spread 1.7x at the median and 5x
at the 90th percentile: that spread is the contention itself. The least disturbed instance shows
what noise is left. `FAR`: identical work at the same memory level differs by at most 2.3x on those
quiet captures (small H100 elementwise kernels, consistently), so 4x the noise is beyond the work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..costmodel.units import count, factor, human, ratio
from .interference import Beside, Identical, beside_summary
from .record import DeviceTime, OpRecord
from .beside import Overlaps
from .verdict import INTERFERENCE, JUDGED

FAR = 4.0


def judge_identical(records: Sequence[OpRecord], identities: Mapping[str, str], *, min_efficiency: float,
                    overlaps: Overlaps | None = None, simulated: bool = False) -> list[OpRecord]:
    """`records` with every op that has identical instances told how it compares with them, and
    those far beyond the kernel's time given the `interference` verdict. `identities`: op key ->
    parsers.hlo.identity; `overlaps`: the exported window's events, for what ran beside them; `simulated`:
    the devices are simulated CPU devices sharing one host's cores."""
    groups: dict[tuple[str, str], list[OpRecord]] = {}
    for r in records:
        if r.verdict in JUDGED and identities.get(r.key) and r.per_device and r.occurrences and r.measured_s:
            groups.setdefault((identities[r.key], r.memory_level or ""), []).append(r)
    judged: dict[str, OpRecord] = {}
    for members in groups.values():
        # An instance measured at zero (events shorter than the clock's resolution) says nothing of
        # the kernel's time: it is neither the fastest instance nor one that counts.
        instances = [(r, d) for r in members for d in r.per_device or () if d.occurrences > 0 and d.measured_s > 0]
        if len(instances) < 2:
            continue
        kernel_op, kernel = min(instances, key=lambda rd: rd[1].measured_s / rd[1].occurrences)
        for r in members:
            judged[r.key] = _judged(r, members, len(instances), kernel_op, kernel, min_efficiency, overlaps,
                                    simulated)
    return [judged.get(r.key, r) for r in records]


def _judged(r: OpRecord, members: list[OpRecord], instances: int, kernel_op: OpRecord, kernel: DeviceTime,
            min_efficiency: float, overlaps: Overlaps | None, simulated: bool) -> OpRecord:
    kernel_s = kernel.measured_s / kernel.occurrences
    noise = max(kernel.run_max_s / kernel.run_min_s, 1.0) if kernel.run_min_s and kernel.run_max_s else 1.0
    per_run = (r.measured_s or 0.0) / r.occurrences
    same = Identical(ops=len(members), instances=instances, kernel_s=kernel_s, kernel_key=kernel_op.key,
                     kernel_device=f"{kernel.host}/{kernel.device}", noise=noise, ratio=per_run / kernel_s,
                     threshold=FAR * noise)
    if not same.interference:
        return replace(r, identical=same)
    beside = None
    if overlaps is not None and r.per_device:
        slowest = max(r.per_device, key=lambda d: d.measured_s / max(d.occurrences, 1))
        beside = overlaps.beside(r.key, slowest.host, (kernel_op.key, same.kernel_device))
    same = replace(same, beside=beside)
    reasons = [_why(r, same, kernel_op.name, per_run)]
    if beside is not None:
        reasons.append(beside_reason(beside, simulated))
    reasons.append(_kernel_itself(r, kernel_s, min_efficiency))
    return replace(r, verdict=INTERFERENCE, flagged=False, suggestion="", identical=same,
                   interference_s=max((r.self_s or 0.0) - kernel_s * r.occurrences, 0.0),
                   reasons=tuple(dict.fromkeys(reasons + list(r.reasons))))


def _why(r: OpRecord, same: Identical, kernel_name: str, per_run: float) -> str:
    level = f", its data in {r.memory_level}" if r.memory_level else ""
    return (f"interference: the same computation on the same shapes{level} ({same.instances} instances: "
            f"{same.ops} op(s) x devices) runs in {human(same.kernel_s, 's')} at its fastest ({kernel_name} on "
            f"{same.kernel_device}); this op takes {human(per_run, 's')} per run, {factor(same.ratio)}, beyond "
            f"{factor(same.threshold)} ({count(FAR)} x the {ratio(same.noise)} spread of that instance's own runs): its time "
            "beyond the kernel's is what ran beside it, not the kernel")


def beside_reason(b: Beside, simulated: bool) -> str:
    """What ran beside an op, as its reason says it."""
    shared = "; the simulated CPU devices share the host's cores" if simulated else ""
    return f"beside it {beside_summary(b)}{shared}"


def _kernel_itself(r: OpRecord, kernel_s: float, min_efficiency: float) -> str:
    """What the kernel itself does at its fastest in this capture, against this op's achievable time."""
    achievable = r.achievable_s / r.occurrences if r.achievable_s is not None else None
    if not achievable:
        return f"the kernel itself at its fastest: {human(kernel_s, 's')} per run (no achievable time to judge it)"
    beyond = (f": beyond the flag threshold ({factor(1 / min_efficiency)}) even there"
              if min_efficiency > 0 and achievable / kernel_s < min_efficiency else "")
    return (f"the kernel itself at its fastest takes {factor(kernel_s / achievable)} its achievable time "
            f"({human(kernel_s, 's')} measured, {human(achievable, 's')} achievable){beyond}")
