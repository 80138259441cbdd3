"""The protobuf wire format's varint, for the readers that walk a message's bytes themselves
(the C readers share `_protowire.h`)."""

from __future__ import annotations


def varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of the protobuf varint at `pos`. **Raises:** ValueError when cut short."""
    value = shift = 0
    while pos < end and shift < 64:
        byte = view[pos]
        value |= (byte & 127) << shift
        pos += 1
        if byte < 128:
            return value, pos
        shift += 7
    raise ValueError(f"varint cut short at byte {pos}")
