"""CUDA graphs (XLA's command buffers) on a real H100 with JAX 0.11.2: the same training step captured as
XLA runs it by default (one `command_buffer_1` op per step) and with `--xla_gpu_enable_command_buffer=`
(one op per kernel); `audit run` on a GPU platform turns them off unless the user chose."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit.child.capture import configure_environment
from audit.optable.command_buffers import RECAPTURE, contents
from audit.orchestration.analysis import cost_modules
from audit.orchestration.runner import Capture, RunRequest, run_source
from audit.parsers.hlo.text import parse_hlo_text
from conftest import read_hosts
from conftest import H100_CAPTURES, render

CAPTURES = H100_CAPTURES
FLAG = "--xla_gpu_enable_command_buffer="


@pytest.fixture(scope="module")
def step_program():
    module = read_hosts(CAPTURES / "train-step-cmdbuf.xplane.pb")[0].modules[0]
    return module, cost_modules({0: module}, None)[0]


def _buffer(report: dict) -> dict:
    (op,) = [o for o in report["ops"] if o["opcode"] == "command-buffer"]
    return op


def test_a_cuda_graph_is_priced_as_the_ops_it_runs(h100_step_graphs, h100_step):
    op = _buffer(h100_step_graphs)
    assert op["name"] == "command_buffer_1" and op["occurrences"] == 3 and op["verdict"] == "ok"
    # The same program captured one kernel per op: every op it runs has its own row there. The two
    # compiles differ only in the library autotuning chose for 16 GEMMs (cuBLAS in one, Triton in the
    # other), priced alike, so the graph's expected and achievable times are those rows' sums.
    timed = [o for o in h100_step["ops"] if o["measured_s"] is not None]
    assert op["expected_s"] == pytest.approx(sum(o["expected_s"] for o in timed), rel=0.01)
    assert op["achievable_s"] == pytest.approx(sum(o["achievable_s"] for o in timed), rel=0.01)
    assert op["expected_s"] <= op["achievable_s"] <= op["measured_s"] * 1.05
    assert op["flops"] == pytest.approx(sum(o["flops"] or 0 for o in timed), rel=0.01)
    assert "419 kernels" in op["reasons"][0] and "349 ops (270 fusions, 79 custom-calls" in op["reasons"][0]


def test_the_step_is_no_longer_a_report_of_dashes(h100_step_graphs, h100_step):
    s, t = h100_step_graphs["summary"], h100_step["summary"]
    assert s["expected_s"] == pytest.approx(t["expected_s"], rel=0.01)
    assert s["expected_step_s"] == pytest.approx(t["expected_step_s"], rel=0.01)
    assert s["roofline_fraction"] == pytest.approx(t["roofline_fraction"], abs=0.02)
    assert s["unmodeled_ops"] == 0 and h100_step_graphs["matching"]["matched_share"] == 1.0
    head = render(h100_step_graphs, "terminal").split("top 1 ops")[0]
    assert "—" not in head and "expected 187 ms" in head


def test_the_report_says_at_the_top_how_to_time_each_op(h100_step_graphs):
    assert h100_step_graphs["warnings"][0].startswith("1 command buffer(s) ran as CUDA graphs (command_buffer_1)")
    assert RECAPTURE in h100_step_graphs["warnings"][0] and FLAG in RECAPTURE
    lines = render(h100_step_graphs, "terminal").splitlines()
    assert next(i for i, ln in enumerate(lines) if FLAG in ln) < next(i for i, ln in enumerate(lines) if "top 1" in ln)


def test_one_buffer_runs_every_op_the_trace_does_not_time(step_program, h100_step):
    module, costs = step_program
    ops = contents(module, costs, {"command_buffer_1"})["command_buffer_1"].ops
    other = {o["name"] for o in h100_step["ops"] if o["measured_s"] is not None}
    assert len(ops) == len(other) == 349
    # The GEMMs autotuning gave to cuBLAS in one compile and to Triton in the other; the rest by name.
    cublas = set(ops) - other
    assert len(cublas) == 16 and all(module.find(n)[1].custom_call_target.startswith("__cublas") for n in cublas)
    assert len(other - set(ops)) == 16 and all(n.startswith("gemm_fusion_dot") for n in other - set(ops))
    assert set(ops.values()) == {1}


def test_several_buffers_take_the_runs_between_timed_ops_in_order(step_program):
    module, costs = step_program
    whole = contents(module, costs, {"command_buffer_1"})["command_buffer_1"].ops
    order = [n for n in module.schedule[module.entry] if n in whole]
    cut = order[100]  # an op XLA left out of the graphs, so the trace times it on its own
    found = contents(module, costs, {"command_buffer_1", "command_buffer_2", cut})
    first, second = found["command_buffer_1"].ops, found["command_buffer_2"].ops
    assert list(first) == order[:100] and list(second) == order[101:]
    three = contents(module, costs, {"command_buffer_1", "command_buffer_2", "command_buffer_3", cut})
    assert all("which buffer runs which ops is not known" in c.problem and not c.ops for c in three.values())


# XLA's CommandBufferScheduling pass (until 2025) outlined each run of ops into a computation named
# `command_buffer` and called it; the trace then names the call.
CALLED = """HloModule step, is_scheduled=true

%fused_exp (p: f32[1024,1024]) -> f32[1024,1024] {
  %p = f32[1024,1024]{1,0} parameter(0)
  ROOT %e = f32[1024,1024]{1,0} exponential(%p)
}

%command_buffer (p0: f32[1024,1024]) -> f32[1024,1024] {
  %p0 = f32[1024,1024]{1,0} parameter(0)
  %loop_exp_fusion = f32[1024,1024]{1,0} fusion(%p0), kind=kLoop, calls=%fused_exp
  ROOT %loop_exp_fusion.1 = f32[1024,1024]{1,0} fusion(%loop_exp_fusion), kind=kLoop, calls=%fused_exp
}

ENTRY %main (a: f32[1024,1024]) -> f32[1024,1024] {
  %a = f32[1024,1024]{1,0} parameter(0)
  %call = f32[1024,1024]{1,0} call(%a), to_apply=%command_buffer
  ROOT %copy = f32[1024,1024]{1,0} copy(%call)
}
"""


def test_a_called_command_buffer_runs_its_computations_ops():
    module = parse_hlo_text(CALLED)
    costs = cost_modules({0: module}, None)[0]
    found = contents(module, costs, {"call", "copy"})
    assert set(found) == {"call"} and dict(found["call"].ops) == {"loop_exp_fusion": 1, "loop_exp_fusion.1": 1}
    assert "command_buffer" in found["call"].how


@given(st.sampled_from([None, "cpu", "tpu", "cuda", "rocm", "gpu", "cuda,cpu"]),
       st.sampled_from(["", "--xla_dump_to=/tmp/d", f"{FLAG}FUSION,CUBLAS", FLAG, "--xla_gpu_enable_command_buffer"]))
def test_a_gpu_run_turns_command_buffers_off_unless_the_user_chose(platform, user):
    flags = configure_environment({"XLA_FLAGS": user}, None, platform)["XLA_FLAGS"]
    gpu = platform is not None and bool({"cuda", "rocm", "gpu"} & set(platform.split(",")))
    mentions = re.findall(r"--xla_gpu_enable_command_buffer\S*", flags)
    if "command_buffer" in user:
        assert mentions == user.split()[-1:]  # the user's choice, as they wrote it, alone
    else:
        assert mentions == ([FLAG] if gpu else [])
    assert set(user.split()) <= set(flags.split())


@pytest.mark.slow
def test_the_run_records_the_flag_and_the_report_source_says_so(tmp_path):
    script = tmp_path / "step.py"
    script.write_text("print('one step')\n")
    out = tmp_path / "out"
    # No GPU here: the run fails where JAX starts CUDA, after the child recorded what it set.
    subprocess.run([sys.executable, "-P", "-m", "audit.child.capture", str(script), "--out", str(out),
                    "--platform", "cuda", "--quiet"], capture_output=True, timeout=300)
    record = json.loads((out / "audit_run.json").read_text())
    assert list(record["xla_flags_added"]) == [FLAG] and "command buffers" in record["xla_flags_added"][FLAG]
    source = run_source(Capture(3, None, record), RunRequest(script=script, platform="cuda"), "audit run", False)
    assert source["xla_flags_added"] == record["xla_flags_added"]
    cpu = run_source(Capture(0, None, {}), RunRequest(script=script), "audit run", False)
    assert "xla_flags_added" not in cpu
