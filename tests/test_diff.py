"""`audit diff` on real captures: program changes are exact, timing changes are judged against noise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.cli import main
from audit.analyses.diff_timing import noise_interval
from audit.analyses.diff_verdict import diff_reports
from audit.reports.model.diff import Gates

B, D, F = 256, 128, 256  # global batch, model width, MLP width; batch is sharded 8 ways
STEPS = 5


def _capture(root: Path, *, width: int = F, shard_weights: bool = False, extra: int = 0) -> dict:
    """Profile STEPS steps of a two-layer MLP on 8 simulated devices and analyse it."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from audit.orchestration.pipeline import analyse_profile

    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    x = jax.device_put(jnp.ones((B, D), jnp.float32), NamedSharding(mesh, P("data", None)))
    # Weights sharded along F force an all-gather before the first matmul; replicated ones do not.
    w_spec = P(None, "data") if shard_weights else P()
    w1 = jax.device_put(jnp.full((D, width), 0.01, jnp.float32), NamedSharding(mesh, w_spec))
    w2 = jax.device_put(jnp.full((width, D), 0.01, jnp.float32), NamedSharding(mesh, P()))

    @jax.jit
    def step(x, w1, w2):
        w1 = jax.lax.with_sharding_constraint(w1, NamedSharding(mesh, P()))
        h = jax.nn.relu(x @ w1)
        y = h @ w2
        for _ in range(extra):  # redundant work that XLA cannot remove
            y = jnp.tanh(y @ w2.T @ w2) + y
        return y

    jax.block_until_ready(step(x, w1, w2))
    with jax.profiler.trace(str(root)):
        for i in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                jax.block_until_ready(step(x, w1, w2))
    return analyse_profile(root).to_json()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    make = lambda name, **kw: _capture(tmp_path_factory.mktemp(name), **kw)  # noqa: E731
    return {
        "base": make("base"), "base2": make("base2"), "wide": make("wide", width=2 * F),
        "gathered": make("gathered", shard_weights=True), "slow": make("slow", extra=40),
    }


@pytest.mark.slow
def test_same_program_twice_has_no_compile_time_change_and_no_regression(runs):
    diff = diff_reports(runs["base"], runs["base2"], Gates(fail_on_slowdown=0.05)).to_json()
    ct = diff["compile_time"]
    assert not ct["changed"], ct
    assert not ct["added_ops"] and not ct["removed_ops"] and not ct["changed_ops"]
    assert diff["matched_ops"] == len([o for o in runs["base"]["ops"] if not o["container"]])
    assert not diff["regression"]


@pytest.mark.slow
def test_doubling_the_mlp_width_names_the_dots_and_the_exact_flops(runs):
    diff = diff_reports(runs["base"], runs["wide"]).to_json()
    ct = diff["compile_time"]
    assert ct["changed"]
    # Each device holds B/8 rows; both dots have F as a dimension, so each doubles.
    per_device_dot_flops = 2 * 2 * (B // 8) * D * F
    dots = [r for r in ct["changed_ops"] + ct["added_ops"] if "dot" in (r.get("framework_op") or "")]
    assert dots, ct
    dot_delta = 0.0
    for r in ct["changed_ops"]:
        if "dot" in (r["framework_op"] or ""):
            dot_delta += r["flops"]["head"] - r["flops"]["base"]
    for r in ct["added_ops"]:
        if "dot" in (r["framework_op"] or ""):
            dot_delta += r["flops"] or 0.0
    for r in ct["removed_ops"]:
        if "dot" in (r["framework_op"] or ""):
            dot_delta -= r["flops"] or 0.0
    assert dot_delta == pytest.approx(per_device_dot_flops, rel=1e-9)
    assert ct["totals_per_step"]["flops"]["delta"] >= per_device_dot_flops


@pytest.mark.slow
def test_a_new_all_gather_is_reported_with_bytes_and_expected_time(runs):
    diff = diff_reports(runs["base"], runs["gathered"]).to_json()
    added = [r for r in diff["compile_time"]["added_ops"] if r["opcode"].startswith("all-gather")]
    assert added, diff["compile_time"]["added_ops"]
    gather = added[0]
    assert gather["comm_bytes"] == pytest.approx(D * F * 4 * 7 / 8, rel=0.5)  # f32 weights, 7/8 arrive
    assert gather["expected_s"] and gather["expected_s"] > 0
    assert diff["compile_time"]["totals_per_step"]["comm_bytes"]["delta"] > 0


@pytest.mark.slow
def test_cli_gates_a_real_slowdown_and_writes_all_outputs(runs, tmp_path, capsys):
    base, slow = tmp_path / "base.json", tmp_path / "slow.json"
    base.write_text(json.dumps(runs["base"]))
    slow.write_text(json.dumps(runs["slow"]))
    code = main(["diff", str(base), str(slow), "--fail-on-slowdown", "5%", "--json", str(tmp_path / "d.json"),
                 "--markdown", str(tmp_path / "d.md"), "--html", str(tmp_path / "d.html")])
    out = capsys.readouterr().out
    assert code == 1
    assert "REGRESSION" in out
    diff = json.loads((tmp_path / "d.json").read_text())
    assert diff["measured"]["regression"] and diff["measured"]["interval"][0] > 0
    md = (tmp_path / "d.md").read_text()
    assert "REGRESSION" in md and len(md) < 65000
    assert "<section" in (tmp_path / "d.html").read_text()


@pytest.mark.slow
def test_cli_same_program_exits_0_and_flops_gate_trips_on_wider_mlp(runs, tmp_path, capsys):
    paths = {}
    for key in ("base", "base2", "wide"):
        paths[key] = tmp_path / f"{key}.json"
        paths[key].write_text(json.dumps(runs[key]))
    assert main(["diff", str(paths["base"]), str(paths["base2"]), "--fail-on-slowdown", "50%", "--quiet"]) == 0
    assert main(["diff", str(paths["base"]), str(paths["wide"]), "--fail-on-slowdown", "1000%", "--quiet"]) == 0
    assert main(["diff", str(paths["base"]), str(paths["wide"]), "--fail-on-flops", "--quiet"]) == 1


def test_bad_sides_exit_2(tmp_path, capsys):
    notreport = tmp_path / "x.json"
    notreport.write_text('{"hello": 1}')
    assert main(["diff", str(notreport), str(notreport)]) == 2
    assert "schema" in capsys.readouterr().err
    assert main(["diff", str(tmp_path / "missing.json"), str(notreport)]) == 2
    assert "missing.json: no such file" in capsys.readouterr().err
    assert main(["diff", str(notreport), str(notreport), "--fail-on-slowdown", "lots"]) == 2
    assert "--fail-on-slowdown expects a percentage" in capsys.readouterr().err


@pytest.mark.slow
def test_the_old_spelling_of_the_step_time_threshold_still_gates_and_says_its_new_name(runs, tmp_path, capsys):
    base, slow = tmp_path / "base.json", tmp_path / "slow.json"
    base.write_text(json.dumps(runs["base"]))
    slow.write_text(json.dumps(runs["slow"]))
    json_path = tmp_path / "d.json"
    assert main(["diff", str(base), str(slow), "--fail-on", "7%", "--quiet", "--json", str(json_path)]) == 1
    err = capsys.readouterr().err
    assert "--fail-on PCT is now --fail-on-slowdown PCT" in err and len(err.splitlines()) == 2  # the warning, the gate
    doc = json.loads(json_path.read_text())
    assert doc["gates"]["fail_on"] == doc["measured"]["threshold"] == pytest.approx(0.07)
    assert main(["diff", str(base), str(slow), "--fail-on", "7%", "--fail-on-slowdown", "7%", "--quiet"]) == 2
    assert "--fail-on-slowdown only" in capsys.readouterr().err


def test_noise_interval_is_repeatable_and_brackets_equal_samples():
    base = [1.0, 1.1, 0.9, 1.05, 0.95]
    lo, hi = noise_interval(base, base)
    assert lo <= 1.0 <= hi
    assert noise_interval(base, base) == (lo, hi)
    lo2, _ = noise_interval(base, [2 * b for b in base])
    assert lo2 > 1.5


@pytest.mark.slow
def test_doubling_the_transformer_mlp_width_is_named_and_exact(tmp_path, capsys):
    """Issue example: `workloads/transformer.py` with d_ff doubled between base and head."""
    root = Path(__file__).resolve().parents[1]
    small = ["--layers", "1", "--d-model", "64", "--heads", "4", "--seq", "32", "--batch", "4", "--vocab", "128"]
    for name, d_ff in (("base", 128), ("head", 256)):
        assert main(["run", str(root / "workloads" / "transformer.py"), "--devices", "1", "--steps", "2", "--warmup", "1",
                     "--quiet", "--json", str(tmp_path / f"{name}.json"), "--", *small, "--d-ff", str(d_ff)]) == 0
    assert main(["diff", str(tmp_path / "base.json"), str(tmp_path / "head.json"), "--quiet",
                 "--json", str(tmp_path / "d.json"), "--markdown", str(tmp_path / "d.md")]) in (0, 1)
    ct = json.loads((tmp_path / "d.json").read_text())["compile_time"]
    dots = 0.0
    for r in ct["changed_ops"]:
        if "dot_general" in (r["framework_op"] or ""):
            dots += r["flops"]["head"] - r["flops"]["base"]
    for sign, key in ((1, "added_ops"), (-1, "removed_ops")):
        dots += sign * sum(r["flops"] or 0 for r in ct[key] if "dot_general" in (r["framework_op"] or ""))
    # Gated MLP: 3 matmuls of D x F, 6 FLOPs per parameter per token in training; 128 tokens, 1 layer.
    assert dots == pytest.approx(18 * 64 * (256 - 128) * 1 * 128, rel=1e-9)
    md = (tmp_path / "d.md").read_text()
    assert "dot_general" in md.replace("\\_", "_") and len(md.splitlines()) < 60


def _scaled(report: dict, factor: float, source: str) -> dict:
    """The same captured run with every step time scaled: a run slowed by something beside it."""
    return {**report, "run_source": source, "steps": [{**s, "time_s": s["time_s"] * factor} for s in report["steps"]]}


def _steady(report: dict, factor: float, source: str) -> dict:
    """A captured run whose steps sit within 1% of its median step, times `factor`.

    The millisecond steps of the test MLP vary by tens of percent on a loaded machine,
    which would hide the run-to-run difference these tests are about.
    """
    import statistics

    med = statistics.median(s["time_s"] for s in report["steps"])
    steps = [{**s, "time_s": med * factor * (1 + 0.01 * ((i % 3) - 1))} for i, s in enumerate(report["steps"])]
    return {**report, "run_source": source, "steps": steps}


def test_hierarchical_interval_covers_run_to_run_variance_not_just_steps():
    from audit.analyses.diff_timing import hierarchical_interval

    steady = [[1.00, 1.01, 0.99, 1.00, 1.02], [1.03, 1.02, 1.04, 1.03, 1.01], [0.98, 0.99, 0.97, 0.99, 1.00]]
    lo, hi = hierarchical_interval(steady, steady)
    assert lo < 1.0 < hi and hierarchical_interval(steady, steady) == (lo, hi)
    slower = [[1.25 * t for t in run] for run in steady]
    lo, hi = hierarchical_interval(steady, slower)
    assert 1.15 < lo < 1.25 < hi < 1.35
    # One head run 30% slow: the interval spans it, so it cannot read as a sure 5% regression.
    one_off = [steady[0], [1.3 * t for t in steady[1]]]
    lo, hi = hierarchical_interval(steady[:2], one_off)
    assert lo < 1.05 and hi > 1.2
    # Within-run bootstrap alone is far narrower: it ignores that runs differ.
    wlo, whi = noise_interval([t for r in steady[:2] for t in r], [t for r in one_off for t in r])
    assert whi - wlo < hi - lo


@pytest.mark.slow
def test_identical_runs_with_one_slowed_head_run_are_inconclusive_and_name_the_run(runs, tmp_path, capsys):
    base_dir, head_dir = tmp_path / "base", tmp_path / "head"
    base_dir.mkdir()
    head_dir.mkdir()
    (base_dir / "run1.json").write_text(json.dumps(_steady(runs["base"], 1.0, "b1")))
    (base_dir / "run2.json").write_text(json.dumps(_steady(runs["base2"], 1.0, "b2") | {"steps": [
        {**s, "time_s": s["time_s"] * 1.01} for s in _steady(runs["base"], 1.0, "b2")["steps"]]}))
    (head_dir / "run1.json").write_text(json.dumps(_steady(runs["base"], 1.005, "h1")))
    (head_dir / "run2.json").write_text(json.dumps(_steady(runs["base"], 1.4, "h2")))
    md = tmp_path / "d.md"
    code = main(["diff", str(base_dir), str(head_dir), "--json", str(tmp_path / "d.json"), "--markdown", str(md),
                 "--quiet"])
    diff = json.loads((tmp_path / "d.json").read_text())
    assert code == 0 and diff["verdict"] == "inconclusive", diff["measured"]["verdict_reason"]
    me = diff["measured"]
    assert me["base_runs"] == me["head_runs"] == 2 and not me["weak"] and me["threshold"] == 0.05
    unstable = [x for x in me["unstable"] if x["side"] == "head"]
    assert unstable and unstable[0]["source"] == str(head_dir / "run2.json")
    assert unstable[0]["off_by"] == pytest.approx(1.4 / 1.005 - 1, rel=0.01)
    text = md.read_text()
    assert "unstable head: run 2 of 2" in text and "run2.json" in text and "Per-run median step time" in text
    assert main(["diff", str(base_dir), str(head_dir), "--strict", "--quiet"]) == 1


@pytest.mark.slow
def test_a_busy_neighbour_beside_two_of_three_head_runs_is_inconclusive_not_a_regression(runs):
    # Identical code; a CPU hog beside head runs 1 and 3 slowed them 1.7x: on average the head
    # reads 46% slower, but its runs disagree, which is the machine speaking, not the code.
    base = [_steady(runs["base"], f, f"b{i}") for i, f in enumerate((1.0, 1.04, 0.97))]
    head = [_steady(runs["base"], f, f"h{i}") for i, f in enumerate((1.7, 1.01, 1.72))]
    me = diff_reports(base, head).to_json()["measured"]
    assert me["change"] > 0.4
    assert me["verdict"] == "inconclusive" and not me["regression"]
    odd = me["unstable"][0]
    assert odd["side"] == "head" and odd["source"] == "h1" and odd["off_by"] < -0.2


@pytest.mark.slow
def test_ordinary_run_to_run_variation_does_not_hide_a_real_slowdown(runs):
    # Runs of one side differ by up to 15% on a shared machine; a 30% slowdown still reads as one.
    base = [_steady(runs["base"], f, f"b{i}") for i, f in enumerate((1.0, 1.12, 0.96))]
    head = [_steady(runs["base"], 1.3 * f, f"h{i}") for i, f in enumerate((1.05, 0.95, 1.1))]
    diff = diff_reports(base, head).to_json()
    assert diff["measured"]["unstable"] == [] and diff["verdict"] == "regression" and diff["regression"]


@pytest.mark.slow
def test_repeated_runs_of_a_real_slowdown_are_a_regression_without_fail_on(runs, tmp_path, capsys):
    for i in range(2):
        (tmp_path / f"b{i}.json").write_text(json.dumps(_steady(runs["base"], 1.0 + 0.01 * i, f"b{i}")))
        (tmp_path / f"h{i}.json").write_text(json.dumps(_steady(runs["slow"], 1.0 + 0.01 * i, f"h{i}")))
    md = tmp_path / "d.md"
    code = main(["diff", str(tmp_path / "b*.json"), f"{tmp_path / 'h0.json'},{tmp_path / 'h1.json'}",
                 "--markdown", str(md), "--quiet"])
    assert code == 1
    text = md.read_text()
    assert "REGRESSION" in text and "default" in text and "step time: regression" in text


@pytest.mark.slow
def test_one_run_a_side_is_labelled_weak_and_identical_code_never_fails(runs, tmp_path):
    base, head = tmp_path / "b.json", tmp_path / "h.json"
    base.write_text(json.dumps(runs["base"]))
    head.write_text(json.dumps(_scaled(runs["base2"], 1.12, "h")))  # 12% slower: within the one-run floor
    assert main(["diff", str(base), str(head), "--json", str(tmp_path / "d.json"), "--quiet"]) == 0
    me = json.loads((tmp_path / "d.json").read_text())["measured"]
    assert me["weak"] and me["verdict"] == "inconclusive" and "floor" in me["method"]


@pytest.mark.slow
def test_one_run_a_side_of_an_unchanged_program_never_fails_on_timing_alone(runs, tmp_path):
    """A CPU hog beside one run slows it severalfold; with one run a side that is no evidence of a regression."""
    base, head = tmp_path / "b.json", tmp_path / "h.json"
    base.write_text(json.dumps(_steady(runs["base"], 1.0, "b")))
    head.write_text(json.dumps(_steady(runs["base"], 3.0, "h")))
    assert main(["diff", str(base), str(head), "--json", str(tmp_path / "d.json"), "--quiet"]) == 0
    me = json.loads((tmp_path / "d.json").read_text())["measured"]
    assert me["verdict"] == "inconclusive" and me["interval"][0] > 1.0 and "program unchanged" in me["verdict_reason"]
    assert main(["diff", str(base), str(head), "--strict", "--quiet"]) == 1
