"""Each program's device memory from its buffer assignment [buffer assignment]: the peak, where in
the schedule it is reached, entry parameters, live-out, temporaries, the headroom against the
device's memory, and the largest buffers live at the peak with the instruction and source line that
made them; beside them, the planner's breakdown where the workload states a transformer [plan]."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ...costmodel import units as qty
from ..model.report import ReportModel
from ..text import clip, md_table, md_text, more
from ._base import RenderOptions

_HEADER = ("Program", "Module", "Peak", "Parameters", "Live-out", "Temporaries", "Device memory", "Peak share",
           "Headroom")
_WIDTH = (8, 28, 9, 10, 9, 11, 13, 10, 9)
_BUFFER_HEADER = ("Size", "Kind", "Instruction", "Shape", "Source line")


def rows(report: ReportModel) -> list[Mapping[str, Any]]:
    return [r for r in report.part("program_memory") or [] if isinstance(r, Mapping)]


def headline(report: ReportModel) -> str | None:
    """The largest program's peak against the device's memory: one line for the report's head."""
    found = rows(report)
    if not found:
        return None
    top = found[0]
    capacity = top.get("device_memory_bytes")
    against = (f" of {qty.nbytes(capacity)} device memory ({qty.percent(top.get('peak_share'))})"
               if qty.known(capacity) else " (device memory unknown)")
    sources = str(top.get("source")) + (f", {top.get('device_memory_source')}" if qty.known(capacity) else "")
    headroom = top.get("headroom_bytes")
    over = (f": {qty.nbytes(-float(headroom))} more than the device holds, it cannot run there"
            if qty.known(headroom) and float(headroom) < 0 else "")
    return f"memory: peak {qty.nbytes(top.get('peak_bytes'))}{against} in {top.get('module')} [{sources}]{over}"


def _cells(row: Mapping[str, Any]) -> list[str]:
    capacity = row.get("device_memory_bytes")
    return [str(row.get("program_id")), str(row.get("module") or ""), qty.nbytes(row.get("peak_bytes")),
            qty.nbytes(row.get("parameter_bytes")), qty.nbytes(row.get("live_out_bytes")),
            qty.nbytes(row.get("temporary_bytes")), qty.nbytes(capacity), qty.percent(row.get("peak_share")),
            qty.nbytes(row.get("headroom_bytes"))]


def peak_place(row: Mapping[str, Any]) -> str:
    """Where the program's peak is reached, in words."""
    at = row.get("peak_at") or {}
    if row.get("source") != "buffer assignment":
        return (f"{row.get('module')}: read from {row.get('source')}, which has no heap trace: its temporaries count "
                "at the size XLA reserved for them (an upper bound on the peak); the largest buffers it holds")
    if not at.get("instruction"):
        return f"{row.get('module')}: no temporaries on the heap; its peak is what it holds throughout"
    where = (f", {qty.count(at['position'])} of {qty.count(at['scheduled'])} in {at.get('computation')}'s schedule"
             if at.get("position") else "")
    line = f", {at['source_line']}" if at.get("source_line") else ""
    return (f"{row.get('module')} peaks at {at['instruction']} (heap event {qty.count(at.get('event'))} of "
            f"{qty.count(at.get('events'))}{where}{line}); the largest buffers live then")


def _buffer_cells(b: Mapping[str, Any]) -> list[str]:
    return [qty.nbytes(b.get("bytes")), str(b.get("kind") or ""), str(b.get("instruction") or ""),
            str(b.get("shape") or ""), str(b.get("source_line") or "")]


def plan_lines(row: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(what, plan, measured) for a program with the planner's breakdown beside it."""
    plan = row.get("plan")
    if not isinstance(plan, Mapping):
        return []
    held = (plan.get("parameter_bytes") or 0) + (plan.get("optimizer_bytes") or 0)
    return [("parameters and optimizer state", qty.nbytes(held), f"{qty.nbytes(row.get('parameter_bytes'))} entry parameters"),
            ("saved activations", qty.nbytes(plan.get("activation_bytes")),
             f"{qty.nbytes(row.get('temporary_bytes'))} temporaries at the peak"),
            ("total", qty.nbytes(plan.get("total_bytes")), f"{qty.nbytes(row.get('peak_bytes'))} peak")]


def intro(report: ReportModel) -> str:
    return ("device memory per program as XLA assigned it [buffer assignment]: the peak counts the buffers "
            "held throughout (parameters, outputs, constants) and the temporaries live at the heap's peak")


def terminal(report: ReportModel, opts: RenderOptions) -> list[str] | None:
    found = rows(report)
    if not found:
        return None
    line = "  ".join(f"{h:<{w}}" if i < 2 else f"{h:>{w}}" for i, (h, w) in enumerate(zip(_HEADER, _WIDTH)))
    out = [intro(report) + ":", line, "-" * len(line)]
    out += ["  ".join(f"{clip(c, w):<{w}}" if i < 2 else f"{c:>{w}}" for i, (c, w) in
                      enumerate(zip(_cells(r), _WIDTH))).rstrip() for r in found[:opts.top]]
    out += [x for x in more(opts.top, len(found), "programs in the JSON report (program_memory)") if x]
    top = found[0]
    out += ["", peak_place(top) + ":"]
    out += ["  " + "  ".join([f"{c[0]:>9}", f"{c[1]:<9}", clip(c[2], 32), clip(c[3], 28), c[4]]).rstrip()
            for c in map(_buffer_cells, top.get("largest") or [])]
    if lines := plan_lines(top):
        out += ["", f"planner beside the buffer assignment for {top.get('module')} [plan, buffer assignment]:"]
        out += [f"  {what}: plan {plan}; measured {measured}" for what, plan, measured in lines]
    return out


def markdown(report: ReportModel, opts: RenderOptions) -> list[str] | None:
    found = rows(report)
    if not found:
        return None
    top = found[0]
    out = ["### Memory", "", md_text(intro(report), 300) + ".", ""]
    out += md_table(list(_HEADER), [[md_text(c, 60) for c in _cells(r)] for r in found[:opts.top]])
    out += more(opts.top, len(found))
    out += ["", md_text(peak_place(top), 400) + ":", ""]
    out += md_table(list(_BUFFER_HEADER), [[md_text(c, 80) for c in _buffer_cells(b)] for b in top.get("largest") or []])
    if lines := plan_lines(top):
        out += ["", "Planner beside the buffer assignment [plan, buffer assignment]:", ""]
        out += md_table(["", "Plan", "Measured"], [[md_text(c, 80) for c in line] for line in lines])
    return out


def html(report: ReportModel, opts: RenderOptions) -> str | None:
    found = rows(report)
    if not found:
        return None
    top = found[0]

    def table(header: tuple[str, ...] | list[str], body: list[list[str]], text_cols: int, ident: str) -> str:
        head = "".join(f'<th class="{"text" if i < text_cols else "num"}">{escape(h)}</th>' for i, h in enumerate(header))
        cells = "".join("<tr>" + "".join(f'<td class="{"text" if i < text_cols else "num"}">{escape(c)}</td>'
                                         for i, c in enumerate(r)) + "</tr>" for r in body)
        return f'<table class="pod" id="{ident}"><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>'

    buffers = [[c[1], c[2], c[3], c[4], c[0]] for c in map(_buffer_cells, top.get("largest") or [])]
    out = (f'<p class="note">{escape(intro(report))}.</p>'
           + table(_HEADER, [_cells(r) for r in found], 2, "program-memory")
           + f'<p class="note">{escape(peak_place(top))}:</p>'
           + table(["Kind", "Instruction", "Shape", "Source line", "Size"], buffers, 4, "memory-at-peak"))
    if lines := plan_lines(top):
        out += ('<p class="note">Planner beside the buffer assignment [plan, buffer assignment]:</p>'
                + table(["", "Plan", "Measured"], [list(x) for x in lines], 1, "memory-plan"))
    return out
