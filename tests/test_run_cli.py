"""`audit run` end to end: each reference workload profiled on 8 simulated CPU devices, then audited."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import render

from audit.cli import main

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ROOT / "workloads"
MODEL = ["--d-model", "64", "--d-ff", "128", "--heads", "8", "--vocab", "128", "--layers", "1"]

# workload, its smallest arguments, the collectives the book says its profile must show
# (exactly, for the single-purpose workloads; at least, for the models, where XLA may add reshuffles)
CASES = [
    ("matmul", ["--d", "64", "--f", "64", "--batches", "8,64"], set()),
    ("sharded_matmul", ["--i", "64", "--j", "64", "--k", "128"], {"all-gather", "all-reduce", "reduce-scatter"}),
    ("collectives", ["--sizes", "1024,16384"], {"all-gather", "reduce-scatter", "all-reduce", "all-to-all"}),
    ("transformer", [*MODEL, "--seq", "16", "--sharding", "fsdp"], {"all-gather", "all-reduce"}),
    ("decode", [*MODEL, "--max-len", "32", "--prompt", "8"], {"all-reduce"}),
]


def audit_run(capsys, *argv: str) -> tuple[int, dict | None, str]:
    """Run `audit run ARGV --json -` in process; return the exit code, the parsed report and stderr."""
    code = main(["run", "--json", "-", *argv])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else None), captured.err


def ops_of(report: dict, module: str | None = None) -> list[dict]:
    return [o for o in report["ops"] if module is None or o["module"] == module]


@pytest.mark.parametrize("name, args, collectives", CASES, ids=[c[0] for c in CASES])
@pytest.mark.slow
def test_each_reference_workload_is_profiled_step_by_step_with_its_collectives(capsys, name, args, collectives):
    code, report, err = audit_run(capsys, str(WORKLOADS / f"{name}.py"), "--devices", "8", "--steps", "2",
                                  "--warmup", "1", "--", *args)
    assert code == 0, err
    summary = report["summary"]
    assert summary["steps"] == 2 and [s["index"] for s in report["steps"]] == [0, 1]
    stats = summary["step_time_s"]
    assert 0 < stats["min"] <= stats["median"] <= stats["max"]
    assert summary["devices"] == (1 if name == "matmul" else 8)

    measured = [o for o in report["ops"] if o["measured_s"] is not None]
    assert measured and all(o["measured_s"] > 0 for o in measured)
    step_module = max({o["module"] for o in measured}, key=lambda m: sum(o["measured_s"] for o in ops_of(report, m)))
    # Each op of the step ran once per profiled step per device; warmup is not counted.
    assert {o["occurrences"] for o in ops_of(report, step_module)} == {2}
    kinds = {c["kind"] for c in report["collectives"]}
    assert kinds == collectives if name in ("matmul", "sharded_matmul", "collectives") else kinds >= collectives
    assert collectives <= {o["opcode"] for o in measured}

    source = report["source"]
    assert source["kind"] == "run" and source["argv"] == args and source["workload"]
    assert source["command"].startswith(f"audit run {WORKLOADS / name}.py --steps 2 --warmup 1 --devices 8")
    assert source["command"].endswith(" -- " + " ".join(args))
    assert len(source["host_step_time_s"]) == 2 and source["compile_s"] > 0


@pytest.mark.slow
def test_kept_profile_reads_back_through_inspect_as_the_same_table(capsys, tmp_path):
    name, args, _ = CASES[1]
    code, report, err = audit_run(capsys, str(WORKLOADS / f"{name}.py"), "--devices", "8", "--steps", "2",
                                  "--warmup", "1", "--out", str(tmp_path / "logdir"), "--", *args)
    assert code == 0, err
    [run_dir] = (tmp_path / "logdir" / "plugins" / "profile").iterdir()
    assert list(run_dir.glob("*.xplane.pb")) and report["source"]["run_dir"] == str(run_dir)
    assert f"--logdir {tmp_path / 'logdir'}" in err

    assert main(["inspect", str(tmp_path / "logdir"), "--json", "-"]) == 0
    again = json.loads(capsys.readouterr().out)
    table = lambda r: {(o["module"], o["name"]): (o["measured_s"], o["occurrences"], o["expected_s"])  # noqa: E731
                       for o in r["ops"]}
    assert table(again) == table(report)
    assert again["summary"]["step_time_s"] == report["summary"]["step_time_s"]


@pytest.mark.slow
def test_without_out_the_temporary_profile_is_removed(capsys, tmp_path):
    name, args, _ = CASES[0]
    code, report, _ = audit_run(capsys, str(WORKLOADS / f"{name}.py"), "--steps", "1", "--warmup", "0", "--",
                                *args)
    assert code == 0 and report["source"]["profile_kept"] is False
    assert report["source"]["paths"] and not any(Path(p).exists() for p in report["source"]["paths"])


@pytest.mark.slow
def test_workload_output_never_mixes_into_the_json_on_stdout(capsys, tmp_path):
    script = tmp_path / "chatty.py"
    script.write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp
        print("hello from the workload")
        print("total", float(jax.jit(lambda a: (a @ a).sum())(jnp.ones((64, 64)))))
        """))
    code, report, err = audit_run(capsys, str(script), "--quiet")
    assert code == 0 and "hello from the workload" in err
    assert report["source"]["kind"] == "run" and report["source"]["workload"] == "chatty"
    assert any(o["measured_s"] for o in report["ops"])


@pytest.mark.slow
def test_raising_workload_exits_3_with_its_traceback_and_still_reports_what_ran(capsys, tmp_path):
    script = tmp_path / "diverges.py"
    script.write_text(textwrap.dedent("""
        import jax
        from audit import Workload, workload

        calls = []

        def check(args, out):
            calls.append(1)
            if len(calls) == 3:
                raise FloatingPointError("loss is nan")
            return (out,)

        @workload
        def build(ctx):
            return Workload(step=jax.jit(lambda x: x * 2.0), args=(ctx.array((32, 32), "float32"),), update=check)
        """))
    code, report, err = audit_run(capsys, str(script), "--steps", "5", "--warmup", "1")
    assert code == 3
    assert "FloatingPointError: loss is nan" in err and f'File "{script}"' in err
    assert report["summary"]["steps"] == 2
    assert any("did not finish" in w for w in report["warnings"])


def test_missing_workload_is_one_line_and_exit_2(capsys, tmp_path):
    code = main(["run", str(tmp_path / "nope.py")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "nope.py: workload file not found" in err


@pytest.mark.slow
def test_default_run_profiles_the_bundled_training_step_on_8_devices(capsys):
    code, report, err = audit_run(capsys, "--steps", "2", "--warmup", "1", "--quiet")
    assert code == 0, err
    assert report["source"]["workload"] == "transformer_train"
    assert report["source"]["command"] == "audit run --steps 2 --warmup 1 --devices 8"
    assert report["summary"]["devices"] == 8 and report["summary"]["steps"] == 2
    assert report["source"]["config"]["sharding"] == "fsdp"
    assert {"all-gather", "all-reduce"} <= {c["kind"] for c in report["collectives"]}
    # The roofline is a lower bound real ops rarely beat: judged per memory level (L1/L2/L3 or
    # DRAM, calibrated) on the bytes each op touches, at most 10% of the timed ops and 2% of
    # their time run more than 1.25x faster than expected (before cache-aware roofs: 52%).
    timed = [o for o in report["ops"] if not o["container"] and o["measured_s"] and o["expected_s"]]
    faster = [o for o in timed if o["measured_s"] < o["expected_s"] / 1.25]
    assert len(timed) > 100 and len(faster) <= 0.10 * len(timed)
    assert sum(o["measured_s"] for o in faster) <= 0.02 * sum(o["measured_s"] for o in timed)
    assert {o["memory_level"] for o in timed} <= {"L1", "L2", "L3", "DRAM"}
    # Collectives between simulated devices are rendezvous waits: not judged, never flagged, and
    # left out of the roofline fraction.
    comm = [o for o in report["ops"] if not o["container"] and o["comm_bytes"] and o["measured_s"]]
    assert comm and all(o["verdict"] == "not judged" and not o["flagged"] for o in comm)
    assert report["summary"]["not_judged_ops"] >= len(comm)
    judged = [o for o in timed if o["verdict"] != "not judged"]
    assert report["summary"]["roofline_fraction"] == pytest.approx(
        sum(o["expected_s"] for o in judged) / sum(o["self_s"] for o in judged), rel=1e-6)
    # Every plan-vs-profile row more than 2x apart says why, with numbers from the ops.
    rows = report["plan_vs_profile"]["rows"]
    gaps = [r for r in rows if r.get("gap")]
    assert any(r["quantity"] == "HBM bytes per device" for r in gaps)
    for r in gaps:
        assert r["reasons"] and all(any(ch.isdigit() for ch in reason) for reason in r["reasons"])
    hbm = next(r for r in gaps if r["quantity"] == "HBM bytes per device")
    assert any(reason.startswith("f32 instead of bf16") for reason in hbm["reasons"])
    # The per-op overhead is the machine's calibrated figure, never the judged trace's, and says so.
    assert report["hardware"]["op_overhead_s_source"] == "calibrated"
    overhead = [reason for r in gaps for reason in r["reasons"] if reason.startswith("per-op overhead")]
    assert all("[calibrated]" in reason for reason in overhead)

    assert f"Why HBM bytes per device differs ({hbm['gap']})" in render(report, "markdown")
    assert "Why HBM bytes per device differs" in render(report, "html")


def _audit_with_default_sigint(*args: str) -> list[str]:
    """`python -m audit ARGS` with SIGINT at its default: a test runner started in the background
    (`make test &`) ignores SIGINT, an ignored signal stays ignored across exec, and a Python
    that starts with it ignored never turns Ctrl-C into KeyboardInterrupt."""
    start = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
             "os.execv(sys.executable, [sys.executable, '-m', 'audit', *sys.argv[1:]])")
    return [sys.executable, "-c", start, *args]


_ENDLESS = """
import time
from pathlib import Path
import jax
from audit import Workload, workload

done = []

def pace(args, out):
    done.append(1)
    if len(done) == 3:
        Path(__file__).with_name("started").write_text("")
{wait}
    return (out,)

@workload
def build(ctx):
    return Workload(step=jax.jit(lambda x: x + 1.0), args=(ctx.array((32,), "float32"),), update=pace)
"""


def _interrupted_run(tmp_path: Path, wait: str, signum: int) -> tuple[int, str, dict]:
    """Run an endless workload whose steps end in `wait`, send `signum` to `audit run` once three
    steps are done; its exit code, stderr and JSON report."""
    script = tmp_path / "endless.py"
    script.write_text(_ENDLESS.format(wait=textwrap.indent(textwrap.dedent(wait).strip(), "    ")))
    report = tmp_path / "report.json"
    proc = subprocess.Popen(_audit_with_default_sigint("run", str(script), "--steps", "100000", "--warmup", "1",
                                                       "--json", str(report)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else ""
        time.sleep(0.05)
    proc.send_signal(signum)  # to the parent only; it must pass it on
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err, json.loads(report.read_text()) if report.exists() else {}


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stopping_audit_run_stops_the_workload_and_reports_the_captured_steps(tmp_path, signum):
    code, err, written = _interrupted_run(tmp_path, "time.sleep(0.05)", signum)
    assert code == 130, err
    assert written["summary"]["steps"] >= 2 and written["source"]["status"] == "interrupted"


@pytest.mark.slow
def test_an_interrupt_swallowed_inside_a_step_still_stops_the_run(tmp_path):
    # Library code can swallow a KeyboardInterrupt (a destructor, a callback); here the workload's
    # own update does, in the sleep where the signal almost always lands.
    code, err, written = _interrupted_run(tmp_path, """
        try:
            time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        """, signal.SIGINT)
    assert code == 130, err
    assert written["source"]["status"] == "interrupted"


@pytest.mark.slow
def test_workload_help_is_shown_and_nothing_is_analysed(capsys):
    code = main(["run", str(WORKLOADS / "matmul.py"), "--", "--help"])
    captured = capsys.readouterr()
    assert code == 0 and "--batches BATCHES" in captured.err and captured.out == ""


@pytest.mark.slow
def test_bad_workload_argument_exits_2_with_the_workload_usage(capsys):
    code = main(["run", str(WORKLOADS / "matmul.py"), "--", "--bogus"])
    assert code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_an_older_run_in_the_same_out_dir_never_passes_for_this_one(tmp_path):
    from audit.orchestration.runner import read_capture

    old = tmp_path / "plugins" / "profile" / "2020_01_01_00_00_00"
    old.mkdir(parents=True)
    (old / "host.xplane.pb").write_bytes(b"")
    (old / "audit_run.json").write_text(json.dumps({"run_dir": str(old), "status": "ok"}))
    assert read_capture(tmp_path, 0).captured  # found when nothing says when this run began
    stale = read_capture(tmp_path, -11, since=time.time() + 1)
    assert not stale.captured and stale.record == {}


@pytest.mark.slow
def test_plain_script_raising_before_any_xla_op_exits_3_with_only_its_own_frames(capsys, tmp_path):
    script = tmp_path / "fails_early.py"
    script.write_text("import jax\n\n\ndef setup():\n    raise ValueError('bad config')\n\n\nsetup()\n")
    code = main(["run", str(script), "--quiet"])
    err = capsys.readouterr().err
    assert code == 3
    assert "ValueError: bad config" in err and str(script) in err
    assert "runpy" not in err and "audit/" not in err
    assert "nothing to analyse" in err and "holds no XLA programs" not in err


@pytest.mark.slow
def test_analysing_a_capture_without_a_profile_dir_is_a_workload_error_not_a_crash(tmp_path):
    from audit.base.errors import ExitCode, WorkloadError
    from audit.orchestration.runner import Capture, RunRequest, analyse_capture

    cap = Capture(ExitCode.OK, None, {"status": "ok"})
    with pytest.raises(WorkloadError, match="no profile"):
        analyse_capture(cap, RunRequest(script=tmp_path / "w.py"), hardware=None, command="audit run",
                        keep_out=False)
