"""The verdict: step time, how close to the roofline, where the time goes, the step with overlap,
and for a prediction XLA's own estimate and whether the program fits in memory."""

from __future__ import annotations

from html import escape
from typing import Any

from ...costmodel import units as qty
from ..model.report import ReportModel
from ..model.summary import Summary, time_by_bound_parts
from ..svg import share_bar_svg
from ..text import md_table, md_text
from . import header as head_section
from . import memory
from ._base import RenderOptions
from .answer import answer
from .findings import headline as top_finding
from .judged import fraction_clause, judged_any, none_judged
from .programs import executions


def breakdown(s: Summary) -> tuple[list[tuple[str, float]], float]:
    """(kind, seconds) of time by bound, plus idle time, and their total."""
    return time_by_bound_parts(s)


def headline(report: ReportModel) -> str:
    """One plain sentence: how close to the roofline, where most time goes, what the flags cost."""
    s = report.summary
    parts, _ = breakdown(s)
    words = []
    if report.predicted:
        words.append("Predicted from the compiled program, not measured.")
    elif judged_any(report):
        words.append(f"Judged ops ran at {qty.percent(s.roofline_fraction)} of their roofline overall.")
    else:
        words.append(_sentence(none_judged(report)))
    ops_parts = [(b, t) for b, t in parts if b != "idle"]
    op_time = sum(t for _, t in ops_parts)  # a share of op time, idle time left out, as the table gives it
    if ops_parts and op_time > 0:
        b, t = max(ops_parts, key=lambda bt: bt[1])
        words.append(f"Most op time ({_share(t / op_time)}) is in ops whose bound is unknown." if b == "unknown"
                     else f"Most op time is {b}-bound ({_share(t / op_time)}).")
    # What the flagged ops lose is said once, in the verdict line above (sections/answer.py).
    return " ".join(words)


def _by_bound(parts: list[tuple[str, float]], total: float, sep: str) -> str:
    """Shares of op time by bound, the sentence's quantity, then idle time as a share of all time: one
    number per quantity wherever the split is shown."""
    op_time = sum(t for b, t in parts if b != "idle")
    shares = sep.join(f"{b} {_share(t / op_time)}" for b, t in parts if b != "idle" and op_time > 0)
    idle = sum(t for b, t in parts if b == "idle")
    return shares + (f"; idle {qty.seconds(idle)} ({_share(idle / total)} of op and idle time)" if idle else "")


def _share(fraction: float) -> str:
    """A share of the time; a part too small for one decimal is not printed as 0.0%."""
    return "<0.1%" if 0 < fraction < 0.0005 else qty.percent(fraction)


def _sentence(clause: str) -> str:
    return clause[:1].upper() + clause[1:] + "."


def before_optimization(report: ReportModel) -> bool:
    """Whether the prediction priced a program from before XLA optimized it (not what runs)."""
    return bool(report.predicted and report.source.get("before_optimization"))


BEFORE_OPTIMIZATION = "before optimization: an estimate of a program that does not run as priced"


def _model(report: ReportModel, what: str = "model") -> str:
    """The tag of a step figure: `what`, said to be a pre-optimization estimate where it is one."""
    return f"{what}; {BEFORE_OPTIMIZATION}" if before_optimization(report) else what


def overlap_line(s: Summary, caveat: str = "") -> str:
    """The step both ways: the no-overlap sum and the schedule walk with async collectives hidden."""
    o = s.overlap
    if s.expected_s is None:
        return f"expected step unknown [model{caveat}]: {_no_step(s)}"
    if o.expected_step_s is None:
        return (f"expected op time {qty.seconds(s.expected_s)} [model{caveat}] (no overlap); "
                f"overlapped step unknown: {_no_step(s)}")
    no_overlap = _no_overlap_step(s)
    return (f"expected step {qty.seconds(o.expected_step_s)} with async overlap [model, schedule walk{caveat}], "
            f"{qty.seconds(no_overlap)} with none; communication exposed {qty.seconds(o.exposed_comm_s)}, "
            f"hidden {qty.seconds(o.hidden_comm_s)} per step")


def _no_step(s: Summary) -> str:
    """Why the overlapped step is unknown."""
    return "no op has an expected time" if s.expected_s is None else "the program has no schedule"


def _no_overlap_step(s: Summary) -> float | None:
    """One step's expected op time with no overlap (a report read back from an older file: the sum)."""
    return s.expected_op_step_s if s.expected_op_step_s is not None else s.expected_s


def _xla(report: ReportModel) -> str | None:
    xla: dict[str, Any] = report.part("xla") or {}
    if xla.get("optimal_seconds") is None:
        return None
    gap = (xla.get("gap") or {}).get("text")
    return (f"XLA's own estimate: {qty.seconds(xla['optimal_seconds'])} [xla]; "
            + (gap or "it does not price all-gather/reduce-scatter/all-to-all over the topology"))


def _memory(report: ReportModel) -> str | None:
    verdict = (report.part("memory") or {}).get("verdict")
    return f"memory per device: {verdict} [xla memory_analysis, catalog]" if verdict else None


def terminal(report: ReportModel, _: RenderOptions) -> list[str]:
    """The answer, the largest cost to the step, and the largest program's memory peak: the headline."""
    lines = [f"verdict: {answer(report)}"]
    if (first := top_finding(report)) is not None:
        lines.append(first)
    if (peak := memory.headline(report)) is not None:
        lines.append(peak)
    return lines


def markdown(report: ReportModel, _: RenderOptions) -> list[str]:
    lines = [f"**Verdict:** {md_text(answer(report), 400)}", ""]
    if (first := top_finding(report)) is not None:  # the PR comment leads with the largest finding
        lines += [f"**{md_text(first[:1].upper() + first[1:], 400)}**", ""]
    return lines + [md_text(headline(report), 400)]


def html(report: ReportModel, _: RenderOptions) -> str:
    return f'<p class="answer">{escape(answer(report))}</p><p class="headline">{escape(headline(report))}</p>'


def step_terminal(report: ReportModel, _: RenderOptions) -> list[str]:
    s = report.summary
    st = s.step_time_s
    if report.predicted and s.programs:
        lines = [f"predicted, not measured: {s.programs} different programs, one execution of each "
                 f"[{_model(report)}]: no step runs them all, so none is summed into a step; each program's "
                 "expected time per execution is in the programs table"]
    elif report.predicted:
        lines = [f"predicted, not measured: expected step time {qty.seconds(st.median)} [{_model(report)}]"]
    else:
        lines = _measured_lines(report)
    lines += [x for x in (_xla(report), _memory(report)) if x]
    if not s.programs:
        lines.append(overlap_line(s, _model(report, "")))
    parts, total = breakdown(s)
    if total > 0:
        lines.append("op time by bound: " + _by_bound(parts, total, ", "))
    return lines + head_section.terminal_hardware(report)


def _measured_lines(report: ReportModel) -> list[str]:
    """Steps, op time against expected, and the achievable time of a measured report."""
    s = report.summary
    st = s.step_time_s
    expected = (f", expected {qty.seconds(s.expected_s)} [model]: {fraction_clause(report)}"
                if qty.known(s.expected_s) else "; no op has an expected time [model], so none is judged")
    steps = (f"{s.programs} different programs run {executions(report)} times on {s.devices} device(s), "
             f"{s.hosts} host(s) [trace]: no step repeats, so each program's expected time per execution is beside "
             "its measured time in the programs table" if s.programs else
             f"{s.steps} step(s) on {s.devices} device(s), {s.hosts} host(s): step time "
             f"min {qty.seconds(st.min)} / median {qty.seconds(st.median)} / max {qty.seconds(st.max)} [trace]")
    over = "the capture" if s.programs else f"the {qty.count(s.steps)} step(s)"
    lines = [steps, f"op time per device over {over} {qty.seconds(s.measured_s)} [trace]{expected}; idle "
                    f"{qty.seconds(s.idle_s)} [trace]"]
    if qty.known(s.achievable_s):
        reach = (f": judged ops reach {qty.percent(s.achievable_fraction)} of what good kernels would"
                 if qty.known(s.achievable_fraction) else "")
        if qty.known(s.achievable_step_s) and not s.programs:
            lines.append(f"achievable step {qty.seconds(s.achievable_step_s)} ({qty.seconds(s.achievable_s)} over "
                         f"{over}) [model, achievable figures]{reach}")
        else:
            lines.append(f"achievable op time over {over} {qty.seconds(s.achievable_s)} [model, achievable figures]"
                         f"{reach}")
    return lines


def step_markdown(report: ReportModel, _: RenderOptions) -> list[str]:
    s = report.summary
    st = s.step_time_s
    predicted = report.predicted
    fraction = [] if predicted else [qty.percent(s.roofline_fraction) if judged_any(report) else "none judged"]
    counts = [qty.count(s.flagged_ops), qty.count(s.unmodeled_ops), qty.count(s.devices)]
    if s.programs and predicted:  # several compiled programs: one execution of each, none summed into a step
        header = ["Programs", "Expected op time (one execution of each)", "Achievable op time", "Unmodeled ops",
                  "Devices"]
        row = [qty.count(s.programs), _seconds(s.expected_s), _seconds(s.achievable_s)] + counts[1:]
    elif s.programs:  # no step repeats: the capture's totals here, each program's per execution in its table
        header = ["Programs", "Executions", "Op time (total)", "Roofline fraction", "Expected op time (total)",
                  "Achievable op time (total)", "Flagged ops", "Unmodeled ops", "Devices"]
        row = [qty.count(s.programs), qty.count(executions(report)), _seconds(s.measured_s)] + fraction + \
            [_seconds(s.expected_s), _seconds(s.achievable_s)] + counts
    elif predicted:  # one predicted step: no median, spread or flags of a measurement
        header = ["Predicted step" + (f" ({BEFORE_OPTIMIZATION})" if before_optimization(report) else ""),
                  "Expected step (no overlap)", "Achievable step (no overlap)", "Exposed comm", "Unmodeled ops",
                  "Devices"]
        row = [_seconds(st.median), _seconds(_no_overlap_step(s)), _seconds(s.achievable_step_s),
               _seconds(s.overlap.exposed_comm_s)] + counts[1:]
    else:
        header = ["Step time (median)", "min", "max", "Roofline fraction", "Expected step (no overlap)",
                  "Achievable step", "Expected step (overlap)", "Exposed comm", "Flagged ops", "Unmodeled ops",
                  "Devices"]
        row = [qty.seconds(st.median), qty.seconds(st.min), qty.seconds(st.max)] + fraction + \
            [_seconds(_no_overlap_step(s)), _seconds(s.achievable_step_s), _seconds(s.overlap.expected_step_s),
             _seconds(s.overlap.exposed_comm_s)] + counts
    parts, total = breakdown(s)
    lines = md_table(header, [row])
    if total > 0:
        lines += ["", "Op time by bound: " + _by_bound(parts, total, " · ")]
    gap = ((report.part("xla") or {}).get("gap") or {}).get("text")
    if gap:
        lines += ["", f"**Against XLA's estimate:** {md_text(gap, 600)}"]
    if (memory := _memory(report)) is not None:
        lines += ["", f"**Memory:** {md_text(memory, 300)}"]
    return lines + ["", *head_section.markdown_hardware(report)]


def _seconds(value: float | None) -> str:
    """A headline duration; "unknown" in words, the headline explaining why."""
    return qty.seconds(value) if qty.known(value) else "unknown"


def _stat(label: str, value: str, sub: str = "") -> str:
    return (f'<div class="stat"><div class="stat-label">{escape(label)}</div>'
            f'<div class="stat-value">{escape(value)}</div><div class="stat-sub">{escape(sub)}</div></div>')


def _step_stat(report: ReportModel) -> str:
    s, st = report.summary, report.summary.step_time_s
    if s.programs:
        return _stat("Programs", qty.count(s.programs),
                     f"{qty.count(executions(report))} executions: each program per execution in Programs")
    if report.predicted:
        return _stat("Predicted step time", qty.seconds(st.median if st.median is not None else s.expected_s),
                     f"one step of the compiled program [{_model(report)}]")
    return _stat("Step time (median)", qty.seconds(st.median), f"min {qty.seconds(st.min)} · max {qty.seconds(st.max)}")


def _overlap_stat(s: Summary) -> str:
    if s.programs:
        return _stat("Expected op time (total)", _seconds(s.expected_s),
                     "summed over the capture [model]; each program's per execution in Programs")
    if not qty.known(s.overlap.expected_step_s):
        return _stat("Expected step with overlap", "unknown", _no_step(s))
    return _stat("Expected step with overlap", qty.seconds(s.overlap.expected_step_s),
                 f"exposed communication {qty.seconds(s.overlap.exposed_comm_s)} · hidden "
                 f"{qty.seconds(s.overlap.hidden_comm_s)} [model, schedule walk]")


def _achievable_stat(s: Summary, predicted: bool) -> str:
    """What good kernels take, per step beside the other cards (a sum over steps only where no step repeats)."""
    if not qty.known(s.achievable_s):
        return _stat("Achievable step", "unknown", "no op has an achievable time")
    reached = f" · {qty.percent(s.achievable_fraction)} reached" if qty.known(s.achievable_fraction) else ""
    reached = "" if predicted else reached
    if s.programs or not qty.known(s.achievable_step_s):
        return _stat("Achievable op time (total)", qty.seconds(s.achievable_s),
                     f"what good kernels take, summed over the capture{reached}")
    return _stat("Achievable step (no overlap)", qty.seconds(s.achievable_step_s),
                 f"what good kernels take per step{reached}")


def step_html(report: ReportModel, _: RenderOptions) -> str:
    s = report.summary
    predicted = report.predicted
    stats = [
        _step_stat(report),
        (_stat("Roofline fraction", qty.percent(s.roofline_fraction),
               "sum of expected / sum of measured time of the judged ops (waits and markers are not judged)")
         if judged_any(report) else _stat("Roofline fraction", "none judged", none_judged(report)))
        if not predicted else (_stat("Expected op time", _seconds(s.expected_s),
                                     "one execution of each program, not a step [model]") if s.programs else
                               _stat("Expected step (no overlap)", qty.seconds(_no_overlap_step(s)),
                                     f"from the cost model [{_model(report)}]")),
        _overlap_stat(s),
        _achievable_stat(s, predicted),
        _stat("Flagged ops", qty.count(s.flagged_ops), "far from their achievable time") if not predicted else "",
        _stat("Unmodeled ops", qty.count(s.unmodeled_ops), "no cost model; time still counted"),
        _stat("Devices", qty.count(s.devices), "devices the program spans" if predicted else
              f"{qty.count(s.hosts)} host(s) · " + (f"{qty.count(executions(report))} executions" if s.programs
                                                   else f"{qty.count(s.steps)} step(s)")),
    ]
    parts, total = breakdown(s)
    op_time = sum(t for b, t in parts if b != "idle")

    def of_ops(b: str, t: float) -> str:  # the sentence's quantity: a share of op time, idle left out
        return "" if b == "idle" or op_time <= 0 else _share(t / op_time)

    rows = "".join(f'<tr><td><span class="sw k-{b}"></span>{escape(b)}</td><td class="num">'
                   f"{escape(qty.seconds(t))}</td><td class=\"num\">{escape(of_ops(b, t))}</td>"
                   f"<td class=\"num\">{escape(_share(t / total))}</td></tr>"
                   for b, t in parts) if total > 0 else ""
    what = "expected" if predicted else "measured"
    table = (f'<table class="mini"><thead><tr><th>Time is</th><th class="num">{what}</th><th class="num">of op time'
             f'</th><th class="num">of op and idle time</th></tr></thead><tbody>{rows}</tbody></table>') if rows else ""
    notes = ""
    if (gap := ((report.part("xla") or {}).get("gap") or {}).get("text")):
        notes += f'<p class="note">Against XLA\'s estimate: {escape(gap)}</p>'
    if (memory := _memory(report)) is not None:
        notes += f'<p class="note" id="memory-fit">{escape(memory)}</p>'
    return (f'<div class="stats">{"".join(stats)}</div>'
            f'<div class="breakdown">{share_bar_svg(parts, total)}{table}</div>{notes}{head_section.html_hardware(report)}')
