"""Held-out real data: the project's captures on one NVIDIA H200 (JAX 0.11.2, tests/data/captures/h200-jax0.11),
made after every catalog figure was set (the H200's from its datasheet and the H100's measurements). The chip is
recognised from the trace, the roofline stays below every measured kernel, and the kernels good libraries run
(cuBLAS GEMMs, cuDNN attention, large streams) land on their achievable time."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from audit.orchestration.pipeline import analyse_profile
from audit.reports.model.report import ReportModel

H200 = Path(__file__).parent / "data" / "captures" / "h200-jax0.11"


@cache
def report(name: str) -> ReportModel:
    return analyse_profile(H200 / f"{name}.xplane.pb")


@pytest.mark.parametrize("name", ["microbench", "train-step"])
def test_the_h200_is_recognised_and_nothing_is_flagged(name):
    r = report(name)
    assert r.hardware["name"] == "h200"
    assert "gpu_device_name 'NVIDIA H200'" in r.hardware["identified_by"]
    assert r.flagged == []
    assert all(o.expected_s is not None and o.achievable_s is not None for o in r.timed_ops)


def test_the_roofline_is_below_every_measured_kernel():
    r = report("microbench")
    for o in r.timed_ops:
        assert o.expected_s <= o.measured_s, o.name


@pytest.mark.parametrize("module, name, min_bytes", [
    ("jit_matmul", "custom-call.1", 0), ("jit_forward", "dot_product_attention_fwd", 0),
    ("jit_loss", "dot_product_attention", 0), ("jit_stream", "loop_add_fusion", 8e6)])
def test_library_kernels_reach_their_achievable_time(module, name, min_bytes):
    # cuBLAS GEMMs (45 µs to 1.36 ms), cuDNN flash attention forward and backward, and streams
    # of 8 MB and more: each within 12% of the achievable time priced from the catalog alone.
    ops = [o for o in report("microbench").timed_ops
           if o.module == module and o.name.startswith(name) and o.bytes / o.occurrences >= min_bytes]
    assert len(ops) >= 2
    for o in ops:
        assert o.achievable_s / o.measured_s == pytest.approx(1.0, abs=0.12), (o.name, o.program_id)


def test_a_training_step_is_judged_within_a_tenth_of_what_good_kernels_reach():
    s = report("train-step").summary
    assert s.steps == 3
    assert s.achievable_s / s.measured_s == pytest.approx(0.93, abs=0.07)
    assert s.expected_s < s.achievable_s < s.measured_s
