"""One report schema, generated from the types, followed by the writer and enforced on every read."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from audit.analyses.diff_timing import DIRECT_STEPS, bootstrap_medians
from audit.analyses.diff_verdict import diff_reports
from audit.cli import main
from audit.optable.record import JSON_NAMES, CollectiveRow, OpRecord
from audit.base.errors import ExitCode, InputError
from audit.reports.model.read import SCHEMA_FILE, parse_report, read_report
from audit.reports.model.summary import Summary
from audit.reports.model.schema import REQUIRED, render, report_schema

HLO = Path(__file__).parent / "data" / "hlo"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    """Real reports as the writer writes them: GPU profiles (one with collectives) and predicted HLO."""
    from audit.orchestration.pipeline import analyse_hlo, analyse_profile
    from conftest import shared_fixture

    return {
        "gemm": analyse_profile(shared_fixture("gpu-mi300x/gemm.xplane.pb")).to_json(),
        "conv8": analyse_profile(shared_fixture("gpu-mi300x/conv3d-8gpu.xplane.pb")).to_json(),
        "hlo": analyse_hlo(HLO / "diff_head.hlo", hardware="h100").to_json(),
        "tpu-hlo": analyse_hlo(shared_fixture("tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"),
                               hardware="tpu-v6e:2x4").to_json(),
    }


def test_the_checked_in_schema_is_the_one_generated_from_the_types():
    assert SCHEMA_FILE.read_text() == render(), \
        "the report types changed: regenerate the schema with `python -m audit.reports.model.schema --write`"


@pytest.mark.parametrize(("cls", "where"), [(OpRecord, "ops"), (CollectiveRow, "collectives"), (Summary, "summary")])
def test_every_field_of_the_typed_report_is_described(cls, where):
    schema = report_schema()["properties"][where]
    props = (schema["items"] if schema["type"] == "array" else schema)["properties"]
    expanded = {"collective", "placement", "overlap", "spread"}  # written as their own fields, checked below
    json_name = JSON_NAMES if cls is OpRecord else {}  # an op's fractions keep the contract's names in JSON
    missing = [f.name for f in dataclasses.fields(cls) if json_name.get(f.name, f.name) not in props
               and f.name not in expanded]
    assert not missing, missing


@pytest.mark.parametrize("which", ["gemm", "conv8", "hlo", "tpu-hlo"])
def test_the_writers_real_reports_validate_and_use_only_described_fields(reports, which, tmp_path):
    report = reports[which]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    assert read_report(path) == json.loads(json.dumps(report))
    schema = report_schema()
    hint = "a field the writer adds by hand: describe it in audit.reports.model.schema (_BY_HAND) and regenerate"
    for where in ("ops", "collectives"):
        described = set(schema["properties"][where]["items"]["properties"])
        for row in report[where]:
            assert set(row) <= described, (set(row) - described, hint)
    undescribed = set(report["summary"]) - set(schema["properties"]["summary"]["properties"])
    assert not undescribed, (undescribed, hint)


def _mutated(report: dict, edit) -> bytes:
    doc = json.loads(json.dumps(report))
    edit(doc)
    return json.dumps(doc).encode()


def _set(path: tuple, value):
    def edit(doc):
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return edit


def _delete(path: tuple):
    def edit(doc):
        node = doc
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return edit


@pytest.mark.parametrize(("edit", "message"), [
    (_set(("ops", 12, "measured_s"), "x"), 'ops[12].measured_s: expected a number or null, got "x"'),
    (_delete(("summary",)), "(top level): missing field 'summary'"),
    (_delete(("hardware",)), "(top level): missing field 'hardware'"),
    (_delete(("collectives",)), "(top level): missing field 'collectives'"),
    (_delete(("steps", 0, "time_s")), "steps[0]: missing field 'time_s'"),
    (_set(("ops",), "abc"), 'ops: expected an array, got "abc"'),
    (_set(("ops",), [None, None]), "ops[0]: expected an object, got null"),
    (_set(("ops", 3, "flops"), [1, 2]), "ops[3].flops: expected a number or null, got an array of 2"),
    (_set(("summary", "steps"), "5"), 'summary.steps: expected an integer, got "5"'),
    (_set(("steps", 1, "time_s"), -1.0), "steps[1].time_s: -1.0 is out of range (minimum 0)"),
    (_set(("summary", "steps"), 10 ** 400), "summary.steps: 1000000000000000000000000000000000000... is out of "
                                            "range (maximum 1e+300)"),
    (_set(("runs",), [{"steps": []}] * 10_001), "runs: 10,001 items, more than the 10,000 a report may hold"),
    (_set(("runs",), [{"steps": ["fast"]}]), 'runs[0].steps[0]: expected a number, got "fast"'),
    (_set(("schema",), "audit.report/v2"), "not an audit JSON report (schema audit.report/v1)"),
])
def test_a_report_that_breaks_the_schema_names_the_json_path(reports, edit, message):
    with pytest.raises(InputError) as caught:
        parse_report(_mutated(reports["gemm"], edit), "r.json")
    text = str(caught.value)
    assert text.startswith("r.json: ") and text.endswith(message) and "\n" not in text, text


@pytest.mark.parametrize(("data", "message"), [
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested 100000 levels deep; a report nests at most 64"),
    (b'{"a": "[[[[' + b"[" * 200 + b'", "schema": "audit.report/v1"}', "missing field 'hardware'"),
    (b'{"schema": "audit.report/v1", "x": NaN}', "NaN is not a number a report may hold"),
    (b'{"schema": "audit.report/v1", "x": -Infinity}', "-Infinity is not a number a report may hold"),
    (b'{"schema": "audit.report/v1", "x": 1e999}', "1e999 is too large for a float"),
    (b'{"schema": "audit.report/v1", "x": ' + b"9" * 5000 + b"}", "not a JSON report: Exceeds the limit"),
    (b"\xff\xfe{}", "not a JSON report"),
    (b"  \n", "empty, not a JSON report"),
])
def test_hostile_json_is_refused_before_it_hurts(data, message):
    with pytest.raises(InputError, match=None) as caught:
        parse_report(data, "r.json")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_report_with_only_the_required_fields_still_compares(reports, tmp_path, capsys):
    """What an older writer may have left out is not needed: only `REQUIRED` is."""
    doc = reports["gemm"]
    keep = {k: doc[k] for k in REQUIRED["report"]}
    keep["hardware"] = {"name": doc["hardware"]["name"]}
    keep["summary"] = {"steps": doc["summary"]["steps"]}
    keep["steps"] = [{"time_s": s["time_s"]} for s in doc["steps"]]
    keep["ops"] = [{k: o[k] for k in REQUIRED["op"]} for o in doc["ops"]]
    keep["collectives"] = [{k: c[k] for k in REQUIRED["collective"]} for c in doc["collectives"]]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(keep))
    new = tmp_path / "new.json"
    new.write_text(json.dumps(doc))
    assert main(["diff", str(old), str(new), "-q"]) in (ExitCode.OK, ExitCode.GATE)


def test_the_bootstrap_of_many_steps_needs_memory_for_its_resamples_not_its_steps():
    steps = np.random.default_rng(0).lognormal(-4.6, 0.05, size=250_000)
    tracemalloc.start()
    try:
        medians = bootstrap_medians(np.random.default_rng(1), steps, 2000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * steps.nbytes + (1 << 20)  # the sorted copy and index arrays, never 2000 x 250,000
    assert np.quantile(medians, 0.025) < np.median(steps) < np.quantile(medians, 0.975)


@pytest.mark.parametrize("n", [DIRECT_STEPS + 1, DIRECT_STEPS + 2])
def test_order_statistic_medians_have_the_distribution_of_drawn_ones(n):
    steps = np.random.default_rng(2).lognormal(0.0, 0.3, size=n)
    drawn = np.median(np.random.default_rng(3).choice(steps, size=(3000, n)), axis=1)
    fast = bootstrap_medians(np.random.default_rng(4), steps, 3000)
    spread = np.quantile(drawn, 0.975) - np.quantile(drawn, 0.025)
    for q in (0.025, 0.25, 0.5, 0.75, 0.975):
        assert abs(np.quantile(fast, q) - np.quantile(drawn, q)) < 0.1 * spread


def test_a_diff_of_250000_steps_a_side_compares(reports):
    rng = np.random.default_rng(5)
    base, head = (json.loads(json.dumps(reports["gemm"])) for _ in range(2))
    base["steps"] = [{"time_s": t} for t in rng.lognormal(-4.6, 0.02, size=250_000)]
    head["steps"] = [{"time_s": t} for t in rng.lognormal(-4.6 + np.log(1.3), 0.02, size=250_000)]
    diff = diff_reports(base, head).to_json()
    assert diff["measured"]["base_steps"] == 250_000
    lo, hi = diff["measured"]["interval"]  # 30% slower; one run a side widens it by the run-to-run floor
    assert 0.1 < lo < 0.3 < hi


OLD_REPORTS = sorted((Path(__file__).parent / "data" / "reports").glob("*-10daea0.json"))


@pytest.mark.parametrize("old", OLD_REPORTS, ids=lambda p: p.name)
def test_reports_written_by_an_earlier_version_still_read_and_compare(old, reports, tmp_path, capsys):
    """Written by commit 10daea0 (21 Nov 2026) from the same captures, before fields were added."""
    assert read_report(old)["schema"] == "audit.report/v1"
    new = tmp_path / "new.json"
    new.write_text(json.dumps(reports["gemm" if old.name.startswith("gemm") else "conv8"]))
    assert main(["diff", str(old), str(new), "-q"]) in (ExitCode.OK, ExitCode.GATE)
    assert capsys.readouterr().err.count("\n") <= 1


def test_there_are_old_reports_to_check():
    assert len(OLD_REPORTS) == 2, "tests/data/reports lost the reports an earlier version wrote"


def test_a_report_with_fields_added_inside_per_device_rows_loads_in_the_library(reports, tmp_path):
    """Objects are open: a newer writer's extra field inside a nested row does not break `audit.load`."""
    from audit.library import load

    doc = json.loads(json.dumps(reports["conv8"]))
    rows = [o for o in doc["ops"] if o.get("per_device")]
    assert rows, "the 8-GPU capture's ops carry per-device rows"
    for row in rows:
        for entry in row["per_device"]:
            entry["a_field_from_the_future"] = 1
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    assert len(load(path).model.ops) == len(doc["ops"])
