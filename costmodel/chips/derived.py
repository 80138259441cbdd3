"""Figures a hardware file states as a ratio of another figure, computed when the file is read.

A number may be written `{ ratio = R, of = "KEY", unit, kind, source }` instead of with a `value`:
its value is R times the figure KEY names (a dotted key of the same file: `peak_flops.tf32`,
`interconnect.dcn_bytes_per_s`, `caches.L2.bytes_per_s`, cache levels by name). R is a number, or
`"A / B"`, the ratio of two figures of the file (a measured efficiency carried over to another
peak). The file states the ratio and its source once; the value follows its base figure when that
changes, and the note says how it was computed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...base.errors import InputError
from ..units import percent, stated

Error = Callable[[str, str], InputError]
CheckUnit = Callable[[str, str], None]


def resolve(raw: dict[str, Any], error: Error, check_unit: CheckUnit) -> dict[str, Any]:
    """`raw` (a hardware file as tomllib read it) with every derived figure given its value; the
    tables are changed in place. `error(key, message)` makes the InputError for a bad one;
    `check_unit(key, unit)` raises it for a figure stated in another unit than its field's."""
    resolver = _Resolver(raw, error, check_unit)
    for key in resolver.derived:
        resolver.compute(key, ())
    return raw


def _derived_tables(node: Any, key: str) -> list[tuple[str, dict[str, Any]]]:
    """(dotted key, table) of every figure written with a `ratio` or an `of`; arrays of tables
    by their items' `name` (`caches.L2.bytes_per_s`), as references name them."""
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        if "ratio" in node or "of" in node:
            return [(key, node)]
        for name, value in node.items():
            out += _derived_tables(value, f"{key}.{name}" if key else str(name))
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                out += _derived_tables(item, f"{key}.{item['name']}")
    return out


def _lookup(raw: dict[str, Any], ref: str) -> dict[str, Any] | None:
    node: Any = raw
    for part in ref.split("."):
        if isinstance(node, list):
            node = next((item for item in node if isinstance(item, dict) and item.get("name") == part), None)
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return None
    return node if isinstance(node, dict) else None


class _Resolver:
    """Computes the derived figures of one file, each once, following references between them."""

    def __init__(self, raw: dict[str, Any], error: Error, check_unit: CheckUnit):
        self.raw, self.error, self.check_unit = raw, error, check_unit
        self.derived = dict(_derived_tables(raw, ""))
        self.done: set[str] = set()

    def figure(self, ref: str, user: str, chain: tuple[str, ...]) -> tuple[float, str]:
        """(value, unit) of the figure `ref` that `user` refers to, computed first if it is derived."""
        ref = ref.strip()
        table = _lookup(self.raw, ref)
        if table is None:
            raise self.error(user, f"refers to {ref!r}, which the file does not state")
        if ref in self.derived:
            self.compute(ref, chain)
        value, unit = table.get("value"), table.get("unit")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not isinstance(unit, str):
            raise self.error(user, f"refers to {ref!r}, which is not a number with a unit")
        self.check_unit(ref, unit)  # a base in the wrong unit is named as that, not as a ratio of mismatched units
        return float(value), unit

    def compute(self, key: str, chain: tuple[str, ...]) -> None:
        if key in self.done:
            return
        if key in chain:
            raise self.error(key, f"its ratio refers back to itself ({' -> '.join(chain + (key,))})")
        chain += (key,)
        table = self.derived[key]
        if "value" in table:
            raise self.error(key, "states both a value and a ratio; give one")
        ratio, of = table.get("ratio"), table.get("of")
        if not isinstance(of, str) or ratio is None:
            raise self.error(key, 'a derived figure needs both ratio and of (ratio = 0.9, of = "hbm_bytes_per_s")')
        base, unit = self.figure(of, key, chain)
        if unit != table.get("unit"):
            raise self.error(key, f"is in {table.get('unit')!r} but {of!r} is in {unit!r}")
        factor, how = self.ratio(ratio, key, chain)
        table["value"] = factor * base
        if isinstance(table.get("source", ""), str):  # any other type is refused where sources are read
            table["source"] = f"{table.get('source', '')}; computed: {percent(factor)}{how} of {of} ({stated(base)} {unit})"
            table["source"] = table["source"].lstrip("; ")
        del table["ratio"], table["of"]
        self.done.add(key)

    def ratio(self, ratio: Any, key: str, chain: tuple[str, ...]) -> tuple[float, str]:
        """(the ratio, how it was found): a number as written, or `A / B` of two figures of the file."""
        if isinstance(ratio, (int, float)) and not isinstance(ratio, bool):
            if not ratio >= 0:
                raise self.error(key, f"ratio must be a number >= 0, got {ratio!r}")
            return float(ratio), ""
        if isinstance(ratio, str) and ratio.count("/") == 1:
            top, bottom = ratio.split("/")
            (a, a_unit), (b, b_unit) = (self.figure(ref, key, chain) for ref in (top, bottom))
            if a_unit != b_unit or b <= 0:
                raise self.error(key, f"ratio {ratio!r} divides figures of different units or by zero")
            return a / b, f" ({top.strip()} / {bottom.strip()})"
        raise self.error(key, f'ratio must be a number or "A / B" of two figures of the file, got {ratio!r}')
