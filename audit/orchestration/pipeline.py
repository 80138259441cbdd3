"""The one place that runs parsers -> cost model -> analyses and builds the report."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any


from ..analyses.steps import step_table, step_time_stats
from ..costmodel.chips.hardware import Hardware
from ..costmodel.records import Expectation, OpCost
from ..costmodel.schedule import windows_by_op
from ..costmodel.table.carriers import attribute_to_carriers
from ..costmodel.table.join import Joined, join_measured, join_static, measure
from ..costmodel.table.judge import Thresholds, judge_table
from ..costmodel.table.overlap import step_overlap
from ..errors import InputError
from ..parsers.hlo_model import Module
from ..parsers.nvtx_xla import STEP_SOURCE as NSYS_STEPS
from ..reports.model import Report, StepTimes
from .assemble import assemble
from .caveats import check_partitions, loop_caveats, trace_flops_warning
from .misleading import (hardware_mismatch_warning, platform_mismatch_warning, pre_optimization_warning,
                         refuse_mixed_chips)

if TYPE_CHECKING:
    from ..pod.reduce import PodSettings


@dataclass(frozen=True)
class Options:
    """How the analysis judges ops, from the command's options."""

    thresholds: Thresholds = Thresholds()
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


def analyse_profile(path: str | Path, *, run: str | None = None, hardware: str | None = None,
                    source: dict[str, Any] | None = None, options: Options = DEFAULT_OPTIONS,
                    pod: PodSettings | None = None) -> Report:
    """Read a profile (file, run dir or logdir, local or an fsspec URL) or an HLO dump, and
    return its report. Hosts are reduced one by one (on Dask for several, per `pod`)."""
    from ..parsers.inputs import open_input
    from ..pod.files import is_url

    if not is_url(path):
        opened = open_input(path, accept=("profile", "hlo"))
        if opened.kind == "hlo":
            return analyse_hlo(path, hardware=hardware, source=source, options=options, module=opened.module)
    from ..pod.reduce import reduce_profile

    profile = reduce_profile(path, run=run, settings=pod)
    hosts = profile.hosts
    # One row per (host, device, program, op): the per-op sums the analyses need, not events.
    events, steps = profile.ops, profile.steps
    if events.empty:
        raise InputError("the profile holds no executed XLA ops", path=path,
                         hint="was the program running while the profiler was on?")
    refuse_mixed_chips([(h.path, h.platform, h.device_stats) for h in hosts])
    hw = _hardware(hardware, profile.platform, profile.device_stats, options.overrides)
    modules, names = profile.modules, profile.module_names
    events = attribute_to_carriers(events, modules)
    devices = int(events[["host", "device"]].drop_duplicates().shape[0])
    warnings = list(profile.warnings) + check_partitions(hw, hardware, devices, options.allow_smaller)
    if hardware and (mismatch := _traced_chip_mismatch(hw, profile.platform, profile.device_stats)) is not None:
        warnings.append(mismatch)
    with _naming(path):
        costs = cost_modules(modules, devices, hw)
    expectations = expect_all(costs, hw)
    per_device, per_op = measure(events)
    joined = join_measured(per_op, modules, names, costs, expectations, hw)
    if (disagree := trace_flops_warning(joined)) is not None:
        warnings.append(disagree)
    missing = sorted({names.get(r.program_id, str(r.program_id)) for r in joined if r.program_id not in modules})
    if missing:
        warnings.append(f"no HLO in the profile for program(s) {', '.join(missing)}: their ops are "
                        "measured but not costed")
    walks = windows_by_op(modules, costs, expectations, shared_stream=hw.kind == "gpu")
    comm_names = {r.name for r in joined if r.cost is not None and r.cost.comm_bytes}
    ops = judge_table(joined, hw, options.thresholds, per_device=per_device, walks=walks,
                      overlapped={k: v for k, v in profile.overlapped.items() if k in comm_names},
                      measured_on=profile.platform)
    step_list = step_table(steps, events)
    nsys = hosts[0].step_source == NSYS_STEPS
    if nsys and len(hosts) > 1:
        # Each process's clock has its own origin, so steps of different processes are not placed
        # against each other: a step lasts as long as its slowest device's.
        step_list = [{**s, "time_s": max(s["per_device_s"].values())} for s in step_list]
    kind_of = {(o.program_id, o.name): o.bound_by for o in ops}
    device_names = {(h.host, d): n for h in hosts for d, n in h.device_names.items()}
    st = step_time_stats(step_list)
    report = assemble(
        ops=ops, hw=hw, warnings=warnings, overlap=step_overlap(ops, walks), devices=devices, hosts=len(hosts),
        steps=step_list, step_time=StepTimes(st["min"], st["median"], st["max"]), idle_s=profile.idle_seconds(),
        step_source=hosts[0].step_source, platform=profile.platform,
        source={"kind": "nsys" if nsys else "xplane", "paths": profile.paths, "workload": None, "command": None,
                "jax_version": hosts[0].versions.get("jax_version"), "run": profile.run, **(source or {})},
        timeline=profile.timeline(kind_of, device_names), device_steps=profile.device_steps(device_names),
    )
    if profile.platform == "gpu":
        from ..analyses.matching import matching

        found = matching(ops)
        report = report.attach("matching", found) if found is not None else report
    if len(hosts) > 1:
        from ..pod.analyses import host_summary, pod_analyses

        report = report.attach("hosts", host_summary(per_device, step_list, hosts))
        report = report.attach("pod", pod_analyses(per_device, ops, step_list, hosts))
    return attach_plan(report, hw)


def attach_plan(report: Report, hw: Hardware) -> Report:
    """For a workload that states its model config, put the book's plan beside the audit."""
    from ..analyses.plan_vs_profile import plan_vs_profile

    table = plan_vs_profile(report, report.source.get("config") or {}, hw)
    return report if table is None else report.attach("plan_vs_profile", table)


def analyse_hlo(path: str | Path, *, hardware: str | None = None, source: dict[str, Any] | None = None,
                options: Options = DEFAULT_OPTIONS, module: Module | None = None) -> Report:
    """Cost an HLO dump with no measurement: every op with its expected time (`module`: already read)."""
    from ..costmodel.ops.module import device_count
    from ..parsers.hlo_files import load_hlo_file

    from ..parsers.hlo_platform import platform_of

    module = module if module is not None else load_hlo_file(path)
    warnings: list[str] = []
    if (before := pre_optimization_warning(module, str(path))) is not None:
        warnings.append(before)
    if hardware is None:
        _refuse_accelerator_without_hardware(module, str(path))
        warnings.append("no --hardware given: expected times are for this machine's CPU")
    hw = _hardware(hardware, "cpu", {}, options.overrides)
    if hardware and (mismatch := platform_mismatch_warning(hw, platform_of(module, str(path)))) is not None:
        warnings.append(mismatch)
    warnings += check_partitions(hw, hardware, device_count(module), options.allow_smaller)
    with _naming(path):
        return analyse_modules({module.id: module}, hw, source={"kind": "hlo", "paths": [str(path)],
                                                                **(source or {})}, warnings=warnings, options=options)


@contextmanager
def _naming(path: str | Path) -> Iterator[None]:
    """An `InputError` that names no file (the cost model sees modules, not files) names `path`."""
    try:
        yield
    except InputError as exc:
        if exc.path is not None:
            raise
        raise InputError(exc.message, path=path, hint=exc.hint) from None


def _refuse_accelerator_without_hardware(module: Module, path: str) -> None:
    """A GPU or TPU program is never priced as this machine's CPU: say what it is and what to pass."""
    from ..costmodel.chips.catalog import candidates
    from ..costmodel.ops.module import device_count
    from ..parsers.hlo_platform import platform_of

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
                    coords: dict[int, tuple[int, ...]] | None = None) -> Report:
    """A predicted report for modules that were compiled but not run (HLO dumps, AOT targets).

    `coords` maps device ids to physical coordinates when the compile knows them, so
    collectives are placed on the real torus.
    """
    from ..costmodel.ops.module import device_count

    costs = cost_modules(modules, devices, hw)
    expectations = expect_all(costs, hw, coords)
    if devices is None:  # the devices the program spans, as its collectives name them (1 without any)
        devices = max((device_count(m) or 1 for m in modules.values()), default=1)
    joined: list[Joined] = []
    for pid, module in modules.items():
        joined.extend(join_static(module, pid, costs.get(pid, {}), expectations, devices))
    walks = windows_by_op(modules, costs, expectations, shared_stream=hw.kind == "gpu")
    ops = judge_table(joined, hw, options.thresholds, walks=walks)
    loop_warnings, loops = loop_caveats(modules)
    return assemble(ops=ops, hw=hw, warnings=warnings + loop_warnings, overlap=step_overlap(ops, walks),
                    devices=devices, loops=loops,
                    source={"paths": [], "workload": None, "command": None, "jax_version": None, **source})


def cost_modules(modules: dict[int, Module], devices: int | None,
                 hw: Hardware | None = None) -> dict[int, dict[str, OpCost]]:
    """Every op's cost, per program; with `hw`, which of its bytes its caches can serve, by the
    data's history in each program's schedule. **Raises:** `InputError` naming the module for a
    value the cost model refuses (a trip count that is not a count)."""
    from ..costmodel.ops.module import cost_module
    from ..costmodel.residency import with_residency

    costs = {}
    for pid, module in modules.items():
        try:
            costs[pid] = cost_module(module, num_partitions=devices)
        except InputError as exc:
            raise InputError(f"HLO module {module.name!r}: {exc.message}", path=exc.path, hint=exc.hint) from None
    if hw is None:
        return costs
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


def _traced_chip_mismatch(hw: Hardware, platform: str, device_stats: dict[str, Any]) -> str | None:
    """The --hardware chip against the one the trace's device planes describe."""
    if platform not in ("gpu", "tpu", "cpu"):
        return None
    vendor = ""
    if platform == "gpu":
        from ..costmodel.chips.detect import hardware_from_trace

        vendor = hardware_from_trace(platform, device_stats, calibrate=False).vendor.lower()
    return hardware_mismatch_warning(hw, platform, vendor if vendor in ("nvidia", "amd") else "",
                                     "the trace's device planes", "the profile ran on")


def _hardware(spec: str | None, platform: str, device_stats: dict[str, Any],
              overrides: tuple[tuple[str, str], ...] = ()) -> Hardware:
    """The chip named with --hardware, else the one the trace shows; --set figures applied to either."""
    from ..costmodel.chips.overrides import apply

    if spec:
        from ..costmodel.chips.catalog import lookup

        hw = lookup(spec)
        hw = replace(hw, source="user", notes=hw.notes + (f"chosen with --hardware {spec}",))
        return apply(hw, overrides)
    from ..costmodel.chips.detect import hardware_from_trace

    return apply(hardware_from_trace(platform, device_stats), overrides)
