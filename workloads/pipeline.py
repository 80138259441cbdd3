"""A pipeline-parallel training step: transformer layers in stages over devices (How to Scale Your Model, ch. 5).

The book's scheme, written with `shard_map` over a mesh axis `stage`: device i holds
layers [i L/S, (i+1) L/S) (stage 0 also the embedding, the last stage the unembedding and
the loss). The global batch is cut into `--microbatches` microbatches; at each of the
M + S - 1 ticks every stage runs its layers on the activation it holds, if it holds a real
microbatch (`lax.cond`, so an idle stage computes nothing), and `jax.lax.ppermute` hands the
result to the next stage. Gradients flow back through the transposed permutes, so the
backward pass is the same pipeline in reverse: GPipe (all forwards, then all backwards).
A plain SGD update follows on each stage's own weights; no other collective runs.

What the book predicts the profile shows: 2 (M + S - 2) collective-permutes per step (one
per tick but the last, forward and backward), each of a microbatch's activations,
[batch / M, seq, d_model]; each stage busy for M of the M + S - 1 ticks, so idle (or
waiting in a permute) for (S - 1) / (M + S - 1) of the step: the bubble, which more
microbatches shrink. Defaults are tiny, for a CPU with simulated devices
(XLA_FLAGS=--xla_force_host_platform_device_count=4).
"""

from __future__ import annotations

import argparse
from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from audit import Context, Workload, workload
from audit.workloads.transformer import attention, mlp, rms_norm

AXIS = "stage"


def parse(argv: list[str], devices: int) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="pipeline.py", description="pipeline-parallel training step")
    parser.add_argument("--stages", type=int, default=None, help="pipeline stages (default: every device)")
    parser.add_argument("--microbatches", type=int, default=None, help="default: 2 x stages")
    parser.add_argument("--layers-per-stage", type=int, default=1)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--d-ff", type=int, default=512)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--batch", type=int, default=None, help="global batch in sequences (default: microbatches)")
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--lr", type=float, default=1e-3)
    o = parser.parse_args(argv)
    o.stages = o.stages or devices
    o.microbatches = o.microbatches or 2 * o.stages
    o.batch = o.batch or o.microbatches
    if o.stages > devices or o.stages < 1:
        parser.error(f"--stages {o.stages} needs that many devices; {devices} are available")
    if o.batch % o.microbatches or o.d_model % o.heads:
        parser.error("--batch must be a multiple of --microbatches and --d-model of --heads")
    o.head_dim = o.d_model // o.heads
    return o


def param_shapes(o: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """Each weight with a leading stage axis: device i holds slice i (its layers, or unused zeros)."""
    S, D, F, H, K = o.stages, o.d_model, o.d_ff, o.heads, o.head_dim
    out = {"embed": (S, o.vocab, D), "unembed": (S, D, o.vocab), "norm_f": (S, D)}
    for j in range(o.layers_per_stage):
        out.update({f"{j}.norm1": (S, D), f"{j}.norm2": (S, D), f"{j}.wq": (S, D, H, K), f"{j}.wk": (S, D, H, K),
                    f"{j}.wv": (S, D, H, K), f"{j}.wo": (S, H, K, D), f"{j}.w_gate": (S, D, F),
                    f"{j}.w_up": (S, D, F), f"{j}.w_down": (S, F, D)})
    return out


def run_stage(p: dict[str, jax.Array], x: jax.Array, layers: int, heads: int) -> jax.Array:
    for j in range(layers):
        layer = {k.split(".", 1)[1]: v for k, v in p.items() if k.startswith(f"{j}.")}
        x = x + attention(rms_norm(x, layer["norm1"]), layer, heads)
        x = x + mlp(rms_norm(x, layer["norm2"]), layer)
    return x


def cross_entropy(p: dict[str, jax.Array], x: jax.Array, targets: jax.Array) -> jax.Array:
    logits = jnp.dot(rms_norm(x, p["norm_f"]), p["unembed"]).astype(jnp.float32)
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)


def embed_or_hold(fresh: tuple[jax.Array, jax.Array], held: jax.Array) -> jax.Array:
    """Stage 0 starts a new microbatch from its tokens; the others keep what they were handed."""
    table, tokens = fresh
    return table[tokens].astype(held.dtype)


def pipeline_loss(p: dict[str, jax.Array], tokens: jax.Array, targets: jax.Array, o: argparse.Namespace) -> jax.Array:
    """This stage's share of the loss (the last stage's microbatch losses; 0 elsewhere), GPipe forward."""
    S, M = o.stages, o.microbatches
    stage = jax.lax.axis_index(AXIS)
    mb_tokens = tokens.reshape(M, -1, tokens.shape[-1])
    mb_targets = targets.reshape(M, -1, targets.shape[-1])
    # Both differ per stage: typed as varying over the stage axis, as the branches that write them.
    state = jax.lax.pcast(jnp.zeros((mb_tokens.shape[1], o.seq, o.d_model), jnp.dtype(o.dtype)), AXIS, to="varying")
    zero = jax.lax.pcast(jnp.zeros((), jnp.float32), AXIS, to="varying")
    loss = zero
    for tick in range(M + S - 1):
        mb = tick - stage
        active = (mb >= 0) & (mb < M)
        x = jax.lax.cond(stage == 0, embed_or_hold, lambda _, held: held, (p["embed"], mb_tokens[min(tick, M - 1)]),
                         state)
        out = jax.lax.cond(active, partial(run_stage, layers=o.layers_per_stage, heads=o.heads),
                           lambda _, y: y, p, x)
        last = active & (stage == S - 1)
        loss = loss + jax.lax.cond(last, cross_entropy, lambda *_: zero, p, out,
                                   mb_targets[jnp.clip(mb, 0, M - 1)]) / M
        if tick < M + S - 2 and S > 1:
            state = jax.lax.ppermute(out, AXIS, [(i, i + 1) for i in range(S - 1)])
    return loss


def make_step(o: argparse.Namespace, mesh: jax.sharding.Mesh):
    def stage_step(params: dict[str, jax.Array], tokens: jax.Array, targets: jax.Array):
        local = {k: v[0] for k, v in params.items()}
        loss, grads = jax.value_and_grad(pipeline_loss)(local, tokens, targets, o)
        new = {k: (local[k] - o.lr * grads[k])[None] for k in local}
        return new, loss[None]

    specs = {k: P(AXIS) for k in param_shapes(o)}
    return jax.shard_map(stage_step, mesh=mesh, in_specs=(specs, P(), P()), out_specs=(specs, P(AXIS)))


@workload
def build(ctx: Context) -> Workload:
    o = parse(ctx.argv, len(ctx.devices))
    mesh = ctx.mesh({AXIS: o.stages})
    params = {k: ctx.array(shape, o.dtype, (AXIS,), mesh, seed=i, scale=0 if "norm" in k else shape[1] ** -0.5)
              for i, (k, shape) in enumerate(param_shapes(o).items())}
    tokens = ctx.array((o.batch, o.seq), "int32", (None, None), mesh, seed=1000, maxval=o.vocab)
    targets = ctx.array((o.batch, o.seq), "int32", (None, None), mesh, seed=1001, maxval=o.vocab)
    step = jax.jit(make_step(o, mesh), donate_argnums=(0,))
    config = {"layers": o.layers_per_stage * o.stages, "d_model": o.d_model, "d_ff": o.d_ff, "heads": o.heads,
              "kv_heads": o.heads, "head_dim": o.head_dim, "vocab": o.vocab, "batch": o.batch, "seq": o.seq,
              "dtype": o.dtype, "sharding": "pp", "mesh": {AXIS: o.stages}, "mode": "train",
              "microbatches": o.microbatches, "schedule": "gpipe", "optimizer": "sgd"}
    return Workload(step=step, args=(params, tokens, targets), name="pipeline_train", mesh=mesh,
                    update=lambda args, out: (out[0], *args[1:]), config=config)


if __name__ == "__main__":
    import sys

    times = build(Context(argv=sys.argv[1:])).run(3)
    print("step times (s):", ", ".join(f"{t:.4f}" for t in times))
