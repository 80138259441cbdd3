"""Numbers with their units: the one formatter of the tool.

Every number `audit` prints (report tables, the terminal, the reasons the cost model
writes, `calc`, `plan`, `diff`) goes through here. Each formatter takes SI base units
(seconds, bytes, FLOPs, FLOP/s, bytes/s) and returns three significant digits with a
decimal prefix (GB = 1e9 bytes); an unknown value (`None`, NaN, inf) becomes `UNKNOWN`,
never a zero. The HTML page shows the strings formatted here (reports/payload.py): its script
formats no number.
"""

from __future__ import annotations

import math
from typing import Callable, Literal, TypeGuard

UNKNOWN = "—"

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
# Below half a picosecond (the traces' resolution) a duration is floating-point residue.
_RESIDUE_S = 0.5e-12
_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps"))


def known(value: object) -> TypeGuard[float]:
    """True for a finite real number (not None, NaN, inf or a bool); the checker then treats it as a float."""
    if value is None or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _rounded(value: float) -> float:
    """`value` to three significant digits, so a prefix is chosen for the number printed: 999.95 µs is
    1.00 ms, not 1000 µs."""
    return float(f"{value:.3g}")


def _three_digits(value: float) -> str:
    """Three significant digits: 1.23, 12.3, 123; general format outside [1, 1000)."""
    value = _rounded(value)
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


def figure(value: object) -> str:
    """A plain number to three significant digits (1.23, 12.3, 123, 1.23e+04): counts of parameters,
    tokens or FLOPs in prose, ratios that are not a factor."""
    return _three_digits(float(value)) if known(value) else UNKNOWN


def number(value: object) -> str:
    """A plain number for a table or a rate: three significant digits below 1000, whole with thousands
    separators from there (12,346 tokens/s)."""
    if not known(value):
        return UNKNOWN
    v = float(value)
    return f"{v:,.0f}" if abs(_rounded(v)) >= 1000 else _three_digits(v)


def seconds(value: object) -> str:
    """A duration in s, ms, µs, ns or ps."""
    if not known(value):
        return UNKNOWN
    if abs(_rounded(float(value))) >= 1000:
        return f"{float(value):,.0f} s"
    v = _rounded(float(value))
    if abs(v) < _RESIDUE_S:  # rounding residue of sums and differences, not a duration
        return "0 s"
    for scale, unit in _TIME_UNITS:
        if abs(v) >= scale:
            return f"{_three_digits(v / scale)} {unit}"
    return f"{_three_digits(v / 1e-12)} ps"


def si(value: object, unit: str) -> str:
    """A quantity with a decimal prefix: `si(2.5e12, "FLOP/s")` is "2.50 TFLOP/s"."""
    if not known(value):
        return UNKNOWN
    v = _rounded(float(value))
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


def share(part: object, whole: object) -> str:
    """`part` as a percentage of `whole`; unknown when either is unknown or `whole` is 0."""
    if not (known(part) and known(whole)) or float(whole) == 0:
        return UNKNOWN
    return percent(float(part) / float(whole))


def intensity(value: object) -> str:
    """Arithmetic intensity in FLOPs per byte."""
    if not known(value):
        return UNKNOWN
    return f"{_three_digits(float(value))} FLOP/B"


def human(value: object, unit: str) -> str:
    """A quantity in prose: seconds for "s", an SI prefix for any other unit."""
    return seconds(value) if unit == "s" else si(value, unit)


def signed(value: object, fmt: Callable[[object], str]) -> str:
    """A change with its sign: "+1.20 ms", "-3.00 GB", "0"."""
    if not known(value):
        return UNKNOWN
    v = float(value)
    return "0" if v == 0 else ("+" if v > 0 else "") + fmt(v)


def ratio(value: object) -> str:
    """A ratio as a factor: 1.5 -> "1.50x"."""
    return f"{float(value):.2f}x" if known(value) else UNKNOWN


def stated(value: object) -> str:
    """A figure as stated (a user's --set, a hardware file's, a setting's, an op's attribute), to four
    significant digits, in the unit it came in: 12500000000.0 -> "1.25e+10"; beside it, what it became
    (a batch of 4.063e+06 tokens instead of 4e+06)."""
    return f"{float(value):.4g}" if known(value) else UNKNOWN


def factor(value: object) -> str:
    """A factor in prose, to one decimal: 2.3 -> "2.3x" (`ratio` writes two, for tables)."""
    return f"{float(value):.1f}x" if known(value) else UNKNOWN


def whole_percent(value: object) -> str:
    """A fraction in prose, to a whole percent: 0.372 -> "37%"."""
    return f"{100.0 * float(value):.0f}%" if known(value) else UNKNOWN


def whole(value: object) -> str:
    """A count or a length rounded to a whole number, with thousands separators: 12345.6 -> "12,346"."""
    return f"{float(value):,.0f}" if known(value) else UNKNOWN


def integral(value: object) -> str:
    """A whole number without separators, as the HLO and the trace write it: the bytes a collective note
    says each device sends (102760448), to set beside their own figures."""
    return f"{float(value):.0f}" if known(value) else UNKNOWN


def decade(value: object) -> str:
    """A power of ten on a log axis: as written from 0.001 to 10000 (0.01, 100), as 1e5 and up from there."""
    if not known(value) or float(value) <= 0:
        return UNKNOWN
    v = float(value)
    return f"{v:g}" if 1e-3 <= v < 1e5 else f"1e{round(math.log10(v))}"


def count(value: object) -> str:
    """A count with thousands separators, as it is: a mean over devices (4.875 runs) keeps its
    fraction, to three decimals."""
    if not known(value):
        return UNKNOWN
    text = f"{float(value):,.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


Unit = Literal["text", "s", "FLOP", "B", "FLOP/s", "B/s", "FLOP/B", "fraction", "ratio", "count", "bool"]
"""The unit of a reported quantity; `text` and `bool` are not numbers."""


def format_as(value: object, unit: Unit) -> str:
    """Any reported value in its unit, as every renderer prints it."""
    if unit == "text":
        return "" if value is None else str(value)
    if unit == "bool":
        return UNKNOWN if value is None else ("yes" if value else "no")
    return _BY_UNIT[unit](value)


_BY_UNIT: dict[str, Callable[[object], str]] = {
    "s": seconds, "FLOP": flops, "B": nbytes, "FLOP/s": flops_per_s, "B/s": bytes_per_s,
    "FLOP/B": intensity, "fraction": percent, "ratio": ratio, "count": count,
}
