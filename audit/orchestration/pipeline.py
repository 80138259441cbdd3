"""The one place that runs parsers -> cost model -> analyses and assembles the JSON report."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..analyses.steps import CONTAINER_OPCODES, step_table, step_time_stats, time_by_bound
from ..costmodel.chips.hardware import Hardware
from ..costmodel.optable import (OpRow, Thresholds, build_rows, measure, safe_ratio, static_rows,
                                 with_trace_costs)
from ..costmodel.records import Expectation, OpCost
from ..errors import InputError
from ..parsers.hlo_model import Module
from ..costmodel.schedule import windows_by_op
from .caveats import (check_partitions, loop_caveats, not_judged_warning, peaks_used, unmodeled_groups,
                      unmodeled_list, unmodeled_warning)
from .overlap import attach_overlap
from .report_rows import collective_rows, host_summary, op_dicts

if TYPE_CHECKING:
    from ..pod.reduce import PodSettings

SCHEMA = "audit.report/v1"


@dataclass(frozen=True)
class Options:
    thresholds: Thresholds = Thresholds()
    allow_smaller: bool = False  # price a program wider than --hardware's topology as several copies


def analyse_profile(path: str | Path, *, run: str | None = None, hardware: str | None = None,
                    source: dict | None = None, options: Options | dict | None = None,
                    pod: "PodSettings | None" = None) -> dict:
    """Read a profile (file, run dir or logdir, local or an fsspec URL) or an HLO dump, and
    return the JSON report. Hosts are reduced one by one (on Dask for several, per `pod`)."""
    from ..parsers.inputs import open_input
    from ..pod.files import is_url

    opts = _options(options)
    if not is_url(path):
        opened = open_input(path, accept=("profile", "hlo"))
        if opened.kind == "hlo":
            return analyse_hlo(path, hardware=hardware, source=source, options=opts, module=opened.module)
    from ..pod.reduce import reduce_profile

    profile = reduce_profile(path, run=run, settings=pod)
    hosts = profile.hosts
    # One row per (host, device, program, op): the per-op sums the analyses need, not events.
    events, steps = profile.ops, profile.steps
    if events.empty:
        raise InputError("the profile holds no executed XLA ops", path=path,
                         hint="was the program running while the profiler was on?")
    hw = _hardware(hardware, profile.platform, profile.device_stats)
    modules, names = profile.modules, profile.module_names
    devices = int(events[["host", "device"]].drop_duplicates().shape[0])
    smaller = check_partitions(hw, hardware, devices, opts.allow_smaller)
    costs, expectations = cost_programs(modules, hw, devices)
    per_device, per_op = measure(events)
    rows = build_rows(per_op, modules, names, costs, expectations)
    with_trace_costs(rows, hw)
    step_list = step_table(steps, events)
    warnings = list(profile.warnings) + smaller
    missing = sorted({names.get(r.program_id, str(r.program_id)) for r in rows
                      if r.program_id not in modules})
    if missing:
        warnings.append(f"no HLO in the profile for program(s) {', '.join(missing)}: their ops are "
                        "measured but not costed")
    ops = op_dicts(rows, hw, opts.thresholds, per_device)
    step_fields, step_warnings = attach_overlap(ops, windows_by_op(modules, costs, expectations,
                                                                    shared_stream=hw.kind == "gpu"))
    warnings += step_warnings
    overlap = {k: v for k, v in profile.overlapped.items() if k in {o["name"] for o in ops if o["comm_bytes"]}}
    kind_of = {(o["program_id"], o["name"]): o["bound_by"] for o in ops}
    device_names = {(h.host, d): n for h in hosts for d, n in h.device_names.items()}
    report = _assemble(
        ops=ops, hw=hw, warnings=warnings, predicted=False,
        summary_extra={
            "devices": devices, "hosts": len(hosts), "steps": len(step_list),
            "step_time_s": step_time_stats(step_list),
            "idle_s": profile.idle_seconds(),
            "step_source": hosts[0].step_source,
            "platform": profile.platform,
            **step_fields,
        },
        source={"kind": "xplane", "paths": profile.paths, "workload": None, "command": None,
                "jax_version": hosts[0].versions.get("jax_version"), "run": profile.run,
                **(source or {})},
        steps=step_list,
        collectives=collective_rows(ops, overlap),
        timeline=profile.timeline(kind_of, device_names),
    )
    if len(hosts) > 1:
        from ..pod.analyses import pod_analyses

        report["hosts"] = host_summary(per_device, step_list, hosts)
        report["pod"] = pod_analyses(per_device, ops, step_list, hosts)
    attach_plan(report, hw)
    return report


def attach_plan(report: dict, hw: Hardware) -> None:
    """For a workload that states its model config, put the book's plan beside the audit."""
    from ..analyses.plan_vs_profile import plan_vs_profile

    table = plan_vs_profile(report, (report.get("source") or {}).get("config") or {}, hw)
    if table is not None:
        report["plan_vs_profile"] = table


def analyse_hlo(path: str | Path, *, hardware: str | None = None, source: dict | None = None,
                options: Options | dict | None = None, module: Module | None = None) -> dict:
    """Cost an HLO dump with no measurement: every op with its expected time (`module`: already read)."""
    from ..parsers.hlo_files import load_hlo_file

    opts = _options(options)
    module = module if module is not None else load_hlo_file(path)
    warnings: list[str] = []
    if hardware is None:
        _refuse_accelerator_without_hardware(module, str(path))
        warnings.append("no --hardware given: expected times are for this machine's CPU")
    hw = _hardware(hardware, "cpu", {})
    from ..costmodel.ops.module import device_count

    warnings += check_partitions(hw, hardware, device_count(module), opts.allow_smaller)
    return analyse_modules({module.id: module}, hw, source={"kind": "hlo", "paths": [str(path)], **(source or {})},
                           warnings=warnings, options=opts)


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


def analyse_modules(modules: dict[int, Module], hw: Hardware, *, source: dict, warnings: list[str],
                    options: Options, devices: int | None = None, predicted: bool = True,
                    coords: dict[int, tuple] | None = None) -> dict:
    """A predicted report for modules that were compiled but not run (HLO dumps, AOT targets).

    `coords` maps device ids to physical coordinates when the compile knows them, so
    collectives are placed on the real torus.
    """
    costs, expectations = cost_programs(modules, hw, devices, coords)
    rows: list[OpRow] = []
    for pid, module in modules.items():
        rows.extend(static_rows(module, pid, costs.get(pid, {}), expectations, devices or 0))
    ops = op_dicts(rows, hw, options.thresholds, None)
    step_fields, step_warnings = attach_overlap(ops, windows_by_op(modules, costs, expectations,
                                                                    shared_stream=hw.kind == "gpu"))
    known = [o["expected_s"] for o in ops if o["opcode"] not in CONTAINER_OPCODES and o["expected_s"] is not None]
    expected_total = sum(known) if known else None
    step = step_fields["expected_step_s"]
    step = expected_total if step is None else step
    loop_warnings, loops = loop_caveats(modules)
    return _assemble(
        ops=ops, hw=hw, warnings=warnings + loop_warnings + step_warnings, predicted=predicted,
        summary_extra={"devices": devices, "hosts": 0, "steps": 0,
                       "step_time_s": {"min": step, "median": step, "max": step},
                       "idle_s": None, "step_source": "predicted", **step_fields,
                       "unknown_trip_count_loops": loops,
                       "unknown_trip_count_ops": sum(entry["ops"] for entry in loops)},
        source={"paths": [], "workload": None, "command": None, "jax_version": None, **source},
        steps=[], collectives=collective_rows(ops, {}), timeline=[],
    )


def cost_programs(modules: dict[int, Module], hw: Hardware, devices: int | None,
                  coords: dict[int, tuple] | None = None) -> tuple[dict[int, dict[str, OpCost]], dict[tuple[int, str], Expectation]]:
    from ..costmodel.ops.module import cost_module
    from ..costmodel.roofline import expect

    costs: dict[int, dict[str, OpCost]] = {}
    expectations: dict[tuple[int, str], Expectation] = {}
    for pid, module in modules.items():
        costs[pid] = cost_module(module, num_partitions=devices)
        for name, cost in costs[pid].items():
            expectations[(pid, name)] = expect(cost, hw, coords=coords)
    return costs, expectations


def _options(options: Options | dict | None) -> Options:
    if isinstance(options, Options):
        return options
    if not options:
        return Options()
    return Options(thresholds=Thresholds(**{k: v for k, v in options.items()
                                            if k in ("min_efficiency", "min_share")}),
                   allow_smaller=bool(options.get("allow_smaller", False)))


def _hardware(spec: str | None, platform: str, device_stats: dict) -> Hardware:
    if spec:
        from dataclasses import replace

        from ..costmodel.chips.catalog import lookup

        hw = lookup(spec)
        return replace(hw, source="user", notes=hw.notes + (f"chosen with --hardware {spec}",))
    from ..costmodel.chips.detect import hardware_from_trace

    return hardware_from_trace(platform, device_stats)


def _assemble(*, ops: list[dict], hw: Hardware, warnings: list[str], predicted: bool,
              summary_extra: dict, source: dict, steps: list[dict], collectives: list[dict],
              timeline: list[dict]) -> dict:
    measured_ops = [o for o in ops if not o["container"]]
    measured_total = sum(o["self_s"] or 0.0 for o in measured_ops) if not predicted else None
    modeled = [o for o in measured_ops if o["expected_s"] is not None]
    # Unknown is null: a profile none of whose ops has an expected time expects nothing known.
    expected_total = sum(o["expected_s"] for o in modeled) if modeled else None
    judged = [o for o in modeled if o.get("verdict") != "not judged"]
    expected_judged = sum(o["expected_s"] for o in judged) if judged else None
    measured_judged = sum(o["self_s"] or 0.0 for o in judged)
    unmodeled = unmodeled_list(ops)
    unmodeled_line = unmodeled_warning(ops)
    if unmodeled_line:
        warnings = warnings + [unmodeled_line]
    unjudged = [o for o in measured_ops if o.get("verdict") == "not judged"]
    if unjudged:
        warnings = warnings + [not_judged_warning(unjudged)]
    flagged = [o for o in ops if o["flagged"]]
    flagged.sort(key=lambda o: -(o["wasted_s"] or 0.0))
    summary = {
        **summary_extra,
        "measured_s": measured_total,
        "expected_s": expected_total,
        "roofline_fraction": None if predicted else safe_ratio(expected_judged, measured_judged),
        "time_by_bound_s": time_by_bound(ops) if not predicted else _expected_by_bound(ops),
        "flagged_ops": len(flagged),
        "unmodeled_ops": len(unmodeled),
        "lower_bound_ops": sum(1 for o in unmodeled if o["expected_s"] is not None),
        "not_judged_ops": len(unjudged),
        "unmodeled_by_target": unmodeled_groups(ops),
        "predicted": predicted,
        "units": "seconds per device, summed over the analysed steps",
    }
    return {
        "schema": SCHEMA,
        "tool": {"name": "audit", "version": __version__},
        "source": {"created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                   "jax_running": _jax_version(), **source},
        "hardware": {**hw.to_json(), "peaks_used": peaks_used(ops, hw)},
        "summary": summary,
        "steps": steps,
        "ops": ops,
        "flagged": [{"key": o["key"], "name": o["name"], "module": o["module"], "wasted_s": o["wasted_s"],
                     "efficiency": o["efficiency"], "reasons": o["reasons"], "suggestion": o["suggestion"]}
                    for o in flagged],
        "collectives": collectives,
        "timeline": timeline,
        "warnings": warnings,
    }


def _jax_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jax")
    except PackageNotFoundError:
        return None


def _expected_by_bound(ops: list[dict]) -> dict:
    from ..costmodel.records import BOUNDS

    out = {b: 0.0 for b in BOUNDS}
    for o in ops:
        if o["container"] or o["expected_s"] is None:
            continue
        out[o["bound_by"] if o["bound_by"] in out else "unknown"] += o["expected_s"]
    return out
