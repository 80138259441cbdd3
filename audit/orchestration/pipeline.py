"""The entry points of an analysis: a profile (any format, local or remote) or an HLO dump to its report;
the steps every input shares are in `analysis`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analyses.host_idle import merge_hosts
from ..analyses.programs import per_program
from ..analyses.step_diagnosis import attach_diagnosis
from ..analyses.steps import step_table, step_time_stats
from ..analyses.waste import attach_waste
from ..costmodel.schedule import windows_by_op
from ..optable.carriers import attribute_to_carriers, carrier_names
from ..optable.command_buffers import price_command_buffers
from ..optable.join import join_measured, measure
from ..optable.judge import judge_table
from ..optable.overlap import step_overlap
from ..base.errors import InputError
from ..parsers.hlo.model import Module
from ..parsers.readers import reader_named
from ..reports.model.report import DeviceSteps, ReportModel
from ..reports.model.summary import StepTimes
from .analysis import (DEFAULT_OPTIONS, Options, analyse_modules, attach_memory, attach_plan, cached_bytes,
                       cost_modules, expect_all, hardware_for, naming, traced_chip_mismatch)
from .assemble import assemble
from .caveats import check_partitions, trace_flops_warning
from .misleading import refuse_mixed_chips, refuse_unidentified_chip

__all__ = ["DEFAULT_OPTIONS", "Options", "analyse_hlo", "analyse_modules", "analyse_profile", "attach_plan",
           "cost_modules", "expect_all"]

if TYPE_CHECKING:
    from ..pod.reduce import PodSettings


def analyse_profile(path: str | Path, *, run: str | None = None, hardware: str | None = None,
                    source: dict[str, Any] | None = None, options: Options = DEFAULT_OPTIONS,
                    pod: PodSettings | None = None) -> ReportModel:
    """Read a profile (file, run dir or logdir, local or an fsspec URL) or an HLO dump, and
    return its report. Hosts are reduced one by one (on Dask for several, per `pod`)."""
    from ..parsers.inputs import open_input

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
    modules, names = profile.modules, profile.module_names
    events = attribute_to_carriers(events, modules)
    devices = int(events[["host", "device"]].drop_duplicates().shape[0])
    # What does not depend on the chip comes first: this machine's CPU may still be being measured,
    # its probes compiling beside this work (`audit.orchestration.ahead`).
    with naming(path):
        costs = cost_modules(modules, devices)
    per_device, per_op = measure(events)
    hw = hardware_for(hardware, profile.platform, profile.device_stats, options.overrides)
    if not hardware:
        refuse_unidentified_chip(hw, profile.platform, profile.device_stats, path)
    warnings = list(profile.warnings) + check_partitions(hw, hardware, devices, options.allow_smaller)
    if hardware and (mismatch := traced_chip_mismatch(hw, profile.platform, profile.device_stats)) is not None:
        warnings.append(mismatch)
    costs = cached_bytes(modules, costs, hw)
    expectations = expect_all(costs, hw)
    joined = join_measured(per_op, modules, names, costs, expectations, hw)
    joined, buffer_notes = price_command_buffers(joined, modules, costs, expectations, hw, per_device)
    warnings[:0] = buffer_notes
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
                      measured_on=profile.platform, window=profile.exported_window())
    step_list = step_table(steps, events)
    reader = reader_named(hosts[0].reader)
    if reader.separate_clocks and len(hosts) > 1:
        # Each process's clock has its own origin, so steps of different processes are not placed
        # against each other: a step lasts as long as its slowest device's.
        step_list = [{**s, "time_s": max(s["per_device_s"].values())} for s in step_list]
    kind_of = {(o.program_id, o.name): o.bound_by for o in ops}
    device_names = {(h.host, d): n for h in hosts for d, n in h.device_names.items()}
    st = step_time_stats(step_list)
    report = assemble(
        programs=per_program(ops, step_list, walks),
        ops=ops, hw=hw, warnings=warnings, overlap=step_overlap(ops, walks), devices=devices, hosts=len(hosts),
        steps=step_list, step_time=StepTimes(st["min"], st["median"], st["max"]), idle_s=profile.idle_seconds(),
        step_source=hosts[0].step_source, platform=profile.platform,
        source={"kind": reader.source_kind, "paths": profile.paths, "workload": None, "command": None,
                "jax_version": hosts[0].versions.get("jax_version"), "run": profile.run, **(source or {})},
        timeline=profile.timeline(kind_of, device_names), device_steps=_with_carriers(profile.device_steps(device_names),
                                                                                      modules),
    )
    if profile.platform == "gpu":
        from ..analyses.matching import matching
        from .priced_buffers import buffer_contents

        found = matching(ops)
        report = report.attach("matching", found) if found is not None else report
        if buffers := buffer_contents(ops, modules, costs, expectations):
            report = report.attach("command_buffers", [b.to_json() for b in buffers])
    report = attach_waste(report, modules, costs, hw, options.thresholds)
    if len(hosts) > 1:
        from ..pod.analyses import host_summary, pod_analyses

        report = report.attach("hosts", host_summary(per_device, step_list, hosts))
        report = report.attach("pod", pod_analyses(per_device, ops, step_list, hosts))
    report = attach_memory(report, profile.buffers, modules, names, hw)
    return attach_diagnosis(attach_plan(report, hw), merge_hosts([h.host_idle for h in hosts]))




def _with_carriers(steps: DeviceSteps | None, modules: dict[int, Module]) -> DeviceSteps | None:
    """The exported events, each with the op the report judged it as (its carrier, for a kernel XLA
    runs inside an async op), so the trace file marks a flagged op on every kernel it ran."""
    if steps is None or not modules or steps.events.empty:
        return steps
    return replace(steps, events=steps.events.assign(carrier=carrier_names(steps.events, modules)))


def analyse_hlo(path: str | Path, *, hardware: str | None = None, source: dict[str, Any] | None = None,
                options: Options = DEFAULT_OPTIONS, module: Module | None = None) -> ReportModel:
    """Cost an HLO dump (a module's file, or an `--xla_dump_to` folder) with no measurement: every
    op with its expected time (`module`: the file's module, already read). See `hlo_dumps`."""
    from .hlo_dumps import analyse_dump

    # A dump measures no step: its findings are the program's own (the `waste` part), ranked.
    return attach_diagnosis(analyse_dump(path, hardware=hardware, source=source, options=options, module=module),
                            None)



