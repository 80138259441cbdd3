"""The JSON report writer keeps only plain JSON values: NaN and infinities become null."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from audit.reports.json_report import clean, render_json


@dataclasses.dataclass(frozen=True)
class _Point:
    x: float
    label: str


def _reference(value: Any) -> Any:
    """The writer's rule, one isinstance test after another: no NaN or infinity, and no negative zero."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value + 0.0
    if isinstance(value, dict):
        return {str(k): _reference(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_reference(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _reference(dataclasses.asdict(value))
    if hasattr(value, "item"):
        return _reference(value.item())
    return value


_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.floats(),
                    st.floats().map(np.float64), st.integers(-100, 100).map(np.int64),
                    st.builds(_Point, st.floats(), st.text(max_size=3)))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
    st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=4)), max_leaves=20)


@given(_VALUES)
def test_clean_keeps_every_finite_value_and_nulls_the_rest(value: Any) -> None:
    cleaned = clean(value)
    assert json.dumps(cleaned, sort_keys=True, allow_nan=False) == \
        json.dumps(_reference(value), sort_keys=True, allow_nan=False)


def test_a_report_with_unknown_values_is_valid_json() -> None:
    text = render_json({"ops": [{"measured_s": math.nan, "flops": np.float64(2.5), "bytes": math.inf,
                                 "n": np.int32(3), "reasons": ("a",)}]})
    assert json.loads(text) == {"ops": [{"bytes": None, "flops": 2.5, "measured_s": None, "n": 3, "reasons": ["a"]}]}
