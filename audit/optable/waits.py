"""When a GPU collective's measured time is a wait on other ranks rather than communication.

A collective kernel (NCCL) starts when its own device reaches it and ends when the whole group
has moved the data, so its time on a rank that arrived early includes waiting for the ranks
that arrived late. The rank that arrived last waits least: across the devices that ran the
op, the fastest one's time is the closest the trace comes to the transfer itself, and what
the others spent beyond it is waiting. Two cases are not judged against the roofline:

- the profile holds fewer of the group's devices than the group has: the time cannot be told
  apart from waiting for devices the profile does not show;
- most of the time, averaged over the devices, is that wait.

And an asynchronous collective the schedule hides behind compute is not judged unless the trace
measured whether it overlapped: its kernel runs beside the compute, sharing the device with it,
so a long duration is waste only where the step waited for it, which the trace does not say.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..costmodel.costs import OpCost
from .record import DeviceTime, Overlap
from ..costmodel.units import percent, seconds

WAIT_SHARE = 0.5  # more than this share of the mean device's time spent waiting: not judged


def collective_wait(cost: OpCost | None, per_device: Sequence[DeviceTime] | None) -> str:
    """Why a GPU collective's time is a wait on other ranks ("" when it can be judged)."""
    if cost is None or cost.collective is None or not per_device:
        return ""
    group = cost.collective.group_size
    if group <= 1:
        return ""
    ran = len(per_device)
    if ran < group:
        return (f"spans devices the profile does not show: a collective over {group} devices, {ran} of them in "
                "this profile, whose time includes waiting for the others, so it is not judged (give every "
                "process's profile to judge it)")
    times = [d.measured_s for d in per_device]
    fastest, mean = min(times), sum(times) / len(times)
    if mean <= 0 or (mean - fastest) / mean <= WAIT_SHARE:
        return ""
    return (f"waits on other ranks for most of its time: {percent((mean - fastest) / mean)} of it is a wait on other "
            "ranks "
            f"(the device that waited least spent {seconds(fastest)}, the mean device {seconds(mean)} over the analysed "
            "steps [trace]), so it is not judged")


def hidden_unmeasured(cost: OpCost | None, overlap: Overlap | None, overlapped: bool | None) -> str:
    """Why an asynchronous collective the schedule hides is not judged ("" when it can be): the
    trace does not say whether it overlapped (`overlapped` None: no done event bounds it)."""
    if cost is None or cost.collective is None or overlapped is not None or overlap is None:
        return ""
    if overlap.window_compute_s is None or overlap.hidden_s <= 0 or overlap.exposed_s > overlap.hidden_s:
        return ""
    return (f"hidden by the schedule, overlap not measured: an asynchronous collective the schedule hides behind "
            f"compute ({seconds(overlap.hidden_s)} hidden, {seconds(overlap.exposed_s)} exposed [model, schedule "
            "walk]) and whose overlap the trace does not measure (no done event bounds it); its duration, shared "
            "with the compute beside it, is waste only where the step waited for it, so it is not judged")
