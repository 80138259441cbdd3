"""A program's buffer assignment from the text XLA dumps beside a module after optimization
(`*-buffer-assignment.txt`, written with `--xla_dump_to`): its allocations and the values in each.

The text has no heap simulator trace, so the temporaries' peak is not known from it: the allocations
XLA reserves for temporaries (`preallocated-temp` and the other reusable ones) stand in for it at
their full size, an upper bound on the peak the proto's trace gives.
"""

from __future__ import annotations

import re
from pathlib import Path

from .buffer_assignment import Allocation, BufferAssignment, LogicalBuffer

_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*):\s*$")
_VALUE = re.compile(r"^ value: <(\d+) (\S+?)(?:\{([\d,]*)\})? @\d+> \(size=(\d+),offset=\d+\)")
_PARAMETER = re.compile(r"(?:^|, )parameter \d+")
_COLOR = re.compile(r"color (\d+)")
_MAX_BYTES = 256 << 20  # a buffer-assignment text this long is not one this reader should hold in memory


def read_buffer_assignment_text(path: Path) -> BufferAssignment | None:
    """The allocations and values of an XLA `*-buffer-assignment.txt`; None when it holds none."""
    try:
        if path.stat().st_size > _MAX_BYTES:
            return None
        text = path.read_text(errors="replace")
    except OSError:
        return None
    return parse_buffer_assignment_text(text)


def parse_buffer_assignment_text(text: str) -> BufferAssignment | None:
    buffers: dict[int, LogicalBuffer] = {}
    allocations: list[Allocation] = []
    current: tuple[int, int, str] | None = None
    members: list[int] = []

    def close() -> None:
        if current is not None:
            index, size, attrs = current
            allocations.append(Allocation(
                index=index, size=size, color=_color(attrs),
                parameter=_PARAMETER.search(attrs) is not None, live_out="maybe-live-out" in attrs,
                constant="constant" in attrs, thread_local="thread-local" in attrs, is_tuple=False,
                buffers=tuple(members)))

    for line in text.splitlines():
        if (a := _ALLOCATION.match(line)) is not None:
            close()
            current, members = (int(a[1]), int(a[2]), a[3]), []
        elif current is not None and (v := _VALUE.match(line)) is not None:
            index = tuple(int(i) for i in v[3].split(",") if i) if v[3] else ()
            buffer = LogicalBuffer(id=int(v[1]), size=int(v[4]), instruction=v[2], instruction_id=-1,
                                   shape_index=index, color=_color(current[2]))
            buffers[buffer.id] = buffer
            members.append(buffer.id)
    close()
    return BufferAssignment(buffers, tuple(allocations), traces=(), traced=False) if allocations else None


def _color(attrs: str) -> int:
    color = _COLOR.search(attrs)
    return int(color[1]) if color else 0


def beside(module_file: Path) -> Path | None:
    """The `*-buffer-assignment.txt` XLA wrote beside a module's text or proto, if any."""
    name = module_file.name
    for suffix in (".hlo.pb", ".pb", ".txt", ".hlo"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    found = module_file.with_name(f"{name}-buffer-assignment.txt")
    return found if found.is_file() else None
