"""Inline SVG of the step diagnosis: one waterfall per program, roofline step -> achievable step ->
each cause -> measured step, as horizontal bars on one time axis (built here, no charting library)."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ..costmodel import units as qty

WIDTH, ROW, LABEL, PAD = 820, 22, 300, 8
_TOTALS = ("roofline step [model]", "achievable step [model]", "measured step, mean [trace]")


def waterfall_svg(row: Mapping[str, Any]) -> str:
    """One program's waterfall; empty where its measured step is unknown."""
    measured = row.get("measured_s")
    if not measured or measured <= 0:
        return ""
    achievable = row.get("achievable_s") or 0.0
    roofline = row.get("roofline_s")
    bars: list[tuple[str, float, float, str]] = []  # label, start, length, class
    if roofline is not None:
        bars.append((_TOTALS[0], 0.0, float(roofline), "total"))
    bars.append((_TOTALS[1], 0.0, float(achievable), "total"))
    cursor = float(achievable)
    for bar in row.get("bars", []):
        t = float(bar["time_s"])
        bars.append((f"+ {bar['cause']}", cursor, t, "cause"))
        cursor += t
    bars.append((_TOTALS[2], 0.0, float(measured), "total"))
    for bar in row.get("inside_op_time", []):
        bars.append((f"of which {bar['cause']}", 0.0, float(bar["time_s"]), "inside"))
    scale = (WIDTH - LABEL - 2 * PAD - 90) / max(cursor, float(measured), float(roofline or 0.0), 1e-12)
    height = ROW * len(bars) + 2 * PAD
    parts = [f'<svg class="waterfall" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
             f'role="img" aria-label="step waterfall of {escape(str(row.get("program", "")))}">']
    colours = {"total": "#4c72b0", "cause": "#dd8452", "inside": "#8c8c8c"}
    for i, (label, start, length, kind) in enumerate(bars):
        y = PAD + i * ROW
        x = round(LABEL + start * scale)
        w = max(round(length * scale), 1)
        parts.append(f'<text x="{LABEL - 6}" y="{y + 15}" text-anchor="end" font-size="12">{escape(label)}</text>')
        parts.append(f'<rect x="{x}" y="{y + 3}" width="{w}" height="{ROW - 6}" fill="{colours[kind]}">'
                     f"<title>{escape(label)}: {escape(qty.seconds(length))}</title></rect>")
        parts.append(f'<text x="{x + w + 4}" y="{y + 15}" font-size="11">{escape(qty.seconds(length))} '
                     f"({escape(qty.percent(length / measured))})</text>")
    parts.append("</svg>")
    return "".join(parts)
