"""An XSpace whose lines are decoded on access, one at a time.

The planes, their metadata and stats are decoded up front; each line stays encoded
until it is read, and is not kept, so memory holds one decoded line at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Iterator

from google.protobuf.message import DecodeError

from ..errors import InputError
from .ranges import check_line
from .xplane_schema import XLine


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

    def encoded(self) -> Sequence[bytes]:
        """The lines as their protobuf bytes, undecoded."""
        return self._encoded  # type: ignore[no-any-return]


class Plane:
    """One plane: decoded metadata and stats, lazily decoded lines."""

    def __init__(self, plane: Any, origin: str) -> None:
        self._plane = plane
        self.lines = LazyLines(plane.lines, origin, plane.name)

    def __getattr__(self, name: str) -> Any:  # id, name, event_metadata, stat_metadata, stats
        return getattr(self._plane, name)


class Space:
    """An XSpace with lazily decoded lines."""

    def __init__(self, space: Any, origin: str) -> None:
        self._space = space
        self.planes = [Plane(p, origin) for p in space.planes]

    def __getattr__(self, name: str) -> Any:  # hostnames, errors, warnings
        return getattr(self._space, name)
