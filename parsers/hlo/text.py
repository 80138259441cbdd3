"""Read HLO text (as `--xla_dump_to` and `compiled.as_text()` print it) into the module model.

The text is line oriented: a `HloModule name, ...` header, optional stack-frame tables
(`FileNames`, `FunctionNames`, `FileLocations`, `StackFrames`), then computations, each a
header line ending in `{`, one instruction per line, and a closing `}`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TypedDict

from ...base.errors import InputError
from .model import ConvDims, Computation, DotDims, Instruction, Metadata, Module, Shape
from .checks import check_module
from .syntax import (bracket_depth, int_list, unquote, find_close, parse_shape, split_attributes, split_top,
                         strip_comments)
from .replica_groups import parse_replica_groups, parse_source_target_pairs

_HEADER = re.compile(r"^HloModule\b\s*([^\s,]*)")
_SCHEDULED = re.compile(r"\bis_scheduled=true\b")
_PARTITIONS = re.compile(r"\bnum_partitions=(\d{1,9})\b")
_ALIAS_ENTRY = re.compile(r"\{(\d+)\}:\s*\((\d+),\s*\{\}")
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*(?:\(.*)?\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([A-Za-z][\w\-.$]*)\(")
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_TABLE_ROW = re.compile(r"^(\d+)\s+(.*)$")
_FIELD = re.compile(r"(\w+)=(-?\d+)")


class FrameTables(TypedDict):
    """A module's stack-frame index, 1-based, named as HLO text names its tables.

    Location and frame rows keep every `key=int` field printed (`file_name_id`, `line`,
    `file_location_id`, `parent_frame_id`, ...).
    """

    FileNames: dict[int, str]
    FunctionNames: dict[int, str]
    FileLocations: dict[int, dict[str, int]]
    StackFrames: dict[int, dict[str, int]]


_NO_METADATA = Metadata()


def empty_frame_tables() -> FrameTables:
    return FrameTables(FileNames={}, FunctionNames={}, FileLocations={}, StackFrames={})


_META = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s}]+)')
_TRIP_COUNT = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
_SLICE_DIM = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+))?\s*\]")


def backend_config_attributes(config: str) -> list[tuple[str, str]]:
    """Attributes the cost model reads out of a backend_config (JSON on GPU/TPU/CPU)."""
    trip = _TRIP_COUNT.search(config)
    return [("known_trip_count", trip.group(1))] if trip else []


def _metadata(value: str, tables: FrameTables | None = None) -> tuple[Metadata, list[tuple[str, str]]]:
    """The metadata, its source read from the stack frame it names where `tables` hold it."""
    fields = {k: unquote(v) for k, v in _META.findall(value)}
    frame = fields.get("stack_frame_id")
    if frame and not frame.removeprefix("-").isdigit():
        raise ValueError(f"metadata stack_frame_id {frame[:30]!r} is not a frame number")
    source_file, source_line = fields.get("source_file", ""), int(fields.get("source_line", 0) or 0)
    if not source_file and frame and tables and tables["StackFrames"] and frame.isdigit():
        found, line = frame_source(int(frame), tables)
        if found:
            source_file, source_line = found, line
    meta = Metadata(op_type=fields.get("op_type", ""), op_name=fields.get("op_name", ""),
                    source_file=source_file, source_line=source_line)
    return meta, ([("stack_frame_id", frame)] if frame and frame != "0" else [])


def _window(value: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for key, text in re.findall(r"(\w+)=(\S+)", value.strip("{}")):
        if key != "pad":
            out[key] = [int(v) for v in text.split("x")]
    return out


def _conv(raw: dict[str, str]) -> ConvDims:
    lhs, _, out = raw.get("dim_labels", "").partition("->")
    lhs, _, rhs = lhs.partition("_")
    window = _window(raw.get("window", ""))
    size = window.get("size", [])
    ones = [1] * len(size)

    def spatial(labels: str) -> tuple[int, ...]:
        return tuple(labels.index(str(k)) for k in range(len(labels) - 2))

    return ConvDims(
        input_batch=lhs.find("b"), input_feature=lhs.find("f"), input_spatial=spatial(lhs),
        kernel_input_feature=rhs.find("i"), kernel_output_feature=rhs.find("o"),
        kernel_spatial=spatial(rhs),
        output_batch=out.find("b"), output_feature=out.find("f"), output_spatial=spatial(out),
        window_size=tuple(size), window_stride=tuple(window.get("stride", ones)),
        lhs_dilation=tuple(window.get("lhs_dilate", ones)),
        rhs_dilation=tuple(window.get("rhs_dilate", ones)),
        feature_group_count=int(raw.get("feature_group_count", 1)),
        batch_group_count=int(raw.get("batch_group_count", 1)))


# Called computations in XLA's operand order (a while's body comes before its condition).
CALLED_KEYS = ("calls", "to_apply", "body", "condition", "select", "scatter",
               "true_computation", "false_computation", "branch_computations",
               "called_computations")
_DOT_KEYS = ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims")
_FIELD_KEYS = frozenset(_DOT_KEYS + (
    "kind", "dim_labels", "feature_group_count", "batch_group_count", "replica_groups",
    "channel_id", "use_global_device_ids", "dimensions", "iota_dimension", "slice",
    "source_target_pairs", "custom_call_target", "backend_config", "sharding", "metadata"))


def _called(raw: dict[str, str]) -> tuple[str, ...]:
    names: list[str] = []
    for key in CALLED_KEYS:
        if key in raw:
            names.extend(n.strip() for n in raw[key].strip("{}").split(",") if n.strip())
    return tuple(names)


def _attribute_pairs(attrs: list[str]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for item in attrs:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected key=value, got {item[:40]!r}")
        if key == "device_ids" and pairs and pairs[-1][0] == "replica_groups":
            pairs[-1] = ("replica_groups", f"{pairs[-1][1]}, {item}")  # mesh form spans a comma
            continue
        if key in CALLED_KEYS:
            value = value.replace("%", "")
        pairs.append((key.strip(), value.strip()))
    return pairs


def build_instruction(name: str, opcode: str, shape: Shape, operands: tuple[str, ...],
                      attrs: list[str], extra: list[tuple[str, str]],
                      tables: FrameTables | None = None,
                      read: dict[str, tuple[Metadata, list[tuple[str, str]]]] | None = None) -> Instruction:
    """Turn printed attributes into model fields; keep the rest as raw text attributes. `tables`:
    the module's stack frames, when read before its computations (as XLA prints them); `read`:
    metadata already read with them, by its text (unrolled code repeats it op after op)."""
    pairs = _attribute_pairs(attrs)
    raw = dict(pairs)
    attributes = list(extra) + [(k, v) for k, v in pairs if k not in _FIELD_KEYS]
    text = raw.get("metadata")
    frame: list[tuple[str, str]]
    if text is None:
        meta, frame = _NO_METADATA, []
    else:
        meta, frame = read_metadata(text, tables, read)
    config = unquote(raw.get("backend_config", ""))
    attributes += frame + backend_config_attributes(config)
    dot = None
    if opcode == "dot" or any(k in raw for k in _DOT_KEYS):
        dot = DotDims(*(int_list(raw.get(k, "")) for k in _DOT_KEYS))
    groups = parse_replica_groups(raw["replica_groups"]) if "replica_groups" in raw else ()
    dims = raw.get("dimensions") or raw.get("iota_dimension", "")
    return Instruction(
        name=name, opcode=opcode, shape=shape, operands=operands, called=_called(raw),
        fusion_kind=raw.get("kind", ""), dot=dot,
        conv=_conv(raw) if opcode == "convolution" or "dim_labels" in raw else None,
        replica_groups=groups or None,
        channel_id=int(raw["channel_id"]) if "channel_id" in raw else None,
        use_global_device_ids=raw.get("use_global_device_ids") == "true",
        dimensions=int_list(dims),
        slice=tuple((int(a), int(b), int(c or 1)) for a, b, c in _SLICE_DIM.findall(raw.get("slice", ""))),
        source_target_pairs=parse_source_target_pairs(raw["source_target_pairs"])
        if "source_target_pairs" in raw else (),
        custom_call_target=unquote(raw.get("custom_call_target", "")),
        backend_config=config, sharding=raw.get("sharding", ""), metadata=meta,
        attributes=tuple(attributes))


def read_metadata(text: str, tables: FrameTables | None = None,
                  read: dict[str, tuple[Metadata, list[tuple[str, str]]]] | None = None
                  ) -> tuple[Metadata, list[tuple[str, str]]]:
    """A `metadata={...}` value (`text`, braces included): the metadata, and the attributes it adds
    (its stack frame); from `read`, the values already read by their text, where it holds it."""
    found = read.get(text) if read is not None else None
    if found is None:
        found = _metadata(text, tables)
        if read is not None:
            read[text] = found
    return found


def frame_source(frame_id: int, tables: FrameTables) -> tuple[str, int]:
    """(file, line) of a stack frame of the module's tables; ("", 0) where they do not say."""
    frame = tables["StackFrames"].get(frame_id)
    # A row without a location (or naming one that is not listed) gives no source, as an unknown id does.
    location = tables["FileLocations"].get(frame.get("file_location_id", 0)) if frame else None
    if not location:
        return "", 0
    return tables["FileNames"].get(location.get("file_name_id", 0), ""), location.get("line", 0)


def resolve_sources(computations: dict[str, Computation],
                    tables: FrameTables) -> dict[str, Computation]:
    """Fill metadata source file/line from the module's stack frames where only an id was given
    (and the reader could not already: tables printed after the computations)."""
    if not tables.get("StackFrames"):
        return computations
    out = {}
    for name, comp in computations.items():
        instructions = []
        changed = False
        for instr in comp.instructions:
            frame = instr.attr("stack_frame_id") if not instr.metadata.source_file else ""
            if frame:
                file, line = frame_source(int(frame), tables)
                if file:
                    instr = replace(instr, metadata=replace(instr.metadata, source_file=file,
                                                            source_line=line))
                    changed = True
            instructions.append(instr)
        out[name] = comp if not changed else Computation(name=name, instructions=instructions, id=comp.id,
                                                         root=comp.root, is_fusion=comp.is_fusion,
                                                         content=comp.content)
    return out


def _error(origin: str, line_no: int, message: str) -> InputError:
    return InputError(f"line {line_no}: {message}", path=origin or None)


def _parse_instruction(line: str) -> tuple[bool, str, Shape, str, str, list[str]]:
    """Split one instruction line into (is_root, name, shape, opcode, operand text, attributes)."""
    head = _INSTRUCTION.match(line)
    if not head:
        raise ValueError("expected '%name = shape opcode(operands)'")
    shape, pos = parse_shape(line, head.end())
    op = _OPCODE.match(line, pos)
    if not op:
        raise ValueError(f"expected an opcode after the shape at column {pos + 1}")
    close = find_close(line, op.end() - 1)
    operands = line[op.end():close]
    rest = line[close + 1:].lstrip()
    attrs = split_attributes(rest[1:]) if rest.startswith(",") else []
    return bool(head.group(1)), head.group(2), shape, op.group(1), operands, attrs


def _operand_names(opcode: str, text: str) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
    """Operand names, plus attributes for the operand-like literals of parameter/constant."""
    text = text.strip()
    if opcode == "parameter":
        return (), [("parameter_number", text)]
    if opcode == "constant":
        return (), [("literal", text)]
    names = []
    for item in split_top(strip_comments(text)):
        token = item.strip().rsplit(None, 1)[-1] if item.strip() else ""
        if token:
            names.append(token.lstrip("%"))
    return tuple(names), []


def _table_row(table: str, rest: str, tables: FrameTables, key: int) -> None:
    fields = {k: int(v) for k, v in _FIELD.findall(rest)}
    if table == "FileNames":
        tables["FileNames"][key] = unquote(rest.strip())
    elif table == "FunctionNames":
        tables["FunctionNames"][key] = unquote(rest.strip())
    elif table == "FileLocations":
        tables["FileLocations"][key] = fields
    else:
        tables["StackFrames"][key] = fields


def _logical_lines(lines: list[str]) -> list[tuple[int, str]]:
    """Non-empty lines, with an instruction whose brackets stay open joined to the lines closing them.

    Only instruction lines are checked: a JSON backend_config or frontend attribute may
    be printed over several lines.
    """
    out: list[tuple[int, str]] = []
    pending: tuple[int, str, int] | None = None  # first line number, text, open depth
    in_body = False
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if pending is not None:
            start, text, depth = pending[0], pending[1] + "\n" + line, pending[2] + bracket_depth(line)
            if depth <= 0:
                out.append((start, text))
                pending = None
            else:
                pending = (start, text, depth)
            continue
        stripped = line.strip()
        if not stripped:
            continue
        if in_body and _INSTRUCTION.match(line):
            depth = bracket_depth(line)
            if depth > 0:
                pending = (no, line, depth)
                continue
        elif in_body and stripped.startswith("}"):  # may carry `, execution_thread="..."`
            in_body = False
        elif _COMPUTATION.match(line):
            in_body = True
        out.append((no, line))
    if pending is not None:
        out.append((pending[0], pending[1]))
    return out


_MLIR_STARTS = ("module @", "module {", "module attributes", "func.func", "#loc")  # StableHLO pasted after HLO


class LineReader:
    """Reads a module's text line by line: its stack-frame tables, its computations' headers, and each
    instruction line (`body_line`) into `computations`."""

    def __init__(self, origin: str):
        self.origin = origin
        self.computations: dict[str, Computation] = {}
        self.entry = ""
        self.tables = empty_frame_tables()
        self.metadata: dict[str, tuple[Metadata, list[tuple[str, str]]]] = {}
        self.table = ""
        self.current: tuple[str, list[Instruction], str] | None = None  # name, instructions, root

    def line(self, no: int, line: str) -> None:
        stripped = line.strip()
        if self.current is not None:
            self.body_line(no, stripped)
        elif stripped in _TABLES:
            self.table = stripped
        elif self.table and (row := _TABLE_ROW.match(stripped)):
            _table_row(self.table, row.group(2), self.tables, int(row.group(1)))
            self.metadata.clear()  # read against the tables as they were
        elif match := _COMPUTATION.match(line):
            self.table = ""
            self.current = (match.group(2), [], "")
            if match.group(1):
                self.entry = match.group(2)
        elif stripped.startswith(_MLIR_STARTS) and self.computations:
            raise _error(self.origin, no, f"StableHLO (MLIR) starts here, after the HLO module that ended cleanly above "
                                          f"({len(self.computations)} computations); audit reads the HLO: keep only "
                                          f"lines 1-{no - 1}")
        else:
            raise _error(self.origin, no, f"unexpected text {stripped[:60]!r}")

    def body_line(self, no: int, stripped: str) -> None:
        if stripped.startswith("}"):
            self.close()
            return
        is_root, instr = self.instruction(no, stripped)
        self.add(instr, is_root)

    def instruction(self, no: int, stripped: str) -> tuple[bool, Instruction]:
        """Line `no`, an instruction: whether it is its computation's root, and the instruction."""
        try:
            is_root, iname, shape, opcode, operand_text, attrs = _parse_instruction(stripped)
            operands, extra = _operand_names(opcode, operand_text)
            return is_root, build_instruction(iname, opcode, shape, operands, attrs, extra, self.tables, self.metadata)
        except InputError as exc:
            raise _error(self.origin, no, exc.message) from None
        except (ValueError, IndexError) as exc:
            raise _error(self.origin, no, f"cannot read instruction: {exc}") from None

    def add(self, instr: Instruction, is_root: bool) -> None:
        assert self.current is not None
        self.current[1].append(instr)
        if is_root:
            self.current = (self.current[0], self.current[1], instr.name)

    def close(self, content: int | None = None) -> None:
        """The computation being read ends (its `}` line); `content` numbers it (see `Computation`)."""
        assert self.current is not None
        name, instructions, root = self.current
        self.computations[name] = Computation(name=name, instructions=instructions, root=root, content=content)
        self.current = None


def _mark_fusions(computations: dict[str, Computation]) -> None:
    for comp in list(computations.values()):
        for instr in comp.instructions:
            if instr.opcode == "fusion":
                for name in instr.called:
                    if name in computations:
                        computations[name].is_fusion = True


def parse_hlo_text(text: str, origin: str = "") -> Module:
    """Parse HLO text into a `Module` (source "text"), line by line.

    **Arguments:** `text`: the whole dump; `origin`: a path or label used in error messages.
    **Raises:** `InputError` with the line number when the text is not an HLO module.
    """
    lines = text.splitlines()
    first = header_line(lines, origin)
    reader = LineReader(origin)
    for no, line in _logical_lines(lines[first + 1:]):
        reader.line(no + first + 1, line)
    return finish_module(reader, lines[first], origin)


def header_line(lines: list[str], origin: str) -> int:
    """The index of the `HloModule` line. **Raises:** `InputError` when there is none."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or _HEADER.match(lines[first].strip()) is None:
        mlir = first is not None and lines[first].lstrip().startswith("module")
        raise InputError("not an HLO module (no 'HloModule' header line)", path=origin or None,
                         hint="this is StableHLO/MLIR; use compiled.as_text() or an --xla_dump_to "
                              "*.txt" if mlir else None)
    return first


def finish_module(reader: LineReader, header: str, origin: str) -> Module:
    """The module a reader has read every line of, under its `HloModule` line `header`, checked."""
    if reader.current is not None:
        raise InputError(f"computation {reader.current[0]!r} is not closed with '}}'",
                         path=origin or None)
    if not reader.computations:
        raise InputError("HLO module has no computations", path=origin or None)
    entry = reader.entry or list(reader.computations)[-1]
    _mark_fusions(reader.computations)
    computations = resolve_sources(reader.computations, reader.tables)
    name = _HEADER.match(header.strip())
    module = Module(name=name.group(1) if name else "", computations=computations, entry=entry, source="text",
                    is_scheduled=bool(_SCHEDULED.search(header)), aliased_outputs=_aliased_outputs(header),
                    num_partitions=int(partitions[1]) if (partitions := _PARTITIONS.search(header)) else 1)
    check_module(module, origin)
    return module


def _aliased_outputs(header: str) -> dict[int, int]:
    """`input_output_alias={ {0}: (0, {}, may-alias), ... }` of the header: parameter -> output index,
    for whole top-level parameters and outputs."""
    start = header.find("input_output_alias={")
    if start < 0:
        return {}
    return {int(param): int(output) for output, param in _ALIAS_ENTRY.findall(header[start:])}
