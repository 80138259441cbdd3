"""Inputs that would mislead silently: an HLO dump from before optimization, a module not yet
partitioned across the devices it declares, a `--hardware` of another vendor or platform than the
program's, a folder of profiles from different chips.
Each check returns a warning line (or None), or raises for what cannot be analysed as one run."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..costmodel.chips.hardware import Hardware
from ..base.errors import InputError
from ..parsers.hlo.model import Module
from ..parsers.hlo.opcodes import COLLECTIVES
from ..parsers.hlo.platform import Platform

_BEFORE = "before_optimizations"
_AFTER = "after_optimizations"
# The program itself, not the buffer assignment or memory report XLA writes beside it (-buffer-assignment.txt).
_PROGRAM_ENDINGS = (".txt", ".hlo.pb", ".pb")
_VENDORS = {"nvidia": "NVIDIA", "amd": "AMD"}
_AFTER_MODULE = re.compile(r"after_optimizations(\.hlo\.pb|\.pb|\.txt|\.hlo)$")
# Custom calls only a module before SPMD partitioning holds: GSPMD's and Shardy's annotations.
_PARTITIONER_TARGETS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "xla.sdy.")
_COLLECTIVE_OPCODES = frozenset(COLLECTIVES)


def pre_optimization_warning(module: Module, path: str) -> str | None:
    """A dump taken before XLA optimized the program (unfused, unsharded): not what runs."""
    name = Path(path).name
    if _BEFORE not in name.lower():
        fused = any(i.opcode == "fusion" for _, i in module.instructions())
        if fused or module.is_scheduled or module.instruction_count < 50:
            return None
        evidence = "it has no fusions and no schedule"
    else:
        evidence = "its file name says so"
    sibling = after_optimization_sibling(path)
    where = (f"; the dump after optimization is beside it: {sibling.name}" if sibling is not None
             else "; dump the program after optimization (XLA_FLAGS=--xla_dump_to=DIR) and inspect the "
                  "*after_optimizations* file")
    return (f"this HLO is from before optimization ({evidence}): it is not the program that runs (unfused, "
            f"unsharded, unscheduled), so its prediction can be far off{where}")


def after_optimization_sibling(path: str) -> Path | None:
    """The after-optimization dump XLA wrote for the same module beside `path`, if there is one: the
    module itself (`...after_optimizations.txt`, `.hlo.pb`), not its buffer assignment or memory report."""
    file = Path(path)
    prefix = re.match(r"(module_\d+\.)", file.name)
    if prefix is None:
        return None
    try:
        found = sorted(p for p in file.parent.iterdir()
                       if p.name.startswith(prefix[1]) and p.name != file.name
                       and p.name.endswith(tuple(_AFTER + e for e in _PROGRAM_ENDINGS)))
    except OSError:
        return None
    modules = [p for p in found if _AFTER_MODULE.search(p.name)]
    best = modules or found
    return best[0] if best else None


def unpartitioned_refusal(module: Module, path: str) -> None:
    """Refuse a module that declares `num_partitions > 1` and still carries the shardings SPMD
    partitioning consumes (GSPMD `sharding={devices=...}`, Shardy `xla.sdy.*` calls), with no
    collective and no schedule: every array in it is the global one, so pricing it would price one
    device holding all of them. **Raises:** `InputError`."""
    partitions = module.num_partitions
    if partitions <= 1 or module.is_scheduled:
        return
    annotated = False
    for _, i in module.instructions():
        if i.opcode in _COLLECTIVE_OPCODES or i.opcode.endswith(("-start", "-done")) and i.replica_groups:
            return
        if "devices=[" in i.sharding or i.custom_call_target.startswith(_PARTITIONER_TARGETS):
            annotated = True
    if annotated:
        raise InputError(f"this module declares num_partitions={partitions} but has not been partitioned: its "
                         "arrays are the global ones (shardings not yet applied), not one device's", path=path,
                         hint="dump the program after optimization (XLA_FLAGS=--xla_dump_to=DIR) and inspect its "
                              "*after_optimizations* file, which holds one device's program")


def hardware_mismatch_warning(hw: Hardware, kind: str, vendor: str, evidence: str,
                              program: str = "the program was compiled for") -> str | None:
    """`--hardware` naming another platform (GPU, TPU, CPU) or GPU vendor than the program's."""
    if not kind or hw.source != "user":
        return None
    theirs = _a(f"{_VENDORS.get(vendor, '')} {kind.upper()}".strip())
    ours = _a(f"{hw.vendor} {hw.kind.upper()}" if hw.kind == "gpu" and hw.vendor else hw.kind.upper())
    if kind != hw.kind:
        return (f"--hardware {hw.name} is {ours} but {program} {theirs} ({evidence}): the expected times "
                "describe that other chip, not this program")
    if vendor and hw.vendor and _VENDORS.get(vendor, vendor).lower() != hw.vendor.lower():
        return (f"--hardware {hw.name} is {ours} but {program} {theirs} ({evidence}): its kernels, "
                "libraries and fusions are another vendor's")
    return None


def _a(noun: str) -> str:
    """The noun with its article, as said aloud: an NVIDIA GPU, an AMD GPU, a TPU."""
    return f"{'an' if noun[:1] in 'AEFHILMNORSX' and not noun.startswith('U') else 'a'} {noun}"


def platform_mismatch_warning(hw: Hardware, platform: Platform) -> str | None:
    """`hardware_mismatch_warning` for an HLO dump, from what its name and contents say (nothing
    when they do not say which platform it is)."""
    if platform.kind == "unknown":
        return None
    return hardware_mismatch_warning(hw, platform.kind, platform.vendor, platform.evidence)


def refuse_mixed_chips(hosts: Sequence[tuple[str, str, Mapping[str, Any]]]) -> None:
    """Refuse a folder whose host files come from different chips: they are not hosts of one run.

    `hosts`: (file, platform, device plane stats) per host file.
    """
    from ..costmodel.chips.detect import hardware_from_trace

    chips: dict[str, list[str]] = {}
    for path, platform, stats in hosts:
        chip = platform if platform in ("cpu", "") else hardware_from_trace(platform, dict(stats)).name
        chips.setdefault(chip or "unknown", []).append(Path(path).name)
    if len(chips) > 1:
        listed = "; ".join(f"{chip}: {', '.join(files[:3])}{' ...' if len(files) > 3 else ''}"
                           for chip, files in chips.items())
        raise InputError(f"the folder holds profiles from different chips ({listed}), not hosts of one run",
                         path=str(Path(hosts[0][0]).parent),
                         hint="inspect each chip's profiles on their own")


def refuse_unidentified_chip(hw: Hardware, platform: str, device_stats: Mapping[str, Any], path: str | Path) -> None:
    """An accelerator that nothing in the profile identifies (no ceiling known to price with) is an
    exit 2 naming the `--hardware` values that fit what it does say, never a report of dashes."""
    from ..costmodel.chips.catalog import candidates
    from ..costmodel.chips.detect import device_facts, priceable

    if hw.kind == "cpu" or priceable(hw):
        return
    kind = hw.kind if hw.kind in ("gpu", "tpu") else (platform if platform in ("gpu", "tpu") else "gpu")
    facts, vendor, arch = device_facts(device_stats)
    names = (candidates(kind, vendor, arch) if arch else []) or candidates(kind, vendor) or candidates(kind)
    if kind == "tpu":
        names = names[::-1]  # newest first
    evidence = facts or ("no device metadata or device plane stats, and no gpu_target_config or sm_X.Y / gfx "
                         "target in its dump" if kind == "gpu" else "its device planes state no TPU type")
    raise InputError(f"the {kind.upper()} this profile ran on cannot be identified ({evidence}): without its "
                     "ceilings no op could be priced", path=str(path),
                     hint=f"pass --hardware {choices(names)} (or a hardware file)")


def choices(names: Sequence[str]) -> str:
    """"a, b or c"."""
    names = list(names)
    return " or ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)
