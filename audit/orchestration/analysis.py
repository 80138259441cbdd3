"""The analysis every input shares: programs priced on a chip, joined with what was measured, judged and
assembled into a report. The entry points (`pipeline` for profiles and dumps, `predict` for AOT targets,
`hlo_dumps` for dump files and folders) call it; it calls none of them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any
from pathlib import Path

from ..costmodel.chips.hardware import Hardware
from ..costmodel.costs import Expectation, OpCost
from ..costmodel.schedule import windows_by_op
from ..base.errors import InputError
from ..optable.judge import judge_predicted
from ..analyses.programs import predicted_programs
from ..optable.overlap import step_overlap
from ..base.options import DEFAULTS, Thresholds
from ..parsers.hlo.buffer_assignment import BufferAssignment
from ..parsers.hlo.model import Module
from ..reports.model.report import ReportModel
from .assemble import assemble
from .caveats import loop_caveats
from .misleading import hardware_mismatch_warning


@dataclass(frozen=True)
class Options:
    """How the analysis judges ops, from the command's options."""

    thresholds: Thresholds = DEFAULTS.thresholds
    allow_smaller: bool = False  # price a program wider than --hardware's topology as several copies
    overrides: tuple[tuple[str, str], ...] = ()  # --set KEY=VALUE: figures of the chip changed for this run

    @classmethod
    def from_flags(cls, flags: dict[str, Any] | None) -> Options:
        """From the `min_efficiency`, `min_share`, `allow_smaller` and `overrides` (--set) command options."""
        flags = flags or {}
        return cls(thresholds=Thresholds(**{k: v for k, v in flags.items() if k in ("min_efficiency", "min_share")}),
                   allow_smaller=bool(flags.get("allow_smaller", False)),
                   overrides=tuple((str(k), str(v)) for k, v in flags.get("overrides") or ()))


DEFAULT_OPTIONS = Options()


def attach_plan(report: ReportModel, hw: Hardware) -> ReportModel:
    """For a workload that states its model config, put the book's plan beside the audit."""
    from ..analyses.plan_vs_profile import plan_vs_profile

    table = plan_vs_profile(report, report.source.get("config") or {}, hw)
    return report if table is None else report.attach("plan_vs_profile", table)


def attach_memory(report: ReportModel, buffers: dict[int, BufferAssignment], modules: dict[int, Module],
                  names: dict[int, str], hw: Hardware) -> ReportModel:
    """Each program's memory from its buffer assignment, where the programs carry one."""
    from ..analyses.program_memory import program_memory

    notes: list[str] = []
    rows = program_memory(buffers, modules, names, hw, report.source.get("config"), notes)
    for note in notes:
        report = report.warn(note)
    return report.attach("program_memory", rows) if rows else report


@contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """An `InputError` that names no file (the cost model sees modules, not files) names `path`."""
    try:
        yield
    except InputError as exc:
        if exc.path is not None:
            raise
        raise InputError(exc.message, path=path, hint=exc.hint) from None


def refuse_accelerator_without_hardware(module: Module, path: str) -> None:
    """A GPU or TPU program is never priced as this machine's CPU: say what it is and what to pass."""
    from ..costmodel.chips.catalog import candidates
    from ..costmodel.ops.module import device_count
    from ..parsers.hlo.platform import platform_of

    platform = platform_of(module, path)
    if not platform.accelerator:
        return
    names = candidates(platform.kind, platform.vendor, platform.arch) or candidates(platform.kind)
    if platform.kind == "tpu":
        names = names[::-1]  # newest first
    devices = device_count(module)
    example = f" (with the device count, e.g. {names[0]}:{devices})" if devices and devices > 1 else ""
    raise InputError(f"HLO dump for {platform.describe()} ({platform.evidence}) and no --hardware: it would "
                     "be priced as this machine's CPU", path=path,
                     hint=f"pass --hardware {' or '.join([', '.join(names[:-1]), names[-1]] if len(names) > 1 else names)}"
                          f"{example}")


def analyse_modules(modules: dict[int, Module], hw: Hardware, *, source: dict[str, Any], warnings: list[str],
                    options: Options, devices: int | None = None,
                    coords: dict[int, tuple[int, ...]] | None = None) -> ReportModel:
    """A predicted report for modules that were compiled but not run (HLO dumps, AOT targets).

    `coords` maps device ids to physical coordinates when the compile knows them, so
    collectives are placed on the real torus.
    """
    from ..analyses.waste import attach_waste
    from ..costmodel.ops.module import device_count

    costs = cost_modules(modules, devices, hw)
    expectations = expect_all(costs, hw, coords)
    if devices is None:  # the devices the program spans, as its collectives name them (1 without any)
        devices = max((device_count(m) or 1 for m in modules.values()), default=1)
    walks = windows_by_op(modules, costs, expectations, shared_stream=hw.kind == "gpu")
    ops = judge_predicted(modules, costs, expectations, hw, options.thresholds, devices=devices, walks=walks)
    loop_warnings, loops = loop_caveats(modules)
    # Several different programs are not one step: each is priced per execution, none summed.
    programs = predicted_programs(ops, walks)
    report = assemble(ops=ops, hw=hw, warnings=warnings + loop_warnings, overlap=step_overlap(ops, walks),
                      devices=devices, loops=loops, programs=programs,
                      source={"paths": [], "workload": None, "command": None, "jax_version": None, **source})
    return attach_waste(report, modules, costs, hw, options.thresholds)


def cost_modules(modules: dict[int, Module], devices: int | None,
                 hw: Hardware | None = None) -> dict[int, dict[str, OpCost]]:
    """Every op's cost, per program; with `hw`, which of its bytes its caches can serve, by the
    data's history in each program's schedule. **Raises:** `InputError` naming the module for a
    value the cost model refuses (a trip count that is not a count)."""
    from ..costmodel.ops.module import cost_module

    costs = {}
    for pid, module in modules.items():
        try:
            costs[pid] = cost_module(module, num_partitions=devices)
        except InputError as exc:
            raise InputError(f"HLO module {module.name!r}: {exc.message}", path=exc.path, hint=exc.hint) from None
    return costs if hw is None else cached_bytes(modules, costs, hw)


def cached_bytes(modules: dict[int, Module], costs: dict[int, dict[str, OpCost]],
                 hw: Hardware) -> dict[int, dict[str, OpCost]]:
    """`costs` with which of each op's bytes the caches of `hw` can serve (`cost_modules`)."""
    from ..costmodel.residency import with_residency

    return {pid: with_residency(modules[pid], c, hw) for pid, c in costs.items()}


def expect_all(costs: dict[int, dict[str, OpCost]], hw: Hardware,
               coords: dict[int, tuple[int, ...]] | None = None) -> dict[tuple[int, str], Expectation]:
    """Every op's expected time on `hw`, priced once per distinct cost (an unrolled program repeats a
    few dozen costs over hundreds of thousands of ops)."""
    from ..costmodel.roofline import expect

    priced: dict[OpCost, Expectation] = {}

    def once(cost: OpCost) -> Expectation:
        found = priced.get(cost)
        if found is None:
            found = priced[cost] = expect(cost, hw, coords=coords)
        return found

    return {(pid, name): once(cost) for pid, ops in costs.items() for name, cost in ops.items()}


def traced_chip_mismatch(hw: Hardware, platform: str, device_stats: dict[str, Any]) -> str | None:
    """The --hardware chip against the one the trace's device planes describe."""
    if platform not in ("gpu", "tpu", "cpu"):
        return None
    vendor = ""
    if platform == "gpu":
        from ..costmodel.chips.detect import hardware_from_trace

        vendor = hardware_from_trace(platform, device_stats, cpu=lambda: None).vendor.lower()
    return hardware_mismatch_warning(hw, platform, vendor if vendor in ("nvidia", "amd") else "",
                                     "the trace's device planes", "the profile ran on")


def hardware_for(spec: str | None, platform: str, device_stats: dict[str, Any],
              overrides: tuple[tuple[str, str], ...] = ()) -> Hardware:
    """The chip named with --hardware, else the one the trace shows; --set figures applied to either.
    This machine's CPU is measured first when it has no calibration record."""
    from ..costmodel.chips.overrides import apply
    from .calibrate import cpu_hardware

    if spec:
        from ..costmodel.chips.catalog import lookup

        hw = lookup(spec, cpu=cpu_hardware)
        hw = replace(hw, source="user", notes=hw.notes + (f"chosen with --hardware {spec}",))
        return apply(hw, overrides)
    from ..costmodel.chips.detect import hardware_from_trace

    return apply(hardware_from_trace(platform, device_stats, cpu=cpu_hardware), overrides)
