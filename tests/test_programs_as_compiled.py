"""Programs priced as XLA compiled them: a module not yet partitioned is refused, several programs
in one dump are priced one by one, and a prediction from before optimization says so wherever it
prints a step.

The dump in tests/data/hlo/sdy-dump is XLA's own (`--xla_dump_to`, JAX 0.10 on CPU, 8 devices):
`jit(lambda a, b: tanh(a @ b))` with `a` sharded 8 ways under Shardy, and a broadcast before it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import render
from audit.cli import main
from audit.library.calls import load

DUMP = Path(__file__).resolve().parent / "data" / "hlo" / "sdy-dump"
PREPARTITION = DUMP / "module_0006.jit__lambda.before_optimizations.txt"
PARTITIONED = DUMP / "module_0006.jit__lambda.cpu_after_optimizations.txt"
BEFORE = DUMP / "module_0002.jit_broadcast_in_dim.before_optimizations.txt"


def _report(capsys, *argv: str) -> dict:
    assert main(["inspect", *argv, "--json", "-", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("chip", ["mi355x:8", "h100:8", "h100"])
def test_a_module_not_yet_partitioned_is_refused_with_one_line(capsys, chip):
    # num_partitions=8 with Shardy shardings and global f32[1024,512] arrays: pricing it would price one
    # device holding every shard.
    assert "num_partitions=8" in PREPARTITION.read_text().splitlines()[0]
    assert main(["inspect", str(PREPARTITION), "--hardware", chip]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "num_partitions=8" in err and "has not been partitioned" in err and "after_optimizations" in err


def test_the_same_program_after_partitioning_is_priced_per_device(capsys):
    report = _report(capsys, str(PARTITIONED), "--hardware", "h100:8")
    dots = [o for o in report["ops"] if o["flops"] and o["flops"] >= 2 * 128 * 512 * 256]
    # One device's rows: 1024 / 8 = 128 of them.
    assert dots and all(o["flops"] == 2 * 128 * 512 * 256 for o in dots)


def test_several_programs_in_one_dump_are_priced_one_by_one_not_summed_into_a_step(capsys, tmp_path):
    report = _report(capsys, str(DUMP), "--hardware", "h100:8")
    s = report["summary"]
    assert s["programs"] == 2
    assert s["step_time_s"]["median"] is None and s["expected_step_s"] is None  # no step runs both
    rows = {r["module"]: r for r in report["programs"]}
    assert set(rows) == {"jit__lambda", "jit_broadcast_in_dim"}
    assert all(r["executions"] == 1 and r["expected_s"] > 0 and r["measured_s"] is None for r in rows.values())
    assert sum(r["expected_s"] for r in rows.values()) == pytest.approx(s["expected_s"])
    terminal = render(report, "terminal")
    assert "expected step time" not in terminal and "2 different programs, one execution of each" in terminal
    assert "Measured" not in terminal  # nothing was measured: no measured column
    markdown = render(report, "markdown")
    assert "Predicted step" not in markdown and "Expected op time (one execution of each)" in markdown
    assert "Predicted step time" not in render(report, "html")
    written = tmp_path / "r.json"
    written.write_text(json.dumps(report))
    assert load(str(written)).summary.programs == 2  # the schema holds


def test_a_prediction_from_before_optimization_says_so_wherever_a_step_is_printed(capsys):
    report = _report(capsys, str(BEFORE), "--hardware", "h100")
    assert report["source"]["before_optimization"] is True
    assert any("before optimization" in w for w in report["warnings"])
    terminal = render(report, "terminal").splitlines()
    steps = [line for line in terminal if "step " in line and ("expected" in line or "predicted" in line)
             and not line.startswith("times:")]
    assert steps and all("before optimization" in line for line in steps)
    markdown = render(report, "markdown")
    assert "Predicted step (before optimization" in markdown
    assert "before optimization: an estimate" in render(report, "html")
    # After optimization nothing is said.
    after = _report(capsys, str(PARTITIONED), "--hardware", "h100:8")
    assert "before_optimization" not in after["source"]
    assert "before optimization" not in render(after, "terminal")
