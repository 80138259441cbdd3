"""A run directory with one .xplane.pb per host is one profile, with per-host columns and stragglers."""

from __future__ import annotations

import json
import shutil

import pytest

from audit.cli import main

HOSTS = ["host-a", "host-b", "host-c", "host-d"]
SLOW_HOST = "host-d"


def _cpu_capture(root):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    x = jax.device_put(jnp.ones((512, 256), jnp.float32), NamedSharding(mesh, P("data", None)))
    w = jax.device_put(jnp.full((256, 256), 0.01, jnp.float32), NamedSharding(mesh, P()))
    step = jax.jit(lambda x, w: jnp.sum(jnp.tanh(x @ w)))
    jax.block_until_ready(step(x, w))
    with jax.profiler.trace(str(root)):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                jax.block_until_ready(step(x, w))
    return next(root.glob("plugins/profile/*/*.xplane.pb"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Four hosts' files in one run dir, written as each host would; the last one runs 2x slower."""
    from audit.parsers.xplane.schema import XSpace

    source = _cpu_capture(tmp_path_factory.mktemp("capture"))
    run = tmp_path_factory.mktemp("logdir") / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    for host in HOSTS:
        space = XSpace()
        space.ParseFromString(source.read_bytes())
        del space.hostnames[:]
        space.hostnames.append(host)
        if host == SLOW_HOST:
            for plane in space.planes:
                for line in plane.lines:
                    for event in line.events:
                        event.offset_ps *= 2
                        event.duration_ps *= 2
        (run / f"{host}.xplane.pb").write_bytes(space.SerializeToString())
    return run


@pytest.mark.slow
def test_four_hosts_are_one_profile_with_per_host_columns(run_dir, capsys):
    assert main(["inspect", str(run_dir), "--json", "-", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["hosts"] == 4
    assert report["summary"]["devices"] == 32
    hosts = {h["host"]: h for h in report["hosts"]}
    assert set(hosts) == set(HOSTS)
    # The straggler is visible per host and per op.
    fast = hosts["host-a"]["step_time_s"]["median"]
    assert hosts[SLOW_HOST]["step_time_s"]["median"] == pytest.approx(2 * fast, rel=0.05)
    dots = [o for o in report["ops"] if o["devices"] == 32 and o["self_s"]]
    assert dots
    for op in dots:
        per_host = op["per_host"]
        assert set(per_host) == set(HOSTS)
        assert per_host[SLOW_HOST]["measured_s"] == pytest.approx(2 * per_host["host-a"]["measured_s"], rel=1e-6)
        assert op["straggler_ratio"] >= 1.9


@pytest.mark.slow
def test_logdir_resolves_to_its_run(run_dir, capsys):
    logdir = run_dir.parents[2]
    assert main(["inspect", str(logdir), "--json", "-", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["hosts"] == 4


@pytest.mark.slow
def test_several_runs_pick_the_latest_and_say_so(run_dir, tmp_path, capsys):
    logdir = tmp_path / "logdir"
    older = logdir / "plugins" / "profile" / "2025_01_01_00_00_00"
    shutil.copytree(run_dir, logdir / "plugins" / "profile" / run_dir.name)
    older.mkdir(parents=True)
    shutil.copy(run_dir / "host-a.xplane.pb", older / "host-a.xplane.pb")
    assert main(["inspect", str(logdir), "--json", "-", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["hosts"] == 4
    assert any("run" in w for w in report["warnings"])
    assert main(["inspect", str(logdir), "--run", older.name, "--json", "-", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["hosts"] == 1
