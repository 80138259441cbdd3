"""The op table as a pandas DataFrame: one row per op, the columns of `columns.COLUMNS`.

Values are raw numbers in SI base units (unknown is NaN or <NA>, never 0). Each column's
unit, origin and description travel with the frame in `DataFrame.attrs` ("units",
"origins", "descriptions": column -> text), so a notebook can say what a number is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pandas as pd

from ...costmodel.units import Unit
from .columns import COLUMNS, Column
from ...optable.record import OpRecord

_NUMERIC: frozenset[Unit] = frozenset({"s", "FLOP", "B", "FLOP/s", "B/s", "FLOP/B", "fraction"})


def _number(value: object) -> float | None:
    return None if value is None else float(cast(float, value))


def _series(column: Column, ops: Sequence[OpRecord]) -> pd.Series:
    values = [column.value(op) for op in ops]
    if column.unit in _NUMERIC:
        return pd.Series([float("nan") if (n := _number(v)) is None else n for v in values],
                         dtype="float64", name=column.key)
    if column.unit == "count":
        numbers = [_number(v) for v in values]
        whole = all(n is None or n.is_integer() for n in numbers)
        if whole:  # whole numbers stay integers (unknown: <NA>); a mean over devices may be fractional
            return pd.Series([None if n is None else int(n) for n in numbers], dtype="Int64", name=column.key)
        return pd.Series([float("nan") if n is None else n for n in numbers], dtype="float64", name=column.key)
    if column.unit == "bool":
        return pd.Series(values, dtype="boolean", name=column.key)
    return pd.Series(values, dtype="object", name=column.key)


def op_frame(ops: Sequence[OpRecord], columns: Sequence[Column] | None = None) -> pd.DataFrame:
    """The ops as a DataFrame indexed by op key ("program_id/name"), one column per declared column."""
    cols = tuple(COLUMNS.values()) if columns is None else tuple(columns)
    frame = pd.DataFrame({c.key: _series(c, ops) for c in cols})
    frame.index = pd.Index([op.key for op in ops], name="key", dtype="object")
    frame.attrs.update(column_attrs(cols))
    return frame


def column_attrs(columns: Sequence[Column]) -> dict[str, dict[str, str]]:
    """What each column is: {"units": {key: unit}, "origins": {...}, "descriptions": {...}}."""
    return {"units": {c.key: c.unit for c in columns}, "origins": {c.key: c.origin for c in columns},
            "descriptions": {c.key: c.title for c in columns}}
