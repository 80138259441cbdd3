"""The HTML report: self-contained, escaped, and faithful to the report it renders."""

from __future__ import annotations

import json
import math
import random
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from audit.costmodel import units as qty
from audit.optable.record import OpRecord
from audit.reports import html
from audit.reports.model.report import ReportModel
from audit.reports.payload import build_payload, script_json
from audit.reports.svg import plot_point as _plot_point
from audit.reports.timeline_svg import timeline_svg

HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "</script><script>alert(2)</script>",
           "a|b`c`\u2028<!--")
BOUNDS = ("compute", "memory", "collective", "latency", "unknown")
PEAK, HBM = 9.89e14, 3.35e12


def render_html(report: dict) -> str:
    """The page of a JSON report read back, as a report written earlier would be."""
    return html.render_html(ReportModel.from_json(report))


def plot_point(op: dict, predicted: bool):
    return _plot_point(OpRecord.from_json(op), predicted)


def _op(i: int, rnd: random.Random, name: str) -> dict:
    bound = BOUNDS[i % len(BOUNDS)]
    flops = 0.0 if bound == "collective" else 10 ** rnd.uniform(6, 12)
    nbytes = 10 ** rnd.uniform(5, 9)
    expected = max(flops / PEAK, nbytes / HBM, 2e-6)
    measured = expected * 10 ** rnd.uniform(0, 1.5)
    flagged = measured > 5 * expected
    return dict(
        program_id=1, module="jit_train_step", name=name, opcode="fusion", category="convolution fusion",
        framework_op=f"jit(train_step)/dot_general[{i}]", source=f"model.py:{10 + i}", devices=8, occurrences=3,
        measured_s=measured, measured_s_max=measured * 1.1, self_s=measured, flops=flops, transcendentals=0.0,
        bytes=nbytes, comm_bytes=nbytes if bound == "collective" else 0.0, dtype="bf16",
        compute_s=flops / PEAK, memory_s=nbytes / HBM, comm_s=None, expected_s=expected, bound_by=bound,
        efficiency=expected / measured, flagged=flagged,
        reasons=[f"runs at {100 * expected / measured:.0f}% of its {bound} roofline"] if flagged else [],
        provenance={"flops": "model", "bytes": "model", "time": "measured"}, share=None,
        wasted_s=measured - expected, intensity=flops / nbytes, achieved_flops_per_s=flops / measured,
        achieved_bytes_per_s=nbytes / measured, suggestion="fuse the producer into this op" if flagged else "",
        key=f"1/{name}/{i}")


def sample_report(n_ops: int = 40, *, hostile: bool = False, predicted: bool = False, seed: int = 0) -> dict:
    """A report dict with every field the renderers read, shaped as the analysis writes it."""
    rnd = random.Random(seed)
    names = [HOSTILE[(i // 2) % len(HOSTILE)] + f"#{i}" if hostile and i % 2 == 0 else f"fusion.{i}"
             for i in range(n_ops)]
    ops = [_op(i, rnd, name) for i, name in enumerate(names)]
    total = sum(o["measured_s"] for o in ops)
    for o in ops:
        o["share"] = o["measured_s"] / total
    by_bound = {b: sum(o["measured_s"] for o in ops if o["bound_by"] == b) for b in BOUNDS}
    flagged = sorted((o for o in ops if o["flagged"]), key=lambda o: -o["wasted_s"])
    if predicted:  # nothing measured, so nothing flagged: flags compare measured with expected time
        for o in ops:
            o.update(measured_s=None, measured_s_max=None, efficiency=None, wasted_s=None, share=None,
                     achieved_flops_per_s=None, achieved_bytes_per_s=None, flagged=False, reasons=[], suggestion="")
        flagged = []
    t = 0.0
    events = []
    for o in ops:
        dur = o["expected_s"] if predicted else o["measured_s"]
        events.append({"name": o["name"], "kind": o["bound_by"], "start_s": t, "dur_s": dur})
        t += dur * 1.05
    return {
        "schema": "audit.report/v1", "tool": {"name": "audit", "version": "0.1.0"},
        "source": {"kind": "aot" if predicted else "run", "paths": ["out/run/host.xplane.pb"],
                   "workload": HOSTILE[0] if hostile else "workloads/transformer.py",
                   "command": "audit run workloads/transformer.py --devices 8", "jax_version": "0.10.2",
                   "created": "2026-11-21T19:00:00+00:00"},
        "hardware": {"name": "h100", "source": "catalog", "peak_flops_per_s": {"bf16": PEAK, "f32": 6.7e13},
                     "peak_flops_source": {"bf16": "catalog", "f32": "catalog"}, "hbm_bytes_per_s": HBM,
                     "hbm_bytes_per_s_source": "trace", "hbm_bytes": 80e9,
                     "interconnect": {"kind": "nvlink", "link_bytes_per_s": {"value": 4.5e11, "unit": "B/s",
                                                                              "source": "catalog"}},
                     "notes": [HOSTILE[1]] if hostile else []},
        "summary": {"devices": 8, "hosts": 1, "steps": 3,
                    "step_time_s": {"min": t * 0.98, "median": t, "max": t * 1.05},
                    "measured_s": None if predicted else total, "expected_s": sum(o["expected_s"] for o in ops),
                    "roofline_fraction": None if predicted else sum(o["expected_s"] for o in ops) / total,
                    "time_by_bound_s": by_bound, "idle_s": 0.05 * t, "flagged_ops": len(flagged),
                    "unmodeled_ops": 1, "predicted": predicted},
        "ops": ops,
        "flagged": [{"key": o["key"], "name": o["name"], "module": o["module"], "wasted_s": o["wasted_s"],
                     "reasons": o["reasons"], "suggestion": o["suggestion"]} for o in flagged],
        "collectives": [{"name": HOSTILE[2] if hostile else "all-reduce.3", "kind": "all-reduce", "bytes": 4e6,
                         "group_size": 8, "groups": [list(range(8))], "axes": ["data"], "hops": 7,
                         "wraparound": True, "expected_s": 2e-5, "measured_s": None if predicted else 5e-5,
                         "achieved_bytes_per_s": None if predicted else 8e10, "peak_bytes_per_s": 4.5e11,
                         "overlapped": None if predicted else False}],
        "timeline": [{"device_class": "H100", "device": 0, "step": 1, "start_s": 0.0, "end_s": t,
                      "events": events}],
        "warnings": [HOSTILE[3]] if hostile else ["1 op has no cost model: custom-call"],
    }


class _Tags(HTMLParser):
    """Every start tag and its attributes, as a browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(page: str) -> list[tuple[str, dict]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def embedded_data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="audit-data">(.*?)</script>', page, re.S)
    assert match, "the page embeds its data"
    return json.loads(match.group(1))


def test_page_is_self_contained_no_url_anywhere():
    page = render_html(sample_report())
    for tag, attrs in tags(page):
        for attr in ("src", "href", "action", "srcset", "poster", "data"):
            value = attrs.get(attr)
            assert value is None or value.startswith("#"), f"<{tag} {attr}={value!r}> would fetch"
    assert "@import" not in page and "url(" not in page
    # The only http string is the SVG namespace name, which is never fetched.
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) == {"http://www.w3.org/2000/svg"}


def test_csp_admits_exactly_the_inline_style_and_script():
    page = render_html(sample_report())
    csp = next(a["content"] for t, a in tags(page) if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp
    import base64
    import hashlib
    for kind, body in (("style", re.search(r"<style>(.*?)</style>", page, re.S).group(1)),
                       ("script", re.search(r"<script>(.*?)</script>", page, re.S).group(1))):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{kind}-src 'sha256-{digest}'" in csp


def test_hostile_strings_become_text_not_markup():
    report = sample_report(hostile=True)
    page = render_html(report)
    found = tags(page)
    assert [t for t, _ in found].count("script") == 2  # the data block and our own script
    assert not [t for t, _ in found if t == "img"]
    assert not [a for _, a in found if any(k.startswith("on") for k in a)]
    for payload in HOSTILE[:3]:
        assert payload not in page
    # The escaped form is present, so the names are shown, not dropped.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    data = embedded_data(page)
    assert set(o["name"] for o in report["ops"]) <= set(data["strings"])


def test_embedded_data_is_the_payload():
    report = sample_report(hostile=True)
    assert embedded_data(render_html(report)) == json.loads(json.dumps(build_payload(ReportModel.from_json(report))))


@given(st.text())
def test_script_json_never_closes_the_element(text):
    encoded = script_json({"s": text})
    assert not set("<>&\u2028\u2029") & set(encoded)
    assert json.loads(encoded) == {"s": text}


def test_flagged_section_lists_the_report_flagged_rows_in_order():
    report = sample_report(60, hostile=True)
    keys = [a["data-key"] for t, a in tags(render_html(report)) if t == "li" and "data-key" in a]
    assert keys == [f["key"] for f in report["flagged"]] and len(keys) > 3


def test_flagged_section_says_wasted_time_is_beyond_the_achievable_time():
    # Verdicts and wasted time are judged on the achievable time, not the roofline's expected time.
    page = render_html(sample_report(60))
    assert "wasted time (measured self time beyond the achievable time)" in page
    assert "measured minus expected" not in page


def test_roofline_has_one_point_per_plottable_op():
    report = sample_report(50)
    page = render_html(report)
    points = [a for t, a in tags(page) if t == "circle" and "pt" in a.get("class", "").split()]
    plottable = [i for i, op in enumerate(report["ops"]) if plot_point(op, False)]
    assert sorted(int(p["data-i"]) for p in points) == plottable
    omitted = len(report["ops"]) - len(plottable)
    assert omitted > 0 and f'data-omitted="{omitted}"' in page
    flagged = {i for i, op in enumerate(report["ops"]) if op["flagged"]} & set(plottable)
    assert {int(p["data-i"]) for p in points if "flag" in p["class"].split()} == flagged


def test_bigger_time_gets_a_bigger_point():
    report = sample_report(30)
    radius = {int(a["data-i"]): float(a["r"]) for t, a in tags(render_html(report)) if t == "circle" and "data-i" in a}
    by_time = sorted(radius, key=lambda i: report["ops"][i]["measured_s"])
    assert [radius[i] for i in by_time] == sorted(radius[i] for i in by_time)


def test_predicted_report_says_so_and_has_no_measured_columns():
    report = sample_report(20, predicted=True)
    page = render_html(report)
    assert "predicted, not measured" in page
    data = embedded_data(page)
    keys = {c["key"] for c in data["columns"]}
    assert data["predicted"] and not keys & {"measured_s", "wasted_s", "efficiency", "achieved_flops_per_s"}
    points = [a for t, a in tags(page) if t == "circle" and "data-i" in a]
    assert len(points) == sum(1 for op in report["ops"] if plot_point(op, True)) > 0


def test_rendering_is_deterministic():
    assert render_html(sample_report(hostile=True)) == render_html(sample_report(hostile=True))


def test_report_without_optional_sections_renders():
    report = sample_report(3)
    for key in ("collectives", "timeline", "warnings", "flagged"):
        report[key] = []
    page = render_html(report)
    ids = [a.get("id") for t, a in tags(page) if t == "section"]
    assert ids == ["sec-verdict", "sec-step", "sec-flagged", "sec-roofline", "sec-ops"]
    assert "No op was flagged" in page


def test_timeline_merges_sub_pixel_ops_but_keeps_their_time():
    events = [{"name": f"op{i}", "kind": "compute", "start_s": i * 1e-6, "dur_s": 1e-6} for i in range(10_000)]
    events.append({"name": "ar", "kind": "collective", "start_s": 0.002, "dur_s": 0.004})
    svg = timeline_svg([{"device_class": "cpu", "device": 0, "step": 0, "start_s": 0.0, "end_s": 0.01,
                         "events": events}])
    rects = [a for t, a in tags(svg) if t == "rect" and a["class"] == "k-compute"]
    assert len(rects) < 20
    plot_width = 800.0  # timeline.WIDTH - LABEL_W - 10
    assert sum(float(r["width"]) for r in rects) == pytest.approx(plot_width, rel=0.02)
    assert len([a for t, a in tags(svg) if t == "rect" and a["class"] == "k-collective"]) == 1


@given(st.floats(min_value=0.5e-12, max_value=1e7))
def test_seconds_reads_back_within_rounding(value):
    number, unit = qty.seconds(value).replace(",", "").split(" ")
    scale = {"s": 1, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12}[unit]
    assert math.isclose(float(number) * scale, value, rel_tol=6e-3)


@given(st.floats(min_value=-0.49e-12, max_value=0.49e-12))
def test_residue_below_a_picosecond_prints_as_zero(value):
    # "hidden 1.73e-06 ps" is the residue of subtracting nearly equal sums, not a duration
    assert qty.seconds(value) == "0 s"


@given(st.floats(min_value=1.0, max_value=1e18))
def test_si_reads_back_within_rounding(value):
    number, unit = qty.flops_per_s(value).split(" ")
    scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}[unit[: -len("FLOP/s")]]
    assert math.isclose(float(number) * scale, value, rel_tol=6e-3)


@pytest.mark.parametrize("value", [None, float("nan"), float("inf"), "x", True])
def test_unknown_values_never_print_as_zero(value):
    assert {qty.seconds(value), qty.nbytes(value), qty.percent(value), qty.count(value)} == {qty.UNKNOWN}


def test_every_table_class_the_sections_emit_is_styled():
    # An unstyled table runs its cells together ("process 0127 ms 1.00x" in the pod section).
    root = Path(__file__).resolve().parents[1] / "reports"
    css = (root / "assets" / "report.css").read_text()
    # The first class of each table is the one that says how it looks.
    emitted = {classes.split()[0] for p in (root / "sections").glob("*.py")
               for classes in re.findall(r'<table[^>]*class="([^"]+)"', p.read_text())}
    assert {"pod", "plan", "mini", "data"} <= emitted
    unstyled = sorted(c for c in emitted if not re.search(rf"table\.{c}\b|\.{c}\s", css))
    assert unstyled == []


@pytest.mark.parametrize("seconds", [999.95e-6, 0.99995, 999.7, 1234.5])
def test_the_page_shows_each_number_as_every_other_format_prints_it(seconds):
    # The page's script once formatted numbers with its own copy of units.py and printed 1000 µs,
    # 1000 ms and 1000 s where the terminal, markdown and CSV print 1.00 ms, 1.00 s and 1,000 s.
    report = sample_report(12, seed=3)
    report["ops"][0].update(measured_s=seconds, self_s=seconds, bytes=999.96e9)
    model = ReportModel.from_json(report)
    data = build_payload(model)
    columns = _columns(model)
    keys = [c["key"] for c in data["columns"]]
    assert keys == [c.key for c in columns]
    for op, row in zip(model.ops, data["shown"]):
        for column, cell in zip(columns, row):
            assert (cell is None) == (column.unit in ("text", "bool")), column.key
            if cell is not None:
                assert data["strings"][cell] == qty.format_as(column.value(op), column.unit), column.key
    shown = {key: data["strings"][cell] for key, cell in zip(keys, data["shown"][0]) if cell is not None}
    assert shown["measured_s"] == qty.seconds(seconds) and shown["bytes"] == "1.00 TB"
    assert not shown["measured_s"].startswith("1000")


def _columns(model: ReportModel):
    from audit.reports.model.columns import TABLE_COLUMNS, for_report

    return for_report(TABLE_COLUMNS, model.predicted)


def test_the_page_script_formats_no_number_itself():
    script = (Path(html.__file__).parent / "assets" / "report.js").read_text()
    found = [f for f in ("toFixed", "toPrecision", "toLocaleString", "Math.round", "1e-3", "\\u00b5s") if f in script]
    assert not found, found
