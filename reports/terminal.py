"""The terminal summary: verdict lines and the top ops by time, plain text."""

from __future__ import annotations

from . import humanize as units
from .pod import pod_lines


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _peaks(hw: dict) -> str:
    """The peaks that priced the ops (with how many ops each), else the bf16 peak."""
    used = hw.get("peaks_used") or []
    if used:
        return "peaks used " + ", ".join(f"{p['peak']} {units.flops_rate(p['flops_per_s'])} [{p['source']}] "
                                         f"({p['ops']} ops)" for p in used)
    peak = hw["peak_flops_per_s"].get("bf16") or next(iter(hw["peak_flops_per_s"].values()), None)
    return (f"bf16 peak {units.flops_rate(peak)} "
            f"[{hw.get('peak_flops_source', {}).get('bf16', hw['source'])}]")


def _header(report: dict) -> list[str]:
    src, hw, s = report["source"], report["hardware"], report["summary"]
    what = src.get("workload") or ", ".join(src.get("paths") or []) or "-"
    lines = [
        f"audit: {what}",
        f"hardware: {hw['name']} ({hw['source']}): {_peaks(hw)}, "
        f"HBM {units.bytes_rate(hw['hbm_bytes_per_s'])} [{hw.get('hbm_bytes_per_s_source', hw['source'])}]"
        + "".join(f", {c['name']} {units.nbytes(c['capacity_bytes']['value'])} at "
                  f"{units.bytes_rate(c['bytes_per_s']['value'])} [{c['bytes_per_s']['source']}]"
                  for c in hw.get("caches") or [])
        + (f", {hw['interconnect']['name']}" if (hw.get("interconnect") or {}).get("name") else ""),
    ]
    st = s["step_time_s"]
    if s.get("predicted"):
        lines.append(f"predicted, not measured: expected step time {units.seconds(st['median'])} [model]")
        xla = report.get("xla") or {}
        if xla.get("optimal_seconds") is not None:
            gap = (xla.get("gap") or {}).get("text")
            lines.append(f"XLA's own estimate: {units.seconds(xla['optimal_seconds'])} [xla]; "
                         + (gap or "it does not price all-gather/reduce-scatter/all-to-all over the topology"))
        if (report.get("memory") or {}).get("verdict"):
            lines.append(f"memory per device: {report['memory']['verdict']} [xla memory_analysis, catalog]")
    else:
        lines.append(
            f"{s['steps']} step(s) on {s['devices']} device(s), {s['hosts']} host(s): step time "
            f"min {units.seconds(st['min'])} / median {units.seconds(st['median'])} / "
            f"max {units.seconds(st['max'])} [trace]")
        lines.append(
            f"op time per device {units.seconds(s['measured_s'])} [trace], expected "
            f"{units.seconds(s['expected_s'])} [model]: roofline fraction "
            f"{units.percent(s['roofline_fraction'])}; idle {units.seconds(s['idle_s'])}")
    lines.append(overlap_line(s))
    by = s["time_by_bound_s"]
    total = sum(v for v in by.values() if v) or None
    parts = [f"{k} {units.percent(v / total) if total else '-'}" for k, v in by.items()]
    lines.append("time by bound: " + ", ".join(parts))
    return lines


def overlap_line(s: dict) -> str:
    """The step both ways: the no-overlap sum and the schedule walk with async collectives hidden."""
    if s.get("expected_step_s") is None:
        return (f"expected op time {units.seconds(s.get('expected_s'))} [model] (no overlap); "
                "overlapped step unknown: the program has no schedule")
    return (f"expected step {units.seconds(s['expected_step_s'])} with async overlap [model, schedule walk], "
            f"{units.seconds(s.get('expected_s'))} with none; communication exposed "
            f"{units.seconds(s.get('exposed_comm_s'))}, hidden {units.seconds(s.get('hidden_comm_s'))}")


def render_terminal(report: dict, *, top: int = 15, width: int = 140) -> str:
    """A readable summary for people (stderr or stdout)."""
    lines = _header(report)
    ops = [o for o in report["ops"] if not o.get("container")][:top]
    predicted = report["summary"].get("predicted")
    name_w = max(20, width - 104)
    head = (f"{'op':<{name_w}} {'module':<17} {'category':<18} {'dev':>3} {'occ':>6} "
            f"{'time' if not predicted else 'expected':>10} {'share':>6} {'expected':>10} {'eff':>6} bound")
    lines += ["", f"top {len(ops)} ops by {'self time per device' if not predicted else 'expected time'}:",
              head, "-" * min(width, len(head) + 12)]
    for o in ops:
        t = o["expected_s"] if predicted else o["self_s"]
        mark = " !" if o["flagged"] else ""
        lines.append(
            f"{_clip(o['name'], name_w):<{name_w}} {_clip(o['module'] or '-', 17):<17} "
            f"{_clip(o['category'] or '-', 18):<18} "
            f"{o['devices']:>3} {o['occurrences']:>6.0f} {units.seconds(t):>10} "
            f"{units.percent(o['share']) if not predicted else '':>6} {units.seconds(o['expected_s']):>10} "
            f"{units.percent(o['efficiency']) if o['efficiency'] is not None else '-':>6} {o['bound_by']}{mark}")
    flagged = report["flagged"]
    if flagged:
        lines += ["", f"{len(flagged)} flagged op(s) (efficiency below threshold, share above threshold):"]
        for f in flagged[:top]:
            lines.append(f"  {f['name']} ({f['module']}): wasted {units.seconds(f['wasted_s'])}; " + "; ".join(f["reasons"][:2]))
    lines += pod_lines(report)
    lines += _plan_lines(report.get("plan_vs_profile"))
    lines += _comparison_lines(report.get("cpu_comparison"), top)
    for w in report["warnings"]:
        lines.append(f"warning: {w}")
    lines.append("times: seconds per device summed over the analysed steps; [trace] measured, [model] expected")
    return "\n".join(lines) + "\n"


def _plan_lines(table: dict | None) -> list[str]:
    """The napkin plan, the cost model and the measurement of one step, side by side."""
    if not table:
        return []
    if table.get("error"):
        return ["", f"plan: not available ({table['error']})"]
    fmt = {"FLOP": units.flops, "B": units.nbytes, "s": units.seconds}
    lines = ["", f"{'per step':<32} {'plan [napkin]':>14} {'expected [model]':>17} {'measured [trace]':>17}"]
    for r in table["rows"]:
        f = fmt[r["unit"]]
        measured = f(r["measured"]) if r["measured"] is not None else "-"
        lines.append(f"{r['quantity']:<32} {f(r['plan']):>14} {f(r['model']):>17} {measured:>17}")
    for r in table["rows"]:
        if r.get("reasons"):
            lines.append(f"why {r['quantity']} differs ({r['gap']}):")
            lines += [f"  - {reason}" for reason in r["reasons"]]
    return lines


def _comparison_lines(cmp: dict | None, top: int) -> list[str]:
    """Measured on this CPU next to predicted on the target, per framework op and step."""
    if not cmp:
        return []
    lines = ["", f"{'framework op':<56} {'CPU measured [trace]':>21} {'target predicted [model]':>25}"]
    for r in cmp["matched"][:top]:
        lines.append(f"{_clip(r['framework_op'], 56):<56} {units.seconds(r['cpu_measured_s']):>21} "
                     f"{units.seconds(r['target_expected_s']):>25}")
    if cmp["cpu_only"] or cmp["target_only"]:
        lines.append(f"unmatched: {len(cmp['cpu_only'])} on CPU only, {len(cmp['target_only'])} on the target only")
    return lines
