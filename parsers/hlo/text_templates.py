"""HLO text read by template: each distinct instruction line, its names taken out, is parsed once.

A big program repeats a few distinct instructions (an unrolled loop: 260,000 lines, 360 distinct)
or computations (renamed copies of one block). Taken out of a line, the `%names` (the
instruction's, its operands', the computations it calls) and the metadata leave a template that
its copies share: the template is parsed once by the line reader's own code, and each copy is a
stamp of it with its own names and its metadata, read once per distinct text. Each computation's
content is numbered as the proto reader numbers it, so that renamed copies of one computation are
priced once. A line whose names the template cannot place (a name inside a string, an operand
printed without `%`) is read by the line reader; text whose lines are not one instruction each (a
JSON attribute over several lines), or whose first instruction names nothing with `%`, is read by
the line reader whole, which also says what is wrong with text that is not HLO.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import fields, replace
from typing import Any

from ...base.gc_pause import collector_paused
from .model import MAX_CONTENT_INSTRUCTIONS, STAMPED, Instruction, Metadata, Module
from .syntax import bracket_depth
from .text import (LineReader, backend_config_attributes, finish_module, header_line, parse_hlo_text,
                       read_metadata)
from ...base.stamping import stamper

# A name as XLA prints it after `%`: an instruction, an operand (`%tuple#1` for a tuple's element),
# a called computation.
_NAME = re.compile(r"%([A-Za-z_][\w.\-#]*)")
_STAMP = stamper(Instruction, STAMPED)
_METADATA_AT = ", metadata={"
_SCHEDULING_NAME = re.compile(r'scheduling_name="(?:[^"\\]|\\.)*"\s*')
_METADATA_VALUE = re.compile(r'\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}')  # braces, quoted strings skipped


def read_hlo_text(text: str, origin: str = "") -> Module:
    """Parse HLO text into a `Module` (source "text"), each distinct instruction once where the
    text allows it, else line by line (`parse_hlo_text`, the same module).

    **Raises:** `InputError` with the line number when the text is not an HLO module.
    """
    lines = text.splitlines()
    first = header_line(lines, origin)
    with collector_paused():
        reader = _TemplateReader(origin)
        if reader.read(lines, first + 1):
            return finish_module(reader, lines[first], origin)
    return parse_hlo_text(text, origin)


class _Template:
    """One distinct instruction line, parsed: `one` with placeholder names, and where its copies'
    names go (`operands` and `called` counted, `attributes` that hold names, by index)."""

    __slots__ = ("one", "is_root", "operands", "called", "named_attributes", "number", "frame_at")

    def __init__(self, one: Instruction, is_root: bool, operands: int, called: int,
                 named_attributes: tuple[tuple[int, int | list[str]], ...], number: int) -> None:
        self.one, self.is_root, self.operands, self.called = one, is_root, operands, called
        self.named_attributes, self.number = named_attributes, number
        # where a copy's stack frame goes among its attributes: before those of its backend_config
        self.frame_at = len(one.attributes) - len(backend_config_attributes(one.backend_config))

    def copy(self, names: list[str], metadata: tuple[Metadata, list[tuple[str, str]]] | None) -> Instruction:
        """The copy with these names (its own, its operands', its callees') and metadata (as read:
        the metadata and its stack-frame attribute; None for a line without)."""
        one, n = self.one, self.operands
        operands = tuple(names[1:1 + n])
        called = tuple(names[1 + n:1 + n + self.called])
        attributes = one.attributes
        if self.named_attributes:
            changed = list(attributes)
            for index, pieces in self.named_attributes:
                # most often the value is one name (`calls=%fused_computation.12`)
                value = names[pieces] if isinstance(pieces, int) else _fill(pieces, names)
                changed[index] = (changed[index][0], value)
            attributes = tuple(changed)
        meta = one.metadata
        if metadata is not None:
            meta, frame = metadata
            if frame:
                attributes = (*attributes[:self.frame_at], *frame, *attributes[self.frame_at:])
        if _STAMP is not None:
            return _STAMP(one, names[0], operands, called, one.id, meta, attributes)
        return replace(one, name=names[0], operands=operands, called=called, metadata=meta, attributes=attributes)


def _own_metadata_at(line: str) -> int | None:
    """Where the line's own `, metadata={` starts (-1: it has none); None where that is not plain: one
    inside a string or a bracket (a `custom_call_target="a, metadata={..."`), two of them, a comment
    or an escape before it. The line reader reads such a line, so a template never takes a string's
    text for the op's metadata."""
    at = line.find(_METADATA_AT)
    if at < 0:
        return -1
    head = line[:at]
    if line.find(_METADATA_AT, at + 1) >= 0 or "/*" in head or "\\" in head or head.count('"') % 2:
        return None
    return at if bracket_depth(head) == 0 else None


def _without_metadata(line: str) -> tuple[str, str | None] | None:
    """The line without its `metadata={...}`, and that value (braces included, its `scheduling_name`
    left out; None without one): newer XLA names each instruction in its metadata, so copies share
    no line, and no metadata, until the name is taken out. None: a line the line reader reads (its
    metadata is not plain, or it holds the bytes that stand in for names)."""
    if "\x01" in line or "\x02" in line:  # the stand-ins of names: its own would be taken for them
        return None
    at = _own_metadata_at(line)
    if at is None:
        return None
    if at < 0:
        return line, None
    value = _METADATA_VALUE.match(line, at + len(_METADATA_AT) - 1)
    if value is None:
        return line, None
    text = value.group()
    if "scheduling_name=" in text:  # unique to each instruction, and not in the model: dropped, so copies share it
        text = _SCHEDULING_NAME.sub("", text)
    return line[:at] + line[value.end():], text


def _placeholder(k: int) -> str:
    return f"\x01{k}\x02"


def _pieces(value: str) -> int | list[str]:
    """A value holding placeholders: the name's number where it is one placeholder alone, else the
    value split at them (see `_fill`)."""
    pieces = value.split("\x01")
    if len(pieces) == 2 and not pieces[0] and pieces[1].endswith("\x02") and pieces[1][:-1].isdigit():
        return int(pieces[1][:-1])
    return pieces


def _fill(pieces: list[str], names: list[str]) -> str:
    """A value split at its placeholders ("text", "k\\x02text", ...) with name k put back at each."""
    out = [pieces[0]]
    for piece in pieces[1:]:
        k, _, rest = piece.partition("\x02")
        out.append(names[int(k)])
        out.append(rest)
    return "".join(out)


def _texts(one: Instruction) -> Iterator[str]:
    """The text an instruction holds outside its name, operands, callees and attribute values."""
    for f in fields(one):
        value = getattr(one, f.name)
        if isinstance(value, str) and f.name != "name":
            yield value
    yield from (value for f in fields(one.metadata) if isinstance(value := getattr(one.metadata, f.name), str))
    yield from (key for key, _ in one.attributes)


class _TemplateReader(LineReader):
    def __init__(self, origin: str) -> None:
        super().__init__(origin)
        self.templates: dict[str, _Template | None] = {}  # None: a template that cannot place its names
        self.numbers = itertools.count()
        self.contents: dict[tuple[Any, ...], int] = {}
        self.content_of: dict[str, int] = {}  # computation name -> content number
        # the open computation's instructions: template number, metadata, operands, callees
        self.keys: list[tuple[Any, ...]] = []

    def read(self, lines: list[str], start: int) -> bool:
        """Read `lines[start:]`; False, having read them only in part, where the text is not one
        instruction per line or names nothing with `%`."""
        name = _NAME.split
        for no, line in enumerate(lines[start:], start + 1):
            if self.current is None:
                if line.strip():
                    self.line(no, line)
                    if self.table:  # a table row: templates read metadata against the tables as they were
                        self.templates.clear()
                continue
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("}"):
                self._close()
                continue
            split = _without_metadata(stripped)
            if split is None:
                if bracket_depth(stripped) != 0:
                    return False  # an instruction over several lines
                is_root, instr = self.instruction(no, stripped)
                self.add(instr, is_root)
                self.keys.append((next(self.numbers), None, instr.operands, instr.called))
                continue
            core, metadata_text = split
            parts = name(core)
            key = "\x00".join(parts[0::2])
            if key in self.templates:
                template = self.templates[key]
            else:
                if not parts[1::2] and not self.computations and not self.current[1]:
                    return False  # names printed without `%`
                if bracket_depth(stripped) != 0:
                    return False  # an instruction over several lines
                template = self.templates[key] = self._template(parts)
            metadata = None
            if template is not None and metadata_text is not None:
                try:
                    metadata = read_metadata(metadata_text, self.tables, self.metadata)
                except ValueError:  # the line reader says what is wrong with it
                    template = None
            if template is None:
                is_root, instr = self.instruction(no, stripped)
                number = next(self.numbers)
            else:
                instr, is_root, number = template.copy(parts[1::2], metadata), template.is_root, template.number
            self.add(instr, is_root)
            # the metadata as the model holds it (no scheduling name) and the stack frame it names
            self.keys.append((number, None if metadata is None else (metadata[0], *metadata[1]), instr.operands,
                              instr.called))
        return True

    def _template(self, parts: list[str]) -> _Template | None:
        names = len(parts) // 2
        text = "".join(p if i % 2 == 0 else "%" + _placeholder(i // 2) for i, p in enumerate(parts))
        try:
            is_root, one = self.instruction(0, text)
        except Exception:  # whatever the template breaks, the line reader reads each such line and says why
            return None
        n_ops = len(one.operands)
        expected = tuple(_placeholder(k) for k in range(names))
        if (one.name, *one.operands, *one.called) != expected[:1 + n_ops + len(one.called)]:
            return None
        named = tuple((i, _pieces(value)) for i, (_, value) in enumerate(one.attributes) if "\x01" in value)
        if any("\x01" in text for text in _texts(one)):
            return None  # a name elsewhere (inside a string): the line reader reads each such line
        return _Template(one, is_root, n_ops, len(one.called), named, next(self.numbers))

    def _close(self) -> None:
        """Close the open computation, numbering its content (as `proto` does) when small."""
        assert self.current is not None
        name, instructions, root = self.current
        content = None
        if len(instructions) <= MAX_CONTENT_INSTRUCTIONS:
            position = {instr.name: n for n, instr in enumerate(instructions)}
            content_of = self.content_of
            shape = tuple((number, metadata, tuple([position.get(o, -1) for o in operands]),
                           tuple([content_of.get(c, c) for c in called]))
                          for number, metadata, operands, called in self.keys)
            content = self.contents.setdefault((shape, position.get(root or instructions[-1].name, -1)
                                                if instructions else -1), len(self.contents))
            content_of[name] = content
        self.keys = []
        self.close(content)
