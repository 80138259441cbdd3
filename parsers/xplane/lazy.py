"""An XSpace whose lines are decoded on access, one at a time.

The planes, their metadata and stats are decoded up front; each line stays encoded
until it is read, and is not kept, so memory holds one decoded line at a time. The
encoded lines are views of the file's own bytes (`split_xspace` finds them by walking
the wire format of the space and its planes), not copies: a big profile is held once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Iterator

from google.protobuf.message import DecodeError

from ...base.errors import InputError
from ..wire.protowire import varint
from ...base.ranges import check_line
from .schema import XLine


class LazyLines(Sequence[Any]):
    """The lines of one plane; indexing decodes that line."""

    def __init__(self, encoded: Any, origin: str, plane: str = "") -> None:
        self._encoded = encoded
        self._origin = origin
        self._plane = plane

    def __len__(self) -> int:
        return len(self._encoded)

    def __getitem__(self, index: int) -> Any:  # type: ignore[override]
        line = XLine()
        try:
            line.ParseFromString(self._encoded[index])
        except DecodeError:
            raise InputError(f"line {index} of a plane is truncated or corrupt (protobuf decode failed)",
                             path=self._origin) from None
        try:
            check_line(line, f"plane {self._plane!r} line {index} ({line.name!r})")
        except InputError as exc:
            raise InputError(exc.message, path=self._origin) from None
        return line

    def __iter__(self) -> Iterator[Any]:
        for index in range(len(self._encoded)):
            yield self[index]

    @property
    def origin(self) -> str:
        """The file the lines came from (for error messages)."""
        return self._origin

    def encoded(self) -> Sequence[bytes | memoryview]:
        """The lines as their protobuf bytes (views of the file's bytes), undecoded."""
        return self._encoded  # type: ignore[no-any-return]


class Plane:
    """One plane: decoded metadata and stats, lazily decoded lines."""

    def __init__(self, plane: Any, origin: str, lines: Sequence[Any] | None = None) -> None:
        self._plane = plane
        self.lines = LazyLines(plane.lines if lines is None else lines, origin, plane.name)

    def __getattr__(self, name: str) -> Any:  # id, name, event_metadata, stat_metadata, stats
        return getattr(self._plane, name)


class Space:
    """An XSpace with lazily decoded lines."""

    def __init__(self, space: Any, origin: str, lines: list[list[memoryview]] | None = None) -> None:
        self._space = space
        self.planes = [Plane(p, origin, None if lines is None else lines[i]) for i, p in enumerate(space.planes)]

    def __getattr__(self, name: str) -> Any:  # hostnames, errors, warnings
        return getattr(self._space, name)


def split_xspace(data: bytes) -> tuple[bytes, list[memoryview], list[list[memoryview]]]:
    """The XSpace in `data` as (its fields but the planes, each plane's fields but its lines, each
    plane's lines), the lines as views of `data`; each part parses as its message (lines aside).

    **Raises:** `ValueError` where the wire format is broken (a length past the end, a bad varint).
    """
    view = memoryview(data)
    rest: list[memoryview] = []
    planes: list[memoryview] = []
    lines: list[list[memoryview]] = []
    for field, wire, start, end, value in _fields(view, 0, len(view)):
        if field == 1 and wire == 2:
            other: list[memoryview] = []
            own: list[memoryview] = []
            for inner, inner_wire, s, e, v in _fields(view, value, end):
                (own if inner == 3 and inner_wire == 2 else other).append(view[v:e] if inner == 3 and inner_wire == 2
                                                                          else view[s:e])
            planes.append(memoryview(b"".join(other)))
            lines.append(own)
        else:
            rest.append(view[start:end])
    return b"".join(rest), planes, lines


def _fields(view: memoryview, pos: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field, wire type, start, end, value start) of each field of the message in view[pos:end]."""
    while pos < end:
        start = pos
        tag, pos = varint(view, pos, end)
        wire = tag & 7
        value = pos
        if wire == 0:
            _, pos = varint(view, pos, end)
        elif wire == 1:
            pos += 8
        elif wire == 2:
            size, value = varint(view, pos, end)
            pos = value + size
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire} at byte {start}")
        if pos > end or tag >> 3 == 0:
            raise ValueError(f"field at byte {start} runs past its message")
        yield tag >> 3, wire, start, pos, value
