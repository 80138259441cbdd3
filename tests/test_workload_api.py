"""The public workload API, in process on 8 simulated CPU devices, and what each reference workload compiles to."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from audit import Context, Workload
from audit.child.capture import configure_environment, script_kind
from audit.base.errors import InputError, UsageError
from audit.workload_api import load_workload

WORKLOADS = Path(__file__).resolve().parents[1] / "workloads"


def test_mesh_spans_the_requested_axes_with_auto_sharding():
    ctx = Context()
    mesh = ctx.mesh({"X": 4, "Y": 2})
    assert dict(mesh.shape) == {"X": 4, "Y": 2}
    assert all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types)


def test_mesh_larger_than_the_devices_is_a_usage_error_naming_the_fix():
    with pytest.raises(UsageError, match="needs 16 devices but 8") as info:
        Context().mesh({"X": 16})
    assert "--devices" in str(info.value)


def test_array_is_random_and_placed_with_its_sharding():
    ctx = Context()
    mesh = ctx.mesh({"X": 4, "Y": 2})
    a = ctx.array((16, 8), "bfloat16", ("X", "Y"), mesh, seed=3, scale=0.5)
    assert a.shape == (16, 8) and a.dtype == jnp.bfloat16
    assert a.sharding.spec == jax.sharding.PartitionSpec("X", "Y")
    assert {s.data.shape for s in a.addressable_shards} == {(4, 4)}
    values = np.asarray(a, dtype=np.float32)
    assert 0.2 < values.std() < 0.8 and len(np.unique(values)) > 50
    again = ctx.array((16, 8), "bfloat16", ("X", "Y"), mesh, seed=3, scale=0.5)
    np.testing.assert_array_equal(values, np.asarray(again, dtype=np.float32))


def test_replicated_array_is_identical_on_every_device():
    ctx = Context()
    mesh = ctx.mesh({"X": 8})
    a = ctx.array((4, 4), "float32", (None, None), mesh, seed=1)
    shards = [np.asarray(s.data) for s in a.addressable_shards]
    assert len(shards) == 8 and all(np.array_equal(shards[0], s) for s in shards)


def test_integer_arrays_stay_below_maxval_and_zero_scale_gives_zeros():
    ctx = Context()
    tokens = np.asarray(ctx.array((64, 32), "int32", maxval=50))
    assert tokens.min() >= 0 and tokens.max() < 50 and len(np.unique(tokens)) > 40
    assert not np.asarray(ctx.array((8,), "float32", scale=0)).any()


def test_aot_context_gives_abstract_arrays_with_the_same_sharding():
    ctx = Context(aot=True)
    mesh = ctx.mesh({"X": 8})
    a = ctx.array((64, 16), "bfloat16", ("X", None), mesh)
    assert isinstance(a, jax.ShapeDtypeStruct)
    assert a.shape == (64, 16) and a.sharding.spec == jax.sharding.PartitionSpec("X", None)


def test_spec_without_mesh_is_a_usage_error():
    with pytest.raises(UsageError, match="no mesh"):
        Context().array((8,), "float32", ("X",))


def test_run_feeds_outputs_back_and_reports_each_step_time():
    counter = Context().array((), "int32", maxval=1)  # 0
    wl = Workload(step=lambda c: c + 1, args=(counter,), update=lambda args, out: (out,))
    seen: list[int] = []
    times = wl.run(3, on_step=lambda i, t: seen.append(i))
    assert int(wl.args[0]) == 3 and seen == [0, 1, 2]
    assert len(times) == 3 and all(t > 0 for t in times)
    assert hasattr(wl.step, "lower")  # a plain function was jitted
    assert wl.compile() >= 0


def write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_load_workload_builds_with_its_argv_and_names_it(tmp_path):
    path = write(tmp_path, "scaled.py", """
        import argparse, jax
        from audit import Workload, workload

        @workload
        def build(ctx):
            parser = argparse.ArgumentParser()
            parser.add_argument("--n", type=int)
            n = parser.parse_args(ctx.argv).n
            return Workload(step=jax.jit(lambda x: x * n), args=(ctx.array((n,), "float32"),), config={"n": n})
        """)
    wl, ctx = load_workload(path, ["--n", "5"])
    assert wl.name == "scaled" and wl.config == {"n": 5} and ctx.argv == ["--n", "5"]
    assert len(ctx.devices) == 8


@pytest.mark.parametrize("body, message", [
    ("def build(ctx):\n    return 1\n", "exactly one @workload"),
    ("from audit import workload\n@workload\ndef build(ctx):\n    return 1\n", "not a Workload"),
])
def test_load_workload_rejects_modules_without_a_workload(tmp_path, body, message):
    with pytest.raises(InputError, match=message):
        load_workload(write(tmp_path, "w.py", body))


@pytest.mark.parametrize("source, kind", [
    ("from audit import workload\n@workload\ndef f(ctx): ...\n", "workload"),
    ("import audit\n@audit.workload\ndef f(ctx): ...\n", "workload"),
    ("import jax\nprint(jax.numpy.ones(3).sum())\n", "script"),
])
def test_script_kind_is_decided_by_parsing(tmp_path, source, kind):
    assert script_kind(write(tmp_path, "s.py", source)) == kind


def test_script_kind_rejects_syntax_errors_and_missing_files(tmp_path):
    with pytest.raises(InputError, match="syntax error at line 2"):
        script_kind(write(tmp_path, "bad.py", "x = 1\ndef f(:\n"))
    with pytest.raises(InputError, match="not found"):
        script_kind(tmp_path / "missing.py")


flags = st.lists(st.sampled_from(["--xla_cpu_use_thunk_runtime=true", "--xla_dump_to=/tmp/d",
                                  "--xla_force_host_platform_device_count=3"]), max_size=4)


@settings(max_examples=50, deadline=None)
@given(existing=flags, devices=st.integers(1, 64), platform=st.sampled_from([None, "gpu", "tpu"]))
def test_environment_has_one_device_count_and_keeps_other_flags(existing, devices, platform):
    env = configure_environment({"XLA_FLAGS": " ".join(existing), "HOME": "/h"}, devices, platform)
    found = re.findall(r"--xla_force_host_platform_device_count=(\d+)", env["XLA_FLAGS"])
    assert found == [str(devices)]
    for flag in existing:
        if "device_count" not in flag:
            assert flag in env["XLA_FLAGS"].split()
    assert env["JAX_PLATFORMS"] == (platform or "cpu") and env["HOME"] == "/h"


def compiled_collectives(wl: Workload) -> set[str]:
    """Collective opcodes in the optimized HLO the workload's step compiles to."""
    text = wl.jitted().lower(*wl.args, **wl.kwargs).compile().as_text()
    return set(re.findall(r"\b(all-gather|all-reduce|reduce-scatter|all-to-all)(?:-start)?\(", text))


TINY = ["--d-model", "64", "--d-ff", "128", "--heads", "8", "--vocab", "128", "--layers", "1"]


@pytest.mark.parametrize("name, argv, expected", [
    ("sharded_matmul", ["--case", "1"], set()),
    ("sharded_matmul", ["--case", "2"], {"all-gather"}),
    ("sharded_matmul", ["--case", "3"], {"all-reduce", "reduce-scatter"}),
    ("sharded_matmul", ["--case", "4"], {"all-gather"}),
    ("collectives", ["--sizes", "1024"], {"all-gather", "reduce-scatter", "all-reduce", "all-to-all"}),
    ("decode", [*TINY, "--max-len", "32", "--prompt", "8", "--sharding", "dp"], set()),
    ("decode", [*TINY, "--max-len", "32", "--prompt", "8"], {"all-reduce", "all-gather"}),
    ("matmul", ["--d", "64", "--f", "64", "--batches", "8,16"], set()),
])
def test_reference_workloads_compile_to_the_communication_the_book_derives(name, argv, expected):
    wl, _ = load_workload(WORKLOADS / f"{name}.py", argv)
    assert compiled_collectives(wl) == expected
    wl.run(1)


# DP: only the gradient all-reduce. FSDP: weight all-gathers, and the gradient reduce-scatter
# (an all-reduce and a slice on CPU). TP: activation all-reduces.
@pytest.mark.slow
@pytest.mark.parametrize("sharding, required, exact", [
    ("dp", {"all-reduce"}, True),
    ("fsdp", {"all-gather", "all-reduce"}, False),
    ("tp", {"all-reduce"}, False),
])
def test_transformer_training_step_communicates_as_the_book_says_and_learns(sharding, required, exact):
    wl, _ = load_workload(WORKLOADS / "transformer.py", [*TINY, "--seq", "16", "--sharding", sharding])
    found = compiled_collectives(wl)
    assert found == required if exact else found >= required
    step, losses = wl.jitted(), []
    for _ in range(3):
        out = step(*wl.args)
        losses.append(float(out[2]))
        wl.args = wl.update(wl.args, out)
    assert losses[2] < losses[0], losses
    assert wl.config["sharding"] == sharding and wl.config["mesh"] == {"data" if sharding != "tp" else "model": 8}
    assert set(wl.config) >= {"layers", "d_model", "d_ff", "heads", "kv_heads", "head_dim", "vocab", "batch",
                              "seq", "dtype", "sharding", "mesh"}


@settings(max_examples=200, deadline=None)
@given(op=st.sampled_from(["all-gather", "reduce-scatter", "all-reduce", "all-to-all"]),
       n=st.integers(1, 64), itemsize=st.sampled_from([1, 2, 4]), volume=st.integers(1, 1 << 31))
def test_collective_blocks_carry_the_requested_volume_as_one_device_sees_it(op, n, itemsize, volume):
    from audit.workloads.collectives import local_elements

    local = local_elements(op, volume, itemsize, n)
    # V is the gathered result for all-gather, the local input otherwise; it splits evenly over n.
    v_elements = local * n if op == "all-gather" else local
    assert v_elements % n == 0 and v_elements >= n
    assert v_elements * itemsize <= max(volume, n * itemsize)
    assert v_elements * itemsize > volume - n * itemsize


@given(n=st.integers(1, 512))
def test_sharded_matmul_mesh_is_two_dimensional_and_fills_every_device(n):
    from audit.workloads.sharded_matmul import mesh_sizes

    sizes = mesh_sizes(n, None, None)
    assert sizes["X"] * sizes["Y"] == n
    assert sizes["Y"] == (2 if n % 2 == 0 else 1)


def test_random_block_without_an_index_is_the_whole_array_as_with_full_slices():
    from audit.workload_api import _random_block

    whole = _random_block((4, 3), None, np.float32, 7, 10, 1.0)
    sliced = _random_block((4, 3), (slice(None), slice(None)), np.float32, 7, 10, 1.0)
    assert whole.shape == (4, 3) and whole.dtype == np.float32
    np.testing.assert_array_equal(whole, sliced)
    part = _random_block((4, 3), (slice(2, 4), slice(0, 3)), np.float32, 7, 10, 1.0)
    assert part.shape == (2, 3)
