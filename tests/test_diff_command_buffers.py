"""The report keeps what a CUDA graph ran: one H100 training step (JAX 0.11.2) captured with CUDA graphs,
where the trace times the whole step as one `command_buffer_1` op."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from audit.orchestration.pipeline import analyse_profile
from audit.parsers.report_file import parse_report
from conftest import ROOT

CAPTURES = ROOT / "tests" / "data" / "captures" / "h100-jax0.11"


@pytest.fixture(scope="module")
def graphs() -> dict:
    return analyse_profile(CAPTURES / "train-step-cmdbuf.xplane.pb").to_json()


def test_the_report_lists_what_the_cuda_graph_ran_priced_as_its_op_is(graphs):
    (buffer,) = [o for o in graphs["ops"] if o["opcode"] == "command-buffer"]
    (part,) = graphs["command_buffers"]
    assert part["key"] == buffer["key"] and len(part["ops"]) == 349
    for field in ("flops", "bytes", "expected_s"):
        assert sum(op[field] for op in part["ops"]) == pytest.approx(buffer[field], rel=1e-9)
    assert Counter(op["opcode"] for op in part["ops"]) == {"fusion": 270, "custom-call": 79}
    assert parse_report(json.dumps(graphs).encode()) == graphs  # the schema accepts the part
