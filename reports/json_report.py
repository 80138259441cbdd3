"""The JSON report (schema audit.report/v1): deterministic, compact, NaN-free."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any


_PLAIN = (str, int, bool, type(None))


def clean(value: Any) -> Any:
    """`value` as plain JSON types: NaN and inf become null, numpy scalars and dataclasses plain values."""
    kind = type(value)
    if kind in _PLAIN:  # exact types first: a report holds hundreds of thousands of plain values
        return value
    if kind is float:
        # NaN and infinities are not finite differences; adding 0.0 turns a negative zero into 0.
        return value + 0.0 if value - value == 0.0 else None
    if kind is dict:
        return {k if type(k) is str else str(k): clean(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [clean(v) for v in value]
    return _clean_other(value)


def _clean_other(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value + 0.0
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return clean(dataclasses.asdict(value))
    if hasattr(value, "item"):  # numpy scalars
        return clean(value.item())
    return value


def render_json(doc: dict[str, Any]) -> str:
    """Serialize a JSON document (a report, a diff): sorted keys, no NaN (unknown values are null)."""
    return json.dumps(clean(doc), sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
