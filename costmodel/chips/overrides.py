"""`--set KEY=VALUE`: change any figure of the chosen chip for one run; the figure is then `user`.

Keys are the dotted paths of a hardware file (`peak_flops.bf16`, `interconnect.dcn_bytes_per_s`,
`caches.L2.bytes_per_s`, by cache name), the names `audit hardware show --json` lists under
`quantities` (`peak_flops_per_s.bf16`), and a few friendly names for the figures people most
often know about their own cluster (`FRIENDLY`). The keys are found by walking the `Hardware`
dataclass types, so a field added there can be set with no change here.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from ...base.errors import UsageError
from .hardware import Hardware, Quantity
from .hwfile import AT_LEAST_ONE, MAX_COUNT, WHOLE_FIGURES
from ..units import count, stated

FRIENDLY: dict[str, tuple[str, str]] = {
    "scale_out_bytes_per_s": ("interconnect.dcn_bytes_per_s", "per-device bandwidth between nodes or slices"),
    "dcn_bytes_per_s": ("interconnect.dcn_bytes_per_s", "the same"),
    "node_gpus": ("interconnect.domain_size", "GPUs per node, one NVLink/xGMI domain (also the node size "
                  "where the two were the same)"),
    "domain_size": ("interconnect.domain_size", "devices in one scale-up (NVLink/xGMI/ICI) domain"),
    "nics_per_node": ("interconnect.nics_per_node", "NICs per node (sets the per-device scale-out bandwidth)"),
    "nic_bytes_per_s": ("interconnect.nic_bytes_per_s", "one NIC's one-way bandwidth (likewise)"),
    "node_size": ("interconnect.node_size", "devices per node or host that share its NICs (likewise)"),
    "scale_up_bytes_per_s": ("interconnect.link_bytes_per_s", "NVLink/xGMI per device, or one ICI link, one-way"),
    "link_bytes_per_s": ("interconnect.link_bytes_per_s", "the same"),
    "host_link_bytes_per_s": ("interconnect.pcie_bytes_per_s", "host link (PCIe) one-way"),
    "collective_latency_s": ("interconnect.collective_latency_s", "fixed time of one collective"),
    "hop_latency_s": ("interconnect.hop_latency_s", "time per ICI hop"),
}
_QUANTITIES_PREFIX = {"peak_flops_per_s": "peak_flops"}  # the JSON `quantities` names
_FILE_NAMES = _QUANTITIES_PREFIX
_UNITS = (("flops", "FLOP/s"), ("bytes_per_s", "B/s"), ("_bytes", "B"), ("_hz", "Hz"), ("_s", "s"))
_NIC_KEYS = ("interconnect.nics_per_node", "interconnect.nic_bytes_per_s", "interconnect.node_size")


def settable(hw: Hardware) -> dict[str, Any]:
    """Every dotted key `apply` accepts for `hw` (friendly names aside) -> its leaf type (Quantity, int
    or float)."""
    known = dict(_paths(hw, type(hw), ""))
    for key in hw.quantities():  # any Quantity at any depth, also in field shapes `_paths` does not walk
        head, _, rest = key.partition(".")
        known.setdefault(f"{_FILE_NAMES.get(head, head)}.{rest}" if rest else _FILE_NAMES.get(head, head), Quantity)
    return known


def parse_pairs(items: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """`KEY=VALUE` texts as (key, value text); UsageError for one without `=`."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"--set {item!r} is not KEY=VALUE", hint="e.g. --set scale_out_bytes_per_s=12.5e9")
        out.append((key.strip(), value.strip()))
    return tuple(out)


def apply(hw: Hardware, pairs: Iterable[tuple[str, str]] | Mapping[str, object]) -> Hardware:
    """`hw` with each (key, value) set, each changed figure marked `user` and noted.

    Setting the NICs per node, their speed or the devices per node also sets the per-device
    scale-out bandwidth (NICs x speed / devices) unless that is set too.
    **Raises:** `UsageError` (one line, listing close keys) for an unknown key or a bad value.
    """
    items = list(pairs.items()) if isinstance(pairs, Mapping) else list(pairs)
    if not items:
        return hw
    known = settable(hw)
    before = hw
    resolved = [(_resolve(key, known), key, str(value)) for key, value in items]
    notes = []
    for path, key, text in resolved:
        same_node = hw.interconnect.node_size == hw.interconnect.domain_size
        hw, note = _set(hw, path, key, text, known[path])
        notes.append(note)
        if key == "node_gpus" and same_node:  # a node that is one NVLink domain stays one
            hw, note = _set(hw, "interconnect.node_size", key, text, int)
            notes.append(note)
    targets = {path for path, _, _ in resolved}
    if targets & set(_NIC_KEYS) and "interconnect.dcn_bytes_per_s" not in targets:
        hw, note = _derive_scale_out(hw)
        notes += [note] if note else []
        targets.add("interconnect.dcn_bytes_per_s") if note else None
    hw, followed = follow_ceilings(before, hw, targets)
    return dataclasses.replace(hw, notes=hw.notes + tuple(notes + followed))


def _followers(path: str, hw: Hardware) -> list[str]:
    """The achievable figures (dotted keys under `achievable.`) that derive from ceiling `path`."""
    head, _, rest = path.partition(".")
    if head == "peak_flops":
        out = [f"achievable.matmul_flops_per_s.{rest}"]
        if rest == "bf16" and hw.achievable is not None:  # fused attention is rated on 16-bit inputs
            out += [f"achievable.attention_flops_per_s.{k}" for k in hw.achievable.attention_flops_per_s]
        return out
    if path == "hbm_bytes_per_s":
        return ["achievable.memory_bytes_per_s"]
    if head == "caches" and path.endswith(".bytes_per_s"):
        return [f"achievable.cache_bytes_per_s.{rest.rsplit('.', 1)[0]}"]
    return {"interconnect.link_bytes_per_s": ["achievable.collective_bytes_per_s.scale_up"],
            "interconnect.dcn_bytes_per_s": ["achievable.collective_bytes_per_s.scale_out"],
            "interconnect.collective_latency_s": ["achievable.collective_latency_s"]}.get(path, [])


def follow_ceilings(before: Hardware, hw: Hardware, targets: set[str]) -> tuple[Hardware, list[str]]:
    """`hw` with each achievable figure moved by the factor its ceiling was changed by (what good
    kernels reach is a share of the ceiling, kept as the catalog states it), unless the user set it too;
    one note per figure moved, or per figure that cannot follow (its ceiling was stated nowhere before)."""
    notes: list[str] = []
    if hw.achievable is None:
        return hw, notes
    for path in sorted(targets):
        old, new = _get(before, path.split(".")), _get(hw, path.split("."))
        for follower in _followers(path, hw):
            parts = follower.split(".")
            reach = _get(hw, parts)
            if follower in targets or not isinstance(reach, Quantity) or not isinstance(new, Quantity):
                continue
            if not isinstance(old, Quantity) or old.value <= 0:
                notes.append(f"{follower} does not follow --set {path}: {before.name} stated no {path} to scale "
                              f"from ({stated(reach.value)} {reach.unit} [{reach.source}] kept)")
                continue
            factor = new.value / old.value
            moved = Quantity(reach.value * factor, reach.unit, "user",
                             f"follows --set {path}: {stated(reach.value)} {reach.unit} [{reach.source}] x {stated(factor)}, "
                             f"the same share of the ceiling", "estimate")
            hw = _put(hw, parts, moved)
            notes.append(f"{follower} = {stated(moved.value)} {moved.unit}, follows --set {path} "
                         f"(was {stated(reach.value)} {reach.unit} [{reach.source}], the same share of its ceiling)")
    return hw, notes


def _resolve(key: str, known: dict[str, Any]) -> str:
    path = FRIENDLY[key][0] if key in FRIENDLY else key
    head, _, rest = path.partition(".")
    path = f"{_QUANTITIES_PREFIX[head]}.{rest}" if head in _QUANTITIES_PREFIX and rest else path
    if path in known:
        return path
    if path.startswith("peak_flops.") and path.count(".") == 1:
        known[path] = Quantity  # a peak for a dtype the entry does not state yet
        return path
    choices = list(known) + list(FRIENDLY)
    close = difflib.get_close_matches(key, choices, n=4, cutoff=0.5)
    hint = f"close keys: {', '.join(close)}" if close else "see docs/hardware.md for the keys"
    raise UsageError(f"--set {key}: no such hardware figure", hint=hint)


def _paths(obj: Any, cls: type, prefix: str) -> Iterable[tuple[str, Any]]:
    """(dotted key, leaf type) of every settable figure: Quantities and whole numbers, at any depth."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if cls is Hardware and f.name in ("topology", "source"):
            continue
        tp, value = _strip_optional(hints[f.name]), getattr(obj, f.name) if obj is not None else None
        key = f"{prefix}{f.name}"
        if tp is Quantity or tp is int or tp is float:
            yield key, tp
        elif typing.get_origin(tp) is dict and _strip_optional(typing.get_args(tp)[1]) is Quantity:
            yield from ((f"{key}.{k}", Quantity) for k in (value or {}))
        elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
            yield from _paths(value, tp, f"{key}.")
        elif typing.get_origin(tp) is tuple and _named_items(tp):
            item_type = typing.get_args(tp)[0]
            for item in value or ():
                yield from _paths(item, item_type, f"{key}.{item.name}.")


def _named_items(tp: Any) -> bool:
    args = typing.get_args(tp)
    return (len(args) == 2 and args[1] is Ellipsis and dataclasses.is_dataclass(args[0])
            and "name" in {f.name for f in dataclasses.fields(args[0])})


def _strip_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return next(t for t in typing.get_args(tp) if t is not type(None))
    return tp


def _number(key: str, text: str, whole: bool, low: int = 1) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--set {key}={text}: not a number", hint=f"e.g. --set {key}=12.5e9") from None
    if not math.isfinite(value) or value < 0 or (whole and (value != int(value) or not low <= value <= MAX_COUNT)):
        wanted = f"a whole number from {low} to {count(MAX_COUNT)}" if whole else "a finite number >= 0"
        raise UsageError(f"--set {key}={text}: expected {wanted}")
    return value


def _set(hw: Hardware, path: str, key: str, text: str, leaf: Any) -> tuple[Hardware, str]:
    # The ranges a hardware file holds these to (hwfile): counts are whole, and a few at least 1.
    name = path.rsplit(".", 1)[-1]
    value = _number(key, text, whole=leaf is int or name in WHOLE_FIGURES,
                    low=1 if name in AT_LEAST_ONE or name in WHOLE_FIGURES else 0)
    parts = path.split(".")
    old = _get(hw, parts)
    if leaf is int:
        new: Any = int(value)
        was = f"was {old}"
    else:
        unit = old.unit if isinstance(old, Quantity) else _unit(path)
        was = f"was {stated(old.value)} {old.unit} [{old.source}]" if isinstance(old, Quantity) else "not stated before"
        new = Quantity(value, unit, "user", f"--set {key}={text} ({was})")
        if value == 0 and not new.may_be_zero:
            raise UsageError(f"--set {key}={text}: expected a number > 0 for a figure in {unit}")
    return _put(hw, parts, new), f"{path} = {text} from --set ({was})"


def _unit(path: str) -> str:
    last = path.split(".")[-1]
    if path.startswith("peak_flops."):
        return "FLOP/s"
    return next((unit for suffix, unit in _UNITS if last.endswith(suffix)), "")


def _get(obj: Any, parts: list[str]) -> Any:
    for part in parts:
        if obj is None:
            return None
        if isinstance(obj, dict):
            obj = obj.get(part)
        elif isinstance(obj, tuple):
            obj = obj[_index(obj, part)]
        else:
            obj = getattr(obj, part)
    return obj


def _put(obj: Any, parts: list[str], value: Any) -> Any:
    head, rest = parts[0], parts[1:]
    if isinstance(obj, dict):
        return {**obj, head: value if not rest else _put(obj[head], rest, value)}
    if isinstance(obj, tuple):
        at = _index(obj, head)
        return tuple((value if not rest else _put(item, rest, value)) if i == at else item for i, item in enumerate(obj))
    return dataclasses.replace(obj, **{head: value if not rest else _put(getattr(obj, head), rest, value)})


def _index(items: tuple[Any, ...], part: str) -> int:
    """A tuple item by its `name` (memory levels), else by position."""
    for i, item in enumerate(items):
        if getattr(item, "name", None) == part:
            return i
    return int(part)


def _derive_scale_out(hw: Hardware) -> tuple[Hardware, str]:
    net = hw.interconnect
    if not (net.nics_per_node and net.nic_bytes_per_s and net.node_size):
        return hw, ""
    per_device = net.nics_per_node * net.nic_bytes_per_s.value / net.node_size
    how = (f"{net.nics_per_node} NICs x {stated(net.nic_bytes_per_s.value)} B/s / {net.node_size} devices per node")
    q = Quantity(per_device, "B/s", "user", f"from --set: {how}")
    return (dataclasses.replace(hw, interconnect=dataclasses.replace(net, dcn_bytes_per_s=q)),
            f"interconnect.dcn_bytes_per_s = {stated(per_device)} B/s from --set: {how}")
