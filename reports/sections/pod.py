"""The pod section (reports with several hosts): top-N lists and distributions over hosts,
in terminal text, markdown and HTML. Times are measured [trace], seconds per device summed
over the analysed steps; step times are each host's median over steps."""

from __future__ import annotations

from html import escape
from typing import Any

from ...costmodel import units as qty
from ..model.report import ReportModel
from ..text import md_text
from ._base import RenderOptions
from ...base.options import DEFAULTS

TOP = DEFAULTS.pod_rows


def _dist(d: dict[str, Any]) -> str:
    if not d or not d.get("n"):
        return qty.UNKNOWN
    return (f"min {qty.seconds(d['min'])}, p10 {qty.seconds(d['p10'])}, median {qty.seconds(d['median'])}, "
            f"p90 {qty.seconds(d['p90'])}, max {qty.seconds(d['max'])} over {d['n']}")


def _ops(ops: list[dict[str, Any]]) -> str:
    return ", ".join(f"{o['name']} +{qty.seconds(o['excess_s'])} ({qty.ratio(o['ratio'])})" for o in ops) or "-"


def pod_facts(report: ReportModel, top: int = TOP) -> dict[str, Any] | None:
    """The rows every renderer shows, or None for a report without a pod analysis."""
    pod = report.part("pod")
    if not isinstance(pod, dict):
        return None
    wait = pod.get("collective_wait") or {}
    mismatch = pod.get("program_mismatch") or {}
    return {
        "hosts": pod.get("hosts"),
        "step": _dist(pod.get("step_time_by_host_s") or {}),
        "ratio": pod.get("straggler_ratio_distribution") or {},
        "slowest": [(h["host"], qty.seconds(h["step_time_s"]), qty.ratio(h["vs_median"]), _ops(h["ops"]))
                    for h in (pod.get("slowest_hosts") or [])[:top]],
        "stragglers": [(s["name"], s.get("module") or "-", qty.ratio(s["straggler_ratio"]), qty.seconds(s["excess_s"]),
                        f"{s['slowest_host']}/{s['slowest_device']}") for s in (pod.get("stragglers") or [])[:top]],
        "last": [(w["host"], qty.seconds(w["wait_s"]), qty.ratio(w["vs_median"]))
                 for w in (wait.get("arrives_last") or [])[:top]],
        "wait": _dist(wait.get("by_host_s") or {}),
        "mismatch": (mismatch.get("hosts") or 0, [e["host"] for e in (mismatch.get("examples") or [])[:top]]),
    }


def terminal(report: ReportModel, _: RenderOptions) -> list[str] | None:
    f = pod_facts(report)
    if f is None:
        return None
    ratio = f["ratio"]
    lines = [f"pod: {f['hosts']} hosts [trace]; step time per host: {f['step']}"]
    lines.append("  slowest hosts (median step, vs pod median; ops over the median host):")
    lines += [f"    {h}  {t}  {r}  {ops}" for h, t, r, ops in f["slowest"]]
    if ratio.get("n"):
        lines.append(f"  straggler ratio per op (slowest device / median): median {qty.ratio(ratio['median'])}, "
                     f"p90 {qty.ratio(ratio['p90'])}, max {qty.ratio(ratio['max'])}")
    lines += [f"    {name} ({module})  {r}  +{excess}  slowest {where}" for name, module, r, excess, where in f["stragglers"]]
    if f["last"]:
        lines.append(f"  collective wait per host: {f['wait']}; arrives last (waits least): "
                     + ", ".join(f"{h} {t}" for h, t, _ in f["last"]))
    count, hosts = f["mismatch"]
    lines.append(f"  hosts running different programs: {count}" + (f" ({', '.join(hosts)})" if hosts else ""))
    return lines


def _md(text: object) -> str:
    return md_text(text)


def markdown(report: ReportModel, _: RenderOptions) -> list[str] | None:
    f = pod_facts(report)
    if f is None:
        return None
    lines = [f"### Pod: {f['hosts']} hosts", "", f"Step time per host [trace]: {f['step']}", "",
             "| slowest host | median step | vs median | ops over the median host |", "|---|---|---|---|"]
    lines += [f"| {_md(h)} | {t} | {r} | {_md(ops)} |" for h, t, r, ops in f["slowest"]]
    if f["stragglers"]:
        lines += ["", "| op | module | straggler ratio | excess | slowest host/device |", "|---|---|---|---|---|"]
        lines += [f"| {_md(n)} | {_md(m)} | {r} | {e} | {_md(w)} |" for n, m, r, e, w in f["stragglers"]]
    if f["last"]:
        lines += ["", f"Collective wait per host: {f['wait']}. Arrives last (waits least): "
                  + ", ".join(f"{_md(h)} {t}" for h, t, _ in f["last"])]
    count, hosts = f["mismatch"]
    lines += ["", f"Hosts running different programs: {count}" + (f" ({_md(', '.join(hosts))})" if hosts else "")]
    return lines


def _table(head: list[str], rows: list[tuple[str, ...]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="pod"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def html(report: ReportModel, _: RenderOptions) -> str | None:
    f = pod_facts(report, 10)
    if f is None:
        return None
    count, hosts = f["mismatch"]
    parts = [f"<p>{f['hosts']} hosts [trace]. Step time per host: {escape(f['step'])}.</p>",
             "<h3>Slowest hosts</h3>",
             _table(["host", "median step", "vs median", "ops over the median host"], f["slowest"]),
             "<h3>Stragglers per op</h3>",
             _table(["op", "module", "slowest / median device", "excess", "slowest host/device"], f["stragglers"])]
    if f["last"]:
        parts += [f"<h3>Collective wait by host</h3><p>{escape(f['wait'])}. The host that waits least arrived last.</p>",
                  _table(["arrives last", "wait", "vs median"], f["last"])]
    parts.append(f"<p>Hosts running different programs: {count}"
                 + (f" ({escape(', '.join(hosts))})" if hosts else "") + "</p>")
    return "".join(parts)
