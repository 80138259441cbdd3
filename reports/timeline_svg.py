"""Inline SVG for the step timeline: one representative step per device class.

Each strip has two lanes, so overlap is visible: the top lane holds compute,
memory, latency and unknown ops, the bottom lane collectives. Uncovered time
is idle. Ops narrower than a pixel are binned per pixel column, which keeps
a step with many thousands of ops to a few hundred rectangles.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from ..costmodel import units as qty

KINDS = ("compute", "memory", "collective", "latency", "unknown", "idle")
WIDTH, LABEL_W, LANE_H, GAP = 1000, 190, 14, 16
_PLOT_W = WIDTH - LABEL_W - 10


def _lane(kind: str) -> int:
    return 1 if kind == "collective" else 0


@dataclass
class _Block:
    """A drawn rectangle: one op, or several sub-pixel ops summarised by their dominant kind."""

    kind: str
    x0: float
    x1: float
    count: int
    name: str


def _pixels(events: list[Mapping[str, Any]], t0: float, scale: float) -> Iterator[tuple[str, int, float, float, str]]:
    """(kind, lane, x0_px, x1_px, name) for each event with a known start and duration."""
    for ev in events:
        raw_kind = ev.get("kind")
        kind = raw_kind if isinstance(raw_kind, str) and raw_kind in KINDS else "unknown"
        start, dur = ev.get("start_s"), ev.get("dur_s")
        if kind == "idle" or not (qty.known(start) and qty.known(dur)):
            continue
        x0 = (float(start) - t0) * scale
        yield kind, _lane(kind), x0, x0 + max(float(dur), 0.0) * scale, str(ev.get("name") or "")


def _blocks(events: list[Mapping[str, Any]], t0: float, scale: float) -> dict[int, list[_Block]]:
    """Blocks per lane: ops a pixel or wider as they are; narrower ones binned per pixel column,
    each column drawn in its dominant kind, and touching columns of one kind joined."""
    lanes: dict[int, list[_Block]] = {0: [], 1: []}
    bins: dict[tuple[int, int], tuple[dict[str, float], list[Any]]] = {}
    for kind, lane, x0, x1, name in _pixels(events, t0, scale):
        if x1 - x0 >= 1.0:
            lanes[lane].append(_Block(kind, x0, x1, 1, name))
            continue
        px, info = bins.setdefault((lane, int(x0)), ({}, [0, name]))
        px[kind] = px.get(kind, 0.0) + (x1 - x0)
        info[0] += 1
    for (lane, col), (px, (n, name)) in sorted(bins.items()):
        kind = max(px, key=lambda k: px[k])
        block = _Block(kind, float(col), col + min(1.0, sum(px.values())), n, name)
        prev = lanes[lane][-1] if lanes[lane] and lanes[lane][-1].count > 1 else None
        if prev is not None and prev.kind == kind and col - prev.x1 < 0.5:
            prev.x1, prev.count = max(prev.x1, block.x1), prev.count + n
        else:
            lanes[lane].append(block)
    return lanes


def _strip(strip: Mapping[str, Any], y: float) -> list[str]:
    t0, t1 = strip.get("start_s"), strip.get("end_s")
    if not (qty.known(t0) and qty.known(t1)) or float(t1) <= float(t0):
        return []
    t0, t1 = float(t0), float(t1)
    scale = _PLOT_W / (t1 - t0)
    label = f"{strip.get('device_class') or 'device'} · {strip.get('device', '?')}"
    out = [f'<text class="tl-label" x="0" y="{y + LANE_H - 2:.0f}">{escape(label)}</text>',
           f'<text class="tl-sub" x="0" y="{y + 2 * LANE_H:.0f}">step {escape(str(strip.get("step", "?")))}'
           f' · {escape(qty.seconds(t1 - t0))}</text>',
           f'<rect class="k-idle" x="{LABEL_W}" y="{y:.0f}" width="{_PLOT_W}" height="{LANE_H}"/>',
           f'<rect class="lane2" x="{LABEL_W}" y="{y + LANE_H + 2:.0f}" width="{_PLOT_W}" height="{LANE_H}"/>']
    for lane, blocks in _blocks(list(strip.get("events") or []), t0, scale).items():
        lane_y = y + lane * (LANE_H + 2)
        for b in blocks:
            what = b.name if b.count == 1 else f"{b.count} ops, mostly {b.kind}"
            tip = f"{what} · {b.kind} · {qty.seconds((b.x1 - b.x0) / scale)}"
            out.append(f'<rect class="k-{b.kind}" x="{LABEL_W + b.x0:.1f}" y="{lane_y:.0f}" '
                       f'width="{max(b.x1 - b.x0, 0.6):.1f}" height="{LANE_H}"><title>{escape(tip)}</title></rect>')
    return out


def timeline_svg(timeline: Sequence[Mapping[str, Any]]) -> str:
    """The timeline strips as one SVG element, or a short note when the report has none."""
    strips = [s for s in timeline if isinstance(s, Mapping)]
    if not strips:
        return '<p class="empty">No timeline: the profile has no per-step events.</p>'
    row_h = 2 * LANE_H + 2 + GAP
    height = row_h * len(strips) + 4
    parts = [f'<svg id="timeline" class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
             f'aria-label="Step timeline, {len(strips)} strips" xmlns="http://www.w3.org/2000/svg">']
    for n, strip in enumerate(strips):
        parts += _strip(strip, 2 + n * row_h)
    parts.append("</svg>")
    return "".join(parts)
