"""The report leads with its answer, in every format: one verdict line first, per step, on the
ceiling the flags use; every card figure per step; one number per quantity; the chip's ceilings
folded below; nothing wasted on an op not judged; an op above its roofline says why where it is shown."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from audit.costmodel import units as qty
from audit.orchestration.pipeline import analyse_profile
from audit.reports.model.report import ReportModel
from audit.reports.render import Format, ReportRenderer
from audit.reports.sections import RenderOptions
from conftest import ROOT, shared_fixture

H100 = ROOT / "tests/data/captures/h100-jax0.11/train-step.xplane.pb"
A100_JOB = "gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc{}.zip"


@pytest.fixture(scope="module")
def h100() -> ReportModel:
    return analyse_profile(H100)


@pytest.fixture(scope="module")
def a100_job(tmp_path_factory) -> ReportModel:
    job = tmp_path_factory.mktemp("job")
    for i in range(4):
        (job / f"proc{i}.zip").symlink_to(shared_fixture(A100_JOB.format(i)))
    return analyse_profile(job)


def _text(report: ReportModel, fmt: Format) -> str:
    return ReportRenderer(report).render(fmt, RenderOptions())


def test_the_verdict_line_comes_first_per_step_on_the_achievable_ceiling(h100):
    s = h100.summary
    line = (f"{qty.seconds(s.step_time_s.median)} per step, {qty.percent(s.achievable_fraction)} of what good "
            "kernels reach: ")
    terminal = _text(h100, Format.TERMINAL).splitlines()
    assert terminal[0].startswith("audit: ") and terminal[1].startswith(f"verdict: {line}")
    markdown = _text(h100, Format.MARKDOWN).splitlines()
    assert markdown[0].startswith("## Roofline audit") and markdown[2].startswith(f"**Verdict:** {line}")
    page = _text(h100, Format.HTML)
    verdict = page.split('id="sec-verdict"', 1)[1]
    assert re.search(r'<p class="answer">' + re.escape(line), verdict.split("</section>", 1)[0])
    assert page.index('id="sec-verdict"') < page.index('id="sec-step"')
    if s.achievable_fraction >= 0.9 and not h100.flagged:
        assert terminal[1].endswith("nothing to fix in the kernels")


class _Stats(HTMLParser):
    """The cards of the page: label -> value."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: dict[str, str] = {}
        self._in: str | None = None
        self._label = ""

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class")
        if cls in ("stat-label", "stat-value"):
            self._in = cls

    def handle_data(self, data):
        if self._in == "stat-label":
            self._label = data
        elif self._in == "stat-value":
            self.cards[self._label] = data
        self._in = None


def test_every_card_is_per_step(h100):
    s = h100.summary
    parser = _Stats()
    parser.feed(_text(h100, Format.HTML))
    cards = parser.cards
    assert cards["Step time (median)"] == qty.seconds(s.step_time_s.median)
    assert cards["Achievable step (no overlap)"] == qty.seconds(s.achievable_step_s)
    assert "Achievable op time" not in cards  # the sum over steps stood beside the per-step figures
    assert not any(qty.seconds(s.achievable_s) == v for v in cards.values()) or s.steps == 1


def test_one_number_per_share_of_op_time_in_sentence_table_and_text(a100_job):
    by = a100_job.summary.time_by_bound_s
    share = qty.percent(max(by.values()) / sum(by.values()))
    page = _text(a100_job, Format.HTML)
    headline = page.split('class="headline">', 1)[1].split("</p>", 1)[0]
    assert f"({share})" in headline
    table = page.split('class="mini"', 1)[1].split("</table>", 1)[0]
    assert f">{share}<" in table
    assert f"memory {share}" in _text(a100_job, Format.TERMINAL)
    assert f"memory {share}" in _text(a100_job, Format.MARKDOWN)


def test_the_ceilings_are_folded_below_the_figures_listing_the_peaks_that_priced_ops(h100):
    page = _text(h100, Format.HTML)
    header = page.split("</header>", 1)[0]
    assert "Peak " not in header  # the page no longer opens with the chip's table
    step = page.split('id="sec-step"', 1)[1].split("</section>", 1)[0]
    folded = step.split('<details class="hardware"', 1)[1].split("</details>", 1)[0]
    peaks = set(re.findall(r"<dt>Peak (\w+)</dt>", folded))
    used = {p["peak"] for p in h100.hardware["peaks_used"]}
    assert peaks == used and peaks


def test_an_op_not_judged_wastes_nothing(a100_job):
    waits = [o for o in a100_job.timed_ops if o.verdict == "not judged"]
    assert waits and all(o.wasted_s is None for o in waits)
    judged = [o for o in a100_job.timed_ops if o.verdict in ("ok", "flagged") and o.achievable_s is not None]
    assert all(o.wasted_s is not None for o in judged)


def test_an_op_above_its_roofline_says_why_in_its_reasons_the_chart_and_its_note(h100):
    above = [o for o in h100.timed_ops if o.roofline_fraction is not None and o.roofline_fraction > 1.02]
    assert above  # the H100 step's small adds reach 3.71 TB/s of the 3.35 TB/s HBM roof
    for o in above:
        (why,) = [r for r in o.reasons if "above its roofline" in r]
        assert "likely" in why and ("resident in" in why or "served from" in why or "reads low" in why)
    page = _text(h100, Format.HTML)
    assert page.count(" above\"") + page.count(" above ") >= len([o for o in above if o.flops])
    note = page.split('id="roofline-above"', 1)[1].split("</div>", 1)[0]
    assert f"{len(above)} op(s) ran faster than their roofline" in note
    assert all(o.name in note for o in above[:5])


def test_the_verdict_line_of_a_flagged_step_says_what_the_flags_lose_per_step(a100_job):
    s = a100_job.summary
    assert a100_job.flagged and s.achievable_fraction < 0.9
    line = _text(a100_job, Format.TERMINAL).splitlines()[1]
    assert line == (f"verdict: {qty.seconds(s.step_time_s.median)} per step, {qty.percent(s.achievable_fraction)} of "
                    f"what good kernels reach: {len(a100_job.flagged)} flagged op(s) lose "
                    f"{qty.seconds(s.wasted_step_s)} per step beyond their achievable time")
