"""The capture child (`python -m audit.child.capture`): real JAX runs on 8 simulated CPU devices, read back by our parser."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import read_hosts

ROOT = Path(__file__).resolve().parents[1]
MATMUL = ROOT / "workloads" / "matmul.py"
TINY_MATMUL = ["--d", "64", "--f", "64", "--batches", "8,16"]


def capture(script: Path, out: Path, *args: str, steps: int = 2, warmup: int = 1, python_flags: tuple = (),
            wait: bool = True) -> subprocess.CompletedProcess | subprocess.Popen:
    cmd = [sys.executable, *python_flags, "-P", "-m", "audit.child.capture", str(script), "--out", str(out),
           "--steps", str(steps), "--warmup", str(warmup), "--devices", "8", "--", *args]
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)


def run_dirs(out: Path) -> list[Path]:
    return sorted((out / "plugins" / "profile").iterdir())


def sidecar(run_dir: Path) -> dict:
    return json.loads((run_dir / "audit_run.json").read_text())


def write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


@pytest.mark.slow
def test_structured_workload_is_captured_in_tensorboard_layout_with_only_the_profiled_steps(tmp_path):
    done = capture(MATMUL, tmp_path, *TINY_MATMUL, steps=3, warmup=2)
    assert done.returncode == 0, done.stderr
    [run_dir] = run_dirs(tmp_path)
    [xplane] = run_dir.glob("*.xplane.pb")
    assert xplane.name.endswith(".xplane.pb") and xplane.parent.parent.name == "profile"

    (host,) = read_hosts(run_dir)
    events, steps = host.events, host.steps
    module_of = host.module_names
    sweep = events[events["program_id"].map(module_of) == "jit_sweep"]
    assert not sweep.empty, sorted(set(module_of.values()))
    # Every op of the step ran once per profiled step: the two warmup steps are not in the profile.
    per_op = sweep.groupby("op")["occurrences"].sum()
    assert (per_op == 3).all(), per_op
    assert sorted(steps["step"].unique()) == [0, 1, 2]
    assert host.step_source == "StepTraceAnnotation"

    record = sidecar(run_dir)
    assert record["workload"] == "matmul_sweep" and record["status"] == "ok"
    assert record["config"]["batches"] == [8, 16] and record["argv"] == TINY_MATMUL
    assert len(record["step_times_s"]) == 3 and len(record["warmup_times_s"]) == 2
    assert record["compile_s"] > 0 and record["device_count"] == 8 and record["jax_version"]


RAISES = """
    import jax
    from audit import Workload, workload

    calls = 0

    def check_loss(args, out):
        global calls
        calls += 1
        if calls == 3:  # warmup, step 0, then step 1 fails
            raise FloatingPointError("loss diverged at step 1")
        return (out,)

    @workload
    def build(ctx):
        return Workload(step=jax.jit(lambda x: x * 2.0), args=(ctx.array((64, 64), "float32"),),
                        update=check_loss)
    """


@pytest.mark.slow
def test_a_raising_workload_exits_3_with_its_own_traceback_and_keeps_the_partial_profile(tmp_path):
    script = write(tmp_path, "diverges.py", RAISES)
    done = capture(script, tmp_path / "out", steps=4, warmup=1)
    assert done.returncode == 3
    assert "FloatingPointError: loss diverged at step 1" in done.stderr
    assert f'File "{script}"' in done.stderr and "in check_loss" in done.stderr
    assert not re.search(r"audit[/\\](child[/\\])?(capture|workload_api)\.py", done.stderr), done.stderr
    [run_dir] = run_dirs(tmp_path / "out")
    record = sidecar(run_dir)
    assert record["status"] == "raised" and "loss diverged" in record["error"]
    assert len(record["step_times_s"]) == 2  # step 1 ran; the update after it raised
    steps = read_hosts(run_dir)[0].steps
    assert set(steps["step"].unique()) <= {0, 1} and 0 in set(steps["step"])


@pytest.mark.slow
def test_a_workload_failing_before_any_step_exits_3_without_a_profile(tmp_path):
    script = write(tmp_path, "broken.py", """
        from audit import workload

        @workload
        def build(ctx):
            return {}["missing key"]
        """)
    done = capture(script, tmp_path / "out")
    assert done.returncode == 3 and "KeyError: 'missing key'" in done.stderr and "in build" in done.stderr
    record = json.loads((tmp_path / "out" / "audit_run.json").read_text())
    assert record["status"] == "raised" and record["phase"] == "build" and "run_dir" not in record


@pytest.mark.slow
def test_a_plain_script_is_profiled_as_a_whole_with_its_argv(tmp_path):
    script = write(tmp_path, "plain.py", """
        import sys
        import jax, jax.numpy as jnp

        @jax.jit
        def gram(a):
            return jnp.tanh(a @ a.T).sum()

        print("total", float(gram(jnp.ones((128, 128)))), "args", sys.argv[1:], "name", __name__)
        """)
    done = capture(script, tmp_path, "--alpha", "3")
    assert done.returncode == 0, done.stderr
    assert "args ['--alpha', '3'] name __main__" in done.stdout
    [run_dir] = run_dirs(tmp_path)
    (host,) = read_hosts(run_dir)
    assert "jit_gram" in set(host.module_names.values())
    assert not host.events.empty
    record = sidecar(run_dir)
    assert record["kind"] == "script" and record["workload"] == "plain" and record["wall_s"] > 0


@pytest.mark.slow
def test_a_plain_script_exiting_non_zero_counts_as_a_failure(tmp_path):
    script = write(tmp_path, "quits.py", "import sys\nsys.exit(4)\n")
    done = capture(script, tmp_path)
    assert done.returncode == 3 and "quits.py exited with status 4" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("body, message", [("def f(:\n    pass\n", "syntax error at line 1"), (None, "not found")])
def test_bad_workload_files_exit_2_before_jax_is_imported(tmp_path, body, message):
    script = tmp_path / "bad.py"
    if body is not None:
        script.write_text(body)
    done = capture(script, tmp_path / "out", python_flags=("-X", "importtime"))
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("audit: error:")]
    assert len(errors) == 1 and message in errors[0] and str(script) in errors[0]
    imported = re.findall(r"\|\s+([\w.]+)\s*$", done.stderr, flags=re.M)
    assert imported and not [m for m in imported if m == "jax" or m.startswith("jax.")]
    assert not (tmp_path / "out").exists()


SLOW_STEPS = """
    import sys, time
    from pathlib import Path
    import jax
    from audit import Workload, workload

    marker = Path(__file__).with_name("started")
    done = 0

    def pace(args, out):
        global done
        done += 1
        if done == 3:
            marker.write_text("3")
        time.sleep(0.05)
        return (out,)

    @workload
    def build(ctx):
        return Workload(step=jax.jit(lambda x: x + 1.0), args=(ctx.array((32,), "float32"),), update=pace)
    """


def wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow
def test_ctrl_c_stops_the_workload_and_keeps_what_was_captured(tmp_path):
    script = write(tmp_path, "endless.py", SLOW_STEPS)
    proc = capture(script, tmp_path / "out", steps=10_000, warmup=1, wait=False)
    wait_for(tmp_path / "started")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    [run_dir] = run_dirs(tmp_path / "out")
    record = sidecar(run_dir)
    assert record["status"] == "interrupted" and 2 <= len(record["step_times_s"]) < 10_000
    assert not read_hosts(run_dir)[0].events.empty
