"""Transformer accounting (book ch. 4): parameters, FLOPs, KV cache and activation bytes per token.

Shapes follow the book's letters: L layers, D d_model, F d_ff, N query heads, K KV heads,
H head dim, V vocabulary. Matmul FLOPs are 2 per multiply-add; training is forward (2x)
plus backward (4x), so 6 FLOPs per parameter per token.
"""

from __future__ import annotations

from typing import Any

from dataclasses import asdict, dataclass

from ...base.errors import InputError
from ...base.options import DEFAULTS
from ...parsers.hlo.dtypes import element_bytes

# Book ch. 4.4.2: without remat a layer keeps ~20 D-sized intermediates per token.
SAVED_PER_LAYER_NO_REMAT = 20


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of a dtype name such as `bf16` or `int8`; GB = 1e9 bytes."""
    size = element_bytes(dtype)
    if size is None:
        raise InputError(f"unknown dtype {dtype!r}", hint="e.g. bf16, f32, int8, fp8, int4")
    return size


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer.

    `experts` > 0 makes the MLP a mixture of experts: each MoE layer has `experts` routed
    MLPs of width `moe_d_ff` (default `d_ff`), `experts_per_token` of them active per token,
    plus `shared_experts` always-active ones; the first `first_dense_layers` layers keep a
    dense MLP of width `d_ff`.
    """

    layers: int
    d_model: int
    d_ff: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    gated_mlp: bool = True
    tied_embeddings: bool = False
    experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_d_ff: int | None = None
    first_dense_layers: int = 0
    name: str = "custom"
    sliding_window: int = 0  # keys a windowed layer's queries see (0: none)
    sliding_window_share: float = 1.0  # share of the layers with the window

    def __post_init__(self) -> None:
        for f in ("layers", "d_model", "d_ff", "heads", "kv_heads", "head_dim", "vocab"):
            if getattr(self, f) <= 0:
                raise InputError(f"model {self.name}: {f} must be positive, got {getattr(self, f)}")
        if self.heads % self.kv_heads:
            raise InputError(f"model {self.name}: heads ({self.heads}) must be a multiple of "
                             f"kv_heads ({self.kv_heads})")
        if self.experts and not 0 < self.experts_per_token <= self.experts:
            raise InputError(f"model {self.name}: experts_per_token must be in 1..{self.experts}")
        if self.sliding_window < 0 or not 0 <= self.sliding_window_share <= 1:
            raise InputError(f"model {self.name}: a sliding window is a key count >= 0 on a share of the layers in [0, 1]")
        if self.first_dense_layers > self.layers:
            raise InputError(f"model {self.name}: first_dense_layers exceeds layers")

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    @property
    def moe_layers(self) -> int:
        return self.layers - self.first_dense_layers if self.experts else 0

    @property
    def expert_width(self) -> int:
        return self.moe_d_ff or self.d_ff

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def attention_params_per_layer(cfg: ModelConfig) -> int:
    """W_Q and W_O are [D, N, H]; W_K and W_V are [D, K, H] (book ch. 4.3)."""
    return 2 * cfg.d_model * cfg.heads * cfg.head_dim + 2 * cfg.d_model * cfg.kv_heads * cfg.head_dim


def _expert_params(cfg: ModelConfig) -> int:
    return cfg.mlp_matrices * cfg.d_model * cfg.expert_width


def mlp_params(cfg: ModelConfig, active: bool = False) -> int:
    """All MLP parameters, or (active=True) those one token multiplies by, summed over layers."""
    dense = cfg.mlp_matrices * cfg.d_model * cfg.d_ff * (cfg.layers - cfg.moe_layers)
    if not cfg.experts:
        return dense
    routed = cfg.experts_per_token if active else cfg.experts
    router = cfg.d_model * cfg.experts
    return dense + cfg.moe_layers * ((routed + cfg.shared_experts) * _expert_params(cfg) + router)


def params_read_per_step(cfg: ModelConfig, tokens: int) -> float:
    """Parameters a forward step over `tokens` tokens must read: all of a dense model, but for
    an MoE only the experts some token routes to, E * (1 - (1 - k/E)^tokens) per layer in
    expectation under uniform routing."""
    total = param_breakdown(cfg)["total"]
    if not cfg.experts:
        return float(total)
    k, e = cfg.experts_per_token, cfg.experts
    touched = e * (1.0 - (1.0 - k / e) ** max(tokens, 0))
    return total - cfg.moe_layers * (e - touched) * _expert_params(cfg)


def embedding_params(cfg: ModelConfig) -> int:
    """Input embedding and unembedding, one shared [V, D] matrix when tied."""
    return cfg.vocab * cfg.d_model * (1 if cfg.tied_embeddings else 2)


def norm_params(cfg: ModelConfig) -> int:
    """Two RMS/LayerNorm scales per layer plus the final one."""
    return cfg.d_model * (2 * cfg.layers + 1)


def param_breakdown(cfg: ModelConfig) -> dict[str, int]:
    """Parameter counts by part, with `total` and `active` (per token, MoE-aware)."""
    attn = attention_params_per_layer(cfg) * cfg.layers
    parts = {"attention": attn, "mlp": mlp_params(cfg), "embeddings": embedding_params(cfg),
             "norms": norm_params(cfg)}
    parts["total"] = sum(parts.values())
    parts["active"] = attn + mlp_params(cfg, active=True) + embedding_params(cfg) + norm_params(cfg)
    return parts


def matmul_params(cfg: ModelConfig) -> int:
    """Active parameters used in a matmul per token: attention, MLP and the unembedding.

    The input embedding is a lookup, not a matmul; norms are negligible (book ch. 4.3).
    """
    return attention_params_per_layer(cfg) * cfg.layers + mlp_params(cfg, active=True) \
        + cfg.vocab * cfg.d_model


def attention_flops_per_token(cfg: ModelConfig, context: int, training: bool = False) -> float:
    """Dot-product attention FLOPs per token attending over `context` keys, all layers.

    QK^T and AV are each 2*context*N*H per token per layer (book ch. 4.3 counts the full
    T x T score matrix); training multiplies by 3.
    """
    forward = 4.0 * context * cfg.heads * cfg.head_dim * cfg.layers
    return 3.0 * forward if training else forward


def forward_flops_per_token(cfg: ModelConfig, context: int = 0) -> float:
    """2 FLOPs per matmul parameter plus dot-product attention over `context` keys."""
    return 2.0 * matmul_params(cfg) + attention_flops_per_token(cfg, context)


def training_flops_per_token(cfg: ModelConfig, seq: int = 0) -> float:
    """The book's 6N rule (N = matmul parameters) plus 12*L*T*N*H attention at sequence length T."""
    return 6.0 * matmul_params(cfg) + attention_flops_per_token(cfg, seq, training=True)


def attention_crossover_seq(cfg: ModelConfig) -> float:
    """Sequence length where per-layer attention FLOPs equal the layer's matmul FLOPs.

    Book ch. 4.3: 12*T*N*H = 6*(params per layer), i.e. T = 8D when F = 4D, NH = D, K = N.
    """
    per_layer = attention_params_per_layer(cfg) + mlp_params(cfg, active=True) / cfg.layers
    return per_layer / (2.0 * cfg.heads * cfg.head_dim)


def kv_bytes_per_token(cfg: ModelConfig, dtype: str = "bf16") -> float:
    """Keys and values for one token over all layers: 2*L*K*H*bytes (book ch. 7.1.6)."""
    return 2.0 * cfg.layers * cfg.kv_heads * cfg.head_dim * dtype_bytes(dtype)


def activation_bytes_per_token(cfg: ModelConfig, checkpoints_per_layer: float | None,
                               dtype: str = "bf16") -> float:
    """Saved activations per token for the backward pass, all layers.

    `checkpoints_per_layer` D-sized arrays per layer (1 = block remat, 4 = the book's
    conservative choice in ch. 6); None means no remat, ~20 per layer (book ch. 4.4.2).
    """
    saved = SAVED_PER_LAYER_NO_REMAT if checkpoints_per_layer is None else checkpoints_per_layer
    if saved < 0:
        raise InputError(f"checkpoints per layer must be >= 0, got {saved}")
    return saved * cfg.d_model * cfg.layers * dtype_bytes(dtype)


def model_summary(cfg: ModelConfig, seq: int, dtype: str = "bf16",
                  checkpoints_per_layer: float = DEFAULTS.plan_checkpoints_per_layer) -> dict[str, Any]:
    """Everything `audit plan model` prints, in SI units (FLOPs, bytes, tokens)."""
    return {
        "config": cfg.to_json(),
        "params": param_breakdown(cfg),
        "matmul_params": matmul_params(cfg),
        "seq": seq,
        "forward_flops_per_token": forward_flops_per_token(cfg, seq),
        "training_flops_per_token": training_flops_per_token(cfg, seq),
        "six_n_flops_per_token": 6.0 * matmul_params(cfg),
        "attention_training_flops_per_token": attention_flops_per_token(cfg, seq, training=True),
        "attention_crossover_seq": attention_crossover_seq(cfg),
        "kv_dtype": dtype,
        "kv_bytes_per_token": kv_bytes_per_token(cfg, dtype),
        "activation_bytes_per_token": {
            "no_remat": activation_bytes_per_token(cfg, None, dtype),
            "remat": activation_bytes_per_token(cfg, checkpoints_per_layer, dtype),
            "checkpoints_per_layer": checkpoints_per_layer,
        },
    }


# Named architectures from their published configs (Hugging Face config.json).
MODELS: dict[str, ModelConfig] = {m.name: m for m in (
    ModelConfig(32, 4096, 11008, 32, 32, 128, 32000, name="llama2-7b"),
    ModelConfig(40, 5120, 13824, 40, 40, 128, 32000, name="llama2-13b"),
    ModelConfig(80, 8192, 28672, 64, 8, 128, 32000, name="llama2-70b"),
    ModelConfig(32, 4096, 14336, 32, 8, 128, 128256, name="llama3-8b"),
    ModelConfig(80, 8192, 28672, 64, 8, 128, 128256, name="llama3-70b"),
    ModelConfig(126, 16384, 53248, 128, 8, 128, 128256, name="llama3-405b"),
    ModelConfig(28, 3072, 24576, 16, 16, 256, 256000, tied_embeddings=True, name="gemma-7b"),
    ModelConfig(46, 4608, 36864, 32, 16, 128, 256000, tied_embeddings=True, name="gemma-27b"),
    # DeepSeek-V3's MoE shape (671B total, 37B active). Its multi-head latent attention is
    # stood in for by grouped-query attention of about the same parameter count (~11B);
    # MLA's compressed KV cache (576 values per token per layer) is not modelled.
    ModelConfig(61, 7168, 18432, 128, 64, 64, 129280, experts=256, experts_per_token=8,
                shared_experts=1, moe_d_ff=2048, first_dense_layers=3, name="deepseek-v3-like"),
    # GPT-3 175B (Brown et al. 2020, table 2.1) with Megatron-LM's 51,200-token vocabulary and
    # tied embeddings (Narayanan et al. 2021); a plain two-matrix GeLU MLP.
    ModelConfig(96, 12288, 49152, 96, 96, 128, 51200, gated_mlp=False, tied_embeddings=True, name="gpt3-175b"),
    # Megatron-LM's 1T benchmark model (Narayanan et al. 2021, table 1): 128 layers, hidden 25,600.
    ModelConfig(128, 25600, 102400, 160, 160, 160, 51200, gated_mlp=False, tied_embeddings=True,
                name="megatron-1t"),
    # PaLM 540B (Chowdhery et al. 2022, table 1): SwiGLU with d_ff = 4D, multi-query attention
    # (one KV head), shared input/output embeddings, 256k vocabulary.
    ModelConfig(118, 18432, 73728, 48, 1, 256, 256000, tied_embeddings=True, name="palm-540b"),
    # MaxText's synthetic benchmark models (MaxText/configs/base.yml: emb 2048, 16 heads of 128,
    # MLP 7168 SwiGLU, 16 layers, 32k vocabulary; `global_parameter_scale` S doubles heads and MLP,
    # then the embedding, then the layers in turn, pyconfig.get_individual_scales)
    ModelConfig(32, 4096, 28672, 64, 64, 128, 32000, name="maxtext-16b"),
    ModelConfig(32, 8192, 28672, 64, 64, 128, 32000, name="maxtext-32b"),
    ModelConfig(64, 8192, 28672, 64, 64, 128, 32000, name="maxtext-64b"),
    ModelConfig(64, 8192, 57344, 128, 128, 128, 32000, name="maxtext-128b"),
    # GPT-OSS-120B (openai/gpt-oss-120b config.json): 36 layers, all MoE with 128 experts of width
    # 2880, 4 per token; 64 query and 8 KV heads of 64; a 128-token sliding window on every other layer
    ModelConfig(36, 2880, 2880, 64, 8, 64, 201088, experts=128, experts_per_token=4, moe_d_ff=2880,
                sliding_window=128, sliding_window_share=0.5, name="gpt-oss-120b"),
    # Qwen3-235B-A22B (Qwen/Qwen3-235B-A22B config.json): 94 layers, all MoE with 128 experts of
    # width 1536, 8 per token, no shared expert; 64 query and 4 KV heads of 128
    ModelConfig(94, 4096, 12288, 64, 4, 128, 151936, experts=128, experts_per_token=8, moe_d_ff=1536,
                name="qwen3-235b-a22b"),
)}


def lookup_model(name: str) -> ModelConfig:
    """A named architecture; InputError listing the known names otherwise."""
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise InputError(f"unknown model {name!r}", hint=f"known: {', '.join(MODELS)}") from None
