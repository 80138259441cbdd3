"""The sections of an `audit diff` document (`DiffModel`), in every format, by the same machinery as a
report's: the verdict and why, the program's changes, every run's median, the ops that moved."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from ..costmodel import units as u
from ..base.options import DEFAULTS
from .model.diff import SCHEMA, ChangedOp, DiffModel, RunRow, Total
from .diff_svg import runs_svg
from .model.findings import Finding
from .html import page, render_sections as html_sections
from .markdown import render_sections as markdown_sections
from .sections import RenderOptions, Section
from .terminal import render_sections as terminal_sections
from .text import md_table, md_text

def _pct(change: float | None) -> str:
    return u.signed(change, u.percent)


def _delta(total: Total, fmt: Callable[[object], str]) -> str:
    """A total's change; one within float summation order reads 0, not "+0 s"."""
    return u.signed(total.delta, fmt) if total.changed else "0"


def _verdict_lines(diff: DiffModel) -> list[str]:
    """The verdict and what it rests on, in plain sentences."""
    ct, me, c = diff.compile_time, diff.measured, diff.measured.compared
    t = ct.totals_per_step
    out = [f"- {reason}" for reason in diff.tripped]
    if c is not None:
        out.append(f"step time: {me.verdict} ({c.verdict_reason})")
        out.append(f"step time (median, trace): {u.seconds(c.base_median_s)} -> {u.seconds(c.head_median_s)} "
                   f"({_pct(c.change)}; 95% interval {_pct(c.interval[0])} .. {_pct(c.interval[1])}, "
                   f"{'beyond' if c.beyond_noise else 'within'} noise; "
                   f"{me.base_runs} base run(s), {me.head_runs} head run(s))")
        if c.weak:
            out.append("weak comparison: one run a side measures no run-to-run variance; the interval is widened "
                       "by a fixed floor (repeat runs with `audit run --repeat N` for a real one)")
        for x in c.unstable:
            out.append(f"unstable {x.side}: run {x.run} of {x.runs} ({x.source}) median "
                       f"{u.seconds(x.median_s)} is {_pct(x.off_by)} from its other runs "
                       f"({u.seconds(x.others_median_s)}); more than ordinary run-to-run variation and its steps "
                       f"explain ({u.percent(x.allowed)})")
    else:
        out.append(f"measured: not compared ({me.reason})")
    out += [f"{b.side}: {b.name} (a CUDA graph, timed as one op) compared as the {u.count(b.ops)} ops it ran [model]"
            for b in ct.command_buffers]
    if not ct.changed:
        out.append("program: unchanged (same ops, FLOPs, bytes and collectives per step) [model]")
    else:
        out.append("program changed, per step [model]: "
                   f"FLOPs {_delta(t['flops'], u.flops)}, bytes {_delta(t['bytes'], u.nbytes)}, "
                   f"communicated {_delta(t['comm_bytes'], u.nbytes)}, "
                   f"expected time {_delta(t['expected_s'], u.seconds)}"
                   + (f", expected step with overlap {_delta(t['expected_step_s'], u.seconds)}"
                      if "expected_step_s" in t else "")
                   + f"; {u.count(len(ct.changed_ops))} op(s) changed, {u.count(len(ct.added_ops))} added, "
                     f"{u.count(len(ct.removed_ops))} removed, {u.count(diff.matched_ops)} paired")
    if ct.uncertain_pairs:
        out.append(f"{ct.uncertain_pairs} changed op(s) were paired by framework op or name only: "
                   "the pairing may be wrong (marked 'uncertain')")
    return out


def _title(diff: DiffModel) -> str:
    return "audit diff: " + headline(diff)


OUTLIER_STEP = 2.0  # a step this many times its run's median stands out of the run


def headline(diff: DiffModel) -> str:
    """What the evidence says, in one line: a change of chip first, then the verdict, and why
    an inconclusive one is (too few runs, runs that disagree, an outlier step)."""
    parts = []
    if diff.base.hardware and diff.head.hardware and diff.base.hardware != diff.head.hardware:
        parts.append(f"chip changed ({diff.base.hardware} -> {diff.head.hardware})")
    me, c = diff.measured, diff.measured.compared
    change = "" if c is None else f"step time {_pct(c.change)}"
    if diff.regression:
        parts.append("REGRESSION: " + diff.tripped[0])
    elif c is None:
        parts.append(("program changed" if diff.compile_time.changed else "program unchanged")
                     + f"; step time not compared ({me.reason})")
    elif me.verdict == "inconclusive":
        parts.append(f"inconclusive: {change}, {_why_inconclusive(diff)}")
    elif me.verdict == "no change" and c.change == 0 and not diff.compile_time.changed:
        parts.append("no change")
    else:
        parts.append(f"{me.verdict}: {change} ({c.verdict_reason})")
    return "; ".join(parts)


def _why_inconclusive(diff: DiffModel) -> str:
    me, c = diff.measured, diff.measured.compared
    assert c is not None
    if c.unstable:
        x = c.unstable[0]
        why = [f"the {x.side} runs disagree (run {x.run} of {x.runs} is {_pct(x.off_by)} from the others)"]
    elif c.weak and not diff.compile_time.changed:
        why = ["one run a side and the program unchanged: machine load alone moves one run this much"]
    else:
        why = [f"interval {_pct(c.interval[0])} .. {_pct(c.interval[1])} straddles ±{u.percent(me.threshold)}"]
    if not c.weak and min(me.base_runs, me.head_runs) < 3:
        why.append(f"only {u.count(me.base_runs)} and {u.count(me.head_runs)} run(s) a side")
    outlier = _outlier_step(c.runs_base, "base") or _outlier_step(c.runs_head, "head")
    if outlier:
        why.append(outlier)
    return "; ".join(why)


def _outlier_step(runs: Sequence[RunRow], side: str) -> str | None:
    """The step that stands furthest out of its run, where one is `OUTLIER_STEP` x its run's median."""
    found = [(r.slowest_s / r.median_s, i, r) for i, r in enumerate(runs, 1)
             if r.slowest_s is not None and r.median_s > 0 and r.slowest_s >= OUTLIER_STEP * r.median_s]
    if not found:
        return None
    times, i, r = max(found, key=lambda f: f[0])
    return f"an outlier step of {u.seconds(r.slowest_s)} ({u.ratio(times)} its run's median) in {side} run {i}"


def _unsure(r: ChangedOp) -> str:
    return " [uncertain pairing]" if r.uncertain else ""


def _changes(diff: DiffModel, top: int) -> list[tuple[str, ...]]:
    """(change, op, opcode, framework op, FLOPs per step, detail) of the program's changed, added and removed ops."""
    ct = diff.compile_time
    rows: list[tuple[str, ...]] = [
        ("changed" + _unsure(r), r.name, r.opcode, r.framework_op or "-",
         f"{u.flops(r.flops.base)} → {u.flops(r.flops.head)}", f"shape {r.shape_base} → {r.shape_head}")
        for r in ct.changed_ops[:top]]
    rows += [("added", r.name, r.opcode, r.framework_op or "-", u.flops(r.flops),
              f"comm {u.nbytes(r.comm_bytes)}, expected {u.seconds(r.expected_s)}") for r in ct.added_ops[:top]]
    rows += [("removed", r.name, r.opcode, r.framework_op or "-", u.flops(r.flops), f"comm {u.nbytes(r.comm_bytes)}")
             for r in ct.removed_ops[:top]]
    return rows


def _run_rows(diff: DiffModel) -> list[tuple[str, str, str, str, str]]:
    """(side, run, source, median step [trace], steps) for every run of both sides."""
    c = diff.measured.compared
    if c is None:
        return []
    odd = {(x.side, x.run) for x in c.unstable}
    return [(side, f"{i}" + (" (unstable)" if (side, i) in odd else ""), r.source, u.seconds(r.median_s),
             str(r.steps))
            for side, runs in (("base", c.runs_base), ("head", c.runs_head)) for i, r in enumerate(runs, 1)]


def _moved(diff: DiffModel, top: int) -> list[tuple[str, str, str, str]]:
    """(op, base, head, change) for ops whose measured time moved beyond noise [trace]."""
    c = diff.measured.compared
    return [(r.name, u.seconds(r.base_s), u.seconds(r.head_s), _pct(r.change))
            for r in (c.changed_ops[:top] if c is not None else [])]


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="data"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


_CHANGE_HEAD = ("change", "op", "opcode", "framework op", "FLOPs per step", "detail")
_RUN_HEAD = ("side", "run", "source", "median step", "steps")
_MOVED_HEAD = ("op", "base [trace]", "head [trace]", "change")


def _table(kind: str, diff: DiffModel, top: int) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """One of the diff's tables: its header and rows (an empty list when there is nothing to show)."""
    rows: list[tuple[str, ...]]
    if kind == "program":
        return _CHANGE_HEAD, _changes(diff, top)
    if kind == "runs":
        rows = list(_run_rows(diff))
        return _RUN_HEAD, rows if len(rows) > 2 else []  # one run a side: the verdict lines say it all
    rows = list(_moved(diff, top))
    return _MOVED_HEAD, rows


def _text(kind: str) -> Callable[[DiffModel, RenderOptions], list[str] | None]:
    def render(diff: DiffModel, opts: RenderOptions) -> list[str] | None:
        _, rows = _table(kind, diff, opts.top)
        if kind == "program":
            return [f"  {c[0]:<8} {c[1]} ({c[2]}, {c[3]}): FLOPs {c[4]}; {c[5]}" for c in rows] or None
        if kind == "runs":
            return [f"  {side} run {run}: median step {med} over {n} steps [trace] ({src})"
                    for side, run, src, med, n in rows] or None
        moved = diff.measured.compared.changed_ops if diff.measured.compared is not None else []
        return [f"  {'slower' if r.head_s > r.base_s else 'faster'} {n}: {b} -> {h} ({c}) [trace]"
                for r, (n, b, h, c) in zip(moved, rows)] or None
    return render


def _markdown(kind: str, title: str) -> Callable[[DiffModel, RenderOptions], list[str] | None]:
    def render(diff: DiffModel, opts: RenderOptions) -> list[str] | None:
        head, rows = _table(kind, diff, opts.top)
        return [f"{title}:", ""] + md_table(head, [[md_text(c) for c in row] for row in rows]) if rows else None
    return render


def _html(kind: str) -> Callable[[DiffModel, RenderOptions], str | None]:
    def render(diff: DiffModel, _: RenderOptions) -> str | None:
        head, rows = _table(kind, diff, 25)
        chart = runs_svg(diff) if kind == "runs" else ""
        return (chart + (_html_table(head, rows) if rows else "")) or None
    return render


def _verdict_markdown(diff: DiffModel, _: RenderOptions) -> list[str]:
    return [ln if ln.startswith("-") else f"- {ln}" for ln in _verdict_lines(diff)]


def _verdict_html(diff: DiffModel, _: RenderOptions) -> str:
    return "".join(f"<p>{escape(ln.removeprefix('- '))}</p>" for ln in _verdict_lines(diff))


def _finding_lines(diff: DiffModel) -> list[str]:
    """Causes of step time new in the head (a regression with its cause named), and causes gone."""
    def cost(f: Finding) -> str:
        return (f"{u.seconds(f.time_per_step_s)} per step"
                + (f", {u.percent(f.share)} of the step" if f.share is not None else "") + f" [{f.origin}]")

    return ([f"new in head: {f.title} ({cost(f)})" for f in diff.findings.appeared]
            + [f"gone from head: {f.title} (was {cost(f)})" for f in diff.findings.disappeared])


def _findings_text(diff: DiffModel, _: RenderOptions) -> list[str] | None:
    return [f"  {ln}" for ln in _finding_lines(diff)] or None


def _findings_markdown(diff: DiffModel, _: RenderOptions) -> list[str] | None:
    lines = _finding_lines(diff)
    return ["Findings that appeared or disappeared [step diagnosis]:", ""] + [f"- {md_text(ln, 300)}" for ln in lines] \
        if lines else None


def _findings_html(diff: DiffModel, _: RenderOptions) -> str | None:
    lines = _finding_lines(diff)
    return "<ul>" + "".join(f"<li>{escape(ln)}</li>" for ln in lines) + "</ul>" if lines else None


DIFF_SECTIONS: Sequence[Section[DiffModel]] = (
    Section("verdict", "Verdict", lambda d, _: _verdict_lines(d), _verdict_markdown, _verdict_html),
    Section("findings", "Findings that appeared or disappeared", _findings_text, _findings_markdown, _findings_html),
    Section("program", "Program changes [model]", _text("program"), _markdown("program", "Program changes [model]"),
            _html("program")),
    Section("runs", "Step times of every run [trace]", _text("runs"),
            _markdown("runs", "Per-run median step time [trace]"), _html("runs")),
    Section("timing", "Ops whose time moved [trace]", _text("timing"),
            _markdown("timing", "Ops whose time moved [trace]"), _html("timing")),
)


def render_diff_terminal(diff: DiffModel, *, top: int = DEFAULTS.diff_top) -> str:
    return "\n".join([_title(diff)] + terminal_sections(diff, DIFF_SECTIONS, RenderOptions(top=top))) + "\n"


def render_diff_markdown(diff: DiffModel, *, top: int = DEFAULTS.diff_top, html_path: str | None = None) -> str:
    lines = ["### audit diff", "", f"**{_title(diff)}**"]
    lines += markdown_sections(diff, DIFF_SECTIONS, RenderOptions(top=top, html_path=html_path))
    if html_path:
        lines += ["", f"Full report: `{html_path.replace('`', '')}`"]
    return "\n".join(lines) + "\n"


def render_diff_page(diff: DiffModel) -> str:
    """A self-contained page: the report's style, no script."""
    head = f'<header class="top"><p class="kicker">audit diff</p><h1>{escape(_title(diff))}</h1></header>'
    footer = f"{escape(SCHEMA)} · times in seconds · GB = 10<sup>9</sup> bytes"
    return page(_title(diff), head, html_sections(diff, DIFF_SECTIONS, RenderOptions()), footer)
