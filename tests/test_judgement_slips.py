"""What the reports say about real captures, read as an expert reads them: every number as it is,
with its unit and source, no claim the figures beside it contradict, in every format."""

from __future__ import annotations

from dataclasses import replace

import re
import statistics
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jaxlib import _hlo

from audit.costmodel import units as qty
from audit.base.options import Thresholds
from audit.optable.suggest import NEAR_ACHIEVABLE
from audit.orchestration.pipeline import analyse_hlo, analyse_profile
from audit.orchestration.analysis import Options
from audit.parsers.xplane.schema import XSpace
from audit.reports.model.report import ReportModel
from audit.reports.render import Format, ReportRenderer
from audit.reports.sections import RenderOptions
from conftest import ROOT, shared_fixture
from test_events_tpu import LINE_NS, PROGRAM, PROGRAM_AS_INT64, _Plane
from test_opaque_kernels import _pallas_profile

H100_MICROBENCH = ROOT / "tests/data/captures/h100-jax0.11/microbench.xplane.pb"
MAXTEXT = "gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb"


@cache
def report(name: str) -> ReportModel:
    """The report of one real MI300X capture (tests/data/fixtures/gpu-mi300x/NAME.xplane.pb)."""
    return analyse_profile(shared_fixture(f"gpu-mi300x/{name}.xplane.pb"))


def text(r: ReportModel, fmt: Format) -> str:
    return ReportRenderer(r).render(fmt, RenderOptions(top=40))


def test_a_mean_run_count_shows_its_fraction_in_every_format():
    # conv3d-8gpu: input_transpose_fusion.1 ran 39 times over 8 GPUs, 4.875 times per device; the
    # terminal and markdown printed "4", the page's table "4.875".
    r = report("conv3d-8gpu")
    (op,) = [o for o in r.ops if o.name == "input_transpose_fusion.1"]
    assert op.occurrences == pytest.approx(4.875) and op.devices == 8
    terminal = next(line for line in text(r, Format.TERMINAL).splitlines()
                    if line.startswith("input_transpose_fusion.1 "))
    assert re.search(r"\s8\s+4\.875\s", terminal)
    markdown = next(line for line in text(r, Format.MARKDOWN).splitlines()
                    if line.startswith("| input\\_transpose\\_fusion.1 |"))
    assert "| 8 | 4.875 |" in markdown


@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
def test_a_count_reads_back_to_three_decimals(value):
    assert float(qty.count(value).replace(",", "")) == pytest.approx(value, abs=5e-4 + 1e-12 * abs(value))


def _tpu_profile(tmp_path: Path, hlo: str, op: str, launch_ps: int = 75_750_000) -> Path:
    """One TPU v6e device running `op` of the program `hlo` three times, as libtpu writes it."""
    space = XSpace(hostnames=["t1v"])
    meta = _Plane(space.planes.add(name="/host:metadata"))
    entry = meta.plane.event_metadata[PROGRAM_AS_INT64]
    entry.id, entry.name = PROGRAM_AS_INT64, f"jit_f({PROGRAM})"
    meta.add_stat(entry.stats, "Hlo Proto", _hlo.hlo_module_from_text(hlo).as_serialized_hlo_module_proto())
    plane = _Plane(space.planes.add(name="/device:TPU:0", id=0))
    plane.add_stat(plane.plane.stats, "device_type_string", "TPU v6 Lite")
    plane.metadata(1, f"%{op} = custom-call(...)", op, symbol_id=1, program_id=PROGRAM)
    plane.metadata(9, f"jit_f({PROGRAM})")
    modules = plane.plane.lines.add(id=2, name="XLA Modules", timestamp_ns=LINE_NS)
    ops = plane.plane.lines.add(id=3, name="XLA Ops", timestamp_ns=LINE_NS)
    for launch in range(3):
        t0 = LINE_NS * 1000 + launch * 200_000_000
        plane.event(modules, 9, t0, 100_000_000, run_id=launch + 1)
        plane.event(ops, 1, t0 + 1_000_000, launch_ps)
    path = tmp_path / "t1v.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


def _verdict_text(r: ReportModel) -> dict[Format, str]:
    """The verdict of each text format: the terminal's head (the verdict line, then the figures under it),
    the markdown's verdict, the page's stats; the step's findings (shares of the step, not fractions of a
    roofline) are left out, as these tests are about the verdict's figures."""
    r = replace(r, parts={k: v for k, v in r.parts.items() if k != "findings"})
    terminal = "\n\n".join(text(r, Format.TERMINAL).split("\n\n")[:2])
    markdown = text(r, Format.MARKDOWN).split("### ")[0]
    page = text(r, Format.HTML)
    return {Format.TERMINAL: terminal, Format.MARKDOWN: markdown,
            Format.HTML: page[page.index('class="headline"'):page.index('class="breakdown"')]}


def test_no_fraction_is_printed_for_no_judged_op(tmp_path):
    # The only op is an opaque Pallas kernel whose bound is its bytes: "bound only", not judged. The
    # terminal printed "roofline fraction of the judged ops 27.0%" and the headline "Judged ops ran at
    # 27.0% of their roofline".
    r = analyse_profile(_pallas_profile(tmp_path))
    (op,) = r.timed_ops
    assert op.verdict == "bound only"
    assert r.summary.roofline_fraction is None and r.summary.achievable_fraction is None
    assert r.to_json()["summary"]["judged_ops"] == 0
    for fmt, said in _verdict_text(r).items():
        assert "%" not in said.split("Most op time")[0].split("time by bound")[0], fmt
        assert "no op is judged: 1 op is bound only" in said.lower(), fmt
    assert "none judged" in _verdict_text(r)[Format.MARKDOWN]


def test_a_profile_none_of_whose_ops_has_a_cost_says_so_in_words(tmp_path):
    hlo = 'HloModule m\nENTRY e {\n  ROOT c = token[] custom-call(), custom_call_target="vendor_kernel"\n}\n'
    r = analyse_profile(_tpu_profile(tmp_path, hlo, "c"))
    assert [o.verdict for o in r.timed_ops] == ["unknown"]
    s = r.to_json()["summary"]
    # No expected time anywhere: the overlapped step is unknown, not 0 s.
    assert s["expected_s"] is None and s["expected_step_s"] is None and s["exposed_comm_s"] is None
    for fmt, said in _verdict_text(r).items():
        assert qty.UNKNOWN not in said and " 0 s with async overlap" not in said, fmt
        assert "no op has an expected time" in said.lower() or "1 op has no cost model" in said.lower(), fmt


LESS_WORK = ("fewer FLOPs", "Fuse this op", "lower-precision", "fewer bytes", "arithmetic intensity", "Batch small")


def _advice(r: ReportModel) -> list[tuple[float, str]]:
    return [(o.achievable_fraction, o.suggestion) for o in r.flagged if o.achievable_fraction is not None]


def test_an_op_far_below_its_achievable_time_is_told_to_look_at_its_kernel():
    # The MI300X attention capture's GEMM fusion runs at 33% of what the best GEMMs reach (the fastest
    # hipBLASLt GEMM of the MI300X captures); it was told "Already compute-bound: gains need fewer FLOPs"
    # (the advice for an op at its ceiling).
    r = report("attention")
    (op,) = [o for o in r.flagged if o.name == "gemm_fusion_dot_general.1"]
    assert op.bound_by == "compute" and op.achievable_fraction == pytest.approx(0.33, abs=0.01)
    assert op.suggestion.startswith("At 3.0x its achievable time the kernel, not the work, is the gap")
    assert "tiling" in op.suggestion and not any(w in op.suggestion for w in LESS_WORK)


def test_gemms_projected_onto_an_mi355x_at_40_percent_get_kernel_advice():
    r = analyse_profile(shared_fixture("gpu-mi300x/gemm.xplane.pb"), hardware="mi355x")
    gemms = [o for o in r.flagged if o.custom_call_target.startswith("__") or "gemm" in o.name]
    assert gemms and all(o.achievable_fraction < 0.5 for o in gemms)
    for o in gemms:
        assert "the kernel, not the work, is the gap" in o.suggestion and "compute-bound" not in o.suggestion


@pytest.mark.parametrize("name", ["attention", "conv3d-8gpu", "elementwise"])
def test_every_suggestion_matches_the_distance_from_the_achievable_time(name):
    # The default threshold flags only ops below half their achievable time: all far. A threshold of
    # 0.95 also flags ops near it (elementwise: loop fusions at 82-89%), which only less work can speed up.
    strict = analyse_profile(shared_fixture(f"gpu-mi300x/{name}.xplane.pb"),
                             options=Options(Thresholds(min_efficiency=0.95)))
    advice = _advice(report(name)) + _advice(strict)
    assert advice
    for reach, said in advice:
        far = reach < NEAR_ACHIEVABLE
        assert ("is the gap: look at" in said) == far, (reach, said)
        assert any(w in said for w in LESS_WORK) == (not far), (reach, said)
    assert any(reach >= NEAR_ACHIEVABLE for reach, _ in advice) or name != "elementwise"


def test_a_capture_of_many_programs_expects_each_program_per_execution():
    # 42 executions of 16 different programs: the report set an "expected step" of 51.3 us (the mean
    # over all executions) beside a median measured step of 10.1 us.
    r = report("gemm")
    s = r.to_json()["summary"]
    assert s["programs"] == 16 and s["steps"] == 42
    assert s["expected_step_s"] is None and s["expected_op_step_s"] is None and s["achievable_step_s"] is None
    runs: dict[int, list[float]] = {}
    for step in r.steps:
        runs.setdefault(step["program_id"], []).append(step["time_s"])
    rows = r.part("programs")
    assert rows and sum(row["executions"] for row in rows) == 42
    for row in rows:
        ops = [o for o in r.timed_ops if o.program_id == row["program_id"]]
        assert row["executions"] == len(runs[row["program_id"]])
        assert row["measured_s"] == pytest.approx(statistics.median(runs[row["program_id"]]))
        assert row["expected_s"] * row["executions"] == pytest.approx(sum(o.expected_s for o in ops))
        assert row["achievable_s"] >= row["expected_s"] > 0
    biggest = rows[0]  # program 49, three 8192^3-class GEMMs: 587 us measured per run, 421 us expected
    assert biggest["program_id"] == 49 and biggest["executions"] == 3
    for fmt in (Format.TERMINAL, Format.MARKDOWN, Format.HTML):
        said = text(r, fmt)
        assert "expected step" not in said.lower() and "51.3 µs" not in said, fmt
        row = next(line for line in said.splitlines() if "587 µs" in line)
        assert "421 µs" in row and "601 µs" in row, fmt  # measured, expected, achievable side by side


def test_every_program_of_a_benchmark_is_listed_even_those_tied_to_no_launch():
    # The H100 microbenchmark: 25 programs run 5 times each; the trace ties the kernels of 13 of them
    # (Triton GEMMs and the f32 streams) to no launch, so only 12 form steps.
    r = analyse_profile(H100_MICROBENCH)
    rows = r.part("programs")
    assert r.summary.programs == 25 and len(rows) == 25
    assert {row["program_id"] for row in rows} == {o.program_id for o in r.timed_ops}
    assert all(row["executions"] == 5 for row in rows)
    assert sum(1 for row in rows if row["measured_s"] is None) == 13
    # The table accounts for every op's time and expectation.
    assert sum(row["op_time_s"] * row["executions"] for row in rows) == pytest.approx(r.summary.measured_s)
    assert sum(row["expected_s"] * row["executions"] for row in rows) == pytest.approx(r.summary.expected_s)


def test_the_steps_of_one_program_keep_their_expected_step():
    r = report("conv3d-8gpu")  # one program on 8 GPUs, 5 executions
    s = r.summary
    assert s.programs is None and r.part("programs") is None
    assert s.expected_op_step_s == pytest.approx(s.expected_s / 5)
    assert "expected step" in text(r, Format.TERMINAL)


def test_ops_of_programs_that_share_a_module_name_are_told_apart():
    # The microbenchmark's 25 programs are all jit__lambda: the flagged list read
    # "dot_product_attention_bwd.8 (jit__lambda)" twice, for two different kernels. Judged against a
    # B200 (the H100's own kernels now reach their achievable time), the GEMMs of several programs,
    # all named custom-call.1, are flagged.
    r = analyse_profile(H100_MICROBENCH, hardware="b200")
    flagged = [o for o in r.flagged if o.name == "custom-call.1"]
    assert len({o.program_id for o in flagged}) >= 2
    terminal, markdown = text(r, Format.TERMINAL), text(r, Format.MARKDOWN)
    for o in flagged:
        assert f"custom-call.1 (jit__lambda, program {o.program_id})" in terminal
        assert f"jit\\_\\_lambda, program {o.program_id}" in markdown
    head = next(line for line in terminal.splitlines() if line.startswith("Op "))
    assert "Program" in head
    single = report("conv3d-8gpu")
    assert "Program" not in next(line for line in text(single, Format.TERMINAL).splitlines() if line.startswith("Op "))


def test_a_prediction_does_not_say_its_collectives_were_measured():
    # The MaxText step's HLO priced on 4 H100s: nothing ran, yet the collectives were listed as
    # "expected [model] and measured [trace]".
    r = analyse_hlo(shared_fixture(MAXTEXT), hardware="h100:4")
    line = next(x for x in text(r, Format.TERMINAL).splitlines() if "collective(s) per execution" in x)
    assert line.endswith("expected [model]:") and "[trace]" not in line


def test_a_predicted_step_is_not_labelled_as_a_measured_median():
    # The Llama3-8B step's HLO priced on a v6e-8: the verdict table read "Step time (median) 3.09 s,
    # min 3.09 s, max 3.09 s", and its latency share "0.0%" of a time that is not zero.
    r = analyse_hlo(shared_fixture("tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"),
                    hardware="tpu-v6e:8")
    assert 0 < r.summary.time_by_bound_s["latency"] < 1e-3 * sum(r.summary.time_by_bound_s.values())
    markdown = _verdict_text(r)[Format.MARKDOWN]
    table = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| Predicted step |") and "median" not in markdown and "| min |" not in markdown
    for said in (markdown, text(r, Format.TERMINAL), text(r, Format.HTML)):
        assert "latency <0.1%" in said or "&lt;0.1%</td>" in said
        assert "latency 0.0%" not in said and ">0.0%<" not in said


def test_the_headline_share_of_op_time_leaves_idle_time_out():
    # conv3d-8gpu: memory-bound ops are 63.5% of op and idle time together, 99.4% of op time; the
    # headline said "Most op time is memory-bound (63.5%)".
    r = report("conv3d-8gpu")
    by_bound = r.summary.time_by_bound_s
    share = by_bound["memory"] / sum(by_bound.values())
    assert share > 0.99 and r.summary.idle_s > 0.3 * sum(by_bound.values())
    said = _verdict_text(r)
    for fmt in (Format.MARKDOWN, Format.HTML):  # the terminal states the split with idle time named
        assert f"Most op time is memory-bound ({qty.percent(share)})" in said[fmt], fmt


def test_a_compute_bound_ops_achievable_time_names_the_compute_figure_that_set_it():
    # The H100 flash-attention backward: "349 us achievable from HBM 2.97 TB/s; shortest kernel 2.00 us"
    # where the 349 us was its FLOPs at the bf16 peak; now the attention rate that sets it is named.
    r = analyse_profile(H100_MICROBENCH)
    compute_bound = [o for o in r.timed_ops if o.bound_by == "compute" and o.achievable_s]
    assert any(o.name.startswith("dot_product_attention") for o in compute_bound)
    for o in compute_bound:
        named = ("matmul", "attention", "compute at the peak")
        assert any(n in o.achievable_source for n in named), (o.name, o.achievable_source)


def test_the_executions_of_a_benchmark_are_every_programs_runs():
    # 25 programs run 5 times each: the verdict said "60 traced executions" (only the steps the trace
    # ties to a launch) beside a programs table whose runs add up to 125.
    r = analyse_profile(H100_MICROBENCH)
    assert sum(row["executions"] for row in r.part("programs")) == 125 and r.summary.steps == 60
    said = _verdict_text(r)
    assert "25 different programs run 125 times" in said[Format.TERMINAL]
    assert "| 25 | 125 |" in said[Format.MARKDOWN]
    assert ">125 executions:" in said[Format.HTML] and "60 step" not in said[Format.HTML]


def test_a_predictions_page_states_no_measured_spread_hosts_or_flags():
    # The Llama3-8B step priced on a v6e-8: the page read "Predicted step time 3.09 s, min 3.09 s · max
    # 3.09 s", "0 host(s) · 0 step(s)" and "Flagged ops 0: far from their achievable time".
    r = analyse_hlo(shared_fixture("tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"),
                    hardware="tpu-v6e:8")
    page = _verdict_text(r)[Format.HTML]
    assert "Predicted step time" in page and "min " not in page and "0 host(s)" not in page
    assert ">Flagged ops<" not in page
