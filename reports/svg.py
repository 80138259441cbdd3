"""Inline SVG for the HTML report: the log-log roofline chart.

Built here in Python so the page needs no charting library and no network.
Every string from a trace goes through `html.escape`; points carry only the
op's row index (`data-i`), and the page's script looks the op up in the
embedded JSON for the hover card.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from typing import Any

from ..costmodel import units as qty
from ..optable.record import OpRecord
from .model.report import ReportModel

WIDTH, HEIGHT = 820, 440
LEFT, RIGHT, TOP, BOTTOM = 84, 130, 18, 48
R_MIN, R_MAX = 2.5, 16.0


class _LogAxis:
    """Maps a positive value onto a pixel range on a log10 scale."""

    def __init__(self, lo: float, hi: float, p0: float, p1: float):
        self.lo, self.hi = math.log10(lo), math.log10(hi)
        self.p0, self.p1 = p0, p1

    def __call__(self, value: float) -> float:
        t = (math.log10(value) - self.lo) / (self.hi - self.lo)
        return self.p0 + t * (self.p1 - self.p0)

    def decades(self) -> list[float]:
        return [10.0 ** e for e in range(math.ceil(self.lo - 1e-9), math.floor(self.hi + 1e-9) + 1)]


def _domain(values: list[float], pad_lo: float, pad_hi: float, min_decades: int) -> tuple[float, float]:
    lo = math.floor(math.log10(min(values) / pad_lo))
    hi = math.ceil(math.log10(max(values) * pad_hi))
    if hi - lo < min_decades:
        lo -= (min_decades - (hi - lo) + 1) // 2
        hi = lo + min_decades
    return 10.0 ** lo, 10.0 ** hi


def op_time(op: OpRecord, predicted: bool) -> float | None:
    """The op's time as the report states it: measured, or expected when predicted."""
    return op.expected_s if predicted else op.measured_s


ABOVE_ROOF = 1.02  # expected / measured beyond timer rounding: the op beat its roofline, and says why


def above_roof(op: OpRecord) -> bool:
    """A measured op faster than its roofline (each such op's reasons say why: audit.optable.verdict)."""
    return op.measured_s is not None and op.roofline_fraction is not None and op.roofline_fraction > ABOVE_ROOF


def plot_point(op: OpRecord, predicted: bool) -> tuple[float, float, float] | None:
    """(intensity FLOP/B, FLOP/s, time s) for the roofline chart, or None if it has no place there.

    Measured reports use the achieved rate the analysis wrote; predicted ones use FLOPs over
    expected time, which lies on the roof by construction.
    """
    x = op.intensity
    t = op_time(op, predicted)
    if x is None or x <= 0 or t is None or t <= 0:
        return None
    y = (op.flops / t if op.flops is not None else None) if predicted else op.achieved_flops_per_s
    if y is None or y <= 0:
        return None
    return x, y, t


def main_dtype(report: ReportModel) -> str | None:
    """The dtype whose compute roof the chart draws solid: the one with most op time."""
    peaks: Mapping[str, Any] = report.hardware.get("peak_flops_per_s") or {}
    if not peaks:
        return None
    weight: dict[str, float] = {}
    for op in report.ops:
        t = op.measured_s if op.measured_s is not None else op.expected_s
        if op.dtype in peaks and t is not None:
            weight[op.dtype] = weight.get(op.dtype, 0.0) + t
    if weight:
        return max(weight, key=lambda d: weight[d])
    return "bf16" if "bf16" in peaks else max(peaks, key=lambda d: peaks[d])


def _roofs(report: ReportModel) -> tuple[dict[str, float], float | None, str | None]:
    hw = report.hardware
    peaks = {k: float(v) for k, v in (hw.get("peak_flops_per_s") or {}).items() if qty.known(v) and v > 0}
    hbm = hw.get("hbm_bytes_per_s")
    return peaks, (float(hbm) if qty.known(hbm) and hbm > 0 else None), main_dtype(report)


def _radius(t: float, t_max: float) -> float:
    """Point area proportional to time."""
    if t_max <= 0 or t <= 0:
        return R_MIN
    return max(R_MIN, R_MAX * math.sqrt(t / t_max))


def _axes_svg(xa: _LogAxis, ya: _LogAxis, y_label: str) -> list[str]:
    out = []
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP
    for v in xa.decades():
        x = xa(v)
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{y1}" x2="{x:.1f}" y2="{y0}"/>')
        out.append(f'<text class="tick" x="{x:.1f}" y="{y0 + 16}" text-anchor="middle">{escape(qty.decade(v))}</text>')
    for v in ya.decades():
        y = ya(v)
        out.append(f'<line class="grid" x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}"/>')
        out.append(f'<text class="tick" x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{escape(_decade(v, "FLOP/s"))}</text>')
    out.append(f'<rect class="frame" x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}"/>')
    out.append(f'<text class="axis" x="{(x0 + x1) / 2:.0f}" y="{HEIGHT - 8}" text-anchor="middle">'
               "arithmetic intensity (FLOPs / byte of HBM traffic)</text>")
    out.append(f'<text class="axis" x="{x0 + 6}" y="{y1 + 14}">{escape(y_label)}</text>')
    return out


def _decade(v: float, unit: str) -> str:
    """A power of ten with a decimal prefix: 1 TFLOP/s, 100 GFLOP/s."""
    return qty.si(v, unit).replace(".00 ", " ").replace(".0 ", " ")


def _spread(ys: list[float], gap: float = 12.0) -> list[float]:
    """Label positions at least `gap` pixels apart, each as close to its line as that allows."""
    out: list[float] = []
    for y in ys:  # ascending pixel y: top label first
        out.append(max(y, out[-1] + gap) if out else y)
    return out


def _compute_roofs(peaks: dict[str, float], hbm: float | None, main: str | None,
                   xa: _LogAxis, ya: _LogAxis) -> list[str]:
    """One horizontal roof per distinct peak; dtypes sharing a peak share a line and a label."""
    x_hi = 10.0 ** xa.hi
    by_peak: dict[float, list[str]] = {}
    for dtype, peak in sorted(peaks.items(), key=lambda kv: (-kv[1], kv[0] != main, kv[0])):
        by_peak.setdefault(peak, []).append(dtype)
    out: list[str] = []
    label_ys = _spread([ya(p) + 4 for p in by_peak])
    for (peak, dtypes), label_y in zip(by_peak.items(), label_ys):
        start = min(max(peak / hbm, 10.0 ** xa.lo), x_hi) if hbm else 10.0 ** xa.lo
        cls = "roof main" if main in dtypes else "roof alt"
        y = ya(peak)
        out.append(f'<line class="{cls}" x1="{xa(start):.1f}" y1="{y:.1f}" x2="{xa(x_hi):.1f}" y2="{y:.1f}"/>')
        out.append(f'<text class="roof-label" x="{WIDTH - RIGHT + 6}" y="{label_y:.1f}">'
                   f'{escape("/".join(dtypes))} {escape(qty.flops_per_s(peak))}</text>')
    return out


def _roof_lines(peaks: dict[str, float], hbm: float | None, main: str | None,
                xa: _LogAxis, ya: _LogAxis) -> list[str]:
    out = _compute_roofs(peaks, hbm, main, xa, ya)
    x_lo, x_hi = 10.0 ** xa.lo, 10.0 ** xa.hi
    y_lo = 10.0 ** ya.lo
    if hbm and main in peaks:
        ridge = peaks[main] / hbm
        x_start = max(x_lo, y_lo / hbm)
        x_end = min(ridge, x_hi)
        out.append(f'<line class="roof mem" x1="{xa(x_start):.1f}" y1="{ya(hbm * x_start):.1f}" '
                   f'x2="{xa(x_end):.1f}" y2="{ya(hbm * x_end):.1f}"/>')
        mx = math.sqrt(x_start * x_end)
        out.append(f'<text class="roof-label mem" x="{xa(mx):.1f}" y="{ya(hbm * mx) - 8:.1f}" '
                   f'text-anchor="end">HBM {escape(qty.bytes_per_s(hbm))}</text>')
        if x_lo <= ridge <= x_hi:
            # The ridge's label sits at the foot of a drop line, away from the crowd of points at the roof.
            x, y = xa(ridge), ya(peaks[main])
            out.append(f'<line class="ridge-drop" x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM}"/>')
            out.append(f'<circle class="ridge" cx="{x:.1f}" cy="{y:.1f}" r="4"/>')
            anchor, lx = ("end", x - 4) if x > WIDTH - RIGHT - 120 else ("start", x + 4)
            out.append(f'<text class="ridge-label" x="{lx:.1f}" y="{HEIGHT - BOTTOM - 6}" text-anchor="{anchor}">'
                       f'ridge {escape(qty.intensity(ridge))}</text>')
    return out


def roofline_svg(report: ReportModel) -> tuple[str, int]:
    """The roofline chart as an SVG element, and how many ops it could not place.

    One circle per op that has both a positive arithmetic intensity and a
    positive FLOP rate (measured, or predicted for ahead-of-time reports);
    area is proportional to the op's time, colour is its bound, a ring marks
    flagged ops.
    """
    predicted = report.predicted
    ops = report.ops
    points = [(i, p) for i, op in enumerate(ops) if (p := plot_point(op, predicted)) is not None]
    peaks, hbm, main = _roofs(report)
    xs = [p[0] for _, p in points] + ([peaks[main] / hbm] if hbm and main in peaks else [])
    ys = [p[1] for _, p in points] + list(peaks.values())
    if not xs or not ys:
        return '<p class="empty">Nothing to chart: no op has both FLOPs and a time.</p>', len(ops)
    xa = _LogAxis(*_domain(xs, 2.0, 2.0, 3), LEFT, WIDTH - RIGHT)
    y_lo, y_hi = _domain(ys, 2.0, 1.6, 3)
    ya = _LogAxis(max(y_lo, y_hi * 1e-10), y_hi, HEIGHT - BOTTOM, TOP)
    parts = [f'<svg id="roofline" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="Roofline chart: {len(points)} ops" xmlns="http://www.w3.org/2000/svg">']
    parts += _axes_svg(xa, ya, "predicted FLOP/s" if predicted else "achieved FLOP/s")
    parts += _roof_lines(peaks, hbm, main, xa, ya)
    t_max = max((p[2] for _, p in points), default=0.0)
    parts.append('<g class="points">')
    y_floor = 10.0 ** ya.lo
    for i, (x, y, t) in sorted(points, key=lambda ip: -ip[1][2]):
        op = ops[i]
        cls = f"pt b-{op.bound_by}" + (" flag" if op.flagged else "") + (" above" if above_roof(op) else "")
        parts.append(f'<circle class="{cls}" data-i="{i}" cx="{xa(x):.1f}" cy="{ya(max(y, y_floor)):.1f}" '
                     f'r="{_radius(t, t_max):.1f}"/>')
    parts.append("</g></svg>")
    return "".join(parts), len(ops) - len(points)


def share_bar_svg(parts: list[tuple[str, float]], total: float) -> str:
    """A stacked horizontal bar of time by bound (and idle), one segment per kind."""
    if total <= 0:
        return '<p class="empty">No time to break down.</p>'
    out = ['<svg class="share-bar" viewBox="0 0 600 22" preserveAspectRatio="none" role="img" '
           'aria-label="Time by bound" xmlns="http://www.w3.org/2000/svg">']
    x = 0.0
    op_time = sum(t for kind, t in parts if kind != "idle")
    for kind, t in parts:
        w = 600.0 * t / total
        of_ops = f"{qty.percent(t / op_time)} of op time, " if kind != "idle" and op_time > 0 else ""
        tip = f"{kind}: {qty.seconds(t)} ({of_ops}{qty.percent(t / total)} of op and idle time)"
        out.append(f'<rect class="k-{escape(kind)}" x="{x:.2f}" y="0" width="{w:.2f}" height="22">'
                   f"<title>{escape(tip)}</title></rect>")
        x += w
    out.append("</svg>")
    return "".join(out)
