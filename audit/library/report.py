"""`audit.Report`: an analysed profile (or a prediction) as a notebook works with it.

A thin view over the typed report every output renders (`audit.reports.model.report.ReportModel`,
kept as `.model`): the op table as a pandas DataFrame, the summary, the flagged ops, and
every output format from the same object the CLI writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from html import escape
from typing import TYPE_CHECKING, Any

from .rendered import Rendered

if TYPE_CHECKING:
    import pandas as pd

    from ..reports.render import Renderer
    from ..reports.model.report import ReportModel
    from ..reports.model.summary import Summary

_REPR_COLUMNS = ("name", "opcode", "bound_by", "measured_s", "expected_s", "efficiency", "wasted_s")


class Report(Rendered):
    """An analysed profile or a prediction, in every format (`to_json`, `to_html`, `to_markdown`,
    `to_text`, `to_csv`, `to_trace`) as the CLI writes it.

    **Attributes:**
    - `ops`: one row per op (index: op key), the declared report columns, values in SI base
      units; `ops.attrs["units"]` maps each column to its unit, `attrs["origins"]` to where it
      comes from (hlo, trace, model, verdict), `attrs["descriptions"]` to what it means.
    - `summary`: the headline numbers (seconds per device, summed over the analysed steps).
    - `model`: the typed report itself, as every renderer takes it.
    """

    def __init__(self, model: ReportModel) -> None:
        self.model = model

    @cached_property
    def ops(self) -> pd.DataFrame:
        from ..reports.model.frame import op_frame

        return op_frame(self.model.ops)

    @property
    def summary(self) -> Summary:
        return self.model.summary

    @property
    def units(self) -> dict[str, str]:
        """Each op column's unit: s, FLOP, B, FLOP/s, B/s, FLOP/B, fraction, count, bool or text."""
        return dict(self.ops.attrs["units"])

    @property
    def hardware(self) -> Mapping[str, Any]:
        """The chip the ops were judged on: each ceiling with its source (trace, catalog, calibrated, user)."""
        return self.model.hardware

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.model.warnings

    @property
    def predicted(self) -> bool:
        """True for a prediction (compiled, not run): no measured column means anything."""
        return self.model.predicted

    def flagged(self) -> pd.DataFrame:
        """The flagged ops (far from their roofline), most wasted time first."""
        ops = self.ops
        flagged = ops[ops["flagged"].fillna(False).astype(bool)]
        return flagged.sort_values("wasted_s", ascending=False, na_position="last")

    def to_csv(self) -> str:
        """The per-op table `audit --csv` writes."""
        return self._render("csv")

    def to_trace(self) -> dict[str, Any]:
        """The trace-viewer document `--trace` writes (Chrome trace-event JSON for Perfetto and
        chrome://tracing): per device, the measured ops of one step beside their expected times."""
        import json

        return dict(json.loads(self._render("trace")))

    def save_trace(self, path: str) -> None:
        """Write the trace-viewer file to `path` (`.json`, or `.json.gz` compressed) atomically."""
        from ..atomic import write_bytes
        from ..reports.trace_events import trace_file_bytes

        write_bytes(path, trace_file_bytes(self._render("trace"), path))

    def save(self, path: str) -> None:
        """Write the JSON report to `path` atomically; `audit.load(path)` reads it back."""
        from ..atomic import write_text

        write_text(path, self._render("json"))

    def _renderer(self) -> Renderer:
        from ..reports.render import ReportRenderer

        return ReportRenderer(self.model)

    def __repr__(self) -> str:
        s = self.summary
        kind = "prediction" if s.predicted else "report"
        return (f"<audit {kind}: {len(self.model.ops)} ops, {s.flagged_ops} flagged, "
                f"{s.devices or '?'} devices, hardware {self.hardware.get('name', '?')}>")

    def _repr_html_(self) -> str:
        from ..costmodel import units
        from ..reports.model.columns import COLUMNS
        from ..reports.sections.judged import judged_any, none_judged

        s = self.summary
        rows = [("hardware", f"{self.hardware.get('name', '?')} ({self.hardware.get('source', '?')})"),
                ("devices", units.count(s.devices)), ("steps", units.count(s.steps)),
                ("measured op time", f"{units.seconds(s.measured_s)} [trace]"),
                ("expected (roofline)", f"{units.seconds(s.expected_s)} [model]"),
                ("roofline fraction", units.percent(s.roofline_fraction) if judged_any(self.model)
                 else none_judged(self.model)),
                ("flagged ops", units.count(s.flagged_ops))]
        head = "".join(f"<tr><th style='text-align:left'>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
        flagged = [op for op in self.model.flagged][:10]
        cols = [COLUMNS[k] for k in _REPR_COLUMNS]
        table = ""
        if flagged:
            header = "".join(f"<th>{escape(c.label)}</th>" for c in cols)
            body = "".join("<tr>" + "".join(f"<td>{escape(c.text(op))}</td>" for c in cols) + "</tr>"
                           for op in flagged)
            table = f"<p><b>Flagged ops</b> (most wasted time first)</p><table><tr>{header}</tr>{body}</table>"
        return f"<div class='audit-report'><table>{head}</table>{table}</div>"
