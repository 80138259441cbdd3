"""The Python API end to end on real captures: `audit.inspect`, `audit.load`, `audit.diff`, the
op table as a DataFrame with its units, and every format from the same object."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import ROOT, shared_fixture

import audit
from audit.cli import main
from audit.reports.model.columns import COLUMNS
from audit.reports.text import md_text
from audit.base.errors import InputError, UsageError


@pytest.fixture(scope="module")
def report() -> audit.Report:
    return audit.inspect(shared_fixture("gpu-mi300x/attention.xplane.pb"))


def test_op_table_has_every_declared_column_with_its_unit(report: audit.Report) -> None:
    ops = report.ops
    assert isinstance(ops, pd.DataFrame)
    assert list(ops.columns) == list(COLUMNS)
    assert ops.attrs["units"] == {k: c.unit for k, c in COLUMNS.items()}
    assert ops.attrs["units"]["measured_s"] == "s" and ops.attrs["units"]["bytes"] == "B"
    assert ops.attrs["origins"]["measured_s"] == "trace" and ops.attrs["origins"]["expected_s"] == "model"
    assert len(ops) == len(report.model.ops) and ops.index.is_unique
    # Numbers are numbers in SI units; unknown is NaN, never 0.
    for key in ("measured_s", "expected_s", "flops", "bytes", "efficiency"):
        assert ops[key].dtype == "float64"
    by_key = {o.key: o for o in report.model.ops}
    for key, row in ops.iterrows():
        op = by_key[key]
        assert row["measured_s"] == pytest.approx(op.measured_s) if op.measured_s is not None \
            else pd.isna(row["measured_s"])
        assert pd.isna(row["expected_s"]) if op.expected_s is None else row["expected_s"] == op.expected_s


def test_flagged_ops_are_the_reports_flagged_most_wasted_first(report: audit.Report) -> None:
    flagged = report.flagged()
    assert len(flagged) == report.summary.flagged_ops > 0
    assert flagged["flagged"].all()
    assert list(flagged.index) == [o.key for o in report.model.flagged]
    wasted = flagged["wasted_s"].tolist()
    assert wasted == sorted(wasted, reverse=True)
    # The roofline is a lower bound: no judged op beats its expected time by much.
    judged = report.ops[report.ops["verdict"].isin(["ok", "flagged"])]
    assert (judged["measured_s"] >= 0.9 * judged["expected_s"]).all()


def test_every_format_comes_from_the_same_object(report: audit.Report, tmp_path: Path) -> None:
    doc = report.to_json()
    assert doc["schema"] == "audit.report/v1"
    assert [f["key"] for f in doc["flagged"]] == list(report.flagged().index)
    html = report.to_html()
    assert html.lstrip().lower().startswith("<!doctype html")
    worst = report.flagged().iloc[0]["name"]
    assert worst in html and md_text(worst) in report.to_markdown()  # markdown escapes its underscores
    assert report.to_csv().splitlines()[0].startswith("program_id,module,name")
    assert worst in report._repr_html_() and "flagged" in repr(report)
    path = tmp_path / "r.json"
    report.save(str(path))
    again = audit.load(path)
    pd.testing.assert_frame_equal(again.ops, report.ops)
    assert again.summary.to_json() == report.summary.to_json()


def test_load_refuses_what_is_not_a_report(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(InputError):
        audit.load(bad)
    with pytest.raises(InputError):
        audit.load(tmp_path / "missing.json")


def test_a_report_given_as_a_dict_is_checked_as_its_file_is(report: audit.Report, tmp_path: Path) -> None:
    # GIVEN a real report as a dict, damaged as a hand edit or a hostile caller would damage it
    doc = report.to_json()
    text_measured = json.loads(json.dumps(doc))
    text_measured["ops"][0]["measured_s"] = "x"
    not_finite = json.loads(json.dumps(doc))
    not_finite["ops"][0]["measured_s"] = float("nan")
    cyclic = json.loads(json.dumps(doc))
    cyclic["extra"] = cyclic
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(text_measured))
    with pytest.raises(InputError) as from_file:
        audit.load(path)
    for bad in (text_measured, not_finite, cyclic, {"hello": 1}):
        # WHEN it is loaded or compared as a dict THEN it is refused as its file would be, naming the JSON path
        with pytest.raises(InputError) as loaded:
            audit.load(bad)
        with pytest.raises(InputError):
            audit.diff(doc, bad)
        if bad is text_measured:
            assert from_file.value.message == loaded.value.message and "ops[0].measured_s" in loaded.value.message
    # AND a sound dict still loads and diffs
    assert audit.load(doc).summary.to_json() == report.summary.to_json()
    assert audit.diff(doc, doc).verdict == "no change"


def test_diff_of_one_run_a_side_is_never_a_regression_on_timing_alone(report: audit.Report, tmp_path: Path) -> None:
    doc = report.to_json()
    slower = json.loads(json.dumps(doc))
    for step in slower["steps"]:
        step["time_s"] = step["time_s"] * 2 if step.get("time_s") else step.get("time_s")
    slower["summary"]["step_time_s"] = {k: (v * 2 if v else v) for k, v in doc["summary"]["step_time_s"].items()}
    result = audit.diff(report, slower)
    assert result.verdict == "inconclusive" and not result.regression
    # The CLI says the same, as the gating page's verdict table does: exit 0, never a timing-only regression.
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(doc))
    head.write_text(json.dumps(slower))
    assert main(["diff", str(base), str(head), "--quiet"]) == 0
    assert "Verdict" in result.to_markdown() or result.verdict in result.to_markdown()
    with pytest.raises(UsageError):
        audit.diff(report, report, fail_on_slowdown=-1)
    with pytest.warns(DeprecationWarning, match="fail_on_slowdown"):  # the old name still sets the threshold
        assert audit.diff(report, slower, fail_on=0.5).data["measured"]["threshold"] == 0.5


def test_diff_lists_the_ops_whose_program_changed(report: audit.Report) -> None:
    doc = report.to_json()
    head = json.loads(json.dumps(doc))
    op = max((o for o in head["ops"] if o.get("flops")), key=lambda o: o["flops"])
    op["flops"] *= 2
    result = audit.diff(doc, head, fail_on_flops=True)
    changed = result.changed_ops()
    assert list(changed["name"]) == [op["name"]]
    assert float(changed["flops.head"].iloc[0]) == pytest.approx(2 * float(changed["flops.base"].iloc[0]))
    assert result.regression and any("FLOPs" in t for t in result.tripped)


def test_inspect_options_are_checked(report: audit.Report) -> None:
    with pytest.raises(UsageError):
        audit.inspect(shared_fixture("gpu-mi300x/gemm.xplane.pb"), min_efficiency=2.0)
    with pytest.raises(InputError):
        audit.inspect("/nonexistent/profile.xplane.pb")
    strict = audit.inspect(shared_fixture("gpu-mi300x/attention.xplane.pb"), min_efficiency=0.0)
    assert strict.summary.flagged_ops == 0


def _notebook_example() -> str:
    text = (ROOT / "docs" / "notebook.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_notebook_example_runs_as_written(tmp_path: Path) -> None:
    """The notebook page's example, unchanged, on a real capture laid out as `make demo` writes it."""
    run = tmp_path / "out" / "demo" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    shutil.copy(shared_fixture("gpu-mi300x/attention.xplane.pb"), run / "host.xplane.pb")
    env = {**os.environ, "PYTHONPATH": ""}
    proc = subprocess.run([sys.executable, "-c", _notebook_example()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "<audit report:" in proc.stdout and "flagged" in proc.stdout
    assert (tmp_path / "report.json").exists()
    assert proc.stdout.strip().splitlines()[-1] in ("inconclusive", "no change")


@pytest.mark.slow
def test_import_audit_stays_light() -> None:
    code = "import sys, audit; print(sorted(m for m in ('pandas', 'jax', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
