"""What the reports say about real captures, read as an expert reads them: every number as it is,
with its unit and source, no claim the figures beside it contradict, in every format."""

from __future__ import annotations

import re
from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit.costmodel import units as qty
from audit.orchestration.pipeline import analyse_profile
from audit.reports.model import Report
from audit.reports.render import Format, ReportRenderer
from audit.reports.sections import RenderOptions
from conftest import ROOT, shared_fixture

H100_MICROBENCH = ROOT / "tests/data/captures/h100-jax0.11/microbench.xplane.pb"


@cache
def report(name: str) -> Report:
    """The report of one real MI300X capture (../shared/fixtures/gpu-mi300x/NAME.xplane.pb)."""
    return analyse_profile(shared_fixture(f"gpu-mi300x/{name}.xplane.pb"))


def text(r: Report, fmt: Format) -> str:
    return ReportRenderer(r).render(fmt, RenderOptions(top=40))


def test_a_mean_run_count_shows_its_fraction_in_every_format():
    # conv3d-8gpu: input_transpose_fusion.1 ran 39 times over 8 GPUs, 4.875 times per device; the
    # terminal and markdown printed "4", the page's table "4.875".
    r = report("conv3d-8gpu")
    (op,) = [o for o in r.ops if o.name == "input_transpose_fusion.1"]
    assert op.occurrences == pytest.approx(4.875) and op.devices == 8
    terminal = next(line for line in text(r, Format.TERMINAL).splitlines()
                    if line.startswith("input_transpose_fusion.1 "))
    assert re.search(r"\s8\s+4\.875\s", terminal)
    markdown = next(line for line in text(r, Format.MARKDOWN).splitlines()
                    if line.startswith("| input\\_transpose\\_fusion.1 |"))
    assert "| 8 | 4.875 |" in markdown


@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
def test_a_count_reads_back_to_three_decimals(value):
    assert float(qty.count(value).replace(",", "")) == pytest.approx(value, abs=5e-4 + 1e-12 * abs(value))
