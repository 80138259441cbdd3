"""Remat policies as frameworks name them: what each layer keeps for the backward pass, and what it re-runs.

Memory kept and work re-run are two facts, not one knob. Per token and layer, in elements of the
activation dtype (sequence parallelism splits them over TP, context parallelism over CP):
- `none`: every intermediate the backward pass reads: the two norms' inputs and outputs (4 D),
  Q, K, V and the attention output (2 N H + 2 K H; a flash-attention kernel keeps no score
  matrix), the MLP's up-projection outputs and activation (F per MLP matrix); re-runs nothing.
- `minimal` (MaxText `minimal`, "save the matmul outputs"): Q, K, V, the attention output, the
  out- and down-projection outputs (2 D) and the up-projection outputs; re-runs the norms and the
  activation function (memory-bound, no matmul FLOPs).
- `selective` (Megatron-LM selective recompute, Korthikanti et al. 2022): keeps what `none` keeps
  and re-runs the attention core (QK^T, softmax, AV) forward.
- `full` (block remat): keeps each layer's input (D) and re-runs the whole forward.
- `offload` (MaxText `minimal_offloaded`): `minimal`'s tensors go to host memory over the host
  link and come back for the backward pass; the device keeps the layer input.
- `checkpoints`: the old single knob (`--checkpoints-per-layer N`): N D-sized arrays kept, and
  the forward matmuls re-run in proportion to the rest of the book's 20 (ch. 4.4.2, 6).
`auto` is no policy: the roofline assumes nothing is re-run (a bound for every policy) and the
estimate takes the first of none, minimal, full whose memory fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...base.errors import UsageError
from .transformer import SAVED_PER_LAYER_NO_REMAT, ModelConfig, dtype_bytes

POLICIES = ("auto", "none", "minimal", "selective", "full", "offload")
AUTO_ORDER = ("none", "minimal", "full")
# Frameworks' own names for the same policies (MaxText `remat_policy`, Megatron-LM's flags)
ALIASES = {"minimal_offloaded": "offload", "offloaded": "offload", "save_matmul_outputs": "minimal",
           "save_dot_except_mlpwi": "minimal", "block": "full", "recompute_granularity_full": "full",
           "recompute_granularity_selective": "selective"}  # least re-run first: the estimate's choice under `auto`


@dataclass(frozen=True)
class RematPolicy:
    """A named policy: elements kept in HBM and moved to host per token per layer, and what is re-run."""

    name: str
    kept: float  # elements per token per layer kept in device memory
    offloaded: float  # elements per token per layer written to host and read back
    rerun_matmuls: float  # share of the layer's forward matmul FLOPs re-run
    rerun_attention: bool  # the attention core's forward re-run
    rerun_elementwise: bool  # norms and activation functions re-run (memory-bound)

    @property
    def recomputes(self) -> bool:
        return self.rerun_matmuls > 0 or self.rerun_attention or self.rerun_elementwise


def saved_everything(cfg: ModelConfig) -> float:
    """Elements per token per layer the backward pass reads when nothing is re-run."""
    d, attn = cfg.d_model, 2 * cfg.heads * cfg.head_dim + 2 * cfg.kv_heads * cfg.head_dim
    return 4 * d + attn + cfg.mlp_matrices * _mlp_width(cfg)


def _mlp_width(cfg: ModelConfig) -> float:
    """The MLP width one token sees on average over the layers: dense d_ff, or its experts' width
    times the experts it visits (routed and shared)."""
    if not cfg.experts:
        return float(cfg.d_ff)
    moe = (cfg.experts_per_token + cfg.shared_experts) * cfg.expert_width
    return (cfg.first_dense_layers * cfg.d_ff + cfg.moe_layers * moe) / cfg.layers


def matmul_outputs(cfg: ModelConfig) -> float:
    """Elements per token per layer `minimal` keeps: the projections' outputs and the attention output."""
    d, attn = cfg.d_model, 2 * cfg.heads * cfg.head_dim + 2 * cfg.kv_heads * cfg.head_dim
    return attn + 2 * d + (cfg.mlp_matrices - 1) * _mlp_width(cfg)


def policy(name: str, cfg: ModelConfig, checkpoints: float | None = None) -> RematPolicy:
    """The policy `name` for this model; `checkpoints` gives the old knob's policy."""
    d = float(cfg.d_model)
    if name == "checkpoints":
        n = SAVED_PER_LAYER_NO_REMAT if checkpoints is None else checkpoints
        return RematPolicy("checkpoints", n * d, 0.0, max(0.0, 1 - n / SAVED_PER_LAYER_NO_REMAT), False, False)
    if name in ("none", "auto"):
        return RematPolicy(name, saved_everything(cfg), 0.0, 0.0, False, False)
    if name == "minimal":
        return RematPolicy(name, matmul_outputs(cfg), 0.0, 0.0, False, True)
    if name == "selective":
        return RematPolicy(name, saved_everything(cfg), 0.0, 0.0, True, False)
    if name == "full":
        return RematPolicy(name, d, 0.0, 1.0, True, True)
    if name == "offload":
        return RematPolicy(name, d, matmul_outputs(cfg), 0.0, False, True)
    raise UsageError(f"unknown remat policy {name!r}", hint=", ".join(POLICIES))


def canonical(name: str) -> str:
    """A policy name, or a framework's name for one, as `POLICIES` names it."""
    key = name.strip().lower().replace("-", "_")
    key = ALIASES.get(key, key)
    if key not in POLICIES:
        raise UsageError(f"unknown remat policy {name!r}",
                         hint=f"{', '.join(POLICIES)} (or {', '.join(sorted(ALIASES))})")
    return key


def stated(remat: str, checkpoints: float | None) -> str:
    """The policy a run states: `--remat`, else the old `--checkpoints-per-layer`, else `auto`."""
    if remat != "auto" and checkpoints is not None:
        raise UsageError("give --remat or --checkpoints-per-layer, not both",
                         hint="--remat names what is kept and what is re-run")
    return "checkpoints" if checkpoints is not None else remat


def kept_by_policy(cfg: ModelConfig, dtype: str = "bf16") -> dict[str, float]:
    """Bytes per token, all layers, that each named policy keeps on the chip."""
    return {name: policy(name, cfg).kept * cfg.layers * dtype_bytes(dtype) for name in POLICIES if name != "auto"}
