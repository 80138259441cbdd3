"""Render an `audit diff` document: terminal text, a markdown PR comment, an embeddable HTML section."""

from __future__ import annotations

from html import escape

from . import humanize as u


def _signed(value: float | None, fmt) -> str:
    if value is None:
        return "-"
    return ("+" if value > 0 else "") + fmt(value) if value else "0"


def _pct(change: float | None) -> str:
    return "-" if change is None else f"{100 * change:+.1f}%"


def _md(text: object) -> str:
    s = str(text)
    for ch in ("\\", "|", "`", "*", "_", "<", ">", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return s


def _lines(diff: dict, md: bool) -> list[str]:
    ct, me = diff["compile_time"], diff["measured"]
    t = ct["totals_per_step"]
    out = []
    verdict = "REGRESSION" if diff["regression"] else "no regression"
    out.append(("**audit diff: " + verdict + "**") if md else f"audit diff: {verdict}")
    for reason in diff["gates"]["tripped"]:
        out.append(("- " if md else "  ") + reason)
    if me.get("available"):
        out.append(f"step time: {me.get('verdict', '-')} ({me.get('verdict_reason', '')})")
        out.append(f"step time (median, trace): {u.seconds(me['base_median_s'])} -> {u.seconds(me['head_median_s'])} "
                   f"({_pct(me['change'])}; 95% interval {_pct(me['interval'][0])} .. {_pct(me['interval'][1])}, "
                   f"{'beyond' if me['beyond_noise'] else 'within'} noise; "
                   f"{me.get('base_runs', 1)} base run(s), {me.get('head_runs', 1)} head run(s))")
        if me.get("weak"):
            out.append("weak comparison: one run a side measures no run-to-run variance; the interval is widened "
                       "by a fixed floor (repeat runs with `audit run --repeat N` for a real one)")
        for unstable in me.get("unstable", []):
            out.append(f"unstable {unstable['side']}: run {unstable['run']} of {unstable['runs']} "
                       f"({unstable['source']}) median {u.seconds(unstable['median_s'])} is "
                       f"{_pct(unstable['off_by'])} from its other runs ({u.seconds(unstable['others_median_s'])}); "
                       f"the side's runs differ by {100 * unstable['spread']:.1f}%, their steps explain "
                       f"{100 * unstable['allowed']:.1f}%")
    else:
        out.append(f"measured: not compared ({me.get('reason')})")
    if not ct["changed"]:
        out.append("program: unchanged (same ops, FLOPs, bytes and collectives per step) [model]")
    else:
        out.append("program changed, per step [model]: "
                   f"FLOPs {_signed(t['flops']['delta'], u.flops)}, "
                   f"bytes {_signed(t['bytes']['delta'], u.nbytes)}, "
                   f"communicated {_signed(t['comm_bytes']['delta'], u.nbytes)}, "
                   f"expected time {_signed(t['expected_s']['delta'], u.seconds)}"
                   + (f", expected step with overlap {_signed(t['expected_step_s']['delta'], u.seconds)}"
                      if "expected_step_s" in t else ""))
    if ct.get("uncertain_pairs"):
        out.append(f"{ct['uncertain_pairs']} changed op(s) were paired by framework op or name only: "
                   "the pairing may be wrong (marked 'uncertain')")
    return out


def _run_rows(diff: dict) -> list[tuple[str, str, str, str, str]]:
    """(side, run, source, median step [trace], steps) for every run of both sides."""
    runs = diff["measured"].get("runs") or {}
    odd = {(x["side"], x["run"]) for x in diff["measured"].get("unstable", [])}
    return [(side, f"{i}" + (" (unstable)" if (side, i) in odd else ""), r["source"], u.seconds(r["median_s"]),
             str(r["steps"]))
            for side in ("base", "head") for i, r in enumerate(runs.get(side, []), 1)]


def _unsure(r: dict) -> str:
    return " [uncertain pairing]" if r.get("uncertain") else ""


def render_diff_terminal(diff: dict, *, top: int = 10) -> str:
    lines = _lines(diff, md=False)
    ct = diff["compile_time"]
    for r in ct["changed_ops"][:top]:
        lines.append(f"  changed {r['name']} ({r['opcode']}, {r['framework_op'] or '-'}): FLOPs "
                     f"{u.flops(r['flops']['base'])} -> {u.flops(r['flops']['head'])}; "
                     f"shape {r['shape_base']} -> {r['shape_head']}{_unsure(r)}")
    for r in ct["added_ops"][:top]:
        lines.append(f"  added   {r['name']} ({r['opcode']}): {u.flops(r['flops'])}, comm {u.nbytes(r['comm_bytes'])}, "
                     f"expected {u.seconds(r['expected_s'])}")
    for r in ct["removed_ops"][:top]:
        lines.append(f"  removed {r['name']} ({r['opcode']}): {u.flops(r['flops'])}, comm {u.nbytes(r['comm_bytes'])}")
    run_rows = _run_rows(diff)
    if len(run_rows) > 2:
        lines += [f"  {side} run {run}: median step {med} over {n} steps [trace] ({src})"
                  for side, run, src, med, n in run_rows]
    for r in diff["measured"].get("changed_ops", [])[:top]:
        lines.append(f"  slower/faster {r['name']}: {u.seconds(r['base_s'])} -> {u.seconds(r['head_s'])} "
                     f"({_pct(r['change'])}) [trace]")
    return "\n".join(lines) + "\n"


def render_diff_markdown(diff: dict, *, top: int = 10, html_path: str | None = None) -> str:
    lines = _lines(diff, md=True)
    out = ["### audit diff", ""] + [ln if ln.startswith(("-", "**")) else ln for ln in lines] + [""]
    ct = diff["compile_time"]
    rows = ([("changed" + _unsure(r), r["name"], r["opcode"], r["framework_op"],
              f"{u.flops(r['flops']['base'])} → {u.flops(r['flops']['head'])}",
              f"{r['shape_base']} → {r['shape_head']}") for r in ct["changed_ops"][:top]]
            + [("added", r["name"], r["opcode"], r["framework_op"], u.flops(r["flops"]),
                f"comm {u.nbytes(r['comm_bytes'])}, expected {u.seconds(r['expected_s'])}") for r in ct["added_ops"][:top]]
            + [("removed", r["name"], r["opcode"], r["framework_op"], u.flops(r["flops"]),
                f"comm {u.nbytes(r['comm_bytes'])}") for r in ct["removed_ops"][:top]])
    if rows:
        out += ["| change | op | opcode | framework op | FLOPs per step | detail |", "|---|---|---|---|---|---|"]
        out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
        out.append("")
    run_rows = _run_rows(diff)
    if len(run_rows) > 2:
        out += ["Per-run median step time [trace]:", "", "| side | run | source | median step | steps |",
                "|---|---|---|---|---|"]
        out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in run_rows]
        out.append("")
    if html_path:
        out.append(f"Full report: `{_md(html_path)}`")
    return "\n".join(out) + "\n"


def render_diff_html(diff: dict, *, top: int = 25) -> str:
    """An HTML section (no <html>/<body>) that a report page can embed; every string escaped."""
    lines = _lines(diff, md=False)
    ct = diff["compile_time"]
    parts = ['<section class="audit-diff"><h2>Diff</h2>']
    parts += [f"<p>{escape(ln)}</p>" for ln in lines]
    rows = ([("changed" + _unsure(r), r["name"], r["opcode"], r["framework_op"],
              f"{u.flops(r['flops']['base'])} → {u.flops(r['flops']['head'])}") for r in ct["changed_ops"][:top]]
            + [("added", r["name"], r["opcode"], r["framework_op"], u.flops(r["flops"])) for r in ct["added_ops"][:top]]
            + [("removed", r["name"], r["opcode"], r["framework_op"], u.flops(r["flops"])) for r in ct["removed_ops"][:top]])
    if rows:
        parts.append("<table><thead><tr><th>change</th><th>op</th><th>opcode</th><th>framework op</th>"
                     "<th>FLOPs per step</th></tr></thead><tbody>")
        parts += ["<tr>" + "".join(f"<td>{escape(str(c or ''))}</td>" for c in row) + "</tr>" for row in rows]
        parts.append("</tbody></table>")
    run_rows = _run_rows(diff)
    if len(run_rows) > 2:
        parts.append("<h3>Per-run median step time [trace]</h3><table><thead><tr><th>side</th><th>run</th>"
                     "<th>source</th><th>median step</th><th>steps</th></tr></thead><tbody>")
        parts += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in run_rows]
        parts.append("</tbody></table>")
    parts.append("</section>")
    return "\n".join(parts)


def render_diff_page(diff: dict) -> str:
    """A standalone, self-contained page around the diff section."""
    style = ("body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:70rem;color:#1d2430}"
             "table{border-collapse:collapse}td,th{border-bottom:1px solid #dde;padding:.3rem .6rem;text-align:left}")
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>audit diff</title>"
            f"<style>{style}</style></head><body>{render_diff_html(diff)}</body></html>\n")
