"""One representative step per device class, as a picture (HTML only: the text formats have the numbers)."""

from __future__ import annotations

from ..model.report import ReportModel
from ..timeline_svg import KINDS, timeline_svg
from ._base import RenderOptions


def html(report: ReportModel, _: RenderOptions) -> str | None:
    if not report.timeline:
        return None
    legend = "".join(f'<li><span class="sw k-{k}"></span>{k}</li>' for k in KINDS)
    return (timeline_svg(report.timeline) + f'<ul class="legend">{legend}</ul>'
            + '<p class="note">Top lane: compute and memory ops; bottom lane: collectives. '
              "Grey is idle. Hover a block for the op.</p>")
