"""Read binary HLO protos (`xla.HloProto` or a bare `xla.HloModuleProto`) into the module model.

`--xla_dump_to` writes `*.hlo.pb` as an HloProto (module plus buffer assignment); profiles
embed the same message in `/host:metadata`; jaxlib serializes bare HloModuleProtos.
A big program repeats a few distinct instructions (an unrolled loop) or computations (renamed
copies of one block): each distinct instruction is read once (`proto_fields`) and stamped
per copy, and each distinct computation's content numbered, so that it is priced once too.
"""

from __future__ import annotations

import itertools
from dataclasses import fields as dataclass_fields
from typing import Any

from google.protobuf.message import DecodeError

from . import schema as schema
from ...base.errors import InputError
from ...base.gc_pause import collector_paused
from .checks import check_module
from .model import MAX_CONTENT_INSTRUCTIONS, STAMPED, Computation, Instruction, Module
from .proto_fields import Attribute, called_attributes, named_template
from ..wire.protobuild import DynamicMessage
from .text import FrameTables
from ...base.stamping import stamper

# What tells apart an unrolled program's copies of one instruction (and a renamed program's copies of
# one computation): read once, stamped per copy.
_PER_COPY = ("name", "id", "operand_ids", "control_predecessor_ids", "called_computation_ids")
try:
    from . import _hloscan  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: the Python split, the same result
    _hloscan = None
# A template instruction copied with its name, operands, callees, id, metadata and attributes set (what the
# constructor makes of the same fields, in a tenth of the time); None without the C build.
_STAMP = stamper(Instruction, STAMPED)
_MAX_READ = 1 << 16
_TAIL = tuple(f.name for f in dataclass_fields(Instruction))[6:-1]  # between `id` and `attributes`


_Split = tuple[tuple[Attribute, ...], tuple[Attribute, ...]]


class _Reading:
    """What reading a module's computations shares: each distinct instruction read once (`read`,
    by its message less its names and ids, with a number that is never reused), and each distinct
    computation's content numbered (`contents`, by its instructions' numbers, operand positions and
    callees' contents)."""

    def __init__(self, comps: dict[int, str], tables: FrameTables, origin: str) -> None:
        self.comps, self.tables, self.origin = comps, tables, origin
        self.read: dict[bytes, tuple[Instruction, tuple[Any, ...], _Split, int]] = {}
        self.contents: dict[tuple[Any, ...], int] = {}
        self.content_of: dict[int, int] = {}  # computation id -> content number
        self.fused: set[int] = set()  # ids of computations a fusion calls
        self.calls: dict[tuple[int, tuple[int, ...]], tuple[tuple[str, ...], tuple[Attribute, ...]]] = {}
        self.numbers = itertools.count()

    def template(self, key: bytes, name: str, comp: str) -> tuple[Instruction, tuple[Any, ...], _Split, int]:
        """The instruction whose message less its per-copy fields is `key`, as read the first time."""
        found = self.read.get(key)
        if found is None:
            if len(self.read) >= _MAX_READ:
                self.read.clear()
            p = schema.HloInstructionProto.FromString(key)
            one, before, after = named_template(p, self.tables, name, comp, self.origin)
            tail = tuple(getattr(one, f) for f in _TAIL)
            found = self.read[key] = (one, tail, (before, after), next(self.numbers))
        return found

    def calling(self, number: int, called_ids: tuple[int, ...], one: Instruction, before: tuple[Attribute, ...],
                after: tuple[Attribute, ...]) -> tuple[tuple[str, ...], tuple[Attribute, ...]]:
        """The callees' names and the attributes of instruction `number` calling `called_ids`: one
        pair for all its copies that call the same computations (an unrolled program's fusions)."""
        key = (number, called_ids)
        found = self.calls.get(key)
        if found is None:
            called = tuple([self.comps[i] for i in called_ids if i in self.comps])
            attributes = (*before, *called_attributes(one.opcode, called), *after) if called else one.attributes
            found = self.calls[key] = (called, attributes)
        return found

    def computation(self, c: DynamicMessage, split: _Lists | None = None) -> tuple[Computation, dict[int, str]]:
        """The computation (`split` its instructions, when known), and its instructions' names by id."""
        split = split or _split_in_c(c) or _split(c)
        all_names, all_ids, all_operands, all_called, keys = split
        names = dict(zip(all_ids, all_names))
        position = {iid: n for n, iid in enumerate(all_ids)}
        keyed = len(keys) <= MAX_CONTENT_INSTRUCTIONS
        shape_of: list[tuple[Any, ...]] = []
        out = []
        comps, content_of, template, stamp = self.comps, self.content_of, self.template, _STAMP
        for name, iid, ids, called_ids, key in zip(*split):
            one, tail, (before, after), number = template(key, name, c.name)
            operands = tuple([names[i] if i in names else f"#{i}" for i in ids])
            if called_ids:
                called, attributes = self.calling(number, called_ids, one, before, after)
            else:
                called, attributes = (), one.attributes
            if one.opcode == "fusion":
                self.fused.update(called_ids)
            if stamp is not None:
                out.append(stamp(one, name, operands, called, iid, one.metadata, attributes))
            else:
                out.append(Instruction(name, one.opcode, one.shape, operands, called, iid,  # type: ignore[call-arg]
                                       *tail, attributes))  # the fields between, as read (`_TAIL`)
            if keyed:
                shape_of.append((number, tuple([position.get(i, -1) for i in ids]),
                                 tuple([content_of.get(i, comps.get(i)) for i in called_ids])))
        content = None
        if keyed:
            content = self.contents.setdefault((tuple(shape_of), position.get(c.root_id, -1)), len(self.contents))
            self.content_of[c.id] = content
        comp = Computation(name=c.name, instructions=out, id=c.id, root=names.get(c.root_id, ""),
                           is_fusion=c.is_fusion_computation, content=content)
        return comp, names


_Lists = tuple[list[str], list[int], list[tuple[int, ...]], list[tuple[int, ...]], list[bytes]]


def _split(c: DynamicMessage) -> _Lists:
    """The computation's instructions' names, ids, operand ids, callee ids, and messages less those
    (and their control predecessors), serialized: what copies of one instruction differ in and share."""
    out: _Lists = ([], [], [], [], [])
    for p in c.instructions:
        out[0].append(p.name)
        out[1].append(p.id)
        out[2].append(tuple(p.operand_ids))
        out[3].append(tuple(p.called_computation_ids))
        for field in _PER_COPY:
            p.ClearField(field)
        out[4].append(p.SerializeToString())
    return out


def _split_in_c(c: DynamicMessage) -> _Lists | None:
    """`_split` by the C extension built at install (None without it, or for bytes it leaves to Python)."""
    if _hloscan is None:
        return None
    found: _Lists | None = _hloscan.instructions(c.SerializeToString())
    return found


def _splits_in_c(data: bytes, wrapped: bool) -> list[_Lists] | None:
    """`_split` of every computation in a serialized module (of an HloProto's, `wrapped`), by the C
    extension, straight from the bytes; None without it, or for bytes it leaves to Python."""
    if _hloscan is None:
        return None
    found: list[_Lists] | None = _hloscan.computations(data, wrapped)
    return found


def _frame_tables(index: DynamicMessage) -> FrameTables:
    """The module's stack-frame index as 1-based tables, as HLO text prints them."""
    return {
        "FileNames": dict(enumerate(index.file_names, 1)),
        "FunctionNames": dict(enumerate(index.function_names, 1)),
        "FileLocations": {i: {"file_name_id": f.file_name_id, "line": f.line}
                          for i, f in enumerate(index.file_locations, 1)},
        "StackFrames": {i: {"file_location_id": f.file_location_id, "parent_frame_id": f.parent_frame_id}
                        for i, f in enumerate(index.stack_frames, 1)},
    }


def _module(proto: DynamicMessage, origin: str, splits: list[_Lists] | None = None) -> Module:
    """The model; `splits` the computations' instructions split from the bytes `proto` was parsed
    from (else from each computation's message)."""
    comp_names = {c.id: c.name for c in proto.computations}
    count = len(proto.computations)
    given: list[_Lists | None] = [*splits] if splits is not None and len(splits) == count else [None] * count
    reading = _Reading(comp_names, _frame_tables(proto.stack_frame_index), origin)
    computations: dict[str, Computation] = {}
    schedule: dict[str, tuple[str, ...]] = {}
    sequences = proto.schedule.sequences
    for c, split in zip(proto.computations, given):
        computations[c.name], names = reading.computation(c, split)
        if c.id in sequences:
            ids = sequences[c.id].instruction_ids
            if all(i in names for i in ids):
                schedule[c.name] = tuple([names[i] for i in ids])
    for cid in reading.fused:
        fused = computations.get(comp_names.get(cid, ""))
        if fused is not None and fused.id == cid:
            fused.is_fusion = True
    entry = proto.entry_computation_name or comp_names.get(proto.entry_computation_id, "")
    if entry not in computations:
        raise InputError(f"HLO module {proto.name!r} has no entry computation {entry!r}",
                         path=origin or None)
    module = Module(name=proto.name, computations=computations, entry=entry, id=proto.id,
                    source="proto", is_scheduled=bool(schedule), schedule=schedule,
                    aliased_outputs=_aliased_outputs(proto))
    check_module(module, origin)
    return module


def _aliased_outputs(proto: DynamicMessage) -> dict[int, int]:
    """Entry parameter number -> result tuple index, for whole parameters an output reuses."""
    out: dict[int, int] = {}
    for entry in proto.input_output_alias.entries:
        if len(entry.output_shape_index) == 1 and not entry.parameter_shape_index:
            out[int(entry.parameter_number)] = int(entry.output_shape_index[0])
    return out


def _parse(message_class: DynamicMessage, data: bytes) -> DynamicMessage | None:
    try:
        return message_class.FromString(data)
    except (DecodeError, ValueError, RuntimeError):
        return None


def read_hlo_proto_bytes(data: bytes, origin: str = "") -> Module:
    """Read a serialized `xla.HloProto` or bare `xla.HloModuleProto` (detected) into a `Module`.

    **Raises:** `InputError` ("not an HLO module") when the bytes are neither.
    """
    with collector_paused():
        return _read(data, origin)


def _read(data: bytes, origin: str) -> Module:
    wrapper = _parse(schema.HloProto, data)
    if wrapper is not None and wrapper.hlo_module.computations:
        return _module(wrapper.hlo_module, origin, _splits_in_c(data, wrapped=True))
    module = _parse(schema.HloModuleProto, data)
    if module is not None and module.computations and module.name:
        return _module(module, origin, _splits_in_c(data, wrapped=False))
    raise InputError("not an HLO module (neither an xla.HloProto nor an xla.HloModuleProto)",
                     path=origin or None,
                     hint="expected a *.hlo.pb written by --xla_dump_to or a serialized module")
