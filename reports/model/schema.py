"""The JSON Schema of `audit.report/v1`, generated from the typed `Report` and checked in.

`report_schema()` walks the dataclasses the writer serialises (`Summary`, `OpRecord`,
`CollectiveRow` and their parts) and maps each field's type to JSON Schema; the result is
checked in beside this module as `report.schema.json`, which the reader (`read`) validates
every report against. A test regenerates it and compares, so the schema cannot
drift from the types.

Adding a field: add it to the dataclass (and its `to_json`), then regenerate with
`python -m audit.reports.model.schema --write`. Every object stays open to fields the schema does
not list (the contract says "add fields freely"), so an older reader accepts a newer report.
A field whose JSON differs from its Python type (serialised by hand) is described in
`_BY_HAND` below. `REQUIRED` lists what readers index without a default: a report without
those fields cannot be compared, whatever version wrote it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from .read import SCHEMA_FILE
from ...optable.record import JSON_NAMES, CollectiveRow, DeviceTime, OpRecord, Provenance
from .report import SCHEMA
from ...optable.record import StepOverlap
from .summary import StepTimes, Summary
from .buffer_contents import BufferContents, BufferOp
from .findings import ORIGINS

JSON = dict[str, Any]

# Bounds on what a report may declare, so a reader's memory and arithmetic stay finite: any number
# is within +-MAX_NUMBER (a float64 holds it), any array at most MAX_ITEMS long. Counts and times
# that a reader divides by or sums are not negative.
MAX_NUMBER = 1e300
MAX_ITEMS = 10_000_000
MAX_RUNS = 10_000

# What readers (audit diff) index without a default, per object.
REQUIRED: Mapping[str, tuple[str, ...]] = {
    "report": ("schema", "hardware", "summary", "steps", "ops", "collectives"),
    "hardware": ("name",),
    "summary": ("steps",),
    "step": ("time_s",),
    "op": ("name", "module", "opcode", "category", "framework_op", "fingerprint"),
    "collective": ("kind", "bytes"),
    "run": ("steps",),
    "command_buffer": ("key", "ops"),
    "buffer_op": ("name", "opcode", "category", "framework_op", "shape", "dtype", "fingerprint", "position", "runs",
                  "flops", "bytes", "comm_bytes", "expected_s"),
    "finding": ("cause", "title", "time_per_step_s"),
}
_NON_NEGATIVE = frozenset({"steps", "time_s", "occurrences", "devices", "hosts", "bytes", "comm_bytes", "flops", "runs",
                            "time_per_step_s"})


def _number(name: str = "") -> JSON:
    low = 0 if name in _NON_NEGATIVE else -MAX_NUMBER
    return {"type": "number", "minimum": low, "maximum": MAX_NUMBER}


def _integer(name: str = "") -> JSON:
    low = 0 if name in _NON_NEGATIVE else -MAX_NUMBER
    return {"type": "integer", "minimum": low, "maximum": MAX_NUMBER}


def _array(items: JSON, max_items: int = MAX_ITEMS) -> JSON:
    return {"type": "array", "items": items, "maxItems": max_items}


def _nullable(schema: JSON) -> JSON:
    out = dict(schema)
    kind = out["type"]
    out["type"] = [*kind, "null"] if isinstance(kind, list) else [kind, "null"]
    return out


def _of_type(hint: Any, name: str) -> JSON:
    """The JSON Schema of a field's Python type (open vocabularies stay plain strings)."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(hint) if a is not type(None)]
        base = _of_type(inner[0], name) if len(inner) == 1 else {}
        return _nullable(base) if base and len(inner) < len(get_args(hint)) else base
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return _integer(name)
    if hint is float:
        return _number(name)
    if hint is str or origin is Literal:
        return {"type": "string"}
    if origin in (tuple, list) or origin is Sequence:
        args = [a for a in get_args(hint) if a is not Ellipsis]
        return _array(_of_type(args[0], "") if args else {})
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        pair = get_args(hint)
        values = _of_type(pair[1], "") if len(pair) == 2 and pair[1] is not Any else {}
        return {"type": "object", **({"additionalProperties": values} if values else {})}
    if dataclasses.is_dataclass(hint):
        return _object(hint)
    return {}


def _object(cls: Any, skip: frozenset[str] = frozenset(), role: str = "") -> JSON:
    hints = get_type_hints(cls)
    props = {f.name: _of_type(hints[f.name], f.name) for f in dataclasses.fields(cls) if f.name not in skip}
    return _open(props, role)


def _open(props: Mapping[str, JSON], role: str = "") -> JSON:
    out: JSON = {"type": "object", "properties": dict(props)}
    if REQUIRED.get(role):
        out["required"] = list(REQUIRED[role])
    return out


# Fields the writer serialises by hand: their JSON shape, not their Python type.
_OP_BY_HAND: Mapping[str, JSON] = {
    "reasons": _array({"type": "string"}),
    "provenance": _object(Provenance),
    "overlapped": {"type": ["boolean", "null"]},
    "exposed_s": _nullable(_number()), "hidden_s": _nullable(_number()), "window_compute_s": _nullable(_number()),
    "per_device": _array(_object(DeviceTime)),
    "measured_s_median": _nullable(_number()), "straggler_ratio": _nullable(_number()),
    "per_host": {"type": "object", "additionalProperties": {
        **_open({"measured_s": _number(), "measured_s_max": _number()}),
        "required": ["measured_s", "measured_s_max"]}},
}
_SUMMARY_BY_HAND: Mapping[str, JSON] = {
    "overlap_model": {"type": "string"},
    "xla_optimal_s": _nullable(_number()),
    "time_by_bound_share": {"type": "object", "additionalProperties": _number()},
}
_BY_HAND = {"op": _OP_BY_HAND, "summary": _SUMMARY_BY_HAND}


def _summary() -> JSON:
    schema = _object(Summary, skip=frozenset({"overlap", "step_time_s", "unknown_trip_count_loops"}), role="summary")
    schema["properties"]["step_time_s"] = _object(StepTimes)
    schema["properties"]["unknown_trip_count_loops"] = _array({"type": "object"})
    overlap = _object(StepOverlap, skip=frozenset({"unscheduled"}))["properties"]
    schema["properties"].update({**overlap, **_BY_HAND["summary"]})
    return schema


def _op() -> JSON:
    nested = frozenset({f.name for f in dataclasses.fields(OpRecord)} & {"collective", "placement", "overlap",
                                                                         "spread", *_OP_BY_HAND})
    schema = _object(OpRecord, skip=nested, role="op")
    schema["properties"] = {JSON_NAMES.get(k, k): v for k, v in schema["properties"].items()}
    schema["properties"].update(_BY_HAND["op"])
    return schema


def _collective() -> JSON:
    schema = _object(CollectiveRow, skip=frozenset({"physical_axes"}), role="collective")
    schema["properties"]["physical_axes"] = _array({"type": "object"})
    return schema


def _matching() -> JSON:
    """The `matching` part (audit.analyses.matching): measured time matched to HLO ops, and the rest."""
    shares = {k: _nullable(_number()) for k in ("matched_share", "covered_share")}
    times = {k: _number() for k in ("measured_s", "matched_s", "explained_s", "unmatched_s")}
    largest = _open({"name": {"type": "string"}, "module": {"type": "string"}, "measured_s": _number(),
                     "status": {"type": "string"}, "what": {"type": "string"}})
    return _open({**times, **shares, "ops": _integer(), "largest": _array(largest)})


def _command_buffer() -> JSON:
    """The `command_buffers` part (reports.model.buffer_contents): each buffer and the ops it ran."""
    schema = _object(BufferContents, skip=frozenset({"ops"}), role="command_buffer")
    schema["properties"]["ops"] = _array(_object(BufferOp, role="buffer_op"))
    return schema


def _program_memory() -> JSON:
    """The `program_memory` part (audit.analyses.program_memory): each program's buffer assignment."""
    text, count = _nullable({"type": "string"}), _nullable(_integer())
    size = {k: _number("bytes") for k in ("peak_bytes", "parameter_bytes", "live_out_bytes", "temporary_bytes",
                                          "indefinite_bytes", "allocated_bytes")}
    peak_at = _open({"event": count, "events": _integer(), "instruction": {"type": "string"},
                     "computation": text, "position": count, "scheduled": count, "source_line": text})
    buffer = _open({"instruction": {"type": "string"}, "bytes": _number("bytes"), "kind": {"type": "string"},
                    "opcode": text, "shape": text, "op_name": text, "source_line": text})
    plan = _open({"source": {"type": "string"}, "params": _number(), "parameter_bytes": _number("bytes"),
                  "optimizer_bytes": _number("bytes"), "activation_bytes": _number("bytes"),
                  "total_bytes": _number("bytes"), "note": {"type": "string"}})
    return _open({"program_id": _integer(), "module": {"type": "string"}, "source": {"type": "string"}, **size,
                  "peak_at": peak_at, "largest": _array(buffer),
                  "device_memory_bytes": _nullable(_number("bytes")), "device_memory_source": text,
                  "headroom_bytes": _nullable(_number()), "peak_share": _nullable(_number()), "plan": plan})


def _finding() -> JSON:
    """One row of the `findings` and `waste` parts (reports.model.findings.Finding.to_json)."""
    text = {"type": "string"}
    return _open({"cause": text, "title": text, "time_per_step_s": {"type": "number", "minimum": 0,
                                                                     "maximum": MAX_NUMBER},
                  "share": _nullable(_number()), "evidence": _array(text), "action": text,
                  "origin": {"enum": list(ORIGINS)}, "program": _nullable(text)}, role="finding")


def _step_diagnosis() -> JSON:
    """The `step_diagnosis` part (audit.analyses.step_diagnosis): each program's waterfall."""
    bar = _open({"cause": {"type": "string"}, "time_s": _number()})
    row = _open({"program": {"type": "string"}, "roofline_s": _nullable(_number()),
                 "achievable_s": _nullable(_number()), "measured_s": _nullable(_number()), "steps": _integer(),
                 "bars": _array(bar), "over_s": _number(), "inside_op_time": _array(bar),
                 "per_step": _array({"type": "object"})})
    return _open({"programs": _array(row)})


def report_schema() -> JSON:
    """The schema of `audit.report/v1`, from the types the writer serialises."""
    steps = _open({"index": _integer(), "time_s": _number("time_s"),
                   "per_device_s": {"type": "object"}, "per_host_s": {"type": "object"}}, role="step")
    run = _open({"source": {"type": "string"}, "steps": _array(_number("time_s"))}, role="run")
    flagged = _open({"key": {"type": "string"}, "name": {"type": "string"}, "module": {"type": "string"},
                     "wasted_s": _nullable(_number()), "efficiency": _nullable(_number()),
                     "reasons": _array({"type": "string"}), "suggestion": {"type": "string"}})
    props: dict[str, JSON] = {
        "schema": {"const": SCHEMA},
        "tool": {"type": "object", "additionalProperties": {"type": "string"}},
        "source": {"type": "object"},
        "hardware": _open({"name": {"type": "string"}, "source": {"type": "string"}}, role="hardware"),
        "summary": _summary(),
        "steps": _array(steps),
        "ops": _array(_op()),
        "flagged": _array(flagged),
        "collectives": _array(_collective()),
        "timeline": _array({"type": "object"}),
        "warnings": _array({"type": "string"}),
        "runs": _array(run, MAX_RUNS),
        "run_source": {"type": "string"},
        "matching": _matching(),
        "command_buffers": _array(_command_buffer()),
        "program_memory": _array(_program_memory()),
        "findings": _array(_finding()),
        "waste": _array(_finding()),
        "step_diagnosis": _step_diagnosis(),
    }
    return {"$schema": "http://json-schema.org/draft-07/schema#", "$id": f"urn:{SCHEMA}",
            "title": f"audit JSON report ({SCHEMA})",
            "description": "Generated from the typed Report by audit.reports.model.schema; do not edit by hand.",
            **_open(props, role="report")}


def render() -> str:
    """The checked-in file's text."""
    return json.dumps(report_schema(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m audit.reports.model.schema [--write]
    if "--write" in sys.argv[1:]:
        SCHEMA_FILE.write_text(render())
        print(f"wrote {SCHEMA_FILE}", file=sys.stderr)
    else:
        sys.stdout.write(render())
