"""Which platform an HLO dump was compiled for, from its file name and its contents.

XLA names GPU dumps after the target (`module_0016.jit_step.sm_9.0_gpu_after_optimizations`,
`...gfx942_gpu_after_optimizations`), GPU programs call cuBLAS/hipBLASLt/cuDNN/Triton
through custom calls and carry `operation_queue_id` in their backend configs, and TPU
programs use tiled layouts (`{1,0:T(8,128)(2,1)}`) and TPU custom calls; CPU dumps are named
`...cpu_after_optimizations`, and CPU programs carry XLA:CPU backend configs (`outer_dimension_partitions`,
oneDNN configs, XNNPACK/YNNPACK fusions) and oneDNN custom calls. A module with none of these
(hand-written, or renamed and plain) is of an unknown platform: an absence of evidence is not a CPU.
A hint is what decided, so a message can say why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .gpu_target import gfx_version, sm_version
from .model import Module

_GPU_TARGETS = ("__cublas$", "__cudnn$", "__hipblas$", "__rocblas$", "__triton", "__gpu$", "__nccl",
                "__miopen")
_TPU_TARGETS = ("tpu_custom_call", "PrepareAsyncCallStart", "PrepareAsyncCallDone")
_GPU_CONFIG_KEYS = ('"operation_queue_id"', '"gemm_backend_config"', '"cudnn_conv_backend_config"',
                    '"cudnn_fmha_backend_config"')
_CPU_NAME = re.compile(r"(?<![a-z0-9])cpu_(?:after|before)_optimizations")
_CPU_TARGETS = ("__onednn$",)
_CPU_CONFIG_KEYS = ('"outer_dimension_partitions"', '"onednn_', '"__xnn_fusion"', '"__ynn_fusion"')


@dataclass(frozen=True)
class Platform:
    """`kind`: "gpu", "tpu", "cpu" or "unknown"; `vendor`: "nvidia", "amd" or ""; `arch`: (major, minor) of
    the compute capability (NVIDIA `sm_X.Y`) or the gfx target (AMD `gfx942` -> (9, 4)) when
    the dump names it; `evidence`: what decided, in words."""

    kind: str
    vendor: str = ""
    arch: tuple[int, int] | None = None
    evidence: str = ""

    @property
    def accelerator(self) -> bool:
        return self.kind in ("gpu", "tpu")

    def describe(self) -> str:
        """"an NVIDIA GPU", "an AMD GPU", "a GPU", "a TPU", "a CPU" or "an unknown platform"."""
        if self.vendor:
            return f"an {'NVIDIA' if self.vendor == 'nvidia' else 'AMD'} GPU"
        return {"gpu": "a GPU", "tpu": "a TPU", "cpu": "a CPU"}.get(self.kind, "an unknown platform")


def platform_of(module: Module, path: str = "") -> Platform:
    """The platform `module` (read from `path`) was compiled for; "unknown" when nothing says."""
    names = _names(module, path)
    for name, whose in names:
        sm = sm_version(name)
        if sm is not None:  # sm_9.0a (the arch-specific target XLA 0.11 names) is compute capability 9.0
            return Platform("gpu", "nvidia", sm[:2], f"{whose} says {sm[2]}")
        gfx = gfx_version(name)
        if gfx is not None:
            return Platform("gpu", "amd", gfx[:2], f"{whose} says {gfx[2]}")
    found = _from_contents(module)
    if found is not None:
        return found
    for name, whose in names:
        hit = _CPU_NAME.search(name)
        if hit:
            return Platform("cpu", evidence=f"{whose} says {hit[0]}")
    return Platform("unknown", evidence="no target in its name and no GPU, TPU or CPU custom call, backend "
                                        "config or layout in the module")


def _from_contents(module: Module) -> Platform | None:
    """The platform the instructions show: library calls, backend configs, tiled layouts."""
    tiled, cpu = 0, ""
    plain: set[int] = set()  # configs that say nothing, by identity: the readers share one per distinct value
    tiles: dict[int, bool] = {}  # shapes, by identity, likewise
    for _, instr in module.instructions():
        target = instr.custom_call_target
        if target:
            if target.startswith(_GPU_TARGETS):
                return Platform("gpu", _vendor(target), None, f"custom call {target}")
            if target in _TPU_TARGETS:
                return Platform("tpu", evidence=f"custom call {target}")
        config = instr.backend_config
        if config and id(config) not in plain:
            if any(key in config for key in _GPU_CONFIG_KEYS):
                return Platform("gpu", evidence="GPU backend configs (operation queues, GEMM or cuDNN configs)")
            if not any(key in config for key in _CPU_CONFIG_KEYS):
                plain.add(id(config))
        if not cpu and target.startswith(_CPU_TARGETS):
            cpu = f"custom call {target}"
        elif not cpu and config and id(config) not in plain and any(key in config for key in _CPU_CONFIG_KEYS):
            cpu = f"XLA:CPU backend config on {instr.name}"
        shape = instr.shape
        tiled_shape = tiles.get(id(shape))
        if tiled_shape is None:
            tiled_shape = tiles[id(shape)] = any(leaf.tiles for leaf in shape.leaves())
        tiled += tiled_shape
    if tiled:
        return Platform("tpu", evidence=f"tiled TPU layouts on {tiled} instructions")
    return Platform("cpu", evidence=cpu) if cpu else None


def _names(module: Module, path: str) -> list[tuple[str, str]]:
    """Names that may state the target: the file's, the module's, and the other files XLA
    dumped for the same module (`module_0016.*`: the before-optimizations dump has no target
    in its own name, its after-optimizations sibling has)."""
    file = Path(path) if path else None
    out = [(file.name.lower(), "its file name")] if file else []
    out.append((module.name.lower(), "the module name"))
    prefix = re.match(r"(module_\d+\.)", file.name) if file else None
    if prefix and file is not None:
        try:
            siblings = sorted(p.name for p in file.parent.iterdir() if p.name.startswith(prefix[1]))
        except OSError:
            siblings = []
        out += [(name.lower(), f"the dump {name} of the same module") for name in siblings if name != file.name]
    return out


def _vendor(target: str) -> str:
    if target.startswith(("__hipblas$", "__rocblas$", "__miopen")):
        return "amd"
    return ""
