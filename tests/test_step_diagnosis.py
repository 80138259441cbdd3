"""The step diagnosis on programs whose answer is known by construction: a training loop whose Python
input function sleeps 30 ms per step feeding a few-ms jitted step is host-bound, in the headline's
first lines with the function, what it waits in and its share of the step; the same loop fed from
memory is not. Findings the program waste detectors attach are ranked in the same list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from audit.analyses.step_diagnosis import attach_diagnosis
from audit.cli import main
from audit.orchestration.pipeline import analyse_profile
from audit.reports.model.findings import Finding

LOOP = """
    import sys, time
    import jax, jax.numpy as jnp
    import numpy as np

    SLEEP, ANNOTATE, ON_DEVICE = float(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"
    DATA = np.ones((384, 384), np.float32)

    def load_batch(i):
        if SLEEP:
            time.sleep(SLEEP)
        return jnp.asarray(DATA) * i if ON_DEVICE else DATA * i  # on the device: small programs of its own

    @jax.jit
    def step(w, x):
        for _ in range(6):
            w = jnp.tanh(w @ x)
        return w

    w = jnp.ones((384, 384), jnp.float32)
    step(w, jnp.asarray(DATA)).block_until_ready()
    jax.profiler.start_trace(sys.argv[1])
    for i in range(5):
        if ANNOTATE:
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                w = step(w, load_batch(i)).block_until_ready()
        else:
            w = step(w, load_batch(i)).block_until_ready()
    jax.profiler.stop_trace()
"""


def _profile(tmp_path: Path, name: str, sleep: float, annotate: bool = True, on_device: bool = False) -> Path:
    script = tmp_path / "train_loop.py"
    script.write_text(textwrap.dedent(LOOP))
    out = tmp_path / name
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, str(script), str(out), str(sleep), "1" if annotate else "0",
                           "1" if on_device else "0"],
                          capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def profiles(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("loops")
    return {"host": _profile(tmp, "host", 0.03), "device": _profile(tmp, "device", 0.0),
            "host_unannotated": _profile(tmp, "host_unannotated", 0.03, annotate=False),
            "host_jnp_input": _profile(tmp, "host_jnp_input", 0.03, on_device=True)}


DISPATCH = """
    import sys
    import jax, jax.numpy as jnp

    @jax.jit
    def tiny(x):
        return x * 1.0001 + 1.0

    x = jnp.ones((64,), jnp.float32)
    tiny(x).block_until_ready()
    jax.profiler.start_trace(sys.argv[1])
    for i in range(5):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            for _ in range(100):
                x = tiny(x)
            x.block_until_ready()
    jax.profiler.stop_trace()
"""


@pytest.mark.slow
def test_a_step_of_a_hundred_tiny_launches_is_dispatch_bound_and_not_host_bound(capsys, tmp_path):
    script = tmp_path / "tiny_steps.py"
    script.write_text(textwrap.dedent(DISPATCH))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "p")], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    head = _headline(capsys, tmp_path / "p")
    line = next((x for x in head if x.startswith("largest cost to the step: dispatch-bound:")), None)
    assert line is not None, "\n".join(head)
    assert "100 program executions per step" in line
    assert not any("host-bound" in x for x in head)


def _headline(capsys, path: Path) -> list[str]:
    code = main(["inspect", str(path)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out.splitlines()[:20]


@pytest.mark.slow
@pytest.mark.parametrize("which", ["host", "host_unannotated", "host_jnp_input"])
def test_a_loop_waiting_on_its_python_input_is_host_bound_with_the_function_and_its_share(capsys, profiles, which):
    head = _headline(capsys, profiles[which])
    # The verdict's first line is the largest finding; it names the function, its file and line,
    # what it waited in, and its share of each step (30 ms of sleep in a step of ~31-36 ms).
    line = next((x for x in head if x.startswith("largest cost to the step: host-bound:")), None)
    assert line is not None, "\n".join(head)
    assert "load_batch (train_loop.py:" in line and "time.sleep" in line
    share = float(line.split("spends ~")[1].split("%")[0])
    assert 40.0 <= share <= 99.0  # the step is a few ms, longer on a loaded machine


@pytest.mark.slow
def test_the_same_loop_fed_from_memory_is_never_called_host_bound(capsys, profiles):
    head = _headline(capsys, profiles["device"])
    assert not any("host-bound" in x for x in head), "\n".join(head)
    assert any(x.startswith("largest cost to the step:") for x in head)


@pytest.mark.slow
def test_idle_is_split_between_and_inside_executions_and_adds_up_to_the_step(profiles):
    report = analyse_profile(profiles["host"])
    diagnosis = report.part("step_diagnosis")
    assert diagnosis is not None
    row = diagnosis["programs"][0]
    # The waterfall's bars plus the achievable step make the measured step (within what overlaps).
    total = (row["achievable_s"] or 0.0) + sum(b["time_s"] for b in row["bars"]) - row["over_s"]
    assert total == pytest.approx(row["measured_s"], rel=1e-6)
    assert row["roofline_s"] <= row["achievable_s"] * (1 + 1e-9) <= row["measured_s"]
    steps = row["per_step"]
    assert len(steps) == 5 and all(s["between_s"] > 0.02 and s["host"].startswith("load_batch") for s in steps)
    # Host-bound idle lies between executions, never inside one.
    assert all(s["inside_s"] < 0.5 * s["between_s"] for s in steps)


@pytest.mark.slow
def test_waste_findings_are_ranked_in_the_same_list_and_can_lead_the_headline(profiles):
    report = analyse_profile(profiles["device"])
    step = report.summary.step_time_s.median
    waste = Finding("waste:loop-carry-copy", "the loop copies its carry every iteration", 0.9 * step, 0.9,
                    ("copy.1 = f32[1024] copy(p)",), "Update the carry in place.", "trace", "jit_step")
    merged = attach_diagnosis(report.attach("waste", [waste.to_json()]), None)
    found = [Finding.from_json(f) for f in merged.part("findings") or []]
    assert found[0] == waste
    assert found == sorted(found, key=lambda f: -f.time_per_step_s)
    from audit.reports.sections.findings import headline

    assert headline(merged).startswith("largest cost to the step: the loop copies its carry")


@pytest.mark.slow
def test_findings_are_in_the_json_report_and_read_back_through_the_schema(tmp_path, profiles):
    from audit.reports.model.read import read_report
    from audit.reports.model.report import ReportModel

    path = tmp_path / "report.json"
    path.write_text(json.dumps(analyse_profile(profiles["host"]).to_json()))
    back = ReportModel.from_json(read_report(path))  # validated against the checked-in schema
    causes = [f["cause"] for f in back.part("findings") or []]
    assert causes[0] == "host-bound" and back.part("step_diagnosis") is not None


@pytest.mark.slow
def test_diff_names_the_cause_that_appears_and_the_one_that_goes(profiles):
    from audit.analyses.diff_verdict import diff_reports
    from audit.reports.model.diff import DiffModel
    from audit.reports.diff_sections import render_diff_terminal

    fed, waiting = analyse_profile(profiles["device"]), analyse_profile(profiles["host"])
    diff = diff_reports(fed, waiting)
    assert [f.cause for f in diff.findings.appeared][:1] == ["host-bound"]
    assert "host-bound" not in [f.cause for f in diff.findings.disappeared]
    text = render_diff_terminal(diff)
    assert "new in head: host-bound: the host spends" in text
    assert DiffModel.from_json(json.loads(json.dumps(diff.to_json()))).findings == diff.findings
    back = diff_reports(waiting, fed)
    assert "host-bound" in [f.cause for f in back.findings.disappeared]
    assert "gone from head: host-bound" in render_diff_terminal(back)


@pytest.mark.slow
def test_the_host_thread_is_read_alone_and_the_same_without_the_compiled_decoder(profiles, monkeypatch):
    from audit.parsers.xplane import xline as xline_decode
    from conftest import read_hosts

    path = next(profiles["host"].rglob("*.xplane.pb"))
    compiled = read_hosts(path)[0].host_events
    monkeypatch.setattr(xline_decode, "available", lambda: False)
    parsed = read_hosts(path)[0].host_events
    assert len(compiled) > 0 and compiled.equals(parsed)
    names = set(compiled["name"].astype(str))
    # The thread that launched the program, with the Python tracer's calls and the step annotations.
    assert "time sleep" in {n.removeprefix("$") for n in names} and "train" in names
    assert not any(n.startswith("ynn_fusion") for n in names)  # no op of the pool threads
