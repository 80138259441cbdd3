"""Copies of a frozen slots dataclass's instance with a few fields changed, made in C where the
C build is there (`_stamp.c`): a big program's reader and its predicted op table
make hundreds of thousands of them, and a frozen dataclass's `__init__` sets each field through
`object.__setattr__`, ten times slower."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


_LEARNED: dict[type, tuple[str, ...]] = {}  # the fields each class's stamp sets: one set per class


def stamper(cls: type[T], stamped: tuple[str, ...]) -> Callable[..., T] | None:
    """`stamp(template, *values)`: a copy of `template` (an instance of `cls`) with the fields
    `stamped` names set to `values`, what `dataclasses.replace` makes of it; None without the C
    build, or for a class whose instances it cannot copy (not plain slots).

    **Raises:** `ValueError` for a class already stamped with other fields (the C stamp knows one
    set per class: the readers that stamp one class share its set)."""
    if _LEARNED.setdefault(cls, stamped) != stamped:
        raise ValueError(f"{cls.__name__} is stamped with the fields {_LEARNED[cls]}, not {stamped}")
    try:
        from . import _stamp  # type: ignore[attr-defined]
    except ImportError:  # built without a C compiler
        return None
    try:
        _stamp.layout(cls, tuple(f.name for f in fields(cls)), stamped)  # type: ignore[arg-type]
    except TypeError:
        return None
    stamp: Callable[..., Any] = _stamp.stamp
    return stamp
