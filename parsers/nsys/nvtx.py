"""XLA's NVTX ranges on the GPU timeline -> per-op events and steps, whatever file carried them.

XLA names a program's execution `XlaModule:#hlo_module=NAME,program_id=N#` and each thunk it
runs `Thunk:#[name=FRAMEWORK_OP,]hlo_op=OP#` (with a `TSL:` prefix from the TSL profiler's
annotations). Nsight Systems projects each range onto the GPU: from the start of the first
GPU operation launched inside it to the end of the last. nsys-jax archives store that
projection; an SQLite export is projected by `parsers.nsys.sqlite`. Both hand this module one
frame of ranges (`RANGE_COLUMNS`), so the rules live in one place:

- a step is one execution of the program that holds the most GPU time; its first execution
  is left out when there are more (it carries one-time work: autotuning, NCCL setup, command
  buffer capture), and so is a last one cut short by the end of the capture;
- module ranges without a program id are compilation and autotuning (`gemm_fusion_dot.N`),
  never steps;
- an op's time is its deepest thunk range (a thunk that contains thunks, a while loop or a
  command buffer run op by op, is counted through its children), inside the steady steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...base.errors import InputError
from ...base.timebase import PS_PER_NS
from ..profile.events import events_frame, steps_frame

# One row per NVTX push/pop range, times on the GPU timeline in ns.
RANGE_COLUMNS: dict[str, str] = {
    "name": "range text",
    "start_ns": "projected start on the GPU timeline, ns (-1: launched no GPU work)",
    "dur_ns": "projected duration on the GPU timeline, ns",
    "range_id": "unique id of the range",
    "parent_id": "id of the enclosing range on its thread, -1 for a top-level range",
    "device": "device the range's GPU work ran on",
    "gpu_ops": "GPU operations (kernels, copies) launched inside the range, -1 if unknown",
}

MODULE = re.compile(r"^(?:TSL:)?XlaModule:#(?:prefix=.*?,)?hlo_module=([^,#]+)(?:,program_id=(\d+))?#$")
THUNK = re.compile(r"^(?:TSL:)?Thunk:#.*?hlo_op=([^,#]+)#$")
XLA_RANGE = re.compile(r"^(?:TSL:)?(?:XlaModule|Thunk):#")
STEP_SOURCE = "XLA module ranges (Nsight Systems)"


@dataclass
class XlaExecution:
    """What the XLA ranges of one process say, ready for `HostProfile`."""

    events: pd.DataFrame  # EVENT_COLUMNS (+ kernels)
    steps: pd.DataFrame  # STEP_COLUMNS
    module_names: dict[int, str]  # program id -> module name, for programs with op events
    step_source: str
    warnings: list[str] = field(default_factory=list)


def has_xla_ranges(names: pd.Series) -> bool:
    return bool(names.str.match(XLA_RANGE).any())


def read_xla_ranges(ranges: pd.DataFrame, host: str) -> XlaExecution:
    """Events and steps from one process's ranges (`RANGE_COLUMNS`).

    **Raises:** `InputError` for a program id beyond 64 bits; a frame without module executions
    gives empty events, and the caller says what is missing.
    """
    names = ranges["name"].astype(str)
    # Each distinct name is matched once: a step repeats every thunk's name of the step before.
    codes, distinct = pd.factorize(names)
    unique = pd.Series(distinct, dtype=object)
    module_match = unique.str.extract(MODULE).take(codes).set_axis(names.index)
    is_module = module_match[0].notna().to_numpy()
    program = pd.to_numeric(module_match[1], errors="coerce").to_numpy(float)
    beyond = np.flatnonzero(program >= 2**63)
    if beyond.size:
        raise InputError(f"XLA module range {names.iloc[int(beyond[0])][:100]!r}: the program id is beyond 64 bits")
    op = unique.str.extract(THUNK)[0].take(codes).set_axis(names.index)
    is_thunk = op.notna().to_numpy()
    frame = pd.DataFrame({
        "range_id": ranges["range_id"].to_numpy(np.int64), "parent_id": ranges["parent_id"].to_numpy(np.int64),
        "start": ranges["start_ns"].to_numpy(np.int64), "dur": ranges["dur_ns"].to_numpy(np.int64),
        "device": ranges["device"].to_numpy(np.int64), "gpu_ops": ranges["gpu_ops"].to_numpy(np.int64),
        "module": module_match[0].where(module_match[0].notna(), "").to_numpy(dtype=object),
        "program": np.where(np.isnan(program), -1, np.nan_to_num(program)).astype(np.int64),
        "op": op.where(op.notna(), names).to_numpy(dtype=object),
        "is_module": is_module, "is_thunk": is_thunk,
    })
    warnings: list[str] = []
    executions = frame[frame["is_module"] & (frame["program"] >= 0)]
    tuning = frame[frame["is_module"] & (frame["program"] < 0)]
    if len(tuning):
        examples = ", ".join(sorted(set(tuning["module"]))[:3])
        warnings.append(f"{len(tuning)} module ranges without a program id ({examples}, ...) are compilation and "
                        "autotuning runs, not steps; left out")
    if executions.empty:
        return XlaExecution(events_frame({"host": []}), steps_frame([]), {}, "", warnings)
    owner = _owning_execution(frame)
    step_rows, kept, step_warnings = _steps(executions, host)
    warnings += step_warnings
    events = _op_events(frame, owner, kept, step_rows, host)
    # Each process's clock has its own origin: times count from its first steady step, so the
    # steps of one job's processes line up.
    origin = min(row[3] for row in step_rows)
    step_rows = [(h, d, s, a - origin, b - origin) for h, d, s, a, b in step_rows]
    events["start_ps"] = events["start_ps"] - origin
    names_by_program = {int(p): str(m) for p, m in zip(executions["program"], executions["module"])}
    used = set(int(p) for p in events["program_id"].unique())
    return XlaExecution(events, steps_frame(step_rows), {p: n for p, n in names_by_program.items() if p in used},
                        STEP_SOURCE, warnings)


def _owning_execution(frame: pd.DataFrame) -> np.ndarray:
    """For every range, the range id of the nearest enclosing module execution (-1 if none)."""
    index = pd.Series(np.arange(len(frame)), index=frame["range_id"].to_numpy())
    parent_pos = index.reindex(frame["parent_id"].to_numpy()).fillna(-1).to_numpy(np.int64)
    is_exec = (frame["is_module"] & (frame["program"] >= 0)).to_numpy()
    range_id = frame["range_id"].to_numpy()
    owner = np.where(is_exec, range_id, -1)
    pos = parent_pos.copy()
    pending = (owner < 0) & (pos >= 0)
    for _ in range(64):  # ranges nest a few levels deep; the bound only guards against cycles
        if not pending.any():
            break
        hit = pending & is_exec[np.where(pos >= 0, pos, 0)]
        owner[hit] = range_id[pos[hit]]
        pending &= ~hit
        pos = np.where(pending, parent_pos[np.where(pos >= 0, pos, 0)], -1)
        pending &= pos >= 0
    return owner


def _steps(executions: pd.DataFrame, host: str) -> tuple[list[tuple[str, int, int, int, int]], pd.DataFrame, list[str]]:
    """Step rows (one per steady execution of the busiest program, per device) and those executions."""
    totals = executions.groupby("program")["dur"].sum()
    busiest = int(totals.index.to_numpy()[int(totals.to_numpy().argmax())])
    runs = executions[executions["program"] == busiest].sort_values("start")
    name = str(runs["module"].iloc[0])
    warnings: list[str] = []
    kept_parts = []
    for _, dev_runs in runs.groupby("device", sort=True):
        dev_runs = dev_runs.reset_index(drop=True).assign(step=np.arange(len(dev_runs)))
        if len(dev_runs) > 1:
            warnings.append(f"the first execution of {name} is left out of the steps: it carries one-time work "
                            "(autotuning, NCCL setup, command buffer capture)")
            dev_runs = dev_runs.iloc[1:]
        ops = dev_runs["gpu_ops"].to_numpy()
        if len(dev_runs) > 2 and (ops >= 0).all():
            rest = ops[:-1]
            if ops[-1] < rest.mean() - rest.std():
                warnings.append(f"the last execution of {name} launched fewer GPU operations than the ones "
                                "before: cut short by the end of the capture, left out")
                dev_runs = dev_runs.iloc[:-1]
        kept_parts.append(dev_runs)
    kept = pd.concat(kept_parts, ignore_index=True)
    rows = [(host, int(d), int(s), int(a) * PS_PER_NS, int(a + b) * PS_PER_NS)
            for d, s, a, b in zip(kept["device"], kept["step"], kept["start"], kept["dur"])]
    return rows, kept, warnings


def _op_events(frame: pd.DataFrame, owner: np.ndarray, kept: pd.DataFrame,
               step_rows: list[tuple[str, int, int, int, int]], host: str) -> pd.DataFrame:
    """One event per deepest thunk range (or other GPU-launching range directly in a module) of
    every module execution that starts inside the steady steps' span on its device."""
    executions = frame[frame["is_module"] & (frame["program"] >= 0)]
    lo = executions["device"].map(kept.groupby("device")["start"].min()).to_numpy(float)
    hi = executions["device"].map((kept["start"] + kept["dur"]).groupby(kept["device"]).max()).to_numpy(float)
    start = executions["start"].to_numpy(float)
    steady = set(executions["range_id"].to_numpy()[(start >= lo) & (start < hi)].tolist())
    parents_of_thunks = set(frame.loc[frame["is_thunk"], "parent_id"].tolist())
    in_steady = np.isin(owner, list(steady))
    leaf = ~frame["range_id"].isin(parents_of_thunks).to_numpy()
    is_exec = (frame["is_module"] & (frame["program"] >= 0)).to_numpy()
    direct = frame["parent_id"].isin(steady).to_numpy()
    # Thunks without thunk children, and other ranges placed directly in a module that launched GPU work.
    chosen = in_steady & ~is_exec & (
        (frame["is_thunk"].to_numpy() & leaf)
        | (~frame["is_thunk"].to_numpy() & ~frame["is_module"].to_numpy() & direct & (frame["gpu_ops"].to_numpy() != 0))
    ) & (frame["start"].to_numpy() >= 0)
    rows = frame[chosen]
    program_of = pd.Series(executions["program"].to_numpy(), index=executions["range_id"].to_numpy())
    start_ps = rows["start"].to_numpy(np.int64) * PS_PER_NS
    dur_ps = rows["dur"].to_numpy(np.int64) * PS_PER_NS
    step = _step_of(rows["device"].to_numpy(np.int64), start_ps, step_rows)
    return events_frame({
        "host": [host] * len(rows), "device": rows["device"].to_numpy(),
        "program_id": program_of.reindex(owner[chosen]).to_numpy(np.int64).astype(np.uint64),
        "op": rows["op"].astype(str).tolist(), "start_ps": start_ps, "dur_ps": dur_ps, "self_ps": dur_ps,
        "step": step, "run_id": owner[chosen], "kernels": np.clip(rows["gpu_ops"].to_numpy(), 0, None),
    })


def _step_of(device: np.ndarray, start_ps: np.ndarray, step_rows: list[tuple[str, int, int, int, int]]) -> np.ndarray:
    out = np.full(len(device), -1, dtype=np.int64)
    for _, dev, step, lo, hi in step_rows:
        out[(device == dev) & (start_ps >= lo) & (start_ps < hi)] = step
    return out
