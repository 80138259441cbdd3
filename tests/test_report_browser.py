"""The HTML report opened in a real headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from audit.costmodel import units as qty
from audit.orchestration.pipeline import analyse_profile
from audit.reports.model.columns import TABLE_COLUMNS, for_report
from audit.reports.model.report import ReportModel
from conftest import ROOT, shared_fixture
from test_report_html import HOSTILE, plot_point, render_html, sample_report

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
ARTIFACTS = ROOT / "test-artifacts"
SCOPE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
GPU_CAPTURES = ("gemm", "attention", "elementwise", "conv3d-8gpu")

# A small sharded training-like step whose named scope is an injection payload:
# the payload reaches the trace's op metadata, as a hostile user's would.
PROGRAM = textwrap.dedent(f"""
    import sys
    import jax, jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(jax.devices()[:8], ("data",))
    def step(w, x):
        with jax.named_scope({SCOPE!r}):
            h = jnp.tanh(x @ w)
            return (h @ w.T).sum()
    f = jax.jit(step)
    w = jax.device_put(jnp.ones((256, 256), jnp.float32), NamedSharding(mesh, P()))
    x = jax.device_put(jnp.ones((512, 256), jnp.float32), NamedSharding(mesh, P("data")))
    f(w, x).block_until_ready()
    with jax.profiler.trace(sys.argv[1]):
        for _ in range(3):
            f(w, x).block_until_ready()
""")


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need playwright: pip install playwright (it is in the test extra)")
    if not CHROMIUM.exists():
        pytest.fail(f"the browser tests need Debian's chromium at {CHROMIUM}: run `make browser`")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


class Opened:
    """A page loaded from file://, with every console error, request and dialog it produced."""

    def __init__(self, browser, html: str, path: Path):
        path.write_text(html, encoding="utf-8")
        self.url = path.as_uri()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.page = browser.new_page(viewport={"width": 1366, "height": 900})
        self.page.set_default_timeout(5000)
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(self.url)

    def assert_clean(self) -> None:
        assert self.errors == [], f"console errors: {self.errors}"
        assert self.requests == [self.url], f"network requests beyond the page: {self.requests}"
        assert self.dialogs == [], f"a script ran: {self.dialogs}"

    def column(self, label: str) -> list[str]:
        index = self.page.locator("#ops-table thead th").all_inner_texts().index(label)
        return self.page.eval_on_selector_all(
            "#ops-table tbody tr", f"rows => rows.map(r => r.cells[{index}].textContent)")


def open_report(browser, report: dict, tmp_path: Path, name: str = "report.html") -> Opened:
    return Opened(browser, render_html(report), tmp_path / name)


def assert_faithful(opened: Opened, report: dict) -> None:
    """Points, rows and flagged items match the report."""
    page = opened.page
    predicted = bool(report["summary"].get("predicted"))
    assert page.locator("#roofline circle.pt").count() == sum(1 for op in report["ops"] if plot_point(op, predicted))
    assert page.locator("#ops-table tbody tr").count() == min(len(report["ops"]), 300)
    keys = page.eval_on_selector_all(".flag-item", "items => items.map(i => i.dataset.key)")
    assert keys == [f["key"] for f in report["flagged"]]
    # Each number's cell reads as the terminal, markdown and CSV print it (costmodel/units.py).
    model = ReportModel.from_json(report)
    for column in for_report(TABLE_COLUMNS, model.predicted):
        if column.unit in ("s", "B", "FLOP", "fraction"):
            cells = opened.column(column.label)
            assert cells and set(cells) <= {qty.format_as(column.value(o), column.unit) for o in model.ops}, column.key


@pytest.mark.parametrize("capture", GPU_CAPTURES)
def test_real_gpu_captures_open_clean(browser, tmp_path, capture):
    report = analyse_profile(shared_fixture(f"gpu-mi300x/{capture}.xplane.pb")).to_json()
    opened = open_report(browser, report, tmp_path)
    opened.assert_clean()
    assert_faithful(opened, report)


@pytest.mark.parametrize("dump, hardware", [
    ("tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt", "tpu-v6e:2x4"),
    ("gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb", "h100:4"),
])
def test_real_hlo_dumps_open_as_predictions(browser, tmp_path, dump, hardware):
    # Accelerator dumps need --hardware: they are never priced as this machine's CPU.
    report = analyse_profile(shared_fixture(dump), hardware=hardware).to_json()
    assert report["summary"]["predicted"]
    opened = open_report(browser, report, tmp_path)
    opened.assert_clean()
    assert_faithful(opened, report)
    assert "Measured" not in opened.page.locator("#ops-table thead th").all_inner_texts()
    assert opened.page.locator(".badge.predicted").count() == 1


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("cpu-profile")
    subprocess.run([sys.executable, "-c", PROGRAM, str(out)], check=True, timeout=120)
    return analyse_profile(out).to_json()


def test_hostile_cpu_trace_runs_nothing_and_shows_names_as_text(browser, tmp_path, cpu_report):
    assert any(SCOPE in (op.get("framework_op") or "") for op in cpu_report["ops"]), "payload reached the trace"
    opened = open_report(browser, cpu_report, tmp_path)
    opened.assert_clean()
    assert_faithful(opened, cpu_report)
    page = opened.page
    assert page.evaluate("document.scripts.length") == 2
    assert page.locator("img, [onerror]").count() == 0
    assert any(SCOPE in cell for cell in opened.column("Framework op"))
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-cpu-sharded.png"), full_page=True)


def test_cli_html_lists_the_json_flagged_rows_in_order(browser, tmp_path):
    """`audit inspect --json --html --markdown` writes all three; the page agrees with the JSON."""
    import json

    from audit.cli import main

    capture = shared_fixture("gpu-mi300x/attention.xplane.pb")
    paths = {kind: tmp_path / f"r.{kind}" for kind in ("json", "html", "md")}
    code = main(["inspect", str(capture), "--json", str(paths["json"]), "--html", str(paths["html"]),
                 "--markdown", str(paths["md"]), "--quiet"])
    assert code == 0
    report = json.loads(paths["json"].read_text())
    assert report["flagged"], "the attention capture has flagged ops"
    opened = Opened(browser, paths["html"].read_text(), tmp_path / "copy.html")
    opened.assert_clean()
    assert_faithful(opened, report)
    assert str(paths["html"]) in paths["md"].read_text()
    ARTIFACTS.mkdir(exist_ok=True)
    opened.page.screenshot(path=str(ARTIFACTS / "report-mi300x-attention.png"), full_page=True)


def test_hostile_report_is_inert_everywhere(browser, tmp_path):
    report = sample_report(60, hostile=True)
    opened = open_report(browser, report, tmp_path)
    opened.assert_clean()
    assert_faithful(opened, report)
    page = opened.page
    assert page.evaluate("document.scripts.length") == 2
    assert page.locator("img, [onerror], main script, header script").count() == 0
    names = opened.column("Op")
    for payload in HOSTILE:
        assert any(name.startswith(payload) for name in names), f"{payload!r} not shown as text"
    flagged_names = page.locator(".flag-item .op-name").all_text_contents()
    assert flagged_names == [f["name"] for f in report["flagged"]]
    assert page.locator("h1").inner_text() == HOSTILE[0]
    # Hovering a point fills the card with the op's name as text (the last point is drawn on top).
    point = page.locator("#roofline circle.pt").last
    point.hover()
    op = report["ops"][int(point.get_attribute("data-i"))]
    assert page.locator("#tip").is_visible()
    assert page.locator("#tip b").inner_text() == op["name"]
    # Clicking it finds the op in the table, by its name typed as text into the filter.
    point.click()
    assert op["name"] in opened.column("Op")
    assert page.input_value("#op-filter") == op["name"]
    assert opened.dialogs == [] and opened.errors == []


def _as_seconds(text: str) -> float:
    number, unit = text.split(" ")
    return float(number) * {"s": 1, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12}[unit]


def test_clicking_headers_sorts_the_table(browser, tmp_path):
    report = sample_report(80)
    opened = open_report(browser, report, tmp_path)
    page = opened.page
    measured = [_as_seconds(t) for t in opened.column("Measured")]
    assert measured == sorted(measured, reverse=True), "default order: most measured time first"
    page.click("#ops-table th:has-text('Op') button")
    names = opened.column("Op")
    assert names == sorted(names, key=str.lower) or names == sorted(names)
    assert page.get_attribute("#ops-table th:has-text('Op')", "aria-sort") == "ascending"
    page.click("#ops-table th:has-text('Op') button")
    assert opened.column("Op") == names[::-1]
    page.click("#ops-table th:has-text('Expected') button")
    expected = [_as_seconds(t) for t in opened.column("Expected")]
    assert expected == sorted(expected, reverse=True)
    opened.assert_clean()


def test_filters_narrow_the_table(browser, tmp_path):
    report = sample_report(80)
    opened = open_report(browser, report, tmp_path)
    page = opened.page
    page.fill("#op-filter", "fusion.1")
    names = opened.column("Op")
    assert names and all("fusion.1" in n for n in names)
    assert len(names) == sum("fusion.1" in op["name"] for op in report["ops"])
    page.fill("#op-filter", "")
    page.select_option("#bound-filter", "memory")
    assert set(opened.column("Bound")) == {"memory"}
    page.select_option("#bound-filter", "")
    page.check("#flagged-only")
    assert page.locator("#ops-table tbody tr").count() == len(report["flagged"])
    assert page.locator("#op-count").inner_text().startswith(f"{len(report['flagged'])} of 80")
    opened.assert_clean()


def test_large_table_shows_a_page_then_everything(browser, tmp_path):
    report = sample_report(700)
    opened = open_report(browser, report, tmp_path)
    page = opened.page
    assert page.locator("#ops-table tbody tr").count() == 300
    page.click("#show-all")
    assert page.locator("#ops-table tbody tr").count() == 700
    opened.assert_clean()


def test_predicted_report_in_the_browser(browser, tmp_path):
    report = sample_report(30, predicted=True)
    opened = open_report(browser, report, tmp_path)
    opened.assert_clean()
    assert_faithful(opened, report)
    headers = opened.page.locator("#ops-table thead th").all_inner_texts()
    assert "Measured" not in headers and "Expected" in headers
    assert opened.page.locator(".badge.predicted").text_content() == "predicted, not measured"
