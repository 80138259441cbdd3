"""The lexical layer of HLO text: tokens, brackets, shapes and layouts, quoted strings."""

from __future__ import annotations

import re
from functools import lru_cache

from .model import Shape


# A quoted string or a comment is one token, so brackets and commas inside them don't count.
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|/\*.*?\*/|[()\[\]{},]')
_COMMENT = re.compile(r"/\*.*?\*/")
_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\](\{[^}]*\})?")
_TILES = re.compile(r"T((?:\([\d,*\s]*\))+)")
_MEMORY_SPACE = re.compile(r"S\((\d+)\)")


def strip_comments(text: str) -> str:
    return _COMMENT.sub("", text) if "/*" in text else text


_OPAQUE = re.compile(r'"(?:[^"\\]|\\.)*"|/\*.*?\*/')  # strings and comments: their brackets don't count


def bracket_depth(line: str) -> int:
    """Brackets opened minus brackets closed on a line, outside strings and comments."""
    if '"' in line or "/*" in line:
        line = _OPAQUE.sub("", line)
    return (line.count("(") + line.count("[") + line.count("{")
            - line.count(")") - line.count("]") - line.count("}"))


def find_close(text: str, start: int) -> int:
    """Index of the bracket closing the one at `start`, skipping strings and comments."""
    depth = 0
    for m in TOKEN.finditer(text, start):
        t = m.group()
        if len(t) != 1 or t == ",":
            continue
        depth += 1 if t in "([{" else -1
        if depth == 0:
            return m.start()
    raise ValueError(f"unbalanced bracket from column {start + 1}")


_NESTING = re.compile(r'["(\[{/]')  # what can hide a comma from the top level


def split_top(text: str) -> list[str]:
    """Split at commas that are not inside brackets, strings or comments."""
    if not _NESTING.search(text):  # plain operand lists: every comma is at the top
        return [p.strip() for p in text.split(",") if p.strip()]
    parts, depth, last = [], 0, 0
    for m in TOKEN.finditer(text):
        t = m.group()
        if len(t) != 1:
            continue
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif depth == 0:
            parts.append(text[last:m.start()])
            last = m.end()
    parts.append(text[last:])
    return [p.strip() for p in parts if p.strip()]


_STRING = r'"(?:[^"\\]|\\.)*"'
_BRACED = r'\{(?:[^{}"]|' + _STRING + r'|\{(?:[^{}"]|' + _STRING + r')*\})*\}'  # two levels of braces
_ATTRIBUTE = re.compile(r'\s*([\w.\-]+=(?:[^,{}"()\[\]/]++|' + _STRING + '|' + _BRACED + r')*+)(?:,|$)')


def split_attributes(text: str) -> list[str]:
    """`split_top` for an instruction's `key=value, ...` list: one regex match per attribute where
    every value is plain, quoted or braced at most two deep (what XLA prints), else `split_top`."""
    out, pos, end = [], 0, len(text)
    while pos < end:
        m = _ATTRIBUTE.match(text, pos)
        if m is None or m.end() == pos:
            return split_top(text)
        out.append(m.group(1).rstrip())
        pos = m.end()
    return out if text.rstrip()[-1:] != "," else split_top(text)


def make_layout(rank: int, minor_to_major: tuple[int, ...], tiles: tuple[tuple[int, ...], ...],
                memory_space: int, present: bool) -> tuple[int, ...] | None:
    """One rule for both readers: a scalar has a layout only if it is tiled or placed."""
    if not present or (rank == 0 and not tiles and not memory_space):
        return None
    return minor_to_major


@lru_cache(maxsize=4096)
def _array_shape(dtype: str, dims_text: str, layout_text: str) -> Shape:
    dims = tuple(-1 if d.strip() == "?" else int(d.replace("<=", ""))
                 for d in dims_text.split(",") if d.strip())
    m2m: tuple[int, ...] = ()
    tiles: tuple[tuple[int, ...], ...] = ()
    space = 0
    if layout_text:
        head, _, rest = layout_text[1:-1].partition(":")
        m2m = tuple(int(x) for x in head.split(",") if x.strip())
        tiled = _TILES.search(rest)
        if tiled:
            tiles = tuple(tuple(-1 if v.strip() == "*" else int(v) for v in t.split(",") if v.strip())
                          for t in re.findall(r"\(([^)]*)\)", tiled.group(1)))
        placed = _MEMORY_SPACE.search(rest)
        space = int(placed.group(1)) if placed else 0
    layout = make_layout(len(dims), m2m, tiles, space, bool(layout_text))
    return Shape(dtype=dtype, dims=dims, layout=layout, tiles=tiles, memory_space=space)


@lru_cache(maxsize=1024)
def _tuple_shape(text: str) -> Shape:
    inner = strip_comments(text[1:-1])
    return Shape(dtype="tuple", tuple_shapes=tuple(parse_shape(p, 0)[0] for p in split_top(inner)))


MAX_TUPLE_DEPTH = 32  # real programs nest tuples a few levels


def _depth(text: str, start: int, end: int) -> int:
    depth = deepest = 0
    for ch in text[start:end + 1]:
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


def parse_shape(text: str, pos: int = 0) -> tuple[Shape, int]:
    """Parse the shape starting at `pos`; return it and the position after it."""
    while pos < len(text) and text[pos] == " ":
        pos += 1
    if text.startswith("(", pos):
        close = find_close(text, pos)
        if _depth(text, pos, close) > MAX_TUPLE_DEPTH:  # parsing recurses once per level
            raise ValueError(f"a tuple shape nested more than {MAX_TUPLE_DEPTH} deep")
        return _tuple_shape(text[pos:close + 1]), close + 1
    m = _ARRAY.match(text, pos)
    if not m:
        raise ValueError(f"expected a shape at column {pos + 1}")
    return _array_shape(m.group(1), m.group(2), m.group(3) or ""), m.end()


_ESCAPE = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.S)
_SIMPLE_ESCAPES = {b"n": b"\n", b"t": b"\t", b"r": b"\r"}


def _escaped_byte(m: re.Match[bytes]) -> bytes:
    if m.group(1):
        return bytes([int(m.group(1), 8) & 0xFF])
    if m.group(2):
        return bytes([int(m.group(2), 16)])
    return _SIMPLE_ESCAPES.get(m.group(3), m.group(3))


def unquote(value: str) -> str:
    """A C-escaped quoted string (as XLA prints them) to its text; other values unchanged."""
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return value
    body = value[1:-1]
    if "\\" not in body:
        return body
    return _ESCAPE.sub(_escaped_byte, body.encode("utf-8")).decode("utf-8", errors="replace")


def int_list(value: str) -> tuple[int, ...]:
    return tuple(int(v) for v in value.strip().strip("{}").split(",") if v.strip())
