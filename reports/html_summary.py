"""HTML for the top of the audit: header, verdict, flagged ops and warnings."""

from __future__ import annotations

from html import escape
from pathlib import PurePath

from . import quantities as qty
from .rows import BOUNDS, is_predicted
from .svg import share_bar_svg


def _dl(items: list[tuple[str, str]]) -> str:
    """A definition list; values are already-escaped HTML."""
    return '<dl class="facts">' + "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def _src(source: object) -> str:
    return f' <span class="src">{escape(str(source))}</span>' if source else ""


def _quantity(q: object, fmt) -> str:
    """A hardware quantity, plain or {value, unit, source}, with where it came from."""
    if isinstance(q, dict):
        return escape(fmt(q.get("value"))) + _src(q.get("source"))
    return escape(fmt(q))


def _ceilings(hw: dict) -> list[tuple[str, str]]:
    sources = hw.get("peak_flops_source") or {}
    peaks = hw.get("peak_flops_per_s") or {}
    used = {p["peak"]: p for p in hw.get("peaks_used") or []}
    rows = [(f"Peak {p['peak']}", escape(qty.flops_per_s(p["flops_per_s"])) + _src(p["source"])
             + escape(f" · priced {qty.count(p['ops'])} ops")) for p in used.values()]
    rows += [(f"Peak {dtype}", escape(qty.flops_per_s(v)) + _src(sources.get(dtype) or hw.get("source")))
             for dtype, v in sorted(peaks.items(), key=lambda kv: -float(kv[1] or 0)) if dtype not in used]
    rows.append(("HBM bandwidth", escape(qty.bytes_per_s(hw.get("hbm_bytes_per_s")))
                 + _src(hw.get("hbm_bytes_per_s_source") or hw.get("source"))))
    if qty.known(hw.get("hbm_bytes")):
        rows.append(("HBM capacity", escape(qty.nbytes(hw.get("hbm_bytes"))) + _src(hw.get("source"))))
    for cache in hw.get("caches") or []:  # the memory roofs of ops whose bytes fit in a cache
        rows.append((f"{cache['name']} bandwidth ({qty.nbytes(cache['capacity_bytes']['value'])})",
                     _quantity(cache["bytes_per_s"], qty.bytes_per_s)))
    ic = hw.get("interconnect") or {}
    if ic.get("kind") and ic.get("kind") != "none":
        link = ic.get("link_bytes_per_s")
        rows.append(("Interconnect", escape(str(ic.get("name") or ic["kind"])) + (
            " · link " + _quantity(link, qty.bytes_per_s) if link else "")))
    return rows


def header_html(report: dict) -> str:
    src = report.get("source") or {}
    hw = report.get("hardware") or {}
    tool = report.get("tool") or {}
    paths = [str(p) for p in src.get("paths") or []]
    subject = src.get("workload") or ", ".join(PurePath(p).name for p in paths) or "profile"
    kind = {"run": "profiled run", "xplane": "captured profile", "hlo": "HLO dump",
            "aot": "ahead-of-time prediction"}.get(str(src.get("kind")), str(src.get("kind") or "report"))
    facts = [("Input", escape(kind) + " · " + "<br>".join(f"<code>{escape(str(p))}</code>"
                                                          for p in src.get("paths") or [])),
             ("Hardware", f"<strong>{escape(str(hw.get('name') or 'unknown'))}</strong>" + _src(hw.get("source")))]
    facts += _ceilings(hw)
    jax = src.get("jax_version") or (f"not recorded (analysed with {src['jax_running']})"
                                     if src.get("jax_running") else qty.UNKNOWN)
    facts += [("JAX", escape(str(jax))),
              ("Created", escape(str(src.get("created") or qty.UNKNOWN))),
              ("Tool", escape(f"{tool.get('name', 'audit')} {tool.get('version', '')}".strip()))]
    notes = "".join(f"<li>{escape(str(n))}</li>" for n in hw.get("notes") or [])
    command = src.get("command")
    repro = (f'<div class="repro"><span>Reproduce</span><pre><code id="command">{escape(str(command))}'
             "</code></pre></div>") if command else ""
    badge = '<span class="badge predicted">predicted, not measured</span>' if is_predicted(report) else ""
    return (f'<header class="top"><p class="kicker">Roofline audit{badge}</p>'
            f"<h1>{escape(str(subject))}</h1>{_dl(facts)}"
            + (f'<ul class="notes">{notes}</ul>' if notes else "") + repro + "</header>")


def _stat(label: str, value: str, sub: str = "") -> str:
    return (f'<div class="stat"><div class="stat-label">{escape(label)}</div>'
            f'<div class="stat-value">{escape(value)}</div><div class="stat-sub">{escape(sub)}</div></div>')


def _breakdown(summary: dict) -> tuple[list[tuple[str, float]], float]:
    by = summary.get("time_by_bound_s") or {}
    parts = [(b, float(by[b])) for b in BOUNDS if qty.known(by.get(b)) and by[b] > 0]
    if qty.known(summary.get("idle_s")) and summary["idle_s"] > 0:
        parts.append(("idle", float(summary["idle_s"])))
    return parts, sum(t for _, t in parts)


def headline(report: dict) -> str:
    """One plain sentence: how close to the roofline, where most time goes, what the flags cost."""
    s = report.get("summary") or {}
    parts, total = _breakdown(s)
    words = []
    if is_predicted(report):
        words.append("Predicted from the compiled program, not measured.")
    elif qty.known(s.get("roofline_fraction")):
        words.append(f"Ops ran at {qty.percent(s['roofline_fraction'])} of their roofline overall.")
    ops_parts = [(b, t) for b, t in parts if b != "idle"]
    if ops_parts and total > 0:
        b, t = max(ops_parts, key=lambda bt: bt[1])
        words.append(f"Most op time is {b}-bound ({qty.percent(t / total)}).")
    flagged = report.get("flagged") or []
    wasted = [float(f["wasted_s"]) for f in flagged if qty.known(f.get("wasted_s"))]
    if flagged:
        words.append(f"{len(flagged)} flagged op(s) waste {qty.seconds(sum(wasted))} per device." if wasted
                     else f"{len(flagged)} op(s) flagged.")
    return " ".join(words)


def verdict_html(report: dict) -> str:
    s = report.get("summary") or {}
    predicted = is_predicted(report)
    st = s.get("step_time_s") or {}
    frac = s.get("roofline_fraction")
    stats = [
        _stat("Step time (median)" if not predicted else "Predicted step time",
              qty.seconds(st.get("median") if st else s.get("expected_s")),
              f"min {qty.seconds(st.get('min'))} · max {qty.seconds(st.get('max'))}" if st else ""),
        _stat("Roofline fraction", qty.percent(frac), "sum of expected / sum of measured op time")
        if not predicted else _stat("Expected op time", qty.seconds(s.get("expected_s")), "from the cost model"),
        _stat("Expected step with overlap", qty.seconds(s.get("expected_step_s")),
              f"exposed communication {qty.seconds(s.get('exposed_comm_s'))} · hidden "
              f"{qty.seconds(s.get('hidden_comm_s'))} [model, schedule walk]"),
        _stat("Flagged ops", qty.count(s.get("flagged_ops")), "far from their roofline"),
        _stat("Unmodeled ops", qty.count(s.get("unmodeled_ops")), "no cost model; time still counted"),
        _stat("Devices", qty.count(s.get("devices")),
              f"{qty.count(s.get('hosts'))} host(s) · {qty.count(s.get('steps'))} step(s)"),
    ]
    parts, total = _breakdown(s)
    rows = "".join(f'<tr><td><span class="sw k-{b}"></span>{escape(b)}</td><td class="num">'
                   f"{escape(qty.seconds(t))}</td><td class=\"num\">{escape(qty.percent(t / total))}</td></tr>"
                   for b, t in parts) if total > 0 else ""
    what = "expected" if predicted else "measured"
    table = (f'<table class="mini"><thead><tr><th>Time is</th><th class="num">{what}</th><th class="num">share'
             f"</th></tr></thead><tbody>{rows}</tbody></table>") if rows else ""
    gap = ((report.get("xla") or {}).get("gap") or {}).get("text")
    versus = f'<p class="note">Against XLA\'s estimate: {escape(gap)}</p>' if gap else ""
    return (f'<p class="headline">{escape(headline(report))}</p><div class="stats">{"".join(stats)}</div>'
            f'<div class="breakdown">{share_bar_svg(parts, total)}{table}</div>{versus}')


FLAGGED_OPEN = 10  # shown at once; the rest sit in a collapsed list that printing opens


def _flag_item(n: int, f: dict, op: dict, predicted: bool) -> str:
    reasons = "".join(f"<li>{escape(str(r))}</li>" for r in f.get("reasons") or [])
    timing = [] if predicted else [f"measured {qty.seconds(op.get('measured_s'))}"]
    timing += [f"expected {qty.seconds(op.get('expected_s'))}", f"{op.get('bound_by') or 'unknown'}-bound"]
    meta = " · ".join([str(f.get("module") or "")] + (timing if op else []))
    suggestion = f.get("suggestion")
    return (f'<li class="flag-item" data-key="{escape(str(f.get("key", "")))}">'
            f'<div class="flag-head"><span class="rank">{n}</span>'
            f'<code class="op-name">{escape(str(f.get("name", "")))}</code>'
            f'<span class="wasted">{escape(qty.seconds(f.get("wasted_s")))} wasted</span></div>'
            f'<div class="flag-meta">{escape(meta)}</div><ul class="reasons">{reasons}</ul>'
            + (f'<p class="suggestion"><strong>Try:</strong> {escape(str(suggestion))}</p>' if suggestion else "")
            + "</li>")


def flagged_html(report: dict) -> str:
    """The flagged ops exactly as the report orders them, the first few open."""
    flagged = report.get("flagged") or []
    if not flagged:
        if is_predicted(report):
            return '<p class="empty">No op was flagged: flags compare measured with expected time.</p>'
        return '<p class="empty">No op was flagged: every modeled op is close to its roofline.</p>'
    by_key = {op.get("key"): op for op in report.get("ops") or [] if op.get("key") is not None}
    predicted = is_predicted(report)
    items = [_flag_item(n, f, by_key.get(f.get("key"), {}), predicted) for n, f in enumerate(flagged, 1)]
    out = f'<ol id="flagged-list" class="flagged">{"".join(items[:FLAGGED_OPEN])}</ol>'
    if len(items) > FLAGGED_OPEN:
        out += (f'<details class="more-flagged"><summary>{len(items) - FLAGGED_OPEN} more flagged ops</summary>'
                f'<ol class="flagged" start="{FLAGGED_OPEN + 1}">{"".join(items[FLAGGED_OPEN:])}</ol></details>')
    return out


def warnings_html(report: dict) -> str | None:
    warnings = report.get("warnings") or []
    if not warnings:
        return None
    return '<ul class="warnings">' + "".join(f"<li>{escape(str(w))}</li>" for w in warnings) + "</ul>"
