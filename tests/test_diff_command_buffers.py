"""`audit diff` compares programs, not the ops a trace happened to time: one H100 training step (JAX 0.11.2)
captured with CUDA graphs (one `command_buffer_1` op per step) and without them (one op per kernel), and
the HLO dump of that step, read as the same program."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import audit
from audit.analyses.diff_verdict import diff_reports
from audit.cli import main
from audit.orchestration.pipeline import analyse_hlo
from audit.reports.model.read import parse_report
from audit.reports.model.diff import DiffModel, OpenedBuffer
from audit.reports.diff_sections import render_diff_terminal
from conftest import H100_CAPTURES

CAPTURES = H100_CAPTURES
DUMP = CAPTURES / "dump" / "module_0000.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"


def test_the_report_lists_what_the_cuda_graph_ran_priced_as_its_op_is(h100_step_graphs):
    (buffer,) = [o for o in h100_step_graphs["ops"] if o["opcode"] == "command-buffer"]
    (part,) = h100_step_graphs["command_buffers"]
    assert part["key"] == buffer["key"] and len(part["ops"]) == 349
    for field in ("flops", "bytes", "expected_s"):
        assert sum(op[field] for op in part["ops"]) == pytest.approx(buffer[field], rel=1e-9)
    assert Counter(op["opcode"] for op in part["ops"]) == {"fusion": 270, "custom-call": 79}
    assert parse_report(json.dumps(h100_step_graphs).encode()) == h100_step_graphs  # the schema accepts the part


def test_cuda_graphs_on_and_off_compare_as_the_same_ops_and_the_kernels_autotuning_chose(h100_step, h100_step_graphs):
    diff = diff_reports(h100_step, h100_step_graphs)
    ct = diff.compile_time
    assert ct.command_buffers == [OpenedBuffer("head", "command_buffer_1", 349)]
    assert not any(ct.totals_per_step[q].changed for q in ("flops", "bytes", "comm_bytes"))
    # 333 of the 349 ops are the same in both compiles (18 of them read a cuBLAS call's tuple in one and a
    # fusion's array in the other, so they pair on their shape); autotuning ran the other 16 GEMMs as
    # cuBLAS calls in one and as Triton fusions in the other, the same FLOPs either way.
    assert diff.matched_ops == 333 and ct.pairing_counts == {"fingerprint": 315, "shape": 18}
    assert not ct.changed_ops and not ct.uncertain_pairs
    assert len(ct.added_ops) == len(ct.removed_ops) == 16
    assert all(o.opcode == "custom-call" for o in ct.added_ops)
    assert all(o.name.startswith("gemm_fusion_dot") for o in ct.removed_ops)
    assert sum(o.flops or 0 for o in ct.added_ops) == pytest.approx(sum(o.flops or 0 for o in ct.removed_ops))
    text = render_diff_terminal(diff)
    assert "command_buffer_1" not in "".join(o.name for o in ct.added_ops)
    assert "compared as the 349 ops it ran" in text and "FLOPs 0, bytes 0" in text and "+0 s" not in text


def test_a_capture_and_the_hlo_dump_of_its_program_are_the_same_program(h100_step, h100_step_graphs):
    dump = analyse_hlo(DUMP, hardware="h100").to_json()
    diff = diff_reports(dump, h100_step)
    assert not diff.compile_time.changed and diff.matched_ops == 349  # no parameter or bitcast reads as removed
    assert diff.measured.verdict == "not compared"
    assert not diff_reports(h100_step_graphs, h100_step_graphs).compile_time.changed


def test_a_report_written_before_the_part_keeps_the_graph_as_one_op(h100_step_graphs):
    older = {k: v for k, v in h100_step_graphs.items() if k != "command_buffers"}
    diff = diff_reports(older, h100_step_graphs)
    assert diff.compile_time.command_buffers == [OpenedBuffer("head", "command_buffer_1", 349)]
    assert [o.name for o in diff.compile_time.removed_ops] == ["command_buffer_1"]
    assert not diff_reports(older, older).compile_time.changed


def test_the_diff_document_reads_back_as_it_was_written(h100_step, h100_step_graphs, tmp_path):
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(h100_step))
    head.write_text(json.dumps(h100_step_graphs))
    assert main(["diff", str(base), str(head), "--json", str(tmp_path / "d.json"), "--quiet"]) == 0
    doc = json.loads((tmp_path / "d.json").read_text())
    assert DiffModel.from_json(doc).to_json() == doc
    assert audit.Diff(doc).verdict == doc["verdict"] == audit.diff(str(base), str(head)).verdict
