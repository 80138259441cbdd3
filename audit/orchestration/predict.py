"""`audit run --target`: predict a workload's step on a TPU topology from an ahead-of-time compile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from typing import Any

from ..analyses.xla_gap import explain_gap
from ..child.aot import HLO_NAME, RESULT_NAME, check_target
from ..costmodel.units import nbytes
from ..base.errors import ExitCode, InputError, WorkloadError
from ..reports.model.report import ReportModel
from .analysis import DEFAULT_OPTIONS, Options, analyse_modules, attach_plan

XLA_DIFFERENCE = ("XLA's optimal_seconds is the TPU compiler's own estimate for the module; its cost model does "
                  "not price all-gather, reduce-scatter or all-to-all over the ICI topology, so it is lower than "
                  "ours wherever the step communicates. Ours sums every op's roofline time (compute, HBM and "
                  "collectives on the slice's physical axes), walked over the compiled schedule so an async collective "
                  "hides behind the compute scheduled in its window.")


def _compile(script: Path, argv: Sequence[str], target: str, out: Path) -> dict[str, Any]:
    # No TPU is opened, only its compiler: two predictions at once must not fight over
    # libtpu's single-process lock file.
    env = dict(os.environ, JAX_PLATFORMS="cpu", ALLOW_MULTIPLE_LIBTPU_LOAD="1")
    cmd = [sys.executable, "-P", "-m", "audit.child.aot", str(script), "--target", target, "--out", str(out),
           "--", *argv]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode == ExitCode.INPUT:
        message = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "bad input"
        raise InputError(message.removeprefix("audit: error: "))
    if proc.returncode != 0:
        # libtpu logs warnings on stderr; show only the traceback part of a failure.
        text = proc.stderr
        start = text.find("Traceback (most recent call last)")
        sys.stderr.write(text[start:] if start >= 0 else text[-4000:])
        raise WorkloadError(f"compiling the workload for {target} failed")
    record: dict[str, Any] = json.loads((out / RESULT_NAME).read_text())
    return record


def memory_fit(record: dict[str, Any], hbm_bytes: float | None) -> dict[str, Any]:
    """XLA's memory analysis for one device against the chip's HBM capacity."""
    mem = record["memory"]
    total = (mem["argument_size_in_bytes"] + mem["output_size_in_bytes"] - mem["alias_size_in_bytes"]
             + mem["temp_size_in_bytes"] + mem["generated_code_size_in_bytes"])
    out = {**mem, "total_bytes": total, "hbm_bytes": hbm_bytes, "source": "xla memory_analysis"}
    if hbm_bytes:
        out["fits"] = total <= hbm_bytes
        out["margin_bytes"] = hbm_bytes - total
        out["verdict"] = (f"fits: {nbytes(total)} of {nbytes(hbm_bytes)} HBM per device"
                          if total <= hbm_bytes else
                          f"does not fit: needs {nbytes(total)}, {nbytes(total - hbm_bytes)} "
                          f"more than the {nbytes(hbm_bytes)} of HBM per device")
    return out


def predict_target(script: Path, argv: Sequence[str], target: str, *, keep: Path | None = None,
                   options: Options = DEFAULT_OPTIONS, command: str | None = None) -> ReportModel:
    """Compile `script` for `target` in a child process and return a predicted report."""
    from ..hardware_options import resolve_hardware
    from ..parsers.hlo.text import parse_hlo_text

    check_target(target)
    with tempfile.TemporaryDirectory(prefix="audit-aot-") as tmp:
        out = keep or Path(tmp)
        record = _compile(script, argv, target, out)
        text = (out / HLO_NAME).read_text()
    module = parse_hlo_text(text, origin=str(out / HLO_NAME))
    hw = resolve_hardware(target, options.overrides)
    by_id = {d["id"]: tuple(d["coords"]) for d in record["devices"]}
    order = record.get("partition_devices") or sorted(by_id)
    coords = {p: by_id[dev] for p, dev in enumerate(order) if dev in by_id}
    report = analyse_modules({0: module}, hw, source={
        "kind": "aot", "paths": [str(script)], "workload": record["workload"], "command": command,
        "jax_version": record["jax_version"], "target": target, "topology": record["topology"],
        "device_kind": record["device_kind"], "mesh": record["mesh"], "config": record["config"],
    }, warnings=[], options=options, devices=len(record["devices"]), coords=coords)
    summary = report.summary
    ours = summary.overlap.expected_step_s if summary.overlap.expected_step_s is not None else summary.expected_s
    xla_s = record["cost_analysis"].get("optimal_seconds")
    gap = explain_gap(report, xla_s, hw.op_overhead_s)
    report = report.attach("xla", {
        "optimal_seconds": xla_s, "ours_s": ours, "ours_no_overlap_s": summary.expected_s,
        "ratio_ours_to_xla": (ours / xla_s) if xla_s and ours is not None else None,
        "cost_analysis": record["cost_analysis"], "gap": gap, "explanation": XLA_DIFFERENCE + " " + gap["text"]})
    report = report.attach("memory", memory_fit(record, hw.hbm_bytes.value if hw.hbm_bytes else None))
    report = report.attach("devices", record["devices"])
    return attach_plan(report, hw)
