"""The per-op table as CSV: one row per (program, op), per-device quantities in SI base units.

The columns are `reports.model.columns.CSV_COLUMNS`, headed by their keys; values are raw
numbers (unknown is an empty cell), so a spreadsheet or pandas reads them as numbers.
"""

from __future__ import annotations

import csv
import io

from .model.columns import CSV_COLUMNS
from .model.report import ReportModel


def render_csv(report: ReportModel) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([c.key for c in CSV_COLUMNS])
    for op in report.ops:
        writer.writerow(["" if (v := c.value(op)) is None else v for c in CSV_COLUMNS])
    return out.getvalue()
