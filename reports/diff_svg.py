"""The HTML diff's chart of every run's steps: a row per run, each step a dot on one time axis."""

from __future__ import annotations

from html import escape

from ..costmodel import units as u
from .model.diff import DiffModel

_CHART_W, _ROW_H, _LEFT, _RIGHT, _TOP = 640, 22, 92, 16, 8


def runs_svg(diff: DiffModel) -> str:
    """Every step of every run as a dot on one time axis, a row per run (base, then head), each
    run's median as a tick: where the sides' steps lie, and a step far out of its run [trace]."""
    c = diff.measured.compared
    if c is None:
        return ""
    rows = [("base", i, r) for i, r in enumerate(c.runs_base, 1)] + [("head", i, r) for i, r in enumerate(c.runs_head, 1)]
    times = [t for _, _, r in rows for t in r.step_times_s]
    if not times:
        return ""
    hi = max(times) * 1.05
    height = _TOP + _ROW_H * len(rows) + 26

    def x(t: float) -> float:
        return _LEFT + (_CHART_W - _LEFT - _RIGHT) * t / hi

    out = [f'<svg class="chart runs" viewBox="0 0 {_CHART_W} {height}" role="img" '
           f'aria-label="Step times of every run, base and head" xmlns="http://www.w3.org/2000/svg">']
    for k, (side, i, r) in enumerate(rows):
        y = _TOP + _ROW_H * k + _ROW_H / 2
        colour = "var(--muted)" if side == "base" else "var(--accent)"
        out.append(f'<text x="{_LEFT - 8}" y="{y + 4:.1f}" text-anchor="end" font-size="12" fill="var(--ink)">'
                   f"{side} run {i}</text>")
        out.append(f'<line x1="{_LEFT}" x2="{_CHART_W - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="var(--line)"/>')
        for t in r.step_times_s:
            out.append(f'<circle cx="{x(t):.1f}" cy="{y:.1f}" r="4" fill="{colour}" fill-opacity="0.7">'
                       f"<title>{escape(f'{side} run {i}: step {u.seconds(t)}')}</title></circle>")
        out.append(f'<line x1="{x(r.median_s):.1f}" x2="{x(r.median_s):.1f}" y1="{y - 8:.1f}" y2="{y + 8:.1f}" '
                   f'stroke="var(--ink)" stroke-width="2"><title>{escape(f"median {u.seconds(r.median_s)}")}</title>'
                   "</line>")
    axis = _TOP + _ROW_H * len(rows) + 4
    out.append(f'<line x1="{_LEFT}" x2="{_CHART_W - _RIGHT}" y1="{axis}" y2="{axis}" stroke="var(--muted)"/>')
    for f in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<text x="{x(hi * f):.1f}" y="{axis + 16}" text-anchor="middle" font-size="11" '
                   f'fill="var(--muted)">{escape(u.seconds(hi * f))}</text>')
    out.append("</svg>")
    return "".join(out)
