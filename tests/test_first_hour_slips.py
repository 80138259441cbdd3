"""The slips a new user makes in a first hour, each answered in one line with the right exit code:
2 for what the user typed or gave, never 3 (their workload raised) or 4 (a bug in audit)."""

from __future__ import annotations

import gzip
import re
import json
import shutil
import textwrap

import pytest

from audit.cli import main
from audit.base.errors import ExitCode
from audit.base.options import DEFAULTS
from conftest import ROOT, shared_fixture

H100_STEP = ROOT / "tests/data/captures/h100-jax0.11/train-step.xplane.pb"
REPORT = ROOT / "tests/data/reports/gemm-10daea0.json"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("word", ["train-step.xplane.pb", "../x", "runs/today"])
def test_a_path_without_inspect_is_answered_with_the_command_to_type(word, capsys):
    assert main([word]) == ExitCode.INPUT
    assert _one_line(capsys).endswith(f"audit inspect {word}")


def test_a_workload_without_run_is_answered_with_run(capsys):
    assert main(["workloads/matmul.py"]) == ExitCode.INPUT
    assert _one_line(capsys).endswith("to profile a workload and audit it: audit run workloads/matmul.py")


def test_an_existing_file_named_like_a_word_is_answered_the_same(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "profile").write_bytes(b"")
    assert main(["profile"]) == ExitCode.INPUT
    assert "audit inspect profile" in _one_line(capsys)


def test_an_unknown_word_is_still_clicks_no_such_command(capsys):
    assert main(["foo"]) == ExitCode.INPUT
    assert "No such command 'foo'" in capsys.readouterr().err


def test_an_option_typo_after_the_workload_is_not_passed_to_it(tmp_path, capsys):
    script = tmp_path / "w.py"
    script.write_text("raise SystemExit('the workload must not run')\n")
    assert main(["run", str(script), "--step", "3"]) == ExitCode.INPUT
    err = _one_line(capsys)
    assert "no option --step" in err and "did you mean --steps?" in err and "-- --step 3" in err


@pytest.mark.slow
def test_a_script_that_runs_no_jax_is_named_not_a_temporary_profile(tmp_path, capsys):
    script = tmp_path / "hello.py"
    script.write_text("print('hello')\n")
    assert main(["run", str(script), "--quiet"]) == ExitCode.INPUT
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"audit: error: {script}: ran no XLA program")
    assert "audit-run-" not in err and "plugins/profile" not in err


@pytest.mark.slow
def test_a_topology_the_chip_does_not_come_in_is_bad_input(tmp_path, capsys):
    pytest.importorskip("libtpu")
    assert main(["run", "--target", "tpu-v5e:4x5", "--quiet"]) == ExitCode.INPUT
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("audit: error: --target tpu-v5e:4x5: libtpu has no v5e:4x5 slice")


def test_hlo_text_followed_by_its_stablehlo_says_where_the_hlo_ended(tmp_path, capsys):
    import jax
    import jax.numpy as jnp

    x = jnp.ones((32, 32))
    lowered = jax.jit(lambda a, b: jnp.tanh(a @ b)).lower(x, x)
    hlo = lowered.compile().as_text()
    pasted = tmp_path / "both.txt"
    pasted.write_text(hlo + "\n" + lowered.as_text())
    assert main(["inspect", str(pasted), "--hardware", "h100", "--quiet"]) == ExitCode.INPUT
    starts = next(i for i, line in enumerate(pasted.read_text().splitlines(), 1) if line.startswith("module @"))
    err = _one_line(capsys)
    assert f"line {starts}: StableHLO (MLIR) starts here" in err and f"keep only lines 1-{starts - 1}" in err


def test_the_before_optimization_warning_names_the_program_not_its_buffer_assignment(tmp_path):
    from audit.orchestration.misleading import after_optimization_sibling

    before = tmp_path / "module_0016.jit_train_step.before_optimizations.hlo.pb"
    shutil.copy(shared_fixture("gpu-h100-maxtext/module_0016.jit_train_step.before_optimizations.hlo.pb"), before)
    stem = "module_0016.jit_train_step.sm_9.0_gpu_after_optimizations"
    for name in (f"{stem}-buffer-assignment.txt", f"{stem}-memory-usage-report.txt", f"{stem}.txt"):
        (tmp_path / name).write_text("")
    sibling = after_optimization_sibling(str(before))
    assert sibling is not None and sibling.name == f"{stem}.txt"


def test_a_json_that_is_not_a_report_is_not_called_one(tmp_path, capsys):
    other = tmp_path / "config.json"
    other.write_text('{"learning_rate": 0.001}')
    assert main(["inspect", str(other)]) == ExitCode.INPUT
    err = _one_line(capsys)
    assert "not an audit report" in err and "this is an audit JSON report" not in err
    assert main(["inspect", str(REPORT)]) == ExitCode.INPUT
    assert "this is an audit JSON report" in _one_line(capsys)


@pytest.mark.parametrize("name", ["vm.trace.json.gz", "vm.trace.json"])
def test_a_trace_viewer_json_points_at_the_xplane_beside_it(tmp_path, name, capsys):
    events = json.dumps({"displayTimeUnit": "ns", "traceEvents": []}).encode()
    (tmp_path / name).write_bytes(gzip.compress(events) if name.endswith(".gz") else events)
    shutil.copy(H100_STEP, tmp_path / "vm.xplane.pb")
    assert main(["inspect", str(tmp_path / name)]) == ExitCode.INPUT
    err = _one_line(capsys)
    assert "Trace Viewer JSON" in err and f"audit inspect {tmp_path / 'vm.xplane.pb'}" in err


def test_fp4_on_a_chip_without_an_fp4_peak_says_what_prices_it(capsys):
    assert main(["calc", "matmul", "--m", "4096", "--k", "4096", "--n", "4096", "--dtype", "fp4",
                 "--hardware", "h100"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "note: h100 states no fp4 peak: f4e2m1fn is priced at its fp8 peak" in out
    assert main(["calc", "matmul", "--m", "4096", "--k", "4096", "--n", "4096", "--dtype", "fp4",
                 "--hardware", "b200"]) == ExitCode.OK
    assert "states no fp4 peak" not in capsys.readouterr().out


@pytest.mark.parametrize("precision", ["highest", "dot_bf16_bf16_f32_x3"])
@pytest.mark.parametrize("chip", ["h100", "tpu-v5e"])
def test_the_precision_line_names_the_precision_once(precision, chip, capsys):
    assert main(["calc", "matmul", "--m", "1024", "--k", "1024", "--n", "1024", "--dtype", "f32",
                 "--precision", precision, "--hardware", chip]) == ExitCode.OK
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("precision ")]
    assert line.count(precision) == 1, line


def test_hardware_list_writes_json_with_every_entry(capsys):
    assert main(["hardware", "list", "--json"]) == ExitCode.OK
    listed = json.loads(capsys.readouterr().out)
    names = {e["name"] for e in listed}
    assert {"h100", "tpu-v5e", "mi300x"} <= names
    h100 = next(e for e in listed if e["name"] == "h100")
    assert h100["from"] == "catalog" and h100["peak_flops_per_s"]["bf16"] > 1e14


def test_plan_model_and_plan_train_save_the_same_checkpoints_per_layer(capsys):
    # plan model states one default; plan train states none for the old knob (its --remat policy says what
    # is kept) and its closed forms fall back to the same figure.
    from audit.costmodel.planner.transformer import lookup_model
    from audit.costmodel.planner.train import TrainSetup

    assert main(["plan", "model", "--help"]) == ExitCode.OK
    text = " ".join(capsys.readouterr().out.split())
    assert f"[default: {DEFAULTS.plan_checkpoints_per_layer};" in text.split("--checkpoints-per-layer")[1][:200]
    assert main(["plan", "train", "--help"]) == ExitCode.OK
    text = " ".join(capsys.readouterr().out.split())
    assert "[default: auto]" in text.split("--remat")[1][:400]
    assert "[default:" not in text.split("--checkpoints-per-layer")[1].split("--")[0]
    cfg = lookup_model("llama3-8b")
    assert TrainSetup(1e9, 1e6, 8).closed_form_checkpoints(cfg) == DEFAULTS.plan_checkpoints_per_layer


@pytest.mark.slow
def test_an_unknown_option_after_double_dash_still_goes_to_the_workload(tmp_path, capsys):
    script = tmp_path / "w.py"
    script.write_text(textwrap.dedent("""\
        import sys
        raise SystemExit(0 if sys.argv[1:] == ["--step", "3"] else 5)
    """))
    code = main(["run", str(script), "--quiet", "--", "--step", "3"])
    assert code == ExitCode.INPUT  # it ran (with its arguments) and ran no JAX
    assert "ran no XLA program" in capsys.readouterr().err


def test_the_trace_export_of_the_a100_job_marks_its_flagged_op(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for i in range(4):
        (job / f"proc{i}.zip").symlink_to(shared_fixture(f"gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc{i}.zip"))
    trace, report = tmp_path / "job.json.gz", tmp_path / "job.json"
    assert main(["inspect", str(job), "--quiet", "--trace", str(trace), "--json", str(report)]) == ExitCode.OK
    flagged = {o["name"] for o in json.loads(report.read_text())["ops"] if o["flagged"]}
    # The fusion runs at about half its achievable time; the reduce-scatter is hidden by the schedule and
    # its overlap is not measured, so it is not judged.
    assert flagged == {"input_convert_reduce_fusion.13"}
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    slices = [e for e in events if e["ph"] == "X" and e["cat"] == "flagged"]
    marks = [e for e in events if e["ph"] == "i" and e["cat"] == "flagged"]
    assert slices and {e["args"].get("judged_as", e["name"]) for e in slices} == flagged
    assert len(marks) == len(slices) and {m["name"] for m in marks} == {f"flagged: {name}" for name in flagged}
    flag_tracks = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["args"].get("name") == "flags"}
    assert {(m["pid"], m["tid"]) for m in marks} <= flag_tracks


def test_the_programs_of_one_name_in_a_microbenchmark_are_told_apart_by_shape(tmp_path, capsys):
    out = tmp_path / "mb.json"
    assert main(["inspect", str(ROOT / "tests/data/captures/h200-jax0.11/microbench.xplane.pb"), "--quiet",
                 "--json", str(out)]) == ExitCode.OK
    rows = json.loads(out.read_text())["programs"]
    matmuls = [r for r in rows if r["module"] == "jit_matmul"]
    assert len(matmuls) >= 5
    assert len({r["largest_op"] for r in matmuls}) == len(matmuls)
    assert all(re.fullmatch(r"\S+ (bf16|f32)\[[\d,]+\]", r["largest_op"]) for r in matmuls), matmuls


def test_an_a100_40gb_is_priced_as_the_40gb_part_not_the_80gb_datasheet():
    from audit.costmodel.chips.detect import hardware_from_trace

    stats = {"device_name": "NVIDIA A100-SXM4-40GB", "compute_cap_major": 8, "compute_cap_minor": 0,
             "core_count": 108, "memory_bandwidth": 1555200000000, "memory_size": 42505273344}
    hw = hardware_from_trace("gpu", {"/device:GPU:0": stats})
    assert hw.hbm_bytes is not None and hw.hbm_bytes.value == 42505273344 and hw.hbm_bytes_per_s.value == 1.5552e12
    assert hw.name == "a100-40gb" and hw.hbm_bytes_per_s.source == "trace"
    assert hw.achievable is not None and hw.achievable.memory_bytes_per_s.value < hw.hbm_bytes_per_s.value
    same = hardware_from_trace("gpu", {"/device:GPU:0": {**stats, "device_name": "NVIDIA A100-SXM4-80GB",
                                                          "memory_size": 85e9, "memory_bandwidth": 2.039e12}})
    assert same.name == "a100" and not any("another part" in n for n in same.notes)
