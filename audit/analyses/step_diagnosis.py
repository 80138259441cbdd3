"""The step diagnosis: the measured step taken apart into causes, each with what it costs per step.

A waterfall runs from the roofline step [model] to the achievable step [model] (what good kernels
take on this chip) to the measured step [trace]. What lies between the achievable and the measured
step is attributed, per device and per step (the means over the analysed steps), to:

- the ops themselves: flagged kernel gaps (today's flags), interference, the small gaps of ops each
  under the flag threshold, and ops no cost model prices; communication not hidden behind compute,
  beyond the links' achievable time;
- idle time (`analyses.host_idle`): between executions, split by what the host was doing (its own
  Python: host-bound; an input pipeline: input-bound; JAX's dispatch: dispatch-bound; compilation;
  host-device transfers; nothing the Python tracer saw), and inside executions (the runtime between
  ops; waiting on another device);
- what stays: unexplained, said as such.

These add up to the measured step. The program's waste (the `waste` part, HLO evidence) is listed
beside them but lies inside the op time, so the waterfall shows it as "of which". Every finding is
a `Finding`; the list is ranked by the step time each costs.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from ..costmodel import units as qty
from ..base.options import DEFAULTS, Defaults
from ..reports.model.findings import Finding, ranked
from ..reports.model.report import ReportModel

# Idle between executions, by what the host was doing (analyses.host_idle.KINDS): the cause's key when
# it takes at least `bound_share` of the step, its words, and what to do.
_BOUND: dict[str, tuple[str, str, str]] = {
    "python": ("host-bound", "the host spends {share} of each step in {where}; the devices wait",
               "Take it off the step's critical path: prepare the next batch while the devices run this one "
               "(a background thread or a prefetching input pipeline such as tf.data or Grain), or make it cheaper."),
    "input": ("input-bound", "the input pipeline takes {share} of each step ({where}); the devices wait",
              "Prefetch more (tf.data prefetch, Grain worker threads), or make the pipeline's slowest stage cheaper."),
    "dispatch": ("dispatch-bound", "launching programs takes {share} of each step ({where}); the devices wait "
                 "between many short executions",
                 "Launch fewer, larger programs: jit the whole step, or lax.scan over micro-steps inside one call."),
    "compile": ("compile-in-step", "compilation inside the step takes {share} of each step ({where})",
                "Compile once before the loop: keep shapes and static arguments fixed, or compile ahead with "
                "jax.jit(f).lower(...).compile()."),
    "transfer": ("transfer-bound", "host-device transfers take {share} of each step ({where}); the devices wait",
                 "Keep data on the device, or move the next batch with jax.device_put ahead of the step "
                 "(double-buffer) so the copy overlaps compute."),
}
_UNSEEN_ACTION = ("The Python tracer saw no call covering this time: the host was blocked or busy outside "
                  "traced Python (I/O, locks, another process). Look at the host's other threads in the trace.")


def diagnose(report: ReportModel, host: Mapping[str, Any] | None,
             defaults: Defaults = DEFAULTS) -> tuple[list[Finding], dict[str, Any] | None]:
    """The ranked findings and the waterfall (None where the report has no measured step)."""
    waste = [Finding.from_json(w) for w in report.part("waste") or []]
    s = report.summary
    if s.predicted or not report.steps:
        return _kept(waste, defaults), None
    if s.programs:
        findings, waterfall = _programs(report)
        if host and not float(host.get("step_s", 0.0)) > 0:
            host = None
        findings += _idle(host or {}, host.get("step_s", 0.0) if host else 0.0, None, defaults)
        return _kept(findings + waste, defaults), waterfall
    n = max(s.steps, 1)
    # A step without annotations is one launch cycle: its ops and the time before the next launch.
    step = float(host["step_s"]) if host and host.get("cycles") and host.get("step_s") else \
        statistics.fmean(float(x["time_s"]) for x in report.steps)
    if not step > 0:  # steps of no length (a degenerate capture): nothing to take apart
        return _kept(waste, defaults), None
    busy = (s.measured_s or 0.0) / n
    pid = _main_program(report)
    ops = _op_findings(report, n, step, pid)
    idle_total = max(step - busy, 0.0)
    idle = _idle(host or {}, step, pid, defaults) if host else []
    if not host and idle_total > 0:
        idle = [Finding("idle", f"devices idle {qty.percent(idle_total / step)} of each step; no host thread in "
                        "this trace says why", idle_total, idle_total / step,
                        (f"idle {qty.seconds(idle_total)} per step per device [trace]",),
                        "Capture with jax.profiler (its Python tracer on) to see what the host did.", "trace", pid)]
    achievable = s.achievable_step_s or 0.0
    attributed = achievable + sum(f.time_per_step_s for f in ops + idle)
    rest = step - attributed
    findings = ops + idle
    if rest > 0:
        findings.append(Finding("unexplained", "unexplained: step time no cause above accounts for", rest, rest / step,
                                (f"measured step {qty.seconds(step)} [trace] - achievable {qty.seconds(achievable)} "
                                 f"[model] - the causes above {qty.seconds(attributed - achievable)}",),
                                "Said as unexplained, not hidden: ops that overlap on a device, or time between "
                                "the step's annotation and its first op.", "trace+model", pid))
    inside = waste
    roofline = s.overlap.expected_step_s if s.overlap.expected_step_s is not None else s.expected_op_step_s
    waterfall = {"program": pid or "the step", "roofline_s": roofline, "achievable_s": s.achievable_step_s,
                 "measured_s": step, "steps": n,
                 "bars": [{"cause": f.cause, "time_s": f.time_per_step_s} for f in ranked(findings)],
                 "over_s": max(-rest, 0.0),
                 "inside_op_time": [{"cause": f.cause, "time_s": f.time_per_step_s} for f in ranked(inside)],
                 "per_step": list((host or {}).get("per_step", []))}
    return _kept(findings + inside, defaults), {"programs": [waterfall]}


def attach_diagnosis(report: ReportModel, host: Mapping[str, Any] | None) -> ReportModel:
    """The report with its `findings` (ranked) and, for a measured step, its `step_diagnosis` waterfall."""
    findings, waterfall = diagnose(report, host)
    if findings:
        report = report.attach("findings", [f.to_json() for f in findings])
    return report.attach("step_diagnosis", waterfall) if waterfall is not None else report


def _kept(findings: list[Finding], defaults: Defaults) -> list[Finding]:
    return ranked(f for f in findings if f.share is None or f.share >= defaults.finding_min_share)


def _main_program(report: ReportModel) -> str | None:
    modules = {o.module for o in report.ops if o.module}
    return modules.pop() if len(modules) == 1 else None


def _op_findings(report: ReportModel, n: int, step: float, pid: str | None) -> list[Finding]:
    """Op time beyond the achievable time: flagged, interference, the rest under the threshold, unpriced."""
    timed = [o for o in report.ops if o.self_s is not None and not o.container]
    flagged = sorted((o for o in timed if o.flagged), key=lambda o: -(o.wasted_s or 0.0))
    interfered = [o for o in timed if o.verdict == "interference"]
    out: list[Finding] = []
    gap = sum(o.wasted_s or 0.0 for o in flagged) / n
    if gap > 0:
        out.append(Finding("kernel-gap", f"{len(flagged)} flagged op(s) run beyond their achievable time", gap, gap / step,
                           tuple(f"{o.name} ({o.module}): {qty.seconds((o.wasted_s or 0.0) / n)} per step beyond "
                                 f"achievable [trace+model]" for o in flagged[:5]),
                           "See the flagged ops: each says why it is slow and what to try.", "trace+model", pid))
    slowed = sum(o.interference_s or 0.0 for o in interfered) / n
    if slowed > 0:
        out.append(Finding("interference", f"{len(interfered)} op(s) slowed by what ran beside them", slowed, slowed / step,
                           tuple(f"{o.name}: {qty.seconds((o.interference_s or 0.0) / n)} per step [trace]"
                                 for o in interfered[:5]),
                           "Their kernel runs faster elsewhere in the capture: look at what ran beside them.",
                           "trace", pid))
    # Collectives are the communication finding's; ops not judged (waits) have no kernel time to close.
    priced = [o for o in timed if o.achievable_s is not None and not o.comm_bytes and o.verdict in ("ok", "bound only")]
    slack = sum((o.self_s or 0.0) - (o.achievable_s or 0.0) for o in priced) / n
    if slack > 0:
        out.append(Finding("kernel-slack", "ops each under the flag threshold run beyond their achievable time, all "
                           "together", slack, slack / step,
                           (f"{len(priced)} op(s) not flagged [trace+model]",),
                           "No single op is far off: gains here need many small improvements.", "trace+model", pid))
    out += _exposed_comm(report, n, step, pid)
    unpriced = [o for o in timed if o.achievable_s is None and not o.comm_bytes]
    free = sum(o.self_s or 0.0 for o in unpriced) / n
    if free > 0:
        out.append(Finding("unmodeled", f"{len(unpriced)} op(s) with no achievable time", free, free / step,
                           tuple(f"{o.name} ({o.opcode}) [trace]" for o in sorted(unpriced,
                                                                                key=lambda o: -(o.self_s or 0.0))[:5]),
                           "Measured but not priced: no cost model covers them.", "trace", pid))
    return out


def _idle(host: Mapping[str, Any], step: float, pid: str | None, defaults: Defaults) -> list[Finding]:
    """Idle time from the host side: between executions by what the host did, inside executions."""
    if not host or step <= 0:
        return []
    out: list[Finding] = []
    kinds: dict[str, float] = dict(host.get("host_s", {}))
    functions = list(host.get("functions", []))
    executions = host.get("executions_per_step")
    between = float(host.get("between_s", 0.0))
    unseen = kinds.pop("untraced", 0.0) + kinds.pop("wait", 0.0)
    many = executions is not None and float(executions) >= defaults.dispatch_executions
    if many:  # many short launches a step: the host's time between them is launching them
        kinds["dispatch"] = kinds.get("dispatch", 0.0) + unseen
        unseen = 0.0
    for kind, (cause, words, action) in _BOUND.items():
        t = float(kinds.get(kind, 0.0))
        if t <= 0:
            continue
        mine = [f for f in functions if f["kind"] == kind]
        evidence = tuple(f"{f['function']}" + (f", inside {f['inside']}" if f["inside"] != f["function"] else "")
                         + f": {qty.seconds(f['seconds'])} per step during device idle "
                         f"({qty.percent(f['seconds'] / step)} of the step) [trace, host python line]" for f in mine[:5])
        if host.get("cycles"):
            evidence += (f"no step annotation: a step is one launch cycle, {qty.seconds(step)} on average [trace]",)
        if kind == "dispatch" and executions:
            evidence += (f"{qty.count(executions)} program execution(s) per step [trace]",)
        top = mine[0] if mine else None
        where = (top["function"] + (f", inside {top['inside']}" if top["inside"] != top["function"] else "")
                 if top else "no single function")
        share = t / step  # one number for one quantity: the title and the cost say the same share
        if kind == "dispatch" and many:
            where, share = f"{qty.count(executions)} program executions per step", t / step
        if t / step >= defaults.bound_share:
            title = f"{cause}: " + words.format(share=f"~{qty.percent(share)}", where=where)
            out.append(Finding(cause, title, t, t / step, evidence, action, "trace", pid))
        else:
            out.append(Finding(f"idle-between:{kind}", f"devices idle between executions while the host ran {where} "
                               "(the host keeps up)",
                               t, t / step, evidence, action, "trace", pid))
    if unseen > 0:
        traced = host.get("python_traced", False)
        out.append(Finding("idle-between:unseen", "devices idle between executions "
                           + ("while no traced Python call ran on the host" if traced
                              else "(the trace holds no Python tracer events to say why)"),
                           unseen, unseen / step,
                           (f"idle between executions {qty.seconds(between)} per step [trace]",), _UNSEEN_ACTION,
                           "trace", pid))
    inside = float(host.get("inside_all_s", 0.0))
    if inside > 0:
        out.append(Finding("runtime-gaps", "gaps inside each execution (the runtime between ops, dependencies); the program "
                           "was launched, the host is not the cause",
                           inside, inside / step,
                           (f"every device idle {qty.seconds(inside)} per step while an execution was in flight "
                            "[trace]",),
                           "Fewer, larger ops (more fusion); on XLA:CPU, fewer threads contending for the cores.",
                           "trace", pid))
    wait = float(host.get("inside_wait_s", 0.0))
    if wait > 0:
        out.append(Finding("straggler", "waiting on another device: a device idle while another device of the same "
                           "execution still ran", wait, wait / step,
                           (f"{host.get('devices', '?')} device(s) [trace]",),
                           "Balance the work across devices; the per-device times in the ops table name the slowest.",
                           "trace", pid))
    return out


def _exposed_comm(report: ReportModel, n: int, step: float, pid: str | None) -> list[Finding]:
    """Communication not hidden behind compute [trace]: its time beyond the links' achievable time (which the
    achievable step already holds), for the collectives not flagged nor slowed by interference. Collectives
    whose time is a wait (not judged: between simulated CPU devices) are their own finding."""
    comm = [o for o in report.ops if o.self_s and not o.container and o.comm_bytes and o.overlapped is not True
            and o.verdict not in ("flagged", "interference")]
    waits = [o for o in comm if o.verdict == "not judged"]
    out: list[Finding] = []
    for group, cause in ((waits, "collective-wait"), ([o for o in comm if o.verdict != "not judged"], "exposed-comm")):
        exposed = sum(o.self_s or 0.0 for o in group) / n
        beyond = sum(max((o.self_s or 0.0) - (o.achievable_s or 0.0), 0.0) for o in group) / n
        if beyond <= 0:
            continue
        evidence = tuple(f"{o.name}: {qty.seconds((o.self_s or 0.0) / n)} per step [trace]"
                         for o in sorted(group, key=lambda o: -(o.self_s or 0.0))[:5])
        if cause == "collective-wait":
            why = group[0].reasons[0] if group[0].reasons else "its time is a wait, not communication"
            out.append(Finding(cause, f"{len(group)} collective(s) waiting, not communicating ({why})", beyond,
                               beyond / step, evidence,
                               "Judge communication on real devices; on one CPU, fewer simulated devices wait less.",
                               "trace", pid))
        else:
            out.append(Finding(cause, f"communication not hidden behind compute ({qty.seconds(exposed)} per step "
                               "exposed), beyond what the links need", beyond, beyond / step, evidence,
                               "Overlap it with compute (async collectives, collective matmuls) or move less data.",
                               "trace", pid))
    return out


def _programs(report: ReportModel) -> tuple[list[Finding], dict[str, Any]]:
    """A capture of several programs: each program's waterfall per execution, and its kernel gaps."""
    rows = []
    findings: list[Finding] = []
    for p in report.part("programs") or []:
        measured = p.get("measured_s")
        pid = p.get("module") or str(p.get("program_id"))
        runs = max(int(p.get("executions") or 1), 1)
        flagged = [o for o in report.ops if o.flagged and o.program_id == p.get("program_id")]
        gap = sum(o.wasted_s or 0.0 for o in flagged) / runs
        rows.append({"program": pid, "roofline_s": p.get("expected_step_s") or p.get("expected_s"),
                     "achievable_s": p.get("achievable_s"), "measured_s": measured, "steps": runs,
                     "bars": [{"cause": "kernel-gap", "time_s": gap}] if gap > 0 else [], "over_s": 0.0,
                     "inside_op_time": [], "per_step": []})
        if gap > 0 and measured:
            findings.append(Finding("kernel-gap", f"{pid}: {len(flagged)} flagged op(s) run beyond their achievable time "
                                    "(per execution)", gap, gap / measured,
                                    tuple(f"{o.name}: {qty.seconds((o.wasted_s or 0.0) / runs)} per execution "
                                          "[trace+model]" for o in flagged[:5]),
                                    "See the flagged ops.", "trace+model", pid))
    return findings, {"programs": rows}
