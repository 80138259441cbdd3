"""The pipeline-parallel reference workload: its profile and the plan agree in structure.

`workloads/pipeline.py` runs the book's ch. 5 pipeline (stages over 4 simulated devices,
microbatches handed on with collective-permutes) under `audit run`; the report puts the
plan's stages, collective-permutes and bubble beside the trace's, and `audit plan train
--layout pp=...` for the same model describes the same pipeline.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.cli import main

pytestmark = pytest.mark.slow  # the module's one capture runs the pipeline workload

WORKLOAD = Path(__file__).resolve().parents[1] / "workloads" / "pipeline.py"
STAGES, MICROBATCHES = 4, 4
ARGS = ["--microbatches", str(MICROBATCHES), "--d-model", "64", "--d-ff", "128", "--heads", "4",
        "--vocab", "128", "--seq", "32"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = tmp_path_factory.mktemp("pipeline") / "report.json"
    code = main(["run", str(WORKLOAD), "--devices", str(STAGES), "--steps", "2", "--warmup", "1",
                 "--json", str(path), "--", *ARGS])
    assert code == 0
    return json.loads(path.read_text())


def _rows(report: dict) -> dict[str, dict]:
    return {r["quantity"]: r for r in report["plan_vs_profile"]["rows"]}


def test_the_profile_shows_one_collective_permute_per_tick_forward_and_backward(report):
    permutes = [o for o in report["ops"] if o["opcode"].startswith("collective-permute")]
    ticks = MICROBATCHES + STAGES - 1
    # one permute per tick but the last, forward; their transposes backward; each once per step
    assert len(permutes) == 2 * (ticks - 1)
    assert {o["occurrences"] for o in permutes} == {2}
    assert {c["kind"] for c in report["collectives"]} == {"collective-permute"}
    rows = _rows(report)
    assert rows["collective-permutes per step"]["plan"] == rows["collective-permutes per step"]["measured"] == 12
    assert rows["pipeline stages"]["plan"] == rows["pipeline stages"]["measured"] == STAGES


def test_the_plan_and_the_model_count_the_same_bytes_sent_per_device(report):
    """Both count what each device sends: 2 (M + S - 2) permutes of one microbatch's activations
    (f32[batch / M, seq, d_model]); the host's read-and-write copy of them is not communication."""
    cfg = report["source"]["config"]
    microbatch = cfg["batch"] // MICROBATCHES * cfg["seq"] * cfg["d_model"] * 4
    row = _rows(report)["communicated bytes per device"]
    assert row["plan"] == pytest.approx(row["model"]) == 2 * (MICROBATCHES + STAGES - 2) * microbatch


def test_an_f32_workload_is_not_told_its_plan_counts_bf16(report):
    """The workload runs in f32 and its plan counts 4 bytes per element, so the HBM gap's reasons
    never blame f32 against a bf16 plan."""
    assert report["source"]["config"]["dtype"] == "float32"
    assert report["plan_vs_profile"]["plan"]["param_bytes"] == 4 * report["plan_vs_profile"]["plan"]["params"]
    hbm = _rows(report)["HBM bytes per device"]
    assert hbm.get("gap") and hbm["reasons"]
    assert not any(r.startswith("f32 instead of") for r in hbm["reasons"])


def test_the_bubble_is_shown_as_idle_time_next_to_the_plan(report):
    bubble = _rows(report)["pipeline bubble (idle per device)"]
    step = report["summary"]["step_time_s"]["median"]
    assert 0 < bubble["plan"] and 0 < bubble["measured"] < step
    assert "4 of 7 ticks" in bubble["note"]
    plan = report["plan_vs_profile"]["plan"]["pipeline"]
    assert plan["bubble_fraction"] == pytest.approx((STAGES - 1) / MICROBATCHES)
    assert plan["idle_fraction_of_step"] == pytest.approx(3 / 7)


def test_plan_layout_for_the_same_pipeline_agrees(report, capsys):
    cfg = report["source"]["config"]
    args = ["plan", "train", "--layers", str(cfg["layers"]), "--d-model", str(cfg["d_model"]), "--d-ff",
            str(cfg["d_ff"]), "--heads", str(cfg["heads"]), "--kv-heads", str(cfg["kv_heads"]), "--head-dim",
            str(cfg["head_dim"]), "--vocab", str(cfg["vocab"]), "--tokens", "1e9", "--batch-tokens",
            str(cfg["batch"] * cfg["seq"]), "--seq", str(cfg["seq"]), "--hardware", "h100", "--chips", str(STAGES),
            "--layout", f"pp={STAGES},microbatches={MICROBATCHES},schedule=gpipe", "--json", "-"]
    assert main(args) == 0
    lay = json.loads(capsys.readouterr().out)["layout"]
    pipe = report["plan_vs_profile"]["plan"]["pipeline"]
    assert lay["valid"] and lay["layout"]["pp"] == pipe["stages"] and lay["microbatches"] == pipe["microbatches"]
    assert lay["schedule"]["bubble_fraction"] == pytest.approx(pipe["bubble_fraction"])
    sends = [c for c in lay["collectives"] if c["axis"] == "pp"]
    assert sends and sends[0]["collective"] == "collective-permute"
    # a stage sends each microbatch on and its gradient back; the loop also permutes at fill and drain
    assert sends[0]["count"] == 2 * MICROBATCHES <= pipe["collective_permutes"]


def test_the_roofline_fraction_says_it_is_the_judged_ops(report):
    """The permutes are waits, not judged: the fraction (judged expected / judged measured) is far from
    all ops' expected / measured printed beside it, so the line says whose fraction it is."""
    from audit.costmodel.units import percent

    from conftest import render

    s = report["summary"]
    assert s["not_judged_ops"] > 0 and s["roofline_fraction"] > 1.5 * s["expected_s"] / s["measured_s"]
    assert f"roofline fraction of the judged ops {percent(s['roofline_fraction'])}" in render(report, "terminal")
    assert "measured time of the judged ops" in render(report, "html")
