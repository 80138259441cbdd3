"""Program waste detectors (audit.analyses.waste): each on a real program that has the waste and on a
twin that does not, and over every real capture and dump the repository holds.

The programs are made with JAX on CPU as a user makes them (jit, then a `jax.profiler` trace or the
compiled HLO). Where XLA:CPU does not produce a pattern, the test says so and reads a real GPU/TPU
dump from tests/data or a hand-written module that XLA's own parser accepts.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jaxlib import _hlo

import audit
from audit.reports.model.findings import Finding
from audit.reports.model.read import parse_report

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
HANDWRITTEN = DATA / "hlo" / "waste"
CPU_RUN = DATA / "captures" / "cpu-default-run"
CPU = str(CPU_RUN / "cpu.toml")  # that machine's measured figures: no calibration here, same prices anywhere
CARRY = 4 * 1024 * 1024  # f32 elements: a 16 MiB loop carry


def waste(report: audit.Report) -> list[Finding]:
    """The report's `waste` part, read back through its JSON as a user's tool would."""
    doc = parse_report(__import__("json").dumps(report.model.to_json()).encode())
    return [Finding.from_json(f) for f in doc["waste"]]


def causes(report: audit.Report) -> list[str]:
    return [f.cause for f in waste(report)]


def one(report: audit.Report, cause: str) -> Finding:
    found = [f for f in waste(report) if f.cause == cause]
    assert len(found) == 1, waste(report)
    return found[0]


def loop(read_old_carry: bool):
    """A fori_loop that writes one row of its 16 MiB carry per iteration and reads one element: of
    the carry before the update (the old value stays live: XLA copies the carry) or after it."""
    def step(x):
        def body(i, carry):
            x, acc = carry
            y = lax.dynamic_update_slice(x, jnp.full((1024,), i, x.dtype), (i * 1024,))
            read = x if read_old_carry else y
            return y, acc + read[i * 1024 + 5]
        return lax.fori_loop(0, 8, body, (x, 0.0))
    return step


def dump(tmp_path: Path, name: str, fn, *args, **jit_options) -> Path:
    """The optimized HLO XLA:CPU compiles `fn` to, written as a dump file."""
    path = tmp_path / f"{name}.after_optimizations.txt"
    path.write_text(jax.jit(fn, **jit_options).lower(*args).compile().as_text())
    return path


def profile(tmp_path: Path, fn, x, steps: int = 3) -> Path:
    """A `jax.profiler` trace of `steps` steps of `fn` (donating its input), after one warm-up."""
    step = jax.jit(fn, donate_argnums=0)
    x, acc = step(x)
    acc.block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        for n in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=n):
                x, acc = step(x)
                acc.block_until_ready()
    return tmp_path


# -- a loop carry copied every iteration ---------------------------------------------------------


@pytest.mark.slow
def test_loop_carry_copy_measured_in_a_profile(tmp_path):
    report = audit.inspect(profile(tmp_path / "copy", loop(read_old_carry=True), jnp.zeros((CARRY,))), CPU)
    found = one(report, "waste:loop-carry-copy")
    # The two copies XLA keeps in the body move 16 MiB each per iteration against an update of 4 KiB:
    # most of the step, measured.
    assert found.origin == "trace" and found.share is not None and 0.25 < found.share <= 1.0, found
    # The share is of the mean step, as the time is a mean over the steps.
    mean = sum(s["time_s"] for s in report.model.steps) / len(report.model.steps)
    assert found.share == pytest.approx(found.time_per_step_s / mean)
    assert found.title.startswith("the loop %while") and "every iteration" in found.title
    copies = [o for o in report.model.ops if o.opcode == "copy" and o.shape == f"f32[{CARRY}]"]
    assert len(copies) == 2
    assert found.time_per_step_s == pytest.approx(sum(o.measured_s or 0 for o in copies) / report.summary.steps)
    assert sum(" copy(" in line for line in found.evidence) == 2
    assert any(" while(" in line and "test_waste.py" in line for line in found.evidence), found.evidence
    # Beside the copies, the update that could not be done in place and the read of the old carry
    # that kept it live, at their source lines.
    sources = [line.rsplit("[", 1)[-1] for line in found.evidence if " fusion(" in line]
    assert len(sources) == 2 and all("test_waste.py" in s for s in sources) and sources[0] != sources[1], found.evidence
    assert "in place" in found.action


@pytest.mark.slow
def test_in_place_loop_is_not_a_carry_copy(tmp_path):
    report = audit.inspect(profile(tmp_path / "inplace", loop(read_old_carry=False), jnp.zeros((CARRY,))), CPU)
    assert report.model.summary.steps == 3
    assert "waste:loop-carry-copy" not in causes(report)
    assert not [o for o in report.model.ops if o.opcode == "copy" and o.shape == f"f32[{CARRY}]"]


def test_loop_carry_copied_by_a_copy_fusion_and_its_twin():
    # XLA:GPU may run a copy as a fusion of its own: a hand-written loop that copies its 16 MiB carry
    # through one before updating the copy in place, because the body still reads the old carry; its
    # twin reads the updated carry and updates it in place.
    for name in ("loop_copy_fusion", "loop_in_place"):
        assert _hlo.hlo_module_from_text((HANDWRITTEN / f"{name}.hlo").read_text()) is not None
    found = one(audit.inspect(HANDWRITTEN / "loop_copy_fusion.hlo", "h100"), "waste:loop-carry-copy")
    assert found.origin == "model" and found.share is not None and found.share > 0.3
    assert [line.split(" ")[0] for line in found.evidence] == ["%carry.copy", "%updated", "%read", "%loop"]
    assert causes(audit.inspect(HANDWRITTEN / "loop_in_place.hlo", "h100")) == []


# -- an input copied per call because it is not donated ------------------------------------------


def test_undonated_input_is_copied_per_call(tmp_path):
    x = jnp.zeros((CARRY,))
    report = audit.inspect(dump(tmp_path, "kept", loop(read_old_carry=False), x), CPU)
    found = one(report, "waste:undonated-input")
    assert found.origin == "model" and found.time_per_step_s > 0
    assert any(line.startswith("%copy") and f"f32[{CARRY}]" in line for line in found.evidence)
    assert any(" parameter(" in line for line in found.evidence)
    assert "donate_argnums=(0,)" in found.action
    assert "waste:loop-carry-copy" not in causes(report)


def test_donated_input_is_not_copied(tmp_path):
    report = audit.inspect(dump(tmp_path, "donated", loop(read_old_carry=False), jnp.zeros((CARRY,)),
                                donate_argnums=0), CPU)
    assert causes(report) == []


def test_input_also_read_elsewhere_is_not_blamed_on_donation(tmp_path):
    # The input is updated and also read: XLA:CPU copies it whether it is donated or not (donated, it
    # even copies twice), so "donate it" would not remove the copy and is not said.
    def update_and_read(x):
        return x.at[5].set(1.0), jnp.sum(x * 2)

    x = jnp.zeros((CARRY,))
    kept = dump(tmp_path, "also_read", update_and_read, x)
    assert " copy(%x" in kept.read_text()
    donated = dump(tmp_path, "also_read_donated", update_and_read, x, donate_argnums=0)
    assert " copy(%x" in donated.read_text()
    for path in (kept, donated):
        assert "waste:undonated-input" not in causes(audit.inspect(path, CPU))


# -- copies made only to change a layout ---------------------------------------------------------
# XLA:CPU's layout assignment gives every array its default layout, so it makes no layout copy:
# a real TPU dump that has them, and a hand-written GPU module with its twin.


def test_layout_copy_in_a_real_tpu_step():
    dump_file = DATA / "fixtures" / "tpu-v6e-llama3-8b" / "module_0262.jit_train_step.after_optimizations.txt"
    found = one(audit.inspect(dump_file, "v6e:2x4"), "waste:layout-copy")
    assert found.title.startswith("13 copies only to change a layout")
    # The first lines are the copies themselves: same shape, another layout, the line of the model that made them.
    assert found.evidence[0].startswith("%copy.") and "modeling_llama3.py:975" in found.evidence[0]


def test_layout_copy_and_its_twin():
    for name in ("layout_copy", "layout_agreed"):
        assert _hlo.hlo_module_from_text((HANDWRITTEN / f"{name}.hlo").read_text()) is not None
    found = one(audit.inspect(HANDWRITTEN / "layout_copy.hlo", "h100"), "waste:layout-copy")
    assert found.origin == "model" and found.share is not None and found.share > 0.1
    assert found.evidence == ("%relaid = bf16[4096,4096]{0,1} copy(%sum)  [model.py:13]",)
    assert causes(audit.inspect(HANDWRITTEN / "layout_agreed.hlo", "h100")) == []
    # The same copy run as a fusion of its own.
    assert _hlo.hlo_module_from_text((HANDWRITTEN / "layout_copy_fusion.hlo").read_text()) is not None
    fused = one(audit.inspect(HANDWRITTEN / "layout_copy_fusion.hlo", "h100"), "waste:layout-copy")
    assert fused.evidence == ("%relaid = bf16[4096,4096]{0,1} fusion(%sum)  [model.py:13]",)


# -- data kept wider than it is read -------------------------------------------------------------
# XLA's algebraic simplifier folds a convert pair that returns to its type, and XLA:CPU fuses the
# upcast into its reader, so a JAX program on CPU keeps nothing wide between kernels: hand-written
# modules (XLA's parser accepts them) of the kernels a GPU program runs when they are not fused.


@pytest.mark.parametrize("name, chain", [("precision_round_trip", "bf16 -> f32 -> bf16 round trip"),
                                         ("fp8_double_upcast", "f8e4m3fn -> f32 -> bf16 upcast")])
def test_precision_round_trip(name, chain):
    assert _hlo.hlo_module_from_text((HANDWRITTEN / f"{name}.hlo").read_text()) is not None
    report = audit.inspect(HANDWRITTEN / f"{name}.hlo", "h100")
    found = one(report, "waste:precision-round-trip")
    assert chain in found.title
    # The f32 value is written once and read once: 2 bytes an element too many each way.
    assert "134 MB extra per run" in found.title
    ops = {o.name: o.expected_s or 0.0 for o in report.model.ops}
    assert 0 < found.time_per_step_s < ops["up"] + ops["down"]
    assert [line.split(" ")[0] for line in found.evidence] == ["%up", "%down"]


def test_precision_kept_narrow_is_no_round_trip():
    assert causes(audit.inspect(HANDWRITTEN / "precision_kept.hlo", "h100")) == []


def test_reduction_data_kept_wider_than_needed():
    # A bf16 array upcast and stored in f32 for two reductions, against the same reductions reading
    # bf16 and accumulating in f32 inside their kernels.
    for name in ("reduce_wide", "reduce_narrow"):
        assert _hlo.hlo_module_from_text((HANDWRITTEN / f"{name}.hlo").read_text()) is not None
    found = one(audit.inspect(HANDWRITTEN / "reduce_wide.hlo", "h100"), "waste:precision-round-trip")
    # 2 bytes an element too many in the one write and the two reads.
    assert "(bf16 -> f32 stored, read only by reductions; 201 MB extra per run)" in found.title
    assert "dtype=jnp.float32" in found.action
    assert causes(audit.inspect(HANDWRITTEN / "reduce_narrow.hlo", "h100")) == []


# -- rematerialised recompute --------------------------------------------------------------------


def _layer(w, x):
    return jnp.tanh(jnp.tanh(x @ w) @ w)


def _remat_loss(w, x):
    return jnp.sum(jax.checkpoint(_layer)(w, x))


def _plain_loss(w, x):
    return jnp.sum(_layer(w, x))


def test_recompute_when_the_forward_also_ran(tmp_path):
    w, x = jnp.ones((256, 256)), jnp.ones((64, 256))
    found = one(audit.inspect(dump(tmp_path, "remat", jax.value_and_grad(_remat_loss), w, x), CPU),
                "waste:recompute")
    assert "re-executed in the backward pass" in found.title and "useful" in found.title
    assert all("rematted_computation" in line or "test_waste.py" in line for line in found.evidence[:-1])


def test_no_recompute_without_remat_or_without_a_forward(tmp_path):
    w, x = jnp.ones((256, 256)), jnp.ones((64, 256))
    plain = audit.inspect(dump(tmp_path, "plain", jax.value_and_grad(_plain_loss), w, x), CPU)
    assert "waste:recompute" not in causes(plain)
    # Only the gradient used: XLA drops the forward, so the rematerialised ops are its only run.
    grad_only = audit.inspect(dump(tmp_path, "grad", jax.grad(_remat_loss), w, x), CPU)
    assert "waste:recompute" not in causes(grad_only)


# -- the same collective on the same data twice --------------------------------------------------


def test_duplicate_collectives_in_a_real_cpu_capture():
    # The FSDP transformer step: the partitioner sends the same reduce-scattered slices through two
    # all-to-alls (channels 35 and 36, ...) with the same operands and groups.
    found = one(audit.inspect(CPU_RUN / "vm.xplane.pb", CPU), "waste:duplicate-collective")
    assert found.title.startswith("5 collectives repeated on the same data") and found.origin == "trace"
    assert all(" all-to-all(" in line for line in found.evidence[:-1])


def _psum_twice(through_barrier: bool):
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))

    def twice(x):
        again = lax.optimization_barrier(x) if through_barrier else x
        return lax.psum(x, "d") * 2 + lax.psum(again, "d")

    return jax.shard_map(twice, mesh=mesh, in_specs=jax.P("d"), out_specs=jax.P("d"))


def test_psum_repeated_through_a_barrier_is_sent_twice(tmp_path):
    # The barrier keeps CSE from merging the two psums; XLA:CPU then drops the barrier and its
    # combiner makes one all-reduce that sends the same operand twice.
    path = dump(tmp_path, "psum_barrier", _psum_twice(through_barrier=True), jnp.ones((8 * 1024,)))
    assert "all-reduce(%param.1, %param.1)" in path.read_text()
    found = one(audit.inspect(path, CPU), "waste:duplicate-collective")
    assert found.title.startswith("1 collective repeated on the same data (4.10 kB moved again per run)")
    assert found.evidence[0].startswith("%all-reduce = (f32[1024]{0}, f32[1024]{0}) all-reduce(%param.1, %param.1)")


def test_one_psum_used_twice_is_not_duplicated(tmp_path):
    # The twin: JAX asks for the same psum twice and XLA's CSE merges them into one all-reduce of one operand.
    path = dump(tmp_path, "psum", _psum_twice(through_barrier=False), jnp.ones((8 * 1024,)))
    assert path.read_text().count(" all-reduce(%param.1)") == 1
    assert causes(audit.inspect(path, CPU)) == []


# -- padding -------------------------------------------------------------------------------------


def test_padding_of_a_real_mi300x_gemm():
    found = one(audit.inspect(DATA / "fixtures" / "gpu-mi300x" / "gemm.xplane.pb"), "waste:padding")
    assert found.origin == "trace+model" and "estimate" in found.title
    assert any("84% of the work done is useful" in line for line in found.evidence)


def test_padding_and_whole_tiles():
    found = one(audit.inspect(HANDWRITTEN / "gemm_ragged.hlo", "mi300x"), "waste:padding")
    assert "96% of the work done is useful" in found.evidence[-1]
    assert found.share == pytest.approx(0.044, abs=0.005)  # 4% of the dot: the last wave's idle units
    assert causes(audit.inspect(HANDWRITTEN / "gemm_whole_tiles.hlo", "mi300x")) == []


# -- offload traffic -----------------------------------------------------------------------------


def test_offload_traffic_and_its_twin():
    found = one(audit.inspect(DATA / "hlo" / "host_offload.hlo", "h100"), "waste:offload")
    assert "268 MB between device and host memory" in found.title
    assert [line.split(" ")[0] for line in found.evidence] == ["%out", "%back"]
    assert causes(audit.inspect(HANDWRITTEN / "offload_kept.hlo", "h100")) == []


# -- every real capture and dump -----------------------------------------------------------------

# What fires on each, inspected by hand (docs/reading-a-report.md, "Program waste"): the TPU Llama
# step rematerialises each layer's forward in its backward scan and copies q/k/v into the attention
# kernel's layout; the FSDP MLP on v6e transposes its gathered weights by copies; the MaxText step
# rematerialises; the CPU FSDP step runs 5 all-to-alls twice; the GEMMs leave compute units idle in
# their last wave; the offload module is all offload.
CORPUS = {
    "captures/cpu-default-run/vm.xplane.pb": (CPU, {"waste:duplicate-collective"}),
    "captures/h100-jax0.11/train-step.xplane.pb": (None, set()),
    "captures/h100-jax0.11/train-step-cmdbuf.xplane.pb": (None, set()),
    "captures/h100-jax0.11/attention-sweep/attention-sweep.xplane.pb": (None, set()),
    "captures/h100-jax0.11/microbench.xplane.pb": (None, {"waste:padding"}),
    "captures/h200-jax0.11/train-step.xplane.pb": (None, set()),
    "captures/h200-jax0.11/microbench.xplane.pb": (None, {"waste:padding"}),
    "captures/h100-jax0.11/dump/module_0000.jit_train_step.sm_9.0a_gpu_after_optimizations.txt": (None, set()),
    "captures/h100-jax0.11/attention": (None, set()),
    "captures/h100-jax0.11/attention-sweep/hlo": ("h100", set()),
    "fixtures/gpu-mi300x/attention.xplane.pb": (None, set()),
    "fixtures/gpu-mi300x/conv3d-8gpu.xplane.pb": (None, set()),
    "fixtures/gpu-mi300x/conv3d-legacy.xplane.pb": (None, set()),
    "fixtures/gpu-mi300x/elementwise.xplane.pb": (None, set()),
    "fixtures/gpu-mi300x/gemm.xplane.pb": (None, {"waste:padding"}),
    "fixtures/gpu-a100-pax-nsys-jax": (None, set()),
    "fixtures/gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb":
        ("h100", {"waste:recompute"}),
    "fixtures/tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt":
        ("v6e:2x4", {"waste:recompute", "waste:layout-copy"}),
    "hlo/tpu-aot/fsdp_mlp.tpu-v5p-2x2x1.after_optimizations.txt": ("v5p:2x2x1", set()),
    "hlo/tpu-aot/fsdp_mlp.tpu-v6e-2x4.after_optimizations.txt": ("v6e:2x4", {"waste:layout-copy"}),
    "hlo/caveats.hlo": ("h100", set()),
    "hlo/dot_precision.hlo": ("h100", set()),
    "hlo/fft.hlo": ("h100", set()),
    "hlo/topk.hlo": ("h100", set()),
    "hlo/diff_base.hlo": ("h100", set()),
    "hlo/diff_head.hlo": ("h100", set()),
    "hlo/host_offload.hlo": ("h100", {"waste:offload"}),
}


@pytest.mark.parametrize("relative", sorted(CORPUS))
def test_what_fires_on_every_real_capture(relative):
    hardware, expected = CORPUS[relative]
    report = audit.inspect(DATA / relative, hardware)
    found = waste(report)
    assert {f.cause for f in found} == expected, [f.title for f in found]
    for f in found:
        assert f.time_per_step_s > 0 and f.evidence and f.action and f.program
        assert f.share is None or 0 < f.share <= 1.0 + 1e-9
