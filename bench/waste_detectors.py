"""The program waste detectors (audit.analyses.waste), each on a program that has the waste and on
its twin that does not, what they find on every real capture and dump of tests/data, and their own
CPU time within a warm `inspect` of the largest real programs.

    python bench/waste_detectors.py [--write]

The programs are the ones tests/test_waste.py checks: JAX programs compiled (or profiled) on this
CPU, real GPU/TPU captures and dumps from tests/data, and hand-written modules where XLA:CPU does
not make the pattern (tests/data/hlo/waste). `--write` puts the tables into bench/RESULTS.md between
its waste markers.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("AUDIT_CACHE", "")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
HAND = DATA / "hlo" / "waste"
CPU = str(DATA / "captures" / "cpu-default-run" / "cpu.toml")
RESULTS = ROOT / "bench" / "RESULTS.md"
START, END = "<!-- waste:start -->", "<!-- waste:end -->"
CARRY = 4 * 1024 * 1024  # f32 elements: a 16 MiB loop carry


def _loop(read_old_carry: bool) -> Callable:
    import jax.numpy as jnp
    from jax import lax

    def step(x):
        def body(i, carry):
            x, acc = carry
            y = lax.dynamic_update_slice(x, jnp.full((1024,), i, x.dtype), (i * 1024,))
            return y, acc + (x if read_old_carry else y)[i * 1024 + 5]
        return lax.fori_loop(0, 8, body, (x, 0.0))
    return step


def _profile(folder: Path, fn: Callable) -> Path:
    import jax
    import jax.numpy as jnp

    step = jax.jit(fn, donate_argnums=0)
    x, acc = step(jnp.zeros((CARRY,)))
    acc.block_until_ready()
    with jax.profiler.trace(str(folder)):
        for n in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=n):
                x, acc = step(x)
                acc.block_until_ready()
    return folder


def _dump(folder: Path, name: str, fn: Callable, *args, **options) -> Path:
    import jax

    path = folder / f"{name}.after_optimizations.txt"
    path.write_text(jax.jit(fn, **options).lower(*args).compile().as_text())
    return path


def _remat(checkpoint: bool, grad_only: bool = False) -> Callable:
    import jax
    import jax.numpy as jnp

    def layer(w, x):
        return jnp.tanh(jnp.tanh(x @ w) @ w)

    def loss(w, x):
        return jnp.sum((jax.checkpoint(layer) if checkpoint else layer)(w, x))
    return jax.grad(loss) if grad_only else jax.value_and_grad(loss)


def _psum_twice(through_barrier: bool = False) -> Callable:
    import jax
    import numpy as np
    from jax import lax

    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))

    def twice(x):
        again = lax.optimization_barrier(x) if through_barrier else x
        return lax.psum(x, "d") * 2 + lax.psum(again, "d")
    return jax.shard_map(twice, mesh=mesh, in_specs=jax.P("d"), out_specs=jax.P("d"))


def pairs(tmp: Path) -> list[tuple[str, str, str, tuple[str | Path, str | None], tuple[str | Path, str | None]]]:
    """(cause, program, twin, (program path, hardware), (twin path, hardware)) per detector."""
    import jax.numpy as jnp

    x = jnp.zeros((CARRY,))
    w, a = jnp.ones((256, 256)), jnp.ones((64, 256))
    return [
        ("waste:loop-carry-copy", "fori_loop, 16 MiB carry read after its update (profiled, CPU)",
         "the same loop reading the updated carry",
         (_profile(tmp / "copy", _loop(True)), CPU), (_profile(tmp / "inplace", _loop(False)), CPU)),
        ("waste:loop-carry-copy", "hand-written: the carry copied by a copy fusion, the old carry read (H100)",
         "the same loop reading the updated carry",
         (HAND / "loop_copy_fusion.hlo", "h100"), (HAND / "loop_in_place.hlo", "h100")),
        ("waste:undonated-input", "in-place loop on an undonated input (CPU dump)", "the same, donate_argnums=0",
         (_dump(tmp, "kept", _loop(False), x), CPU), (_dump(tmp, "donated", _loop(False), x, donate_argnums=0), CPU)),
        ("waste:layout-copy", "Llama 3 8B train step, v6e (real dump)", "hand-written: dot reading its producer's layout",
         (DATA / "fixtures/tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt", "v6e:2x4"),
         (HAND / "layout_agreed.hlo", "h100")),
        ("waste:layout-copy", "hand-written: copy to {0,1} before a dot (H100)", "the same dot without the copy",
         (HAND / "layout_copy.hlo", "h100"), (HAND / "layout_agreed.hlo", "h100")),
        ("waste:precision-round-trip", "hand-written: bf16 -> f32 stored -> bf16 (H100)", "kept in bf16",
         (HAND / "precision_round_trip.hlo", "h100"), (HAND / "precision_kept.hlo", "h100")),
        ("waste:precision-round-trip", "hand-written: f8e4m3fn -> f32 stored -> bf16 (H100)", "kept in bf16",
         (HAND / "fp8_double_upcast.hlo", "h100"), (HAND / "precision_kept.hlo", "h100")),
        ("waste:precision-round-trip", "hand-written: bf16 -> f32 stored for two reductions (H100)",
         "the reductions read bf16, accumulate in f32",
         (HAND / "reduce_wide.hlo", "h100"), (HAND / "reduce_narrow.hlo", "h100")),
        ("waste:recompute", "value_and_grad of a jax.checkpoint layer (CPU dump)", "no checkpoint; grad only",
         (_dump(tmp, "remat", _remat(True), w, a), CPU), (_dump(tmp, "plain", _remat(False), w, a), CPU)),
        ("waste:recompute", "Llama 3 8B train step, v6e (real dump)", "grad only of a checkpoint layer (CPU)",
         (DATA / "fixtures/tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt", "v6e:2x4"),
         (_dump(tmp, "grad", _remat(True, grad_only=True), w, a), CPU)),
        ("waste:duplicate-collective", "FSDP transformer step, 8 CPU devices (real capture)",
         "the same psum asked twice (XLA merges it)",
         (DATA / "captures/cpu-default-run/vm.xplane.pb", CPU), (_dump(tmp, "psum", _psum_twice(), jnp.ones((8192,))), CPU)),
        ("waste:duplicate-collective", "psum of x and of optimization_barrier(x), 8 CPU devices (CPU dump)",
         "the same psum asked twice (XLA merges it)",
         (_dump(tmp, "psum_barrier", _psum_twice(True), jnp.ones((8192,))), CPU),
         (_dump(tmp, "psum_once", _psum_twice(), jnp.ones((8192,))), CPU)),
        ("waste:padding", "1024x1024x1024 GEMM on MI300X (real capture)", "hand-written: 4096x4864x4096 (whole tiles)",
         (DATA / "fixtures/gpu-mi300x/gemm.xplane.pb", None), (HAND / "gemm_whole_tiles.hlo", "mi300x")),
        ("waste:offload", "hand-written: 128 MiB to host and back (S(5))", "the same kept on device",
         (DATA / "hlo/host_offload.hlo", "h100"), (HAND / "offload_kept.hlo", "h100")),
    ]


def detector_table(tmp: Path) -> str:
    import audit
    from audit.costmodel.units import human, percent

    rows = ["| detector | program | finding | time per step | twin | fired on the twin |", "|---|---|---|---|---|---|"]
    for cause, program, twin, (path, hw), (twin_path, twin_hw) in pairs(tmp):
        found = [f for f in audit.inspect(path, hw).model.part("waste") or [] if f["cause"] == cause]
        fired = [f for f in audit.inspect(twin_path, twin_hw).model.part("waste") or [] if f["cause"] == cause]
        title = found[0]["title"].rsplit(": ", 1)[0] if found else "(none)"
        seconds = found[0]["time_per_step_s"] if found else None
        share = found[0]["share"] if found else None
        where = ("measured" if found and found[0]["origin"] == "trace" else
                 "measured x model" if found and found[0]["origin"] == "trace+model" else "expected")
        time_text = f"{human(seconds, 's')} {where}" + (f" ({percent(share)} of the step)" if share else "") \
            if seconds is not None else "-"
        rows.append(f"| `{cause}` | {program} | {title} | {time_text} | {twin} | {'yes' if fired else 'no'} |")
    return "\n".join(rows)


# Every real capture and dump the repository holds, with the hardware a user passes (None: detected).
REAL = (
    ("captures/cpu-default-run/vm.xplane.pb", CPU), ("captures/h100-jax0.11/train-step.xplane.pb", None),
    ("captures/h100-jax0.11/train-step-cmdbuf.xplane.pb", None),
    ("captures/h100-jax0.11/attention-sweep/attention-sweep.xplane.pb", None),
    ("captures/h100-jax0.11/microbench.xplane.pb", None), ("captures/h200-jax0.11/train-step.xplane.pb", None),
    ("captures/h200-jax0.11/microbench.xplane.pb", None),
    ("captures/h100-jax0.11/dump/module_0000.jit_train_step.sm_9.0a_gpu_after_optimizations.txt", None),
    ("captures/h200-jax0.11/dump/module_0000.jit_train_step.sm_9.0a_gpu_after_optimizations.txt", None),
    ("captures/h100-jax0.11/attention", None), ("captures/h100-jax0.11/attention-sweep/hlo", "h100"),
    ("fixtures/gpu-mi300x/attention.xplane.pb", None), ("fixtures/gpu-mi300x/conv3d-8gpu.xplane.pb", None),
    ("fixtures/gpu-mi300x/conv3d-legacy.xplane.pb", None), ("fixtures/gpu-mi300x/elementwise.xplane.pb", None),
    ("fixtures/gpu-mi300x/gemm.xplane.pb", None), ("fixtures/gpu-a100-pax-nsys-jax", None),
    ("fixtures/gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb", "h100"),
    ("fixtures/tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt", "v6e:2x4"),
    ("hlo/tpu-aot/fsdp_mlp.tpu-v5p-2x2x1.after_optimizations.txt", "v5p:2x2x1"),
    ("hlo/tpu-aot/fsdp_mlp.tpu-v6e-2x4.after_optimizations.txt", "v6e:2x4"),
)


def real_table() -> str:
    """What fires on every real capture and dump (tests/test_waste.py holds the hand-reviewed set)."""
    import audit

    rows = ["| input | findings (time per step, share of the step) |", "|---|---|"]
    for relative, hw in REAL:
        found = audit.inspect(DATA / relative, hw).model.part("waste") or []
        said = "; ".join(f"`{f['cause']}` {f['title']}" for f in found) or "none"
        rows.append(f"| {relative} | {said} |")
    return "\n".join(rows)


def cost_table(repeats: int = 5) -> str:
    """What the detectors cost within a warm `inspect` of the largest real programs: their own CPU
    time (the detectors timed where the analysis calls them, on its own modules and costs) against
    the whole command's, the fastest of `repeats` runs each (CPU time: the machine is shared)."""
    import audit
    import audit.analyses.waste as waste
    import audit.orchestration.pipeline as pipeline
    from audit.parsers.hlo.files import load_hlo_file

    spent: list[float] = []
    attach = waste.attach_waste

    def timed_attach(*args, **kwargs):
        start = time.process_time()
        try:
            return attach(*args, **kwargs)
        finally:
            spent.append(time.process_time() - start)

    waste.attach_waste = pipeline.attach_waste = timed_attach
    rows = ["| input | instructions | `inspect` CPU (s) | detectors CPU (s) | share |", "|---|---|---|---|---|"]
    for name, path, hw in (
            ("MaxText train step, H100 (HloModuleProto)",
             DATA / "fixtures/gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb", "h100"),
            ("Llama 3 8B train step, v6e (text)",
             DATA / "fixtures/tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt", "v6e:2x4"),
            ("H100 train step (profile)", DATA / "captures/h100-jax0.11/train-step.xplane.pb", None),
            ("FSDP transformer step, 8 CPU devices (profile)", DATA / "captures/cpu-default-run/vm.xplane.pb", CPU)):
        audit.inspect(path, hw)  # warm: the readers and the catalog loaded once
        runs = []
        for _ in range(repeats):
            spent.clear()
            start = time.process_time()
            audit.inspect(path, hw)
            runs.append((time.process_time() - start, sum(spent)))
        whole, own = min(r[0] for r in runs), min(r[1] for r in runs)
        size = "(profile)" if "xplane" in path.name else f"{load_hlo_file(path).instruction_count:,}"
        rows.append(f"| {name} | {size} | {whole:.3f} | {own:.3f} | {own / whole:.1%} |")
    waste.attach_waste = pipeline.attach_waste = attach
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the tables into bench/RESULTS.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        markdown = detector_table(Path(tmp)) + "\n\n" + real_table() + "\n\n" + cost_table()
    print(markdown)
    if args.write:
        text = RESULTS.read_text()
        if START not in text:
            text += f"\n## Program waste detectors\n\n{START}\n{END}\n"
        before, rest = text.split(START, 1)
        RESULTS.write_text(f"{before}{START}\n{markdown}\n{END}{rest.split(END, 1)[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
