"""A fully sharded (FSDP) MLP training step: the collectives XLA fuses on TPU.

Weights are sharded over every device on their first dimension and gathered for the forward and
backward passes; the weight gradients are reduce-scattered back onto the shards. Compiled for a
TPU topology (`audit run --target`), XLA writes the reduce-scatter as an all-reduce-scatter fusion
(`fusion(kind=kCustom, calls=%all-reduce-scatter)`), the gathers as all-gathers or, with
`--xla_tpu_enable_async_collective_fusion*` and `--xla_enable_async_all_gather`, as async
collective fusions that carry them beside the matmuls, and on v6e as collective matmuls
(collective-permutes in loops). The compiled HLO is in `../hlo/tpu-aot/`.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from audit import Context, Workload, workload

D_MODEL, D_FF, TOKENS, LAYERS = 4096, 8192, 16 * 1024, 2


def _loss(weights, x):
    for w1, w2 in weights:
        x = jnp.tanh(x @ w1) @ w2
    return jnp.mean(x.astype(jnp.float32) ** 2)


@workload
def build(ctx: Context) -> Workload:
    # One FSDP axis over every device, in the order the topology lists them.
    mesh = Mesh(np.array(ctx.devices), ("fsdp",))
    weights = [(ctx.array((D_MODEL, D_FF), "bfloat16", spec=("fsdp", None), mesh=mesh, seed=2 * i),
                ctx.array((D_FF, D_MODEL), "bfloat16", spec=("fsdp", None), mesh=mesh, seed=2 * i + 1))
               for i in range(LAYERS)]
    x = ctx.array((TOKENS, D_MODEL), "bfloat16", spec=("fsdp", None), mesh=mesh)
    shard = NamedSharding(mesh, P("fsdp", None))

    def step(weights, x):
        grads = jax.grad(_loss)(weights, x)
        return jax.tree.map(lambda w, g: w - 1e-3 * g, weights, grads)

    return Workload(step=jax.jit(step, out_shardings=[(shard, shard)] * LAYERS), args=(weights, x),
                    mesh=mesh, name="fsdp_mlp")
