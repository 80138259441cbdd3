"""The markdown summary for a pull-request comment (GitHub-flavoured, no HTML needed).

Tables are capped so the comment stays far below GitHub's 65,536-character
limit whatever the profile; every string from a trace is escaped so it shows
as text and cannot break a table or open a tag.
"""

from __future__ import annotations

from . import quantities as qty
from .plan_render import plan_markdown
from .diff_render import render_diff_markdown
from .html_summary import headline
from .pod import pod_markdown
from .rows import BOUNDS, is_predicted

MAX_FLAGGED = 15
MAX_COLLECTIVES = 10
MAX_WARNINGS = 10
MAX_TEXT = 90
_SPECIAL = "\\`*_[]<>|#~&!"


def md_text(value: object, limit: int = MAX_TEXT) -> str:
    """Plain text safe in a GFM table cell: one line, shortened, markdown punctuation escaped."""
    text = " ".join(str(value if value is not None else "").split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return "".join("\\" + ch if ch in _SPECIAL else ch for ch in text)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _subject(report: dict) -> str:
    src = report.get("source") or {}
    return src.get("workload") or ", ".join(str(p) for p in src.get("paths") or []) or "profile"


def _hardware_line(report: dict) -> str:
    hw = report.get("hardware") or {}
    peaks = hw.get("peak_flops_per_s") or {}
    sources = hw.get("peak_flops_source") or {}
    bits = [f"**Hardware:** {md_text(hw.get('name') or 'unknown')} ({md_text(hw.get('source') or 'unknown')})"]
    used = hw.get("peaks_used") or []
    if used:  # the peaks that priced the ops, not whichever are largest
        bits += [f"{md_text(p['peak'])} {qty.flops_per_s(p['flops_per_s'])} ({md_text(p['source'])}; "
                 f"{qty.count(p['ops'])} ops)" for p in used]
    else:
        bits += [f"{md_text(d)} {qty.flops_per_s(v)} ({md_text(sources.get(d) or hw.get('source'))})"
                 for d, v in sorted(peaks.items(), key=lambda kv: (kv[0] != "bf16", -float(kv[1] or 0)))[:3]]
    bits.append(f"HBM {qty.bytes_per_s(hw.get('hbm_bytes_per_s'))} "
                f"({md_text(hw.get('hbm_bytes_per_s_source') or hw.get('source'))})")
    bits += [f"{md_text(c['name'])} {qty.nbytes(c['capacity_bytes']['value'])} at "
             f"{qty.bytes_per_s(c['bytes_per_s']['value'])} ({md_text(c['bytes_per_s']['source'])})"
             for c in hw.get("caches") or []]
    link = (hw.get("interconnect") or {}).get("name")
    if link and (hw.get("interconnect") or {}).get("kind") not in ("none", "host-memory"):
        bits.append(md_text(link))
    jax = (report.get("source") or {}).get("jax_version")
    if jax:
        bits.append(f"JAX {md_text(jax)}")
    return " · ".join(bits)


def _verdict(report: dict) -> list[str]:
    s = report.get("summary") or {}
    st = s.get("step_time_s") or {}
    predicted = is_predicted(report)
    header = ["Step time (median)", "min", "max"] + ([] if predicted else ["Roofline fraction"]) + \
        ["Expected op time", "Expected step (overlap)", "Exposed comm", "Flagged ops", "Unmodeled ops", "Devices"]
    row = [qty.seconds(st.get("median")), qty.seconds(st.get("min")), qty.seconds(st.get("max"))] + \
        ([] if predicted else [qty.percent(s.get("roofline_fraction"))]) + \
        [qty.seconds(s.get("expected_s")), qty.seconds(s.get("expected_step_s")), qty.seconds(s.get("exposed_comm_s")),
         qty.count(s.get("flagged_ops")), qty.count(s.get("unmodeled_ops")), qty.count(s.get("devices"))]
    by = s.get("time_by_bound_s") or {}
    parts = [(b, float(by[b])) for b in BOUNDS if qty.known(by.get(b)) and by[b] > 0]
    if qty.known(s.get("idle_s")) and s["idle_s"] > 0:
        parts.append(("idle", float(s["idle_s"])))
    total = sum(t for _, t in parts)
    lines = [f"**Verdict:** {md_text(headline(report), 400)}", ""] + _table(header, [row])
    if total > 0:
        lines += ["", "Time by bound: " + " · ".join(f"{b} {qty.percent(t / total)}" for b, t in parts)]
    gap = ((report.get("xla") or {}).get("gap") or {}).get("text")
    if gap:
        lines += ["", f"**Against XLA's estimate:** {md_text(gap, 600)}"]
    return lines


def _flagged(report: dict) -> list[str]:
    flagged = report.get("flagged") or []
    if not flagged:
        return ["### Flagged ops", "", "No op was flagged."]
    by_key = {op.get("key"): op for op in report.get("ops") or [] if op.get("key") is not None}
    predicted = is_predicted(report)
    header = ["#", "Op", "Module"] + ([] if predicted else ["Measured"]) + ["Expected", "Wasted", "Why", "Try"]
    rows = []
    for n, f in enumerate(flagged[:MAX_FLAGGED], 1):
        op = by_key.get(f.get("key"), {})
        rows.append([str(n), md_text(f.get("name")), md_text(f.get("module"), 40)]
                    + ([] if predicted else [qty.seconds(op.get("measured_s"))])
                    + [qty.seconds(op.get("expected_s")), qty.seconds(f.get("wasted_s")),
                       md_text("; ".join(str(r) for r in (f.get("reasons") or [])[:2]), 140),
                       md_text(f.get("suggestion") or "", 160)])
    more = ["", f"…and {len(flagged) - MAX_FLAGGED} more in the full report."] if len(flagged) > MAX_FLAGGED else []
    return ["### Top flagged ops", ""] + _table(header, rows) + more


def _collectives(report: dict) -> list[str]:
    rows = [c for c in report.get("collectives") or [] if isinstance(c, dict)]
    if not rows:
        return []
    predicted = is_predicted(report)
    header = ["Collective", "Kind", "Bytes", "Group", "Expected", "Exposed (schedule)"] + \
        ([] if predicted else ["Measured", "Achieved / peak", "Overlapped"])
    body = []
    for c in rows[:MAX_COLLECTIVES]:
        cells = [md_text(c.get("name"), 60), md_text(c.get("kind"), 30), qty.nbytes(c.get("bytes")),
                 qty.count(c.get("group_size")), qty.seconds(c.get("expected_s")), qty.seconds(c.get("exposed_s"))]
        if not predicted:
            ov = c.get("overlapped")
            cells += [qty.seconds(c.get("measured_s")),
                      f"{qty.bytes_per_s(c.get('achieved_bytes_per_s'))} / "
                      f"{qty.bytes_per_s(c.get('peak_bytes_per_s'))}",
                      qty.UNKNOWN if ov is None else ("yes" if ov else "no")]
        body.append(cells)
    more = ["", f"…and {len(rows) - MAX_COLLECTIVES} more in the full report."] if len(rows) > MAX_COLLECTIVES \
        else []
    return ["### Collectives", ""] + _table(header, body) + more


def _warnings(report: dict) -> list[str]:
    warnings = report.get("warnings") or []
    if not warnings:
        return []
    lines = ["### Warnings", ""] + [f"- {md_text(w, 240)}" for w in warnings[:MAX_WARNINGS]]
    if len(warnings) > MAX_WARNINGS:
        lines.append(f"- …and {len(warnings) - MAX_WARNINGS} more")
    return lines


def render_markdown(report: dict, *, html_path: str | None = None) -> str:
    """A compact PR-comment summary of an analysed report (schema `audit.report/v1`).

    **Arguments:**
    - `report`: the JSON report dict.
    - `html_path`: where the full HTML report was written, named in the last line.

    **Returns:** GitHub-flavoured markdown, at most a few thousand characters
    for any report (tables are capped).
    """
    lines = [f"## Roofline audit: {md_text(_subject(report), 120)}", ""]
    if is_predicted(report):
        lines += ["_Predicted, not measured: an ahead-of-time report from the compiled program._", ""]
    lines += [_hardware_line(report), ""] + _verdict(report) + [""] + _flagged(report)
    for block in (_collectives(report), plan_markdown(report, md_text), pod_markdown(report), _warnings(report)):
        if block:
            lines += [""] + block
    diff = report.get("diff")
    if isinstance(diff, dict) and diff:
        lines += ["", render_diff_markdown(diff).rstrip()]
    where = f"`{html_path.replace('`', '')}`" if html_path else "not written (pass `--html FILE`)"
    lines += ["", f"Full report with the roofline chart, timeline and every op: {where}"]
    return "\n".join(lines) + "\n"
