"""`audit diff` pairs ops structurally across recompiles and says when a pairing is uncertain."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from jaxlib import _hlo

from audit.analyses.diff_pairing import pair_ops
from audit.analyses.diff_program import measured_ops, program_ops
from audit.analyses.diff_verdict import diff_reports
from audit.orchestration.pipeline import analyse_hlo
from audit.reports.diff_sections import render_diff_markdown, render_diff_terminal
from audit.reports.model.report import ReportModel

HLO = Path(__file__).resolve().parent / "data" / "hlo"


def match_ops(base: dict, head: dict):
    """The ops of two JSON reports' programs, paired as `audit diff` pairs them."""
    sides = [ReportModel.from_json(r) for r in (base, head)]
    return pair_ops(*(program_ops(r, measured_ops(r)) for r in sides))


@pytest.fixture(scope="module")
def reports():
    # Head renames the f32[33] all-reduce to .4 and gives its old name to a new, unrelated
    # bf16[2,1,1,6144,16384] all-reduce; the dot reads a wider input under a new name.
    return {side: analyse_hlo(HLO / f"diff_{side}.hlo", hardware="h100:4").to_json() for side in ("base", "head")}


@pytest.mark.parametrize("side", ["base", "head"])
def test_the_modules_parse_with_xlas_own_parser(side):
    assert _hlo.hlo_module_from_text((HLO / f"diff_{side}.hlo").read_text()) is not None


def test_a_renamed_collective_is_matched_and_the_reused_name_is_a_new_op(reports):
    triples, removed, added = match_ops(reports["base"], reports["head"])
    by_base = {b.name: (h, p) for b, h, p in triples}
    head_op, pairing = by_base["all-reduce-start.9"]
    assert head_op.name == "all-reduce-start.4" and pairing.how == "fingerprint" and not pairing.uncertain
    assert "all-reduce-start.9" in {o.name for o in added}
    assert not removed
    diff = diff_reports(reports["base"], reports["head"])
    changed = {(r.base_name, r.name) for r in diff.compile_time.changed_ops}
    assert not any(b.startswith("all-reduce") or h.startswith("all-reduce") for b, h in changed)


def test_a_dot_with_a_wider_input_is_a_sure_change(reports):
    diff = diff_reports(reports["base"], reports["head"])
    (dot,) = [r for r in diff.compile_time.changed_ops if r.opcode == "dot"]
    assert (dot.base_name, dot.name) == ("dot.1", "dot.7")
    assert dot.uncertain is False
    assert dot.flops.head == pytest.approx(2 * dot.flops.base)


def _op(name: str, opcode: str, shape: str, position: float | None, fingerprint: str, flops: float = 1.0,
        framework_op: str = "", dtype: str = "f32") -> dict:
    return {"name": name, "opcode": opcode, "shape": shape, "position": position, "fingerprint": fingerprint,
            "framework_op": framework_op, "dtype": dtype, "module": "m", "container": False, "flops": flops,
            "bytes": 0.0, "comm_bytes": 0.0, "expected_s": 1e-6, "category": opcode}


def _report(ops: list[dict]) -> dict:
    return {"ops": ops, "collectives": [], "summary": {"steps": 0}, "steps": [], "hardware": {"name": "h100"}}


def test_identical_ops_pair_by_position_in_the_schedule_not_by_name():
    base = _report([_op("fusion.1", "fusion", "f32[8]", 0.1, "a"), _op("fusion.2", "fusion", "f32[8]", 0.9, "a")])
    head = _report([_op("fusion.9", "fusion", "f32[8]", 0.85, "a"), _op("fusion.3", "fusion", "f32[8]", 0.15, "a"),
                    _op("fusion.4", "fusion", "f32[8]", 0.5, "a")])
    triples, removed, added = match_ops(base, head)
    assert {(b.name, h.name) for b, h, _ in triples} == {("fusion.1", "fusion.3"), ("fusion.2", "fusion.9")}
    assert [o.name for o in added] == ["fusion.4"] and not removed


def test_a_pairing_by_name_alone_is_marked_uncertain_in_every_rendering():
    base = _report([_op("fusion.3", "fusion", "f32[8,128]", 0.5, "a", flops=10.0)])
    head = _report([_op("fusion.3", "fusion", "f32[8,256]", 0.5, "b", flops=20.0)])
    diff = diff_reports(base, head)
    (row,) = diff.to_json()["compile_time"]["changed_ops"]
    assert row["pairing"] == "name" and row["uncertain"] and "may be different ops" in row["pairing_note"]
    assert diff.compile_time.uncertain_pairs == 1
    assert "[uncertain pairing]" in render_diff_terminal(diff)
    assert "uncertain pairing" in render_diff_markdown(diff)


def test_a_name_is_never_enough_across_dtypes():
    base = _report([_op("all-reduce-start.9", "all-reduce-start", "f32[33]", 0.2, "a", dtype="f32")])
    head = _report([_op("all-reduce-start.9", "all-reduce-start", "bf16[2,1,1,6144,16384]", 0.2, "b",
                        dtype="bf16")])
    triples, removed, added = match_ops(base, head)
    assert not triples and len(removed) == 1 and len(added) == 1


def test_the_overlapped_step_of_a_measured_run_is_not_divided_by_its_steps_again(reports):
    """`summary.expected_step_s` is one step; a run of 5 steps compared 1/5 of it (the pipeline workload
    against the transformer read 'expected step with overlap +1.01 ms' for a 5.07 ms difference)."""
    base, head = copy.deepcopy(reports["base"]), copy.deepcopy(reports["head"])
    for r in (base, head):
        r["summary"]["steps"] = 5
    step = diff_reports(base, head).compile_time.totals_per_step["expected_step_s"]
    assert step.base == pytest.approx(base["summary"]["expected_step_s"])
    assert step.delta == pytest.approx(head["summary"]["expected_step_s"] - base["summary"]["expected_step_s"])


def test_the_overlapped_step_is_compared_at_compile_time(reports):
    diff = diff_reports(reports["base"], reports["head"])
    step = diff.compile_time.totals_per_step["expected_step_s"]
    assert step.base == pytest.approx(reports["base"]["summary"]["expected_step_s"])
    assert step.delta > 0 and step.changed
    assert "expected step with overlap +" in render_diff_terminal(diff)
