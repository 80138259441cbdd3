"""A capture of many programs (a benchmark, a notebook session): each step is one execution of one
of several programs, so no step repeats and a mean over them expects nothing. Each program's
expected time per execution stands beside its own measured time per execution instead."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..costmodel.schedule import StepWalk
from ..optable.overlap import step_overlap
from ..optable.record import OpRecord


def program_steps(steps: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """`steps` with the program each one executed: `program_id`, and `programs`, how many programs'
    ops the step holds (1 for one execution of one program; 0 for a step with no op)."""
    if steps.empty:
        return steps.assign(program_id=pd.Series(dtype="uint64"), programs=pd.Series(dtype="int64"))
    inside = events[events["step"] >= 0]
    held = inside.groupby(["device", "step"], observed=True)["program_id"].agg(["first", "nunique"])
    held = held.rename(columns={"first": "program_id", "nunique": "programs"}).reset_index()
    out = steps.drop(columns=[c for c in ("program_id", "programs") if c in steps.columns])
    out = out.merge(held, on=["device", "step"], how="left")
    return out.assign(program_id=out["program_id"].fillna(0).astype("uint64"),
                      programs=out["programs"].fillna(0).astype("int64"))


def step_program(rows: pd.DataFrame) -> int | None:
    """The program one step (its rows on every device) executed, or None when it holds several."""
    if "programs" not in rows.columns or not (rows["programs"] == 1).all():
        return None
    ids = set(int(p) for p in rows["program_id"])
    return ids.pop() if len(ids) == 1 else None


def per_program(ops: Sequence[OpRecord], steps: Sequence[Mapping[str, Any]],
                walks: Mapping[int, StepWalk | None]) -> list[dict[str, Any]] | None:
    """Per program, its executions and, per execution, its measured time [trace] beside its expected
    and achievable time [model]; None unless every step is one execution of one program and the steps
    run several programs. A program the trace ties to no step (its kernels to no launch) is listed
    too, its executions inferred from its ops' runs. Times are seconds per device; rows most measured
    time first."""
    runs: dict[int, list[float]] = {}
    for step in steps:
        pid = step.get("program_id")
        if pid is None:
            return None
        runs.setdefault(int(pid), []).append(float(step["time_s"]))
    if len(runs) < 2:
        return None
    by_program: dict[int, list[OpRecord]] = {}
    for o in ops:
        if not o.container:
            by_program.setdefault(o.program_id, []).append(o)
    rows = [_row(pid, runs.get(pid, []), mine, walks.get(pid)) for pid, mine in by_program.items()]
    rows += [_row(pid, times, [], walks.get(pid)) for pid, times in runs.items() if pid not in by_program]
    return sorted(rows, key=lambda r: -(r["op_time_s"] or 0.0) * r["executions"])


def predicted_programs(ops: Sequence[OpRecord], walks: Mapping[int, StepWalk | None]) -> list[dict[str, Any]] | None:
    """Per program of a prediction holding several (a dump folder of different programs), one
    execution's expected and achievable time [model]; None for one program. Such programs are not
    one step: a prediction that summed them would describe no run."""
    by_program: dict[int, list[OpRecord]] = {}
    for o in ops:
        if not o.container:
            by_program.setdefault(o.program_id, []).append(o)
    if len(by_program) < 2:
        return None
    rows = [{**_row(pid, [], mine, walks.get(pid), runs=1), "executions_from": "one execution (compiled, not run)"}
            for pid, mine in by_program.items()]
    return sorted(rows, key=lambda r: -(r["expected_step_s"] or r["expected_s"] or 0.0))


def _row(pid: int, times: list[float], ops: list[OpRecord], walk: StepWalk | None,
         runs: int | None = None) -> dict[str, Any]:
    # Without steps, each op ran once per execution outside loops: the fewest runs of any op.
    n = runs or len(times) or int(min((o.occurrences for o in ops), default=0)) or 1

    def per_run(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / n if known else None

    overlap = step_overlap(ops, {pid: walk})
    # Programs of one name (ten `jit_matmul`s of a sweep) differ by what they run: name the largest op's shape.
    main = max((o for o in ops if o.self_s is not None), key=lambda o: o.self_s or 0.0, default=None)
    return {
        "program_id": pid, "module": ops[0].module if ops else "", "executions": n,
        "largest_op": f"{main.name} {_result(main.shape)}".strip() if main is not None else "",
        "executions_from": "steps" if times else "its ops' runs (the trace ties none of its kernels to a launch)",
        "measured_s": statistics.median(times) if times else None,
        "measured_s_min": min(times) if times else None, "measured_s_max": max(times) if times else None,
        "op_time_s": per_run([o.self_s for o in ops]),
        "expected_s": per_run([o.expected_s for o in ops]),
        "expected_step_s": None if overlap.expected_step_s is None else overlap.expected_step_s / n,
        "achievable_s": per_run([o.achievable_s for o in ops]),
        "flagged_ops": sum(1 for o in ops if o.flagged),
        "ops_without_expected": sum(1 for o in ops if o.expected_s is None),
    }


def _result(shape: str) -> str:
    """An op's result shape without the layout, and a tuple's first element (a GEMM's, not its workspace)."""
    first = shape.strip().lstrip("(").split("]", 1)[0]
    return first + "]" if "[" in first else shape
