"""HLO dumps priced without a measurement: one module's file, or an `--xla_dump_to` folder of them.

The chip is the one `--hardware` names; else, for a GPU program, the one XLA's
`gpu_target_config.pbtxt` beside the dump describes (XLA writes it for every GPU module); else a
GPU or TPU program is refused with the `--hardware` values that fit it, and a CPU program is
priced on this machine's CPU.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..costmodel.chips.hardware import Hardware
from ..base.errors import InputError
from ..parsers.hlo.buffer_assignment import BufferAssignment
from ..parsers.hlo.model import Module
from ..parsers.hlo.platform import Platform
from ..reports.model.report import ReportModel
from .caveats import check_partitions
from .misleading import platform_mismatch_warning, pre_optimization_warning, unpartitioned_refusal
from .analysis import (DEFAULT_OPTIONS, Options, analyse_modules, attach_memory, hardware_for, naming,
                       refuse_accelerator_without_hardware)


def analyse_dump(path: str | Path, *, hardware: str | None = None, source: dict[str, Any] | None = None,
                 options: Options = DEFAULT_OPTIONS, module: Module | None = None) -> ReportModel:
    """Cost an HLO dump (a file, or a folder of modules after optimization) with no measurement:
    every op with its expected time (`module`: the file's module, already read)."""
    from ..costmodel.ops.module import device_count

    files = _modules(Path(path), module)
    for f, m in files:
        unpartitioned_refusal(m, str(f))
    warnings = [w for f, m in files if (w := pre_optimization_warning(m, str(f))) is not None]
    hw = dump_hardware(hardware, files, options.overrides, warnings)
    if hardware:
        from ..parsers.hlo.platform import platform_of

        mismatches = (platform_mismatch_warning(hw, platform_of(m, str(f))) for f, m in files)
        warnings += list(dict.fromkeys(w for w in mismatches if w is not None))
    devices = max((device_count(m) or 0 for _, m in files), default=0) or None
    warnings += check_partitions(hw, hardware, devices, options.allow_smaller)
    ids = [_program_id(f, m) if len(files) > 1 else m.id for f, m in files]
    programs = dict(zip(ids, (m for _, m in files)))
    with naming(path):
        before = any(pre_optimization_warning(m, str(f)) is not None for f, m in files)
        report = analyse_modules(programs, hw, source={"kind": "hlo", "paths": [str(f) for f, _ in files],
                                                       **({"before_optimization": True} if before else {}),
                                                       **(source or {})}, warnings=warnings, options=options)
    buffers, missing = dump_buffer_assignments(files, ids)
    if missing:
        report = report.warn(f"no buffer assignment beside {missing[0]}" + (f" and {len(missing) - 1} other module(s)"
                                                                          if len(missing) > 1 else "")
                             + ": memory per program needs the *.hlo.pb (--xla_dump_hlo_as_proto) or the "
                               "*-buffer-assignment.txt XLA writes beside the module")
    return attach_memory(report, buffers, programs, {i: m.name for i, m in programs.items()}, hw)


def dump_buffer_assignments(files: list[tuple[Path, Module]],
                            ids: list[int]) -> tuple[dict[int, BufferAssignment], list[str]]:
    """Each dumped module's buffer assignment: from its own HloProto, the `.hlo.pb` beside its text,
    else the `-buffer-assignment.txt` beside it; and the files that have none."""
    from ..parsers.hlo.buffer_assignment import read_buffer_assignment
    from ..parsers.hlo.buffer_assignment_text import beside, read_buffer_assignment_text

    found: dict[int, BufferAssignment] = {}
    missing: list[str] = []
    for (file, _), pid in zip(files, ids):
        proto = file if file.name.endswith(".pb") else _proto_beside(file)
        assignment = read_buffer_assignment(proto.read_bytes()) if proto is not None else None
        if assignment is None and (text := beside(file)) is not None:
            assignment = read_buffer_assignment_text(text)
        if assignment is None:
            missing.append(file.name)
        else:
            found[pid] = assignment
    return found, missing


def _proto_beside(file: Path) -> Path | None:
    """The `.hlo.pb` XLA wrote beside a module's text (`--xla_dump_hlo_as_proto`), if any."""
    stem = file.name.removesuffix(".txt").removesuffix(".hlo")
    found = file.with_name(f"{stem}.hlo.pb")
    return found if found.is_file() else None


def _modules(path: Path, module: Module | None) -> list[tuple[Path, Module]]:
    from ..parsers.hlo.files import load_dump_folder, load_hlo_file

    if not path.is_dir():
        return [(path, module if module is not None else load_hlo_file(path))]
    files = load_dump_folder(path)
    if not files:
        raise InputError("no HLO module after optimization in this folder", path=path,
                         hint="expected the *after_optimizations* files XLA_FLAGS=--xla_dump_to=DIR writes")
    return files


def _program_id(file: Path, module: Module) -> int:
    """A folder's modules by the number XLA gave each (`module_0016.` -> 16): their ids may repeat."""
    match = re.match(r"module_(\d+)\.", file.name)
    return int(match[1]) if match else module.id


def dump_hardware(spec: str | None, files: list[tuple[Path, Module]], overrides: tuple[tuple[str, str], ...],
                  warnings: list[str]) -> Hardware:
    """The chip to price the dump on: `--hardware`, else the GPU its gpu_target_config describes,
    else this machine's CPU for a CPU program. **Raises:** `InputError` for a GPU or TPU program
    whose chip nothing beside it identifies."""
    from ..costmodel.chips.detect import priceable
    from ..parsers.hlo.gpu_target import stats_beside
    from ..parsers.hlo.platform import platform_of

    if spec:
        return hardware_for(spec, "cpu", {}, overrides)
    platforms = []
    for file, module in files:
        platform = platform_of(module, str(file))
        platforms.append(platform)
        if not platform.accelerator:
            continue
        stats = stats_beside(file) if platform.kind == "gpu" else None
        if stats is not None:
            hw = hardware_for(None, "gpu", {"/device:GPU:0": stats}, overrides)
            if priceable(hw):
                return hw
        refuse_accelerator_without_hardware(module, str(file))
    warnings.append(_priced_here(platforms))
    return hardware_for(None, "cpu", {}, overrides)


def _priced_here(platforms: list[Platform]) -> str:
    """The warning of a dump priced as this machine's CPU for want of --hardware."""
    cpu = next((p for p in platforms if p.kind == "cpu"), None)
    if cpu is not None:
        return ("no --hardware given: expected times are for this machine's CPU (the dump is a CPU program: "
                f"{cpu.evidence})")
    evidence = platforms[0].evidence if platforms else "no module"
    return ("no --hardware given: expected times are for this machine's CPU, but the platform the program was "
            f"compiled for is unknown ({evidence}): pass --hardware for the chip it runs on")
