"""One section list for every format: each part a report carries reaches the terminal, markdown and HTML."""

from __future__ import annotations

import pytest

from audit.reports.model.report import PARTS, ReportModel
from audit.reports.render import Format, ReportRenderer
from audit.reports.sections import REPORT_SECTIONS, RenderOptions
from test_report_html import sample_report

_DIST = {"n": 8, "min": 0.010, "p10": 0.011, "median": 0.012, "p90": 0.013, "max": 0.018}

# Each optional part as the analysis attaches it, and a phrase of it every format must show.
PARTS_SHOWN = {
    "plan_vs_profile": ({"rows": [{"quantity": "HBM bytes per device", "unit": "B", "plan": 1e9, "model": 3e9,
                                   "measured": None, "gap": "model 3.0x plan",
                                   "reasons": ["f32 instead of bf16: half the bytes are f32"]}],
                         "note": "plan: the book's closed forms"}, "f32 instead of bf16"),
    "cpu_comparison": ({"matched": [{"framework_op": "jit(step)/dot_general_unique", "cpu_measured_s": 0.004,
                                     "target_expected_s": 2e-5}], "cpu_only": ["jit(step)/copy"], "target_only": [],
                        "cpu_hardware": "cpu", "cpu_steps": 3}, "dot_general_unique"),
    "xla": ({"optimal_seconds": 0.002, "gap": {"text": "ours 3.1 ms with async overlap, XLA's gap_marker"}},
            "gap_marker"),
    "memory": ({"verdict": "fits: 3.2 GB of 16 GB HBM per device (memory_marker)"}, "memory_marker"),
    "pod": ({"hosts": 8, "step_time_by_host_s": _DIST, "straggler_ratio_distribution": {**_DIST, "median": 1.1},
             "slowest_hosts": [{"host": "host-0004-marker", "step_time_s": 0.018, "vs_median": 1.5,
                                "ops": [{"name": "fusion.1", "excess_s": 0.003, "ratio": 1.5}]}],
             "stragglers": [{"name": "fusion.1", "module": "jit_step", "straggler_ratio": 1.5, "excess_s": 0.003,
                             "slowest_host": "host-0004-marker", "slowest_device": 2}],
             "program_mismatch": {"hosts": 0, "examples": []},
             "collective_wait": {"by_host_s": _DIST, "arrives_last": [{"host": "host-0004-marker", "wait_s": 0.001,
                                                                      "vs_median": 0.5}]}}, "host-0004-marker"),
}


def _with_parts() -> ReportModel:
    doc = sample_report(30)
    for name, (value, _) in PARTS_SHOWN.items():
        doc[name] = value
    return ReportModel.from_json(doc)


@pytest.mark.parametrize("fmt", [Format.TERMINAL, Format.MARKDOWN, Format.HTML])
@pytest.mark.parametrize("part", sorted(PARTS_SHOWN))
def test_every_part_reaches_every_format(part: str, fmt: Format):
    text = ReportRenderer(_with_parts()).render(fmt, RenderOptions())
    assert PARTS_SHOWN[part][1] in text.replace("\\", "")


@pytest.mark.parametrize("fmt", [Format.TERMINAL, Format.MARKDOWN, Format.HTML])
def test_a_report_without_parts_shows_none_of_them(fmt: Format):
    text = ReportRenderer(ReportModel.from_json(sample_report(30))).render(fmt, RenderOptions())
    assert not [phrase for _, phrase in PARTS_SHOWN.values() if phrase in text.replace("\\", "")]


def test_parts_survive_json_and_are_named_once():
    report = _with_parts()
    doc = report.to_json()
    assert {name: doc[name] for name in PARTS_SHOWN} == {name: v for name, (v, _) in PARTS_SHOWN.items()}
    assert doc["summary"]["xla_optimal_s"] == 0.002  # the summary repeats XLA's estimate
    assert ReportModel.from_json(doc).to_json() == doc
    assert set(PARTS_SHOWN) <= set(PARTS)
    with pytest.raises(ValueError):
        report.attach("not_a_part", {})  # type: ignore[arg-type]


def test_sections_have_unique_ids_in_one_order_for_every_format():
    ids = [s.id for s in REPORT_SECTIONS]
    assert len(ids) == len(set(ids))
    html = ReportRenderer(_with_parts()).render(Format.HTML, RenderOptions())
    positions = [html.index(f'id="sec-{i}"') for i in ids if f'id="sec-{i}"' in html]
    assert positions == sorted(positions) and len(positions) >= 8
