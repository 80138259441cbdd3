"""Summary figures named "step" are one step, counts count what they name, and time by bound is
one computation in every format."""

from __future__ import annotations

import re

import pytest

from audit.orchestration.pipeline import analyse_hlo, analyse_profile
from conftest import render, shared_fixture


@pytest.fixture(scope="module")
def conv3d() -> dict:
    return analyse_profile(shared_fixture("gpu-mi300x/conv3d-8gpu.xplane.pb")).to_json()


@pytest.fixture(scope="module")
def maxtext_h100() -> dict:
    path = shared_fixture("gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb")
    return analyse_hlo(path, hardware="h100:4").to_json()


def test_one_program_launched_on_eight_gpus_is_one_step_not_eight(conv3d):
    # The capture runs the conv program 5 times on each of 8 GPUs: 40 launches, 5 steps.
    s = conv3d["summary"]
    assert s["devices"] == 8 and s["steps"] == 5
    assert all(len(step["per_device_s"]) == 8 for step in conv3d["steps"])
    assert "5 step(s) on 8 device(s)" in render(conv3d, "terminal")


def test_step_figures_are_one_step_and_expected_s_stays_the_sum(conv3d):
    s = conv3d["summary"]
    timed = [o for o in conv3d["ops"] if not o["container"] and o["expected_s"] is not None]
    assert s["expected_s"] == pytest.approx(sum(o["expected_s"] for o in timed))
    assert s["expected_op_step_s"] == pytest.approx(s["expected_s"] / s["steps"])
    hidden = sum(o.get("hidden_s") or 0.0 for o in timed if o.get("window_compute_s") is not None)
    assert s["expected_step_s"] == pytest.approx((s["expected_s"] - hidden) / s["steps"])
    # One step's expectation is comparable with one step's measured time: a lower bound of it.
    assert s["expected_step_s"] <= s["step_time_s"]["median"]
    wasted = sum(o["wasted_s"] for o in conv3d["ops"] if o["flagged"])
    assert s["wasted_step_s"] == pytest.approx(wasted / s["steps"])


def test_a_prediction_is_one_step_on_the_devices_its_collectives_name(maxtext_h100):
    s = maxtext_h100["summary"]
    assert s["devices"] == 4 and s["steps"] == 0
    assert s["expected_step_s"] == pytest.approx(s["step_time_s"]["median"])
    assert {o["devices"] for o in maxtext_h100["ops"]} == {4}
    assert "| 4 |" in render(maxtext_h100, "markdown")


def test_not_judged_ops_counts_every_op_with_that_verdict(maxtext_h100, conv3d):
    for report in (maxtext_h100, conv3d):
        verdicts = [o["verdict"] for o in report["ops"]]
        assert report["summary"]["not_judged_ops"] == verdicts.count("not judged")
    assert maxtext_h100["summary"]["not_judged_ops"] > 0  # its while loops and calls


def _shares(text: str) -> dict[str, str]:
    """The op-time split of a format's "op time by bound" line, and idle as its share of op and idle time."""
    line = next(x for x in text.splitlines() if x.lower().startswith("op time by bound"))
    shares = dict(re.findall(r"(compute|memory|collective|latency|unknown) (\d+\.\d%)", line))
    idle = re.search(r"idle [^(]*\((\d+\.\d%) of op and idle time\)", line)
    return {**shares, **({"idle": idle.group(1)} if idle else {})}


def test_time_by_bound_is_the_same_split_in_every_format(conv3d):
    # One number per quantity: the shares of op time in the terminal, markdown and the page's table, idle as
    # its share of op and idle time; the JSON's time_by_bound_share is of op and idle time, the same split.
    terminal, markdown = _shares(render(conv3d, "terminal")), _shares(render(conv3d, "markdown"))
    assert terminal and terminal == markdown and "idle" in terminal
    html = render(conv3d, "html")
    for kind, share in terminal.items():
        if kind != "idle":
            assert re.search(rf"{kind}</td><td class=\"num\">[^<]*</td><td class=\"num\">{re.escape(share)}", html)
    in_json = conv3d["summary"]["time_by_bound_share"]
    busy = 1.0 - in_json["idle"]
    assert {k: f"{100 * v / busy:.1f}%" for k, v in in_json.items() if k != "idle"} == \
        {k: v for k, v in terminal.items() if k != "idle"}
    assert f"{100 * in_json['idle']:.1f}%" == terminal["idle"]


def test_residue_prints_as_zero_not_picoseconds(maxtext_h100, conv3d):
    for report in (maxtext_h100, conv3d):
        s = report["summary"]
        for key in ("hidden_s", "hidden_comm_s", "exposed_comm_s"):
            assert s[key] == 0.0 or abs(s[key]) >= 1e-12
        assert "e-0" not in render(report, "terminal").split("top ")[0]
