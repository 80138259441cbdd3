"""The time base of a trace, stated once: the readers keep times as integer picoseconds (XPlane stamps
a line in nanoseconds and its events in picoseconds from it; Nsight Systems counts nanoseconds), and
the report speaks seconds. Like `audit.base.errors`, this module sits below every layer."""

from __future__ import annotations

PS = 1e-12  # seconds per picosecond
PS_PER_NS = 1000  # picoseconds per nanosecond
