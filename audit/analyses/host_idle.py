"""Device idle time explained from the host side: where each step's idle time lies, and what the
host's Python thread was doing while the devices waited.

Idle time is split three ways, per step and per device (the means over devices and steps):

- **between executions**: no execution of any program is in flight on any device; the host had not
  launched the next one. Only this part can be host-bound.
- **inside an execution, every device idle**: the runtime between ops, dependencies (on XLA:CPU
  often a large part of a step); the host had launched the program, so it is not the host's fault.
- **inside an execution, waiting on another device**: this device idle while another device of the
  same execution still runs (a straggler, or a collective waiting for its slowest member).

An execution is one launch of a program (its ops share a `run_id`); where the trace has no launch
ids, every moment no device runs an op counts as between executions. The host's Python events
(`parsers.xplane.host_python`) are weighed by their overlap with the idle time between executions: each
event's own share (less its children's), filed under the function the loop body called (the child
of the step annotation, or of the innermost frame around several idle gaps) and under what it is:
host Python, an input pipeline, JAX's dispatch, compilation, a host-device transfer, waiting for a
device, or, where no Python event covers the gap, time the Python tracer did not see.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .steps import _busy_in_windows, _merged
from ..base.options import DEFAULTS
from ..base.timebase import PS

NO_RUN = -1  # the run_id of an op whose launch the trace does not name (profile_model.EVENT_COLUMNS)
LAUNCHES = "module launches"  # the step source of steps that are the program's launches
TOP_FUNCTIONS = DEFAULTS.host_functions
SAMPLED_STEPS = 64  # steps whose host activity is read and kept per step, spread over the capture

# What a host event is, by its name (lower case); the first kind that matches, in this order of
# strength: an event inherits its caller's kind unless its own is stronger (a compile under JAX's
# dispatch is compilation; a builtin under a user's function is that function's Python).
KINDS = ("compile", "transfer", "input", "wait", "dispatch", "python")
_PATTERNS: dict[str, tuple[str, ...]] = {
    "compile": ("compile", "_lower", "lower_jaxpr", "trace_to_jaxpr"),
    "transfer": ("deviceput", "device_put", "copytodevice", "copy_array_to_devices", "transfertodevice",
                 "transferfromdevice", "copy_to_host", "copytohost", "__array__", "_single_device_array_to_np"),
    "input": ("iterator::", "iteratorgetnext", "tf.data", "$dataset_ops.py", "$iterator_ops.py", "grain",
              "dataloader"),
    "wait": ("block_until_ready", "pjrtbuffer::await", "awaitbuffer"),
    "dispatch": ("pjitfunction", "$pjit.py", "$dispatch.py", "executereplicated", "pjrtloadedexecutable",
                 "$api.py", "$traceback_util.py", "shard_args", "$pxla.py", "parsearguments", "pjrt",
                 "pythonrefmanager", "executethunks", "wait for donation", "wait for usage", "handle input"),
}
UNTRACED = "untraced"  # a gap no Python event covers
_FRAME = re.compile(r"^\$(?P<file>[^ :]+):(?P<line>\d+) (?P<function>.+)$")
_BUILTIN = re.compile(r"^\$(?P<module>[^ ]+) (?P<function>.+)$")


def readable(name: str) -> str:
    """`$file.py:16 load_batch` -> `load_batch (file.py:16)`; `$time sleep` -> `time.sleep`;
    a TraceMe name as it is."""
    if (m := _FRAME.match(name)) is not None:
        return f"{m['function']} ({m['file']}:{m['line']})"
    if (m := _BUILTIN.match(name)) is not None:
        return m["function"] if m["module"] in ("<unknown>", "builtins") else f"{m['module']}.{m['function']}"
    return name


def kind_of(name: str) -> str | None:
    low = name.lower()
    return next((k for k, words in _PATTERNS.items() if any(w in low for w in words)), None)


def host_idle(host_events: pd.DataFrame | None, events: pd.DataFrame, steps: pd.DataFrame,
              step_source: str = "") -> dict[str, Any]:
    """Per-step idle split and the host's activity during idle between executions, for one host.
    Seconds are per step (means over steps; per device where a device is meant); empty without ops.
    Where the steps are the program's launches (no step annotation), a step is one cycle: from one
    launch's first op to the next one's, so the time the host took between launches is in it. At most
    SAMPLED_STEPS steps spread over the capture are read: the figures are means, and their cost stays
    bounded however long the capture."""
    starts = events["start_ps"].to_numpy(np.int64)
    timed = starts >= 0  # arrays, not a filtered copy of the frame: the frame holds every op event
    if not timed.any():
        return {}
    if not steps.empty:
        windows = steps.groupby("step", sort=True).agg(start=("start_ps", "min"), end=("end_ps", "max"))
        ws, we = windows["start"].to_numpy(np.int64), windows["end"].to_numpy(np.int64)
        labels = windows.index.to_numpy(np.int64)
        if step_source == LAUNCHES and ws.size > 1:
            order = np.argsort(ws, kind="stable")
            ws, we, labels = ws[order], we[order], labels[order]
            # Each cycle ends where the next launch starts; the last has no next launch, so it is left out.
            ws, we, labels = ws[:-1], ws[1:], labels[:-1]
        pick = np.unique(np.linspace(0, ws.size - 1, min(ws.size, SAMPLED_STEPS)).round().astype(np.int64))
        ws, we, labels = ws[pick], we[pick], labels[pick]
        step = events["step"].to_numpy(np.int64)
        if labels.min() >= 0:  # the picked steps' ops only
            lut = np.zeros(int(labels.max()) + 2, bool)
            lut[labels] = True
            timed &= lut[np.clip(step, -1, labels.max() + 1)]
            if not timed.any():
                return {}
    start = starts[timed]
    end = start + events["dur_ps"].to_numpy(np.int64)[timed]
    device = events["device"].to_numpy(np.int64)[timed]
    run = events["run_id"].to_numpy(np.int64)[timed]
    if steps.empty:  # the capture: from the first op to the last
        ws, we, labels = np.asarray([start.min()]), np.asarray([end.max()]), np.asarray([-1])
    known = bool((run != NO_RUN).mean() > 0.5)
    any_s, any_e = _merged(start, end)  # some device runs an op
    exec_s, exec_e = _merged(*_run_spans(run, start, end)) if known else (any_s, any_e)
    length = (we - ws).astype(np.int64)
    executing = _busy_in_windows(exec_s, exec_e, ws, we)
    running = _busy_in_windows(any_s, any_e, ws, we)
    devices = np.unique(device)
    busy = float(sum(_busy_in_windows(start[device == d], end[device == d], ws, we).sum() for d in devices)) \
        / max(devices.size, 1) / ws.size  # per device, per step
    between = length - executing
    n = ws.size
    out: dict[str, Any] = {
        "steps": int(n) if not steps.empty else 0, "executions_known": known, "devices": int(devices.size),
        "cycles": step_source == LAUNCHES, "step_s": float(length.mean() * PS), "busy_s": busy * PS,
        "between_s": float(between.mean() * PS), "inside_all_s": float((executing - running).mean() * PS),
        "inside_wait_s": max(float(running.mean()) - busy, 0.0) * PS,
        "executions_per_step": float(len(np.unique(run[run != NO_RUN])) / n) if known else None,
    }
    gaps_s, gaps_e = _gaps(ws, we, exec_s, exec_e)
    attributed = _attribute(host_events, gaps_s, gaps_e, ws, we, n)
    out.update(attributed["totals"])
    out["per_step"] = [
        {"step": int(label), "time_s": float(t * PS), "between_s": float(b * PS), "inside_s": float((e - r) * PS),
         "host": top}
        for label, t, b, e, r, top in zip(labels.tolist(), length.tolist(), between.tolist(), executing.tolist(),
                                         running.tolist(), attributed["top_per_step"])]
    return out


def _run_spans(run: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each launch's first start and last end over its devices (events of no known launch left out)."""
    known = run != NO_RUN
    codes, _ = pd.factorize(run[known])
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    first = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]]) if codes.size else codes[:0]
    return (np.minimum.reduceat(start[known][order], first) if codes.size else start[:0],
            np.maximum.reduceat(end[known][order], first) if codes.size else end[:0])


def _gaps(ws: np.ndarray, we: np.ndarray, exec_s: np.ndarray, exec_e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The intervals inside the windows where no execution is in flight, sorted and disjoint."""
    gs: list[int] = []
    ge: list[int] = []
    for s, e in zip(ws.tolist(), we.tolist()):
        lo, hi = np.searchsorted(exec_e, s, "right"), np.searchsorted(exec_s, e, "left")
        cursor = s
        for a, b in zip(exec_s[lo:hi].tolist(), exec_e[lo:hi].tolist()):
            if a > cursor:
                gs.append(cursor)
                ge.append(min(a, e))
            cursor = max(cursor, b)
        if cursor < e:
            gs.append(cursor)
            ge.append(e)
    s_arr, e_arr = np.asarray(gs, np.int64), np.asarray(ge, np.int64)
    keep = e_arr > s_arr
    return _merged(s_arr[keep], e_arr[keep]) if keep.any() else (s_arr[:0], e_arr[:0])


def _attribute(host_events: pd.DataFrame | None, gs: np.ndarray, ge: np.ndarray, ws: np.ndarray, we: np.ndarray,
               n: int) -> dict[str, Any]:
    """Seconds per step of idle between executions by kind of host activity, and the host functions."""
    total = float((ge - gs).sum())
    kinds = dict.fromkeys((*KINDS, UNTRACED), 0.0)
    empty: dict[str, Any] = {"totals": {"host_s": {k: 0.0 for k in kinds}, "functions": [], "python_traced": False},
             "top_per_step": [None] * n}
    if host_events is None or host_events.empty:
        empty["totals"]["host_s"][UNTRACED] = total / n * PS
        return empty
    es = host_events["start_ps"].to_numpy(np.int64)
    ee = host_events["end_ps"].to_numpy(np.int64)
    names = host_events["name"]
    traced = bool(names.cat.categories.str.startswith("$").any())
    overlap = _busy_in_windows(gs, ge, es, ee) if gs.size else np.zeros(es.size, np.int64)
    keep = np.flatnonzero(overlap > 0)
    step_of = np.searchsorted(ws, es[keep], "right") - 1  # the step window each kept event starts in
    codes = names.cat.codes.to_numpy()[keep]
    categories = [str(c) for c in names.cat.categories]
    roots = set(zip(ws.tolist(), we.tolist()))
    first = np.searchsorted(ge, es[keep], "right")
    spanned = np.searchsorted(gs, ee[keep], "left") - first  # idle gaps each event overlaps
    own = overlap[keep].astype(np.float64)
    parent = np.full(keep.size, -1, np.int64)
    stack: list[int] = []
    ks, ke = es[keep].tolist(), ee[keep].tolist()
    for i in range(keep.size):
        while stack and not ke[i] <= ke[stack[-1]]:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    np.subtract.at(own, parent[parent >= 0], overlap[keep][parent >= 0])
    kind = [""] * keep.size
    body = np.arange(keep.size)
    rank = {k: r for r, k in enumerate(KINDS)}
    # A frame around the loop (not a call inside one step) spans idle gaps of two or more steps; a call that
    # runs small programs of its own (jnp ops in an input function) spans several gaps of one step only.
    gap_step = np.searchsorted(ws, gs, "right") - 1
    last = np.clip(first + spanned - 1, 0, max(gs.size - 1, 0))
    across = (spanned >= 2) & (gap_step[np.clip(first, 0, max(gs.size - 1, 0))] != gap_step[last]) if gs.size \
        else np.zeros(keep.size, bool)
    anchor = [(ks[i], ke[i]) in roots or bool(across[i]) for i in range(keep.size)]
    own_kind = [kind_of(c) for c in categories]  # once per distinct name
    code_list, parents = codes.tolist(), parent.tolist()
    for i in range(keep.size):
        p = parents[i]
        mine = own_kind[code_list[i]]
        inherited = kind[p] if p >= 0 and not anchor[p] else "python"
        kind[i] = mine if mine is not None and rank[mine] < rank.get(inherited, len(KINDS)) else inherited
        if anchor[i]:
            kind[i] = UNTRACED  # its own share is what no Python call under it covers
        elif p >= 0 and not anchor[p]:
            body[i] = body[p]
    seconds = np.clip(own, 0, None)
    for k, t in zip(kind, seconds.tolist()):
        kinds[k] += t
    kinds[UNTRACED] += max(total - float(seconds.sum()), 0.0)
    names_of = (*KINDS, UNTRACED)
    kind_codes = {k: i for i, k in enumerate(names_of)}
    keep_rows = ~np.asarray(anchor, bool) & (seconds > 0)
    bodies, leaves = codes[body][keep_rows], codes[keep_rows]
    kinds_row = np.asarray([kind_codes[k] for k in kind], np.int64)[keep_rows] if kind else np.zeros(0, np.int64)
    t_row, steps_row = seconds[keep_rows], step_of[keep_rows]
    ncat = max(len(categories), 1)
    totals = np.bincount(bodies, weights=t_row, minlength=ncat)
    functions = []
    for b in np.argsort(-totals, kind="stable")[:TOP_FUNCTIONS]:
        if totals[b] <= 0:
            break
        mine = bodies == b
        leaf = int(np.argmax(np.bincount(leaves[mine], weights=t_row[mine], minlength=ncat)))
        kind_here = int(np.argmax(np.bincount(kinds_row[mine], weights=t_row[mine], minlength=len(names_of))))
        functions.append({"function": readable(categories[int(b)]), "inside": readable(categories[leaf]),
                          "kind": names_of[kind_here], "seconds": float(totals[b] / n * PS),
                          "steps": int(np.unique(steps_row[mine]).size)})
    top: list[str | None] = [None] * n
    inside = (steps_row >= 0) & (steps_row < n)
    if inside.any():
        per_step = np.bincount(steps_row[inside] * ncat + bodies[inside], weights=t_row[inside],
                               minlength=n * ncat).reshape(n, ncat)
        for row in np.flatnonzero(per_step.max(axis=1) > 0).tolist():
            top[row] = readable(categories[int(np.argmax(per_step[row]))])
    return {"totals": {"host_s": {k: v / n * PS for k, v in kinds.items()}, "functions": functions,
                       "python_traced": traced}, "top_per_step": top}


def merge_hosts(per_host: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One view over hosts: each figure the mean over the hosts that have it, functions summed and divided."""
    found = [h for h in per_host if h]
    if not found:
        return {}
    if len(found) == 1:
        return dict(found[0])
    keys = ("step_s", "busy_s", "between_s", "inside_all_s", "inside_wait_s")
    out: dict[str, Any] = {k: float(np.mean([h[k] for h in found])) for k in keys}
    out.update(steps=max(h["steps"] for h in found), executions_known=all(h["executions_known"] for h in found),
               devices=sum(h["devices"] for h in found), per_step=found[0]["per_step"],
               python_traced=any(h.get("python_traced") for h in found),
               executions_per_step=found[0].get("executions_per_step"), hosts=len(found),
               cycles=all(h.get("cycles") for h in found))
    out["host_s"] = {k: float(np.mean([h["host_s"].get(k, 0.0) for h in found])) for k in found[0]["host_s"]}
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for h in found:
        for f in h["functions"]:
            entry = merged.setdefault((f["function"], f["kind"]), {**f, "seconds": 0.0})
            entry["seconds"] += f["seconds"] / len(found)
    out["functions"] = sorted(merged.values(), key=lambda f: -f["seconds"])[:TOP_FUNCTIONS]
    return out
