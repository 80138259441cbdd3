"""Predict without the hardware: workloads compiled ahead of time for real TPU topologies (needs libtpu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.orchestration.predict import predict_target

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "data" / "workloads"


def _require_libtpu():
    from audit.child.aot import libtpu_available

    if not libtpu_available():
        pytest.fail("libtpu is not installed: `make test` installs roofline-audit[tpu]")


@pytest.fixture(scope="module")
def allgather_v5e():
    _require_libtpu()
    return predict_target(WORKLOADS / "book_allgather.py", [], "tpu-v5e:8x4").to_json()


@pytest.mark.slow
def test_book_allgather_on_v5e_8x4_lands_between_theory_and_measurement(allgather_v5e):
    # Book ch. 3: 377 us with a wraparound, ~560 us without, 680 us measured; a 4-long v5e axis has none.
    (gather,) = [c for c in allgather_v5e["collectives"] if c["kind"] == "all-gather"]
    assert 377e-6 <= gather["expected_s"] <= 680e-6
    assert gather["expected_s"] == pytest.approx(560e-6, rel=0.02)
    assert gather["wraparound"] is False
    assert gather["hops"] == 3 and gather["group_size"] == 4
    assert gather["bytes"] == 2048 * 8192 * 2
    assert [a["size"] for a in gather["physical_axes"]] == [4]
    assert "without a wraparound" in gather["note"]


@pytest.mark.slow
def test_predicted_reports_say_so_and_carry_xla_estimate_and_memory_fit(allgather_v5e):
    r = allgather_v5e
    assert r["source"]["kind"] == "aot" and r["summary"]["predicted"] is True
    assert all(o["measured_s"] is None and o["provenance"]["time"] == "predicted" for o in r["ops"])
    assert r["summary"]["xla_optimal_s"] and r["summary"]["xla_optimal_s"] > 0
    assert "all-gather" in r["xla"]["explanation"]
    gap = r["xla"]["gap"]
    # The explanation adds up: ours = exposed communication + per-op overhead + rooflines.
    assert gap["ours_step_s"] == pytest.approx(gap["exposed_comm_s"] + gap["overhead_s"] + gap["roofline_s"])
    assert min(gap["exposed_comm_s"], gap["overhead_s"], gap["roofline_s"]) >= 0
    assert gap["difference_s"] == pytest.approx(gap["ours_step_s"] - r["xla"]["optimal_seconds"])
    assert "op launches" in gap["text"] and "not hidden by compute" in gap["text"]
    assert gap["overhead_per_op_source"] == "catalog" and "[catalog]" in gap["text"]
    assert r["memory"]["fits"] is True and r["memory"]["hbm_bytes"] == pytest.approx(16e9, rel=0.1)
    assert r["memory"]["verdict"].startswith("fits")


@pytest.mark.slow
def test_book_tpu_v2_sharded_matmul_predicts_95_6_ms():
    # Book ch. 9.2.4: 2*32*1024*8192*32768 / (23e12 * 8) = 95.6 ms predicted, 96 ms measured.
    _require_libtpu()
    r = predict_target(WORKLOADS / "book_v2_matmul.py", [], "tpu-v2:2x2").to_json()
    dot = max(r["ops"], key=lambda o: o["flops"] or 0)
    assert dot["flops"] == pytest.approx(2 * 32 * 1024 * 8192 * 32768 / 8, rel=1e-9)
    assert dot["expected_s"] == pytest.approx(95.6e-3, rel=0.005)
    assert dot["bound_by"] == "compute"
    assert r["xla"]["optimal_seconds"] == pytest.approx(96e-3, rel=0.05)


def test_target_without_libtpu_names_the_install(monkeypatch, capsys):
    import audit.child.aot
    from audit.cli import main

    monkeypatch.setattr(audit.child.aot, "libtpu_available", lambda: False)
    code = main(["run", str(WORKLOADS / "book_allgather.py"), "--target", "tpu-v5e:4x4"])
    err = capsys.readouterr().err
    assert code == 2
    assert "pip install 'roofline-audit[tpu]'" in err and len(err.strip().splitlines()) == 1


def test_targets_that_cannot_be_compiled_ahead_of_time_are_refused(capsys):
    from audit.cli import main

    assert main(["run", str(WORKLOADS / "book_allgather.py"), "--target", "h100:8"]) == 2
    assert "TPU" in capsys.readouterr().err
    assert main(["run", str(WORKLOADS / "book_allgather.py"), "--target", "tpu-v5e"]) == 2
    assert "topology" in capsys.readouterr().err


@pytest.mark.slow
def test_transformer_on_v5e_4x4_predicts_every_fusion_and_collective(capsys):
    _require_libtpu()
    import json

    from audit.cli import main

    root = HERE.parent
    assert main(["run", str(root / "workloads" / "transformer.py"), "--target", "tpu-v5e:4x4",
                 "--json", "-", "--quiet"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["summary"]["predicted"] and r["source"]["kind"] == "aot" and r["source"]["topology"] == "v5e:4x4"
    fusions = [o for o in r["ops"] if o["opcode"] == "fusion"]
    assert fusions
    unknown = [o["name"] for o in fusions if o["expected_s"] is None]
    assert len(unknown) <= 0.02 * len(fusions), unknown  # opaque index-check fusions only, each with a reason
    assert r["collectives"]
    for c in r["collectives"]:
        assert c["expected_s"] and c["expected_s"] > 0
        assert c["physical_axes"] and c["hops"] is not None and c["wraparound"] is not None
    assert r["summary"]["xla_optimal_s"] > 0
    assert r["plan_vs_profile"]["rows"][0]["plan"] > 0


@pytest.mark.slow
def test_measured_on_cpu_next_to_predicted_on_target(capsys):
    _require_libtpu()
    import json

    from audit.cli import main

    root = HERE.parent
    assert main(["run", str(root / "workloads" / "transformer.py"), "--target", "tpu-v5e:2x2", "--compare-cpu",
                 "--devices", "4", "--steps", "2", "--warmup", "1", "--json", "-", "--quiet"]) == 0
    r = json.loads(capsys.readouterr().out)
    cmp = r["cpu_comparison"]
    assert r["summary"]["predicted"] and cmp["cpu_steps"] == 2
    dots = [m for m in cmp["matched"] if m["framework_op"].endswith("dot_general")]
    assert dots
    for m in dots:
        assert m["cpu_measured_s"] > 0 and m["target_expected_s"] > 0
        # The same framework op does the same math on both sides (per device, per step).
        assert m["target_flops"] == pytest.approx(m["cpu_flops"], rel=0.35)
    assert isinstance(cmp["cpu_only"], list) and isinstance(cmp["target_only"], list)


def test_compare_cpu_needs_a_target(capsys):
    from audit.cli import main

    assert main(["run", str(WORKLOADS / "book_allgather.py"), "--compare-cpu"]) == 2
    assert "--target" in capsys.readouterr().err
