"""The markdown PR summary: compact, escaped, and true to the report."""

from __future__ import annotations

import re

from hypothesis import given, strategies as st

from audit.reports import markdown
from audit.reports.markdown import MAX_FLAGGED, md_text
from audit.reports.model.report import ReportModel
from test_report_html import HOSTILE, sample_report


def render_markdown(report: dict, html_path: str | None = None) -> str:
    return markdown.render_markdown(ReportModel.from_json(report), html_path=html_path)


def _table_rows(text: str, first_header: str) -> list[list[str]]:
    """Cells of the GFM table whose header starts with `first_header`, split on unescaped pipes."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {first_header} |"))
    rows = []
    for ln in lines[start:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]])
    return rows


def test_summary_has_verdict_flagged_collectives_and_html_link():
    report = sample_report(40)
    text = render_markdown(report, html_path="out/report.html")
    assert text.startswith("## Roofline audit: workloads/transformer.py")
    assert "**Verdict:**" in text and "Roofline fraction" in text
    rows = _table_rows(text, "#")
    assert [r[1] for r in rows[2:]] == [f["name"] for f in report["flagged"][:MAX_FLAGGED]]
    assert "### Collectives" in text and "all-reduce.3" in text
    assert text.rstrip().endswith("`out/report.html`")


def test_hostile_names_are_escaped_and_tables_keep_their_shape():
    report = sample_report(40, hostile=True)
    text = render_markdown(report)
    for payload in HOSTILE:
        assert payload not in text
    assert "<" not in text.replace("\\<", "")
    flagged = _table_rows(text, "#")
    assert len({len(r) for r in flagged}) == 1, "an op name with | must not add cells"
    collectives = _table_rows(text, "Collective")
    assert len(collectives) == 3 and len({len(r) for r in collectives}) == 1


def test_huge_report_stays_well_under_github_limit():
    report = sample_report(3000, hostile=True)
    report["flagged"] = report["flagged"] * 20
    report["collectives"] = report["collectives"] * 2000
    report["warnings"] = ["w" * 5000] * 500
    text = render_markdown(report, html_path="r.html")
    assert len(text) < 20_000
    assert "more in the full report" in text


def test_predicted_report_has_no_measured_columns():
    text = render_markdown(sample_report(20, predicted=True))
    assert "Predicted, not measured" in text
    assert "Measured" not in text and "Roofline fraction" not in text


@given(st.text())
def test_md_text_is_one_line_with_markdown_punctuation_escaped(value):
    out = md_text(value, limit=50)
    assert "\n" not in out and "\r" not in out
    unescaped = re.sub(r"\\.", "", out)
    assert not set(unescaped) & set("|`<>*_[]\\")
    assert len(out.replace("\\", "")) <= 50
