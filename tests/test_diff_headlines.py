"""The headline of `audit diff` says what the evidence says, in every format: an inconclusive
diff is called inconclusive with why (too few runs, an outlier step), never "no regression"; a
report against itself is "no change"; a change of chip is named first; the HTML charts every run's steps."""

from __future__ import annotations

import json
import statistics

import pytest

from audit.analyses.diff_verdict import diff_reports
from audit.cli import main
from audit.reports.diff_sections import headline, render_diff_markdown, render_diff_page, render_diff_terminal
from conftest import ROOT

GEMM = ROOT / "tests/data/reports/gemm-10daea0.json"
H100 = ROOT / "tests/data/captures/h100-jax0.11/train-step.xplane.pb"
H200 = ROOT / "tests/data/captures/h200-jax0.11/train-step.xplane.pb"


@pytest.fixture(scope="module")
def gemm() -> dict:
    return json.loads(GEMM.read_text())


def _run(report: dict, times: list[float], source: str) -> dict:
    steps = report["steps"][:len(times)]
    return {**report, "run_source": source, "steps": [{**s, "time_s": t} for s, t in zip(steps, times)]}


def _times(median: float, spread: float = 0.01, n: int = 6) -> list[float]:
    return [median * (1 + spread * ((i % 3) - 1)) for i in range(n)]


def test_the_gating_pages_case_is_inconclusive_with_why_in_every_format(gemm):
    """2 runs a side, the head 75% slower by its median, one outlier step widening the interval."""
    base = [_run(gemm, _times(1e-3), "b1"), _run(gemm, _times(1.02e-3), "b2")]
    outlier = _times(1.75e-3)
    outlier[2] = 9e-3
    head = [_run(gemm, outlier, "h1"), _run(gemm, _times(1.2e-3), "h2")]
    diff = diff_reports(base, head)
    assert diff.verdict == "inconclusive" and not diff.regression
    line = headline(diff)
    assert line.startswith("inconclusive: step time +")
    assert "only 2 and 2 run(s) a side" in line and "an outlier step of 9.00 ms" in line and "head run 1" in line
    for text in (render_diff_terminal(diff), render_diff_markdown(diff), render_diff_page(diff)):
        assert "no regression" not in text and "inconclusive: step time" in text


def test_a_report_against_itself_is_no_change(gemm, tmp_path, capsys):
    assert main(["diff", str(GEMM), str(GEMM), "--json", str(tmp_path / "d.json")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "audit diff: no change"
    assert json.loads((tmp_path / "d.json").read_text())["verdict"] == "no change"


def test_a_change_of_chip_is_named_first(tmp_path, capsys):
    code = main(["diff", str(H100), str(H200), "--markdown", str(tmp_path / "c.md")])
    assert code in (0, 1)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("audit diff: chip changed (h100 -> h200); ")
    assert "**audit diff: chip changed (h100 -> h200); " in (tmp_path / "c.md").read_text()


def test_the_html_diff_charts_every_step_of_every_run(gemm):
    base = [_run(gemm, _times(1e-3), "b1"), _run(gemm, _times(1.01e-3), "b2")]
    head = [_run(gemm, _times(2e-3), "h1"), _run(gemm, _times(2.02e-3), "h2")]
    page = render_diff_page(diff_reports(base, head))
    chart = page.split('<svg class="chart runs"', 1)[1].split("</svg>", 1)[0]
    assert chart.count("<circle") == 4 * 6
    for label in ("base run 1", "base run 2", "head run 1", "head run 2"):
        assert label in chart
    medians = [statistics.median(_times(m)) for m in (1e-3, 2e-3)]
    assert all(f"median {t * 1e3:.2f} ms" in chart for t in medians)


def test_a_regression_still_says_regression_first(gemm):
    base = [_run(gemm, _times(1e-3 * (1 + 0.01 * i)), f"b{i}") for i in range(3)]
    head = [_run(gemm, _times(1.5e-3 * (1 + 0.01 * i)), f"h{i}") for i in range(3)]
    diff = diff_reports(base, head)
    assert diff.regression and headline(diff).startswith("REGRESSION: step time +")


def test_an_interval_an_outlier_step_widens_past_the_threshold_is_inconclusive_and_says_so(gemm):
    """The gating page's case: the head 75% slower by its runs' medians, which agree, two runs a side,
    one step of a head run far out of it: the interval straddles the threshold."""
    base = [_run(gemm, _times(1e-3, n=3), "b1"), _run(gemm, _times(1.01e-3, n=3), "b2")]
    first, second = _times(1.75e-3, n=3), _times(1.74e-3, n=3)
    first[2], second[1] = 12e-3, 0.2e-3
    diff = diff_reports(base, [_run(gemm, first, "h1"), _run(gemm, second, "h2")])
    c = diff.measured.compared
    assert diff.verdict == "inconclusive" and not c.unstable and c.interval[0] < -0.05 < 0.05 < c.interval[1]
    line = headline(diff)
    assert line.startswith("inconclusive: step time +") and "straddles ±5.0%" in line
    assert "only 2 and 2 run(s) a side" in line and "an outlier step of 12.0 ms" in line and "head run 1" in line
