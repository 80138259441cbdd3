"""Read an `audit.report/v1` JSON report, validated against the checked-in schema.

The report is this tool's own format, so its reader lives with its types and its schema, not
among the readers of other tools' formats (`parsers`), which import nothing of ours. Anything
that reads a report back (`audit.load`, `audit diff`) comes through `read_report`, so a
truncated, hand-edited or hostile report is one line naming the file and the JSON path
(`ops[12].measured_s: expected a number, got "x"`), never a crash further in. Limits hold
before and while parsing: the file size (`input_files`), the nesting depth (counted on the
bytes before the parser recurses), non-finite numbers (NaN, Infinity, 1e999), then the schema's
ranges and array sizes. The schema is generated from the typed report
(`audit.reports.model.schema`); see there to extend it.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...costmodel.units import count, figure
from ...base.errors import InputError
from ...parsers.wire.input_files import MAX_REPORT_BYTES, read_input
from .report import SCHEMA

SCHEMA_FILE = Path(__file__).with_name("report.schema.json")
MAX_DEPTH = 64  # a real report nests about 8 deep
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPEN, _CLOSE = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)


def read_report(path: str | Path) -> dict[str, Any]:
    """A validated `audit.report/v1` report. **Raises:** `InputError` naming the file and the JSON path."""
    p = Path(path)
    data = read_input(p, MAX_REPORT_BYTES, "an audit JSON report")
    return parse_report(data, p)


def parse_report(data: bytes, origin: str | Path = "") -> dict[str, Any]:
    """Parse and validate report bytes; `origin` names the source in errors."""
    if not data.strip():
        raise InputError("empty, not a JSON report", path=origin)
    depth = nesting_depth(data)
    if depth > MAX_DEPTH:
        raise InputError(f"JSON nested {depth} levels deep; a report nests at most {MAX_DEPTH}", path=origin)
    try:
        doc = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotFinite as exc:
        raise InputError(f"not a JSON report: {exc}", path=origin) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not a JSON report: not UTF-8 text (byte {exc.start})", path=origin) from None
    except ValueError as exc:  # JSONDecodeError, or an integer of more digits than Python converts
        raise InputError(f"not a JSON report: {_first_line(str(exc))}", path=origin) from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise InputError(f"not an audit JSON report (schema {SCHEMA})", path=origin)
    problem = first_violation(doc)
    if problem is not None:
        raise InputError(f"not a valid {SCHEMA} report: {problem}", path=origin)
    return doc


def check_report(doc: Any, origin: str = "a report given as a dict") -> dict[str, Any]:
    """A report handed over already parsed (`audit.load(dict)`, `audit.diff(dict, dict)`), held to the
    checks a file gets: written out as JSON and read back through `parse_report`, so NaN, nesting,
    the schema and its ranges are judged the same way. **Raises:** `InputError` naming the JSON path."""
    try:
        data = json.dumps(doc, allow_nan=True).encode()
    except (TypeError, ValueError, RecursionError) as exc:  # a value JSON has no form for, a cycle
        raise InputError(f"not a JSON report: {_first_line(str(exc))}", path=origin) from None
    return parse_report(data, origin)


def nesting_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in JSON bytes (strings left out), without parsing."""
    if not (b"[" in data or b"{" in data):
        return 0
    outside = np.frombuffer(_STRING.sub(b'""', data), np.uint8)
    step = np.isin(outside, _OPEN).astype(np.int32) - np.isin(outside, _CLOSE).astype(np.int32)
    return int(np.cumsum(step).max(initial=0))


def first_violation(doc: Any) -> str | None:
    """The first place `doc` breaks the report schema, as `json.path: what is wrong`; None if it is valid."""
    from fastjsonschema import JsonSchemaValueException

    try:
        _validator()(doc)
    except JsonSchemaValueException as error:
        return f"{json_path(doc, error.path or [])}: {_describe(error)}"
    return None


@lru_cache(maxsize=1)
def _validator() -> Callable[[Any], Any]:
    import fastjsonschema

    schema = json.loads(SCHEMA_FILE.read_text())
    return fastjsonschema.compile(schema)


def json_path(doc: Any, parts: Sequence[Any]) -> str:
    """`ops[12].measured_s` for the validator's path ("data", "ops", "12", "measured_s") in `doc`."""
    out, node = "", doc
    for part in list(parts)[1:]:  # the first part names the document itself
        if isinstance(node, list):
            index = int(part)
            out += f"[{index}]"
            node = node[index] if 0 <= index < len(node) else None
        else:
            out += f".{part}" if out else str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return out or "(top level)"


_TYPE_WORDS = {"number": "a number", "integer": "an integer", "string": "a string", "boolean": "true or false",
               "object": "an object", "array": "an array", "null": "null"}


def _describe(error: Any) -> str:
    rule, wanted, value = error.rule, error.rule_definition, error.value
    if rule == "type":
        kinds = wanted if isinstance(wanted, list) else [wanted]
        return f"expected {' or '.join(_TYPE_WORDS.get(str(k), str(k)) for k in kinds)}, got {_show(value)}"
    if rule == "required":
        missing = [k for k in wanted if isinstance(value, dict) and k not in value]
        return f"missing field {missing[0]!r}" if missing else "a required field is missing"
    if rule in ("minimum", "maximum"):
        return f"{_show(value)} is out of range ({rule} {figure(wanted)})"
    if rule == "maxItems":
        return f"{count(len(value))} items, more than the {count(wanted)} a report may hold"
    if rule == "const":
        return f"expected {_show(wanted)}, got {_show(value)}"
    return _first_line(str(error.message))


def _show(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else f"an array of {len(value)}"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _NotFinite(ValueError):
    pass


def _refuse_constant(name: str) -> float:
    raise _NotFinite(f"{name} is not a number a report may hold")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotFinite(f"{text[:40]} is too large for a float")
    return value


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unreadable"
