"""Per-op overhead only for ops that launch work, and overhead figures that real kernels never beat."""

from __future__ import annotations

from collections import Counter

import pytest

from audit.costmodel.chips.catalog import CATALOG
from audit.orchestration.pipeline import analyse_hlo
from conftest import shared_fixture

# Opcodes that never run a kernel or move data of their own.
_NO_WORK = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
            "opt-barrier", "add-dependency", "while", "call", "conditional"}


@pytest.fixture(scope="module")
def maxtext_h100():
    path = shared_fixture("gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb")
    return analyse_hlo(path, hardware="h100:4").to_json()


def _wrapped(op: dict) -> bool:
    return any(r.startswith("costed on ") and "async-start that wraps it" in r for r in op["reasons"])


def test_ops_that_launch_nothing_expect_no_time_on_the_h100_maxtext_step(maxtext_h100):
    ops = maxtext_h100["ops"]
    idle = [o for o in ops if o["launches_work"] is False]
    # 631 get-tuple-element, 447 bitcast, 87 parameter, 22 dones, the ops wrapped in async-starts...
    assert len(idle) > 1200
    assert [o["name"] for o in idle if o["expected_s"] != 0.0] == []
    by_opcode = Counter(o["opcode"] for o in idle)
    assert by_opcode["get-tuple-element"] == 631 and by_opcode["bitcast"] == 447
    # Every op of those kinds is in that set: a done, an op costed on its async-start, metadata.
    named = [o for o in ops if o["opcode"] in _NO_WORK or o["opcode"].endswith("-done") or _wrapped(o)]
    assert len(named) == len(idle)
    assert all(o["launches_work"] is False and o["expected_s"] == 0.0 for o in named)
    # The wrapped collective costs nothing itself; its async-start carries it, overhead included.
    starts = [o for o in ops if o["opcode"] == "async-start"]
    assert starts and all(o["launches_work"] and o["expected_s"] > 0 for o in starts)


def test_ops_that_launch_work_pay_the_overhead_once(maxtext_h100):
    overhead = CATALOG["h100"].op_overhead_s.value
    assert maxtext_h100["hardware"]["op_overhead_s"] == overhead
    assert maxtext_h100["hardware"]["op_overhead_s_source"] == "catalog"  # a figure with a source, not the trace's
    working = [o for o in maxtext_h100["ops"] if o["launches_work"] and not o["container"]]
    assert working
    for o in working:
        terms = [t for t in (o["compute_s"], o["memory_s"], o["comm_s"]) if t is not None]
        assert o["expected_s"] == pytest.approx(max(terms) + overhead * o["occurrences"], rel=1e-9)


def test_overhead_figures_have_a_source_not_an_estimate():
    for hw in CATALOG.values():
        if hw.kind in ("gpu", "tpu"):
            q = hw.op_overhead_s
            assert q is not None and q.source == "catalog"
            assert "estimate" not in q.note and q.note


@pytest.mark.slow
def test_gpu_overhead_is_below_every_real_mi300x_kernel():
    # The overhead is added to every kernel's expected time, so a real kernel shorter than it
    # would beat its own lower bound. The shortest kernel in the MI300X captures: 1.9 us.
    import json
    import subprocess
    import sys

    shortest = []
    for capture in ("gemm", "attention", "elementwise", "conv3d-8gpu"):
        done = subprocess.run([sys.executable, "-m", "audit", "inspect",
                               str(shared_fixture(f"gpu-mi300x/{capture}.xplane.pb")), "--quiet", "--json", "-"],
                              capture_output=True, text=True, check=True)
        shortest += [o["measured_s"] / o["occurrences"] for o in json.loads(done.stdout)["ops"]
                     if not o["container"] and o["measured_s"] and o["occurrences"]]
    assert min(shortest) == pytest.approx(1.93e-6, rel=0.01)
    assert CATALOG["mi300x"].op_overhead_s.value < min(shortest)


def test_the_overhead_never_comes_from_the_trace_it_judges(monkeypatch):
    # GIVEN a real MI300X capture judged on a chip whose per-op overhead (say, calibrated on a busy
    # machine) is longer than its fastest kernel
    from dataclasses import replace

    from audit.costmodel.chips import catalog, hardware
    from audit.orchestration.pipeline import analyse_profile

    slow = replace(CATALOG["mi300x"], op_overhead_s=hardware.Quantity(50e-6, "s", "calibrated", "a busy machine"))
    monkeypatch.setitem(catalog.CATALOG, "mi300x", slow)
    report = analyse_profile(shared_fixture("gpu-mi300x/elementwise.xplane.pb"), hardware="mi300x").to_json()
    # THEN the report keeps the figure it was given: an expectation is never set from the
    # measurement it judges, so the trace's fastest kernel does not lower it
    assert report["hardware"]["op_overhead_s"] == 50e-6
    assert not any("capped" in n for n in report["hardware"]["notes"])
    working = [o for o in report["ops"] if o["launches_work"] and not o["container"] and o["measured_s"]]
    for o in working:
        terms = [t for t in (o["compute_s"], o["memory_s"], o["comm_s"]) if t is not None]
        assert o["expected_s"] == pytest.approx(max(terms) + 50e-6 * o["occurrences"], rel=1e-9)


def test_events_at_the_timer_resolution_are_not_launches():
    from audit.costmodel.costs import OpCost
    from audit.optable.judge import AT_TIMER_RESOLUTION, not_judged

    hw = CATALOG["h100"]
    work = OpCost(flops=1e6, bytes_read=1e6, bytes_written=1e6, dtype="bf16")
    # 3 runs of 1 ns each: markers, not kernels; 3 runs of 2 us: judged
    assert not_judged(work, 3e-9, hw, occurrences=3) == AT_TIMER_RESOLUTION
    assert not_judged(work, 6e-6, hw, occurrences=3) == ""


def test_simulated_cpu_collectives_are_not_judged_on_any_chip_they_are_projected_onto():
    from audit.costmodel.costs import OpCost
    from audit.optable.judge import SIMULATED_COLLECTIVE, not_judged

    gather = OpCost(flops=0.0, bytes_read=1e6, bytes_written=8e6, dtype="f32", comm_bytes=7e6)
    assert not_judged(gather, 1e-3, CATALOG["h100"], measured_on="cpu") == SIMULATED_COLLECTIVE
    assert not_judged(gather, 1e-3, CATALOG["h100"], measured_on="gpu") == ""
