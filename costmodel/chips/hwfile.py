"""Hardware files: the one TOML format of catalog entries and of users' own chips, read and written here.

A file describes one `Hardware` value, field for field: its tables and keys are the dataclass
fields, nested dataclasses are tables (`[interconnect]`, `[detection]`), tuples of them arrays of
tables (`[[caches]]`). Every number is a table `{ value, unit, kind, source }`: `kind` is
`datasheet`, `measured` or `estimate`, `source` says where the figure comes from; a figure that is
a ratio of another is written `{ ratio, of, ... }` and computed on reading (`derived`). Reading and
writing walk the dataclass types, so a field added to `Hardware` (or to a dataclass it holds)
is read and written with no change here. docs/hardware.md has an example.

`topology` and `source` are not in a file: the topology is named with `--hardware FILE:TOPOLOGY`,
and the provenance is where the file lives (`catalog` for the package's own, `user` otherwise).
Errors name the file, the key and its line, and are `InputError`s (exit 2).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...base.errors import InputError
from ..units import count
from . import derived
from .hardware import ATTENTION_KEYS, Achievable, Hardware, Quantity

FORMAT = 1
KINDS = ("datasheet", "measured", "estimate")
# Named on the command line, set by where the file lives, or by what identified the chip in a profile.
_NOT_IN_FILES = frozenset({"topology", "source", "identified_by"})
_QUANTITY_KEYS = ("value", "unit", "kind", "source")
H = typing.TypeVar("H", bound=Hardware)


class _Context:
    """What an error message needs: the file, and where each key sits in its text."""

    def __init__(self, origin: str, text: str):
        self.origin = origin
        self.lines = key_lines(text)

    def error(self, key: str, message: str, hint: str | None = None) -> InputError:
        line = self.line_of(key)
        where = f"key {key!r}" + (f" (line {line})" if line else "") if key else "file"
        return InputError(f"{where}: {message}", path=self.origin, hint=hint)

    def line_of(self, key: str) -> int | None:
        while key:
            if key in self.lines:
                return self.lines[key]
            key = re.sub(r"(\.[^.\[]*|\[\d+\])$", "", key) if re.search(r"[.\[]", key) else ""
        return None


def loads(text: str, origin: str, provenance: str = "user") -> Hardware:
    """The Hardware a file's text describes; every number's source becomes `provenance` (see `loads_as`)."""
    return loads_as(Hardware, text, origin, provenance)


def loads_as(cls: type[H], text: str, origin: str, provenance: str = "user") -> H:
    """The `cls` (Hardware or a subclass with more fields) a file's text describes; every number's
    source becomes `provenance`.

    **Raises:** `InputError` naming `origin`, the key and its line for anything the format
    does not allow: bad TOML, a missing or unknown key, a value of the wrong type or kind.
    """
    ctx = _Context(origin, text)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not a valid TOML file: {exc}", path=origin) from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise InputError("not a hardware file: arrays or tables nested deeper than TOML can be read",
                         path=origin) from None
    version = raw.pop("format", FORMAT)
    if version != FORMAT:
        raise ctx.error("format", f"format {version!r} is not one this version reads", hint=f"format = {FORMAT}")
    raw = derived.resolve(raw, ctx.error, lambda key, unit: _check_unit(key, unit, ctx))
    hw = _build(cls, raw, "", ctx, provenance)
    assert isinstance(hw, cls)
    return dataclasses.replace(hw, source=provenance)


def load(path: str | Path, provenance: str = "user") -> Hardware:
    """The Hardware a file describes (see `loads`); an unreadable file is an InputError too."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read hardware file: {exc.__class__.__name__}: {exc}", path=str(path)) from None
    return loads(text, str(path), provenance)


def dumps(hw: Hardware, header: str = "") -> str:
    """`hw` as a hardware file that `loads` reads back to the same value (less topology and source)."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    lines.append(f"format = {FORMAT}")
    _emit(hw, type(hw), "", lines, skip=_NOT_IN_FILES)
    return "\n".join(lines) + "\n"


# --- reading ----------------------------------------------------------------------------------


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fields(cls: type, skip: frozenset[str] = frozenset()) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.name not in skip]


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _describe(value: object) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)
    return f"{kind} ({value!r})" if not isinstance(value, (list, dict)) else kind


def _build(tp: Any, raw: Any, key: str, ctx: _Context, provenance: str) -> Any:
    """`raw` (what tomllib read at `key`) as a value of type `tp`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [t for t in typing.get_args(tp) if t is not type(None)]
        return _build(inner[0], raw, key, ctx, provenance)
    if tp is Quantity:
        return _quantity(raw, key, ctx, provenance)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass(tp, raw, key, ctx, provenance)
    if origin in (dict, Mapping):
        value_type = typing.get_args(tp)[1]
        table = _expect(raw, dict, key, ctx)
        return {str(k): _build(value_type, v, _join(key, str(k)), ctx, provenance) for k, v in table.items()}
    if origin is tuple:
        args = typing.get_args(tp)
        items = _expect(raw, list, key, ctx)
        if len(args) == 2 and args[1] is Ellipsis:
            if key.rsplit(".", 1)[-1] == "caches" and len(items) > MAX_CACHE_LEVELS:
                raise ctx.error(key, f"{len(items)} cache levels; a chip has a few (at most {MAX_CACHE_LEVELS} read)")
            return tuple(_build(args[0], item, f"{key}[{i}]", ctx, provenance)
                         for i, item in enumerate(items))
        if len(items) != len(args):
            raise ctx.error(key, f"expected {len(args)} items, got {len(items)}")
        return tuple(_build(t, item, f"{key}[{i}]", ctx, provenance) for i, (t, item) in enumerate(zip(args, items)))
    if tp is float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise ctx.error(key, f"expected a number, got {_describe(raw)}")
        return float(raw)
    if tp is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ctx.error(key, f"expected an integer, got {_describe(raw)}")
        low = 1 if key.rsplit(".", 1)[-1] in AT_LEAST_ONE else 0
        if not low <= raw <= MAX_COUNT:
            raise ctx.error(key, f"expected an integer from {low} to {count(MAX_COUNT)}, got {raw}")
        return raw
    if tp is bool:
        return _expect(raw, bool, key, ctx)
    if tp is str:
        return _expect(raw, str, key, ctx)
    raise TypeError(f"hardware files cannot hold a {tp!r} (field {key})")


def _expect(raw: Any, kind: type, key: str, ctx: _Context) -> Any:
    if not isinstance(raw, kind) or (kind is not bool and isinstance(raw, bool)):
        wanted = {dict: "a table", list: "an array", str: "a string", bool: "true or false"}[kind]
        raise ctx.error(key, f"expected {wanted}, got {_describe(raw)}")
    return raw


def _unknown(table: dict[str, Any], allowed: list[str], key: str, ctx: _Context) -> None:
    for name in table:
        if name not in allowed:
            close = difflib.get_close_matches(name, allowed, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}?" if close else f"known keys: {', '.join(allowed)}"
            raise ctx.error(_join(key, name), "unknown key", hint=hint)


def _dataclass(cls: type, raw: Any, key: str, ctx: _Context, provenance: str) -> Any:
    table = _expect(raw, dict, key, ctx)
    skip = _NOT_IN_FILES if issubclass(cls, Hardware) else frozenset()
    fields = _fields(cls, skip)
    _unknown(table, [f.name for f in fields], key, ctx)
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in fields:
        if f.name in table:
            values[f.name] = _build(hints[f.name], table[f.name], _join(key, f.name), ctx, provenance)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ctx.error(key, f"missing key {_join(key, f.name)!r}")
    if cls is Achievable:
        for name, allowed in ATTENTION_KEYS.items():
            _unknown(table.get(name, {}), list(allowed), _join(key, name), ctx)
    return cls(**values)


def _quantity(raw: Any, key: str, ctx: _Context, provenance: str) -> Quantity:
    table = _expect(raw, dict, key, ctx)
    _unknown(table, list(_QUANTITY_KEYS), key, ctx)
    for required in ("value", "unit"):
        if required not in table:
            raise ctx.error(key, f"a number needs {required!r}",
                            hint='write { value = 1.0, unit = "B/s", kind = "datasheet", source = "..." }')
    value = _build(float, table["value"], _join(key, "value"), ctx, provenance)
    if not math.isfinite(value) or value < 0:
        raise ctx.error(_join(key, "value"), f"expected a finite number >= 0, got {value!r}")
    if key.rsplit(".", 1)[-1] in WHOLE_FIGURES and (value != int(value) or not 1 <= value <= MAX_COUNT):
        raise ctx.error(_join(key, "value"), f"expected a whole number from 1 to {count(MAX_COUNT)} (it counts "
                                             f"{_COUNTS[key.rsplit('.', 1)[-1]]}), got {value!r}")
    kind = _expect(table.get("kind", ""), str, _join(key, "kind"), ctx)
    if kind and kind not in KINDS:
        raise ctx.error(_join(key, "kind"), f"kind {kind!r} is not one of {', '.join(KINDS)}")
    unit = _expect(table["unit"], str, _join(key, "unit"), ctx)
    _check_unit(key, unit, ctx)
    note = _expect(table.get("source", ""), str, _join(key, "source"), ctx)
    quantity = Quantity(value, unit, provenance, note, kind)
    if value == 0 and not quantity.may_be_zero:
        raise ctx.error(_join(key, "value"), f"expected a number > 0 for a figure in {unit}, got 0")
    return quantity


_COUNTS = {"compute_units": "units", "gemm_tile_rows": "rows", "gemm_tile_columns": "columns",
           "attention_half_rate_keys": "keys"}
# Figures that count whole things (SMs, tile rows): 0.5 compute units would price a fraction of a wave.
WHOLE_FIGURES = ("compute_units", "gemm_tile_rows", "gemm_tile_columns")
# Integer fields: counts of links, axes, devices, NICs; none of a real machine is near 2^20.
MAX_COUNT = 1 << 20
AT_LEAST_ONE = ("devices_per_chip", "domain_size")
MAX_CACHE_LEVELS = 8  # real chips have one to three; the residency walk takes at most 62


def _check_unit(key: str, unit: str, ctx: _Context) -> None:
    expected = expected_unit(key)
    if expected and unit != expected:
        raise ctx.error(_join(key, "unit"), f"unit {unit!r}, but this figure is in {expected}",
                        hint=f"write the value in {expected}")


def expected_unit(key: str) -> str | None:
    """The unit a figure at dotted `key` is priced in, by the name of the field that holds it
    (`peak_flops.bf16`: FLOP/s, `caches[0].capacity_bytes`: B); None where no name says."""
    for name in reversed([p for p in re.split(r"[.\[\]]+", key) if p]):
        if "flops" in name:
            return "FLOP/s"
        for suffix, unit in (("updates_per_s", "updates/s"), ("bytes_per_s", "B/s"), ("_bytes", "B"), ("_hz", "Hz"), ("_s", "s")):
            if name.endswith(suffix):
                return unit
        if name in _COUNTS:
            return _COUNTS[name]
    return None


# --- writing ----------------------------------------------------------------------------------


def _emit(obj: Any, tp: Any, prefix: str, lines: list[str], skip: frozenset[str] = frozenset()) -> None:
    """Append the table of `obj` (a dataclass or a dict, of type `tp`): its own keys first (TOML puts
    them before any sub-table), then its sub-tables and arrays of tables."""
    if _is_mapping(tp):
        value_type = _strip_optional(typing.get_args(tp)[1])
        entries = [(str(k), v, value_type) for k, v in obj.items()]
    else:
        hints = _hints(tp)
        entries = [(f.name, getattr(obj, f.name), _strip_optional(hints[f.name])) for f in _fields(tp, skip)]
    later = []
    for name, value, value_tp in entries:
        if value is None:
            continue
        if _is_table(value_tp):
            later.append((name, value, value_tp))
        else:
            lines.append(f"{_key(name)} = {_value(value)}")
    for name, value, value_tp in later:
        path = _join(prefix, _key(name))
        if typing.get_origin(value_tp) is tuple:  # a tuple of dataclasses: an array of tables
            for item in value:
                lines += ["", f"[[{path}]]"]
                _emit(item, typing.get_args(value_tp)[0], path, lines)
            continue
        lines += ["", f"[{path}]"]
        _emit(value, value_tp, path, lines)


def _is_mapping(tp: Any) -> bool:
    return typing.get_origin(tp) in (dict, Mapping)


def _strip_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [t for t in typing.get_args(tp) if t is not type(None)]
        return inner[0]
    return tp


def _is_table(tp: Any) -> bool:
    """Whether a field is written as its own [table] rather than a `key = value` line."""
    if tp is Quantity:
        return False
    if dataclasses.is_dataclass(tp) or _is_mapping(tp):
        return True
    args = typing.get_args(tp)
    return typing.get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis and (
        dataclasses.is_dataclass(args[0]) and args[0] is not Quantity)


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _string(name)


def _string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped) + '"'


def _value(value: Any) -> str:
    if isinstance(value, Quantity):
        parts = [f"value = {_value(value.value)}", f"unit = {_string(value.unit)}"]
        parts += [f"kind = {_string(value.kind)}"] if value.kind else []
        parts += [f"source = {_string(value.note)}"] if value.note else []
        return "{ " + ", ".join(parts) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"hardware files cannot hold {value!r}")


def _float(value: float) -> str:
    """The shortest text that reads back as `value`, in powers of ten where that is easier to read."""
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value == 0 or 1e-3 <= abs(value) < 1e6:
        return repr(value)
    for digits in range(17):
        text = f"{value:.{digits}e}"
        if float(text) == value:
            mantissa, exponent = text.split("e")
            return f"{mantissa}e{int(exponent)}"
    return repr(value)


# --- where keys are -----------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=""")


def _parts(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(r"""\s*(?:"[^"]*"|'[^']*'|[^.]+)""", dotted)]


def key_lines(text: str) -> dict[str, int]:
    """Dotted key (arrays of tables indexed, `caches[0].name`) -> the 1-based line that sets it.

    tomllib reports no positions for valid TOML, so an error about a value finds its line here.
    Multi-line strings and arrays are not followed: a key inside one maps to the line it starts on.
    """
    out: dict[str, int] = {}
    arrays: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            names = _parts(header.group(2))
            path = _indexed(names, arrays)
            if header.group(1) == "[[":
                base = ".".join(names)
                arrays[base] = arrays.get(base, -1) + 1
                path = _indexed(names, arrays)
            table = path
            out.setdefault(table, number)
            continue
        assign = _ASSIGN.match(line)
        if assign:
            key = table
            for part in _parts(assign.group(1)):
                key = _join(key, part)
                out.setdefault(key, number)
    return out


def _indexed(names: list[str], arrays: dict[str, int]) -> str:
    """`caches.x` -> `caches[1].x` while the second `[[caches]]` is open."""
    out = ""
    for i, name in enumerate(names):
        out = _join(out, name)
        base = ".".join(names[: i + 1])
        if base in arrays:
            out += f"[{arrays[base]}]"
    return out
