"""Published large training runs with their published layouts, to check the planner against.

Each run states what its report states: the model, the chips, the layout, the batch, and what
it achieved (model FLOPs utilisation, tokens/s, GPU-hours or days). `validate` evaluates the
published layout (does it fit? its step-time lower bound beside the published step time and
the step time the published MFU implies) and puts the planner's own recommendation beside it.
A roofline lower bound above a step time that was achieved would be a planner bug.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..chips.catalog import lookup
from ..chips.hardware import Hardware
from .layout import parse_layout
from .layout_step import RunSpec, evaluate_layout
from .search import search
from .train import TrainSetup
from ..units import percent
from .step_ops import MATMUL_FORMATS
from .transformer import MODELS


@dataclass(frozen=True)
class PublishedRun:
    """One run as its report states it; `step_s` or `mfu` is what it achieved, `source` where it says so."""

    name: str
    model: str
    hardware: str
    chips: int
    layout: str
    batch_tokens: float
    seq: int
    mfu: float | None  # published model FLOPs utilisation
    step_s: float | None  # published step time, or derived from published throughput
    step_note: str
    source: str
    remat: str = "auto"  # the remat policy the report states ("auto": it states none)
    matmul_format: str = "bf16"  # the GEMMs' format (step_ops.MATMUL_FORMATS)

    def hw(self) -> Hardware:
        return lookup(self.hardware)

    def setup(self) -> TrainSetup:
        # The run's total tokens do not change a step; 1e12 stands in for them.
        return TrainSetup(1e12, self.batch_tokens, self.chips, seq=self.seq, remat=self.remat,
                          compute_dtype=MATMUL_FORMATS[self.matmul_format][0], matmul_format=self.matmul_format)


_MAXTEXT_V5P = ("MaxText README, 'Runtime Performance Results', TPU v5p table (AI-Hypercomputer/maxtext); "
                "run configs MaxText/configs/v5p/{}.sh: per_device_batch_size {}, max_target_length 2048, "
                "remat_policy {}, ici_tensor_parallelism {}, the rest FSDP")
_MAXTEXT_V5E = ("MaxText README, 'Runtime Performance Results', TPU v5e table, 1x v5e-256 (AI-Hypercomputer/maxtext); "
                "run configs MaxText/configs/v5e/{}.sh: per_device_batch_size {}, max_target_length 2048, "
                "remat_policy {}, {}")
_BRIDGE = ("Megatron-Bridge performance summary, NeMo container 26.02.01, pre-training LLAMA3_70B "
           "(docs.nvidia.com/nemo/megatron-bridge/nightly/performance-summary.html): 64 GPUs, GBS 256, "
           "sequence 8192, {}; step = GBS x sequence / (tokens/s/GPU x 64)")
_LLAMA3 = "Llama 3 report (Dubey et al. 2024, arXiv:2407.21783), table 4 and sec. 3.3.2"
_MEGATRON = "Narayanan et al. 2021, arXiv:2104.04473 (Megatron-LM on Selene, A100 80GB)"

def _maxtext(size: str, hardware: str, chips: int, layout: str, per_chip: int, remat: str, mfu: float,
             source: str) -> PublishedRun:
    return PublishedRun(f"MaxText {size.upper()} on {hardware.split(':')[0]}, {chips} chips", f"maxtext-{size}",
                        hardware, chips, layout, chips * per_chip * 2048, 2048, mfu, None,
                        f"{percent(mfu)} MFU", source, remat=remat)


RUNS: tuple[PublishedRun, ...] = (
    PublishedRun("Llama 3 405B, 8k context", "llama3-405b", "h100", 16384,
                 "dp=128,tp=8,pp=16,schedule=interleaved,v=2", 2048 * 8192, 8192, 0.41, None,
                 "400 TFLOP/s per GPU (41% MFU)", _LLAMA3),
    PublishedRun("Llama 3 405B, 8k context, 8,192 GPUs", "llama3-405b", "h100", 8192,
                 "dp=64,tp=8,pp=16,schedule=interleaved,v=2", 2048 * 8192, 8192, 0.43, None,
                 "430 TFLOP/s per GPU (43% MFU)", _LLAMA3),
    PublishedRun("Llama 3 405B, 128k context", "llama3-405b", "h100", 16384,
                 "dp=8,tp=8,cp=16,pp=16,schedule=interleaved,v=2", 128 * 131072, 131072, 0.38, None,
                 "380 TFLOP/s per GPU (38% MFU)", _LLAMA3),
    PublishedRun("DeepSeek-V3 (MoE, 671B/37B active)", "deepseek-v3-like", "h800", 2048,
                 "dp=128,pp=16,ep=64,zero=1,schedule=dualpipe", 15360 * 4096, 4096, None,
                 180e3 * 3600 / 1e12 * 15360 * 4096 / 2048,
                 "180K H800 GPU-hours per trillion tokens",
                 "DeepSeek-V3 report (arXiv:2412.19437), sec. 3.2 and 4.2; sec. 3.2.3: RMSNorm and the MLA "
                 "up-projections recomputed, the rest kept", remat="minimal"),
    PublishedRun("GPT-3 175B (Megatron-LM)", "gpt3-175b", "a100", 1024, "dp=8,tp=8,pp=16",
                 1536 * 2048, 2048, None, 34 * 86400 / (300e9 / (1536 * 2048)),
                 "300B tokens in 34 days (140 TFLOP/s per GPU)", _MEGATRON + ", sec. 5.1; activation "
                 "recomputation throughout (sec. 3.5)", remat="full"),
    PublishedRun("Megatron-LM 1T", "megatron-1t", "a100", 3072,
                 "dp=6,tp=8,pp=64,schedule=interleaved,v=2", 3072 * 2048, 2048, 0.52, None,
                 "163 TFLOP/s per GPU (52% of peak)", _MEGATRON + ", table 1; activation recomputation "
                 "throughout (sec. 3.5)", remat="full"),
    PublishedRun("PaLM 540B (two TPU v4 pods)", "palm-540b", "tpu-v4:12x16x16", 6144,
                 "dp=512,tp=12,zero=3,replicas=2",
                 2048 * 2048, 2048, 0.462, None, "46.2% MFU",
                 "PaLM report (Chowdhery et al. 2022, arXiv:2204.02311), sec. 4 and table 3"),
    PublishedRun("Llama 3 70B, MXFP8, 64 GB300", "llama3-70b", "gb300-nvl72:1x64", 64, "tp=1,pp=4,m=16",
                 256 * 8192, 8192, None, 256 * 8192 / (4798 * 64), "4,798 tokens/s/GPU",
                 _BRIDGE.format("DGX-GB300, MXFP8, MBS 2, TP 1, PP 4"), matmul_format="mxfp8"),
    PublishedRun("Llama 3 70B, NVFP4, 64 GB200", "llama3-70b", "gb200-nvl72:1x64", 64, "tp=2,pp=4,v=5,m=32",
                 256 * 8192, 8192, None, 256 * 8192 / (4557 * 64), "4,557 tokens/s/GPU",
                 _BRIDGE.format("DGX-GB200, NVFP4, MBS 1, TP 2, PP 4, VP 5"), matmul_format="nvfp4"),
    # v5p-N names N TensorCores: N / 2 chips
    _maxtext("32b", "tpu-v5p:4x4x4", 64, "fsdp=16,tp=4", 7, "minimal", 0.6776,
             _MAXTEXT_V5P.format("32b", 7, "minimal", 4)),
    _maxtext("64b", "tpu-v5p:4x4x4", 64, "fsdp=16,tp=4", 3, "minimal", 0.7031,
             _MAXTEXT_V5P.format("64b", 3, "minimal", 4)),
    _maxtext("128b", "tpu-v5p:4x4x8", 128, "fsdp=16,tp=8", 1, "minimal", 0.6868,
             _MAXTEXT_V5P.format("128b", 1, "minimal", 8)),
    _maxtext("128b", "tpu-v5p:4x8x8", 256, "fsdp=32,tp=8", 1, "minimal", 0.6853,
             _MAXTEXT_V5P.format("128b", 1, "minimal", 8)),
    _maxtext("16b", "tpu-v5e:16x16", 256, "fsdp=256", 6, "full", 0.6110,
             _MAXTEXT_V5E.format("16b", 6, "full", "FSDP over all chips")),
    _maxtext("32b", "tpu-v5e:16x16", 256, "fsdp=256", 4, "full", 0.6686,
             _MAXTEXT_V5E.format("32b", 4, "full", "FSDP over all chips")),
    _maxtext("64b", "tpu-v5e:16x16", 256, "fsdp=256", 2, "full", 0.5990,
             _MAXTEXT_V5E.format("64b", 2, "full", "FSDP over all chips")),
    _maxtext("16b", "tpu-v5e:16x16", 8192, "dp=8192,zero=3,replicas=32", 6, "full", 0.5465,
             _MAXTEXT_V5E.replace("1x v5e-256", "32x v5e-256").format(
                 "16b", 6, "full", "FSDP within each slice, data parallel over DCN across the 32")),
    _maxtext("64b", "tpu-v5e:16x16", 8192, "dp=8192,zero=3,replicas=32", 2, "full", 0.5018,
             _MAXTEXT_V5E.replace("1x v5e-256", "32x v5e-256").format(
                 "64b", 2, "full", "FSDP within each slice, data parallel over DCN across the 32")),
    _maxtext("128b", "tpu-v5e:16x16", 256, "fsdp=16,tp=16", 1, "offload", 0.5606,
             _MAXTEXT_V5E.format("128b", 1, "minimal_offloaded", "ici_fsdp_parallelism 16, ici_tensor_parallelism 16")),
)


def validate(run: PublishedRun) -> dict[str, Any]:
    """The published layout evaluated, the planner's recommendation, and the published figures."""
    cfg, hw = MODELS[run.model], run.hw()
    setup = run.setup()
    spec: RunSpec = setup.run_spec()
    published = evaluate_layout(cfg, spec, hw, parse_layout(run.layout, run.chips))
    found = search(cfg, spec, hw)
    peak = hw.peak("bf16").value
    model_flops = published.get("model_flops_per_step")
    at_mfu = None if run.mfu is None or model_flops is None else model_flops / (run.chips * peak * run.mfu)
    implied_mfu = None if run.step_s is None or model_flops is None else model_flops / (run.chips * peak * run.step_s)
    return {"name": run.name, "model": run.model, "hardware": hw.name, "chips": run.chips, "layout": run.layout,
            "source": run.source, "published": run.step_note, "published_mfu": run.mfu,
            "published_step_s": run.step_s, "step_at_published_mfu_s": at_mfu, "implied_mfu": implied_mfu,
            "evaluation": published, "recommendation": found["best"], "search": {
                k: found[k] for k in ("candidates", "valid", "fitting", "why")}}
