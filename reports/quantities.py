"""Numbers with their units as the HTML and markdown reports print them.

Every formatter takes SI base units (seconds, bytes, FLOPs, FLOP/s, bytes/s)
and returns a string with three significant digits and a decimal prefix
(GB = 1e9 bytes); an unknown value (`None`, NaN, inf) becomes `UNKNOWN`,
never a zero. The page's script formats table cells the same way.
"""

from __future__ import annotations

import math
from typing import TypeGuard

UNKNOWN = "—"

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps"))


def known(value: object) -> TypeGuard[float]:
    """True for a finite real number (not None, NaN, inf or a bool); the checker then treats it as a float."""
    if value is None or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _three_digits(value: float) -> str:
    """Three significant digits: 1.23, 12.3, 123; general format outside [1, 1000)."""
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude < 1 or magnitude >= 1000:
        return f"{value:.3g}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def seconds(value: object) -> str:
    """A duration in s, ms, µs, ns or ps."""
    if not known(value):
        return UNKNOWN
    v = float(value)
    if v == 0:
        return "0 s"
    if abs(v) >= 1000:
        return f"{v:,.0f} s"
    for scale, unit in _TIME_UNITS:
        if abs(v) >= scale:
            return f"{_three_digits(v / scale)} {unit}"
    return f"{_three_digits(v / 1e-12)} ps"


def si(value: object, unit: str) -> str:
    """A quantity with a decimal prefix: `si(2.5e12, "FLOP/s")` is "2.50 TFLOP/s"."""
    if not known(value):
        return UNKNOWN
    v = float(value)
    for scale, prefix in _PREFIXES:
        if abs(v) >= scale:
            return f"{_three_digits(v / scale)} {prefix}{unit}"
    return f"{_three_digits(v)} {unit}" if v else f"0 {unit}"


def nbytes(value: object) -> str:
    return si(value, "B")


def flops(value: object) -> str:
    return si(value, "FLOP")


def flops_per_s(value: object) -> str:
    return si(value, "FLOP/s")


def bytes_per_s(value: object) -> str:
    return si(value, "B/s")


def percent(value: object) -> str:
    """A fraction (0.25) as a percentage ("25.0%")."""
    if not known(value):
        return UNKNOWN
    return f"{100.0 * float(value):.1f}%"


def intensity(value: object) -> str:
    """Arithmetic intensity in FLOPs per byte."""
    if not known(value):
        return UNKNOWN
    return f"{_three_digits(float(value))} FLOP/B"


def count(value: object) -> str:
    """A whole number with thousands separators."""
    if not known(value):
        return UNKNOWN
    return f"{int(float(value)):,}"
