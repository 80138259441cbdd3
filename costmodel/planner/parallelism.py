"""Which collectives each kind of parallelism runs in one step, and how many times.

The book's table ("How to Scale Your Model", ch. 5.2, Key Takeaways), extended to the axes modern
training adds. Each entry returns (collective, count per step) in the order a step runs them;
the callers price each with their own volume and their own group of chips. `train` adds the
backward pass; `microbatches` repeats what runs per microbatch (gradient accumulation, a pipeline).
"""

from __future__ import annotations

Collectives = list[tuple[str, int]]


def _passes(train: bool) -> int:
    """Forward, and backward again when training."""
    return 2 if train else 1


def data_parallel(zero: int, train: bool = True, microbatches: int = 1) -> Collectives:
    """Gradients and weights over the data axis, by ZeRO stage (book ch. 5.1.1 and 5.1.2).

    ZeRO 0-1 (plain DP): the gradients all-reduced once per step. ZeRO 2: the gradients
    reduce-scattered per microbatch, the updated weight shards all-gathered once. ZeRO 3 (FSDP):
    the weights all-gathered before use, forward and again backward, per microbatch, and their
    gradients reduce-scattered. A forward-only step moves no gradients: only ZeRO 3 gathers.
    """
    m = microbatches
    if not train:
        return [("all-gather", m)] if zero >= 3 else []
    if zero <= 1:
        return [("all-reduce", 1)]
    if zero == 2:
        return [("reduce-scatter", m), ("all-gather", 1)]
    return [("all-gather", 2 * m), ("reduce-scatter", m)]


def across_replicas(zero: int) -> Collectives:
    """Hybrid sharding: ZeRO 2-3 within a replica, the sharded gradients all-reduced across the
    replicas once per step (ZeRO 0-1 all-reduce over the replicas with the rest of the data axis)."""
    return [("all-reduce", 1)] if zero >= 2 else []


def tensor_parallel(layers: int, train: bool = True, microbatches: int = 1,
                    sequence_parallel: bool = True) -> Collectives:
    """Activations over the tensor axis around each of a layer's two blocks, attention and MLP
    (book ch. 5.1.3): gathered before the block and reduce-scattered after it, forward and again
    backward. Without sequence parallelism (serving) each block's output is all-reduced instead."""
    count = 2 * _passes(train) * layers * microbatches
    if not sequence_parallel:
        return [("all-reduce", count)]
    return [("all-gather", count), ("reduce-scatter", count)]


def context_parallel(layers: int, train: bool = True, microbatches: int = 1) -> Collectives:
    """All-gather ring attention (Llama 3): keys and values gathered per layer forward and again
    backward, their gradients reduce-scattered backward."""
    out = [("all-gather", _passes(train) * layers * microbatches)]
    if train:
        out.append(("reduce-scatter", layers * microbatches))
    return out


def expert_parallel(moe_layers: int, dispatch: str = "all-to-all", train: bool = True,
                    microbatches: int = 1) -> Collectives:
    """Tokens to their experts and back per MoE layer, forward and again backward (GShard): an
    all-to-all to dispatch and one to combine; or, with `dispatch` "all-gather", the EP group's
    tokens gathered and the experts' outputs reduce-scattered back."""
    per_layer = _passes(train) * moe_layers * microbatches
    if dispatch == "all-gather":
        return [("all-gather", per_layer), ("reduce-scatter", per_layer)]
    return [("all-to-all", 2 * per_layer)]


def pipeline_parallel(hand_offs: int, train: bool = True) -> Collectives:
    """Activations to the next stage at each hand-off, and their gradients back to the previous
    one when training (book ch. 5.1.5)."""
    return [("collective-permute", _passes(train) * hand_offs)]
