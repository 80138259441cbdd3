"""`audit run --repeat N`: N fresh processes, one report per run, and a combined report `audit diff` reads run by run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.cli import main

MATMUL = Path(__file__).resolve().parents[1] / "workloads" / "matmul.py"


@pytest.mark.slow
def test_repeat_writes_each_run_and_a_combined_report_that_diff_reads_as_runs(tmp_path, capsys):
    out = tmp_path / "r.json"
    args = ["run", str(MATMUL), "--devices", "1", "--steps", "3", "--warmup", "1", "--repeat", "2",
            "--json", str(out), "--quiet", "--", "--batches", "8,32"]
    assert main(args) == 0
    runs = [json.loads((tmp_path / f"r.run{i}.json").read_text()) for i in (1, 2)]
    combined = json.loads(out.read_text())
    assert [len(r["steps"]) for r in runs] == [3, 3]
    # Fresh processes: each run has its own capture, so its own step times.
    assert [s["time_s"] for s in runs[0]["steps"]] != [s["time_s"] for s in runs[1]["steps"]]
    assert combined["repeat"]["runs"] == 2
    assert [r["steps"] for r in combined["runs"]] == [[s["time_s"] for s in r["steps"]] for r in runs]
    assert [r["source"] for r in combined["runs"]] == [str(tmp_path / f"r.run{i}.json") for i in (1, 2)]
    # The combined report and a directory holding it and its runs both diff as 2 runs, never 3 or 4.
    assert main(["diff", str(out), str(tmp_path), "--json", str(tmp_path / "d.json.out"), "--quiet"]) == 0
    diff = json.loads((tmp_path / "d.json.out").read_text())
    assert diff["measured"]["base_runs"] == diff["measured"]["head_runs"] == 2
    assert not diff["compile_time"]["changed"]


def test_repeat_without_a_json_file_is_a_usage_error(capsys):
    assert main(["run", str(MATMUL), "--repeat", "2", "--quiet"]) == 2
    assert "--repeat N needs --json FILE" in capsys.readouterr().err
