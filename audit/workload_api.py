"""The public API of structured workloads: what one step is, and how to build it.

A workload module defines one function marked with `@workload`. It takes a
`Context` and returns a `Workload`: a jitted step, its arguments, and
optionally a mesh, an `update` that feeds a training step's outputs back in,
and the model configuration. `audit run` then handles warmup, step markers,
per-step synchronisation and the number of steps:

    from audit import Context, Workload, workload

    @workload
    def build(ctx: Context) -> Workload:
        mesh = ctx.mesh({"data": len(ctx.devices)})
        x = ctx.array((1024, 1024), "bfloat16", spec=("data", None), mesh=mesh)
        return Workload(step=jax.jit(lambda a: a @ a.T), args=(x,), mesh=mesh)

JAX is imported only when a context or a workload is used, so `import audit`
stays cheap.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .base.errors import InputError, UsageError

WORKLOAD_MARK = "__audit_workload__"


@dataclass
class Context:
    """What a workload is built for: its own command-line arguments and the devices to use.

    **Arguments:**
    - `argv`: the workload's arguments (what follows `--` on the `audit run` command line).
    - `devices`: the JAX devices to build meshes over; all of `jax.devices()` when empty.
      For an ahead-of-time compile these are the devices of a TPU topology.
    - `aot`: arrays are abstract (`jax.ShapeDtypeStruct`) because nothing will execute.
    """

    argv: list[str] = field(default_factory=list)
    devices: list[Any] = field(default_factory=list[Any])
    aot: bool = False

    def __post_init__(self) -> None:
        if not self.devices:
            import jax

            self.devices = list(jax.devices())

    def mesh(self, axis_sizes: dict[str, int]) -> Any:
        """A `jax.sharding.Mesh` over `ctx.devices` with these axis names and sizes (in order).

        Axes are `Auto`, so XLA's partitioner inserts the collectives, as in the book.
        """
        import jax
        from jax.sharding import AxisType

        needed = math.prod(axis_sizes.values())
        if needed > len(self.devices) or needed < 1:
            raise UsageError(f"mesh {axis_sizes} needs {needed} devices but {len(self.devices)} are available",
                             hint="pass --devices N to `audit run`, or pick a smaller mesh")
        return jax.make_mesh(tuple(axis_sizes.values()), tuple(axis_sizes), devices=self.devices[:needed],
                             axis_types=(AxisType.Auto,) * len(axis_sizes))

    def array(self, shape: Sequence[int], dtype: Any, spec: Sequence[Any] | None = None, mesh: Any = None,
              seed: int = 0, maxval: int = 128, scale: float = 1.0) -> Any:
        """A random array of `shape` and `dtype` placed as `NamedSharding(mesh, PartitionSpec(*spec))`.

        Floats are normal with standard deviation `scale` (0 gives zeros, e.g. optimizer state);
        integers are uniform in [0, maxval) (token ids: pass the vocabulary size).
        The array is generated directly with its sharding, so no device holds it whole.
        Under `aot` the result is a `jax.ShapeDtypeStruct` with the same sharding instead.
        """
        import jax
        import jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

        if spec is not None and mesh is None:
            raise UsageError(f"array {tuple(shape)} has spec {tuple(spec)} but no mesh",
                             hint="pass mesh=ctx.mesh({...})")
        sharding = (SingleDeviceSharding(self.devices[0]) if mesh is None
                    else NamedSharding(mesh, PartitionSpec(*(spec or ()))))
        dtype = jnp.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        if self.aot:
            return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
        # Each shard is generated on the host from (seed, its offset): no compilation per array,
        # the same values wherever a shard is replicated, and no device ever holds the whole array.
        return jax.make_array_from_callback(
            shape, sharding, lambda index: _random_block(shape, index, dtype, seed, maxval, scale))


def _random_block(shape: tuple[int, ...], index: tuple[slice, ...] | None, dtype: Any, seed: int, maxval: int,
                  scale: float) -> Any:
    import numpy as np

    if index is None:  # JAX types the callback's index as optional: then the block is the whole array
        index = tuple(slice(None) for _ in shape)
    bounds = [sl.indices(n) for sl, n in zip(index, shape)]
    block = tuple(len(range(*b)) for b in bounds)
    rng = np.random.default_rng([seed, *(b[0] for b in bounds)])
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, maxval, size=block).astype(dtype)
    if scale == 0:
        return np.zeros(block, dtype)
    return (rng.standard_normal(size=block, dtype=np.float32) * np.float32(scale)).astype(dtype)


@dataclass
class Workload:
    """One step of a JAX program, ready to be run N times.

    **Arguments:**
    - `step`: the function of one step, ideally `jax.jit`-ed (it is jitted if not).
    - `args`, `kwargs`: its arguments (arrays from `Context.array`, parameters, a batch).
    - `name`: shown in reports; the workload function's name when empty.
    - `mesh`: the mesh the step runs on, recorded in the report.
    - `update`: `update(args, outputs) -> args` feeds a training step's outputs back as the
      next step's arguments (new parameters, optimizer state); without it every step
      reuses the same arguments.
    - `config`: the model and batch configuration (layers, d_model, batch, ...), recorded in
      the report so the plan's prediction can be printed next to the profile.
    """

    step: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict[str, Any])
    name: str = ""
    mesh: Any = None
    update: Callable[[tuple[Any, ...], Any], tuple[Any, ...]] | None = None
    config: dict[str, Any] = field(default_factory=dict[str, Any])

    def jitted(self) -> Any:
        """The step as a jitted function (`step` itself when it already is one)."""
        if hasattr(self.step, "lower"):
            return self.step
        import jax

        self.step = jax.jit(self.step)
        return self.step

    def compile(self) -> float:
        """Compile the step for its arguments; return the compile time in seconds (host wall clock)."""
        start = time.perf_counter()
        self.jitted().lower(*self.args, **self.kwargs).compile()
        return time.perf_counter() - start

    def run(self, steps: int, *, first_step: int = 0, annotate: bool = False,
            on_step: Callable[[int, float], None] | None = None) -> list[float]:
        """Run `steps` steps, each finished (`block_until_ready`) before the next is dispatched.

        Waiting matters: dispatching steps back to back can deadlock the CPU backend's
        collective rendezvous with many simulated devices. With `annotate`, each step is
        marked with `jax.profiler.StepTraceAnnotation("train", step_num=i)` so the profile
        knows its steps. Returns each step's host wall time in seconds.
        """
        import jax

        fn, times = self.jitted(), []
        for i in range(first_step, first_step + steps):
            start = time.perf_counter()
            if annotate:
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    out = jax.block_until_ready(fn(*self.args, **self.kwargs))
            else:
                out = jax.block_until_ready(fn(*self.args, **self.kwargs))
            times.append(time.perf_counter() - start)
            if on_step is not None:
                on_step(i, times[-1])
            if self.update is not None:
                self.args = tuple(self.update(self.args, out))
        return times

    def describe_mesh(self) -> dict[str, int] | None:
        """The mesh as {axis name: size}, or None without a mesh."""
        if self.mesh is None:
            return None
        return {str(k): int(v) for k, v in dict(self.mesh.shape).items()}


def workload(fn: Callable[[Context], Workload]) -> Callable[[Context], Workload]:
    """Mark `fn(ctx) -> Workload` as its module's workload, the one `audit run` builds."""
    setattr(fn, WORKLOAD_MARK, True)
    return fn


def import_script(path: str | Path, module_name: str = "__audit_workload__") -> Any:
    """Import a workload file as a module (not as `__main__`, so its main block does not run)."""
    path = Path(path).resolve()
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InputError("cannot import this file as Python", path=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # as `python script.py` would, for its sibling imports
    spec.loader.exec_module(module)
    return module


def find_builder(module: Any, path: str | Path) -> Callable[[Context], Workload]:
    """The one function of `module` marked with `@workload`."""
    marked = [v for v in vars(module).values() if callable(v) and getattr(v, WORKLOAD_MARK, False)]
    if len(marked) != 1:
        raise InputError(f"expected exactly one @workload function, found {len(marked)}", path=path,
                         hint="mark the function that returns a Workload with @audit.workload")
    builder: Callable[[Context], Workload] = marked[0]
    return builder


def load_workload(path: str | Path, argv: Sequence[str] = (), *, devices: Sequence[Any] | None = None,
                  aot: bool = False) -> tuple[Workload, Context]:
    """Import a workload file and build its workload for these arguments and devices.

    Exceptions raised by the workload's own code propagate unchanged, so the caller can
    show the workload's traceback.
    """
    module = import_script(path)
    builder = find_builder(module, path)
    ctx = Context(argv=list(argv), devices=list(devices or []), aot=aot)
    built = builder(ctx)
    if not isinstance(built, Workload):
        raise InputError(f"{builder.__name__}() returned {type(built).__name__}, not a Workload", path=path,
                         hint="return audit.Workload(step=..., args=...)")
    if not built.name:
        built.name = Path(path).stem if builder.__name__ in ("build", "main") else builder.__name__
    return built, ctx
