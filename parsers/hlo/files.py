"""Load an HLO module from a file: binary proto or text, chosen by content and extension."""

from __future__ import annotations

import re
from pathlib import Path

from ...base.errors import InputError
from .model import Module
from .proto import read_hlo_proto_bytes
from .text_templates import read_hlo_text
from ..wire.input_files import MAX_HLO_BYTES, read_input

_BINARY_SUFFIXES = (".hlo.pb", ".pb")
_TEXT_SUFFIXES = (".txt", ".hlo")
_TEXT_MAGIC = b"HloModule"
_SNIFF_BYTES = 4096
_MAX_SNIFF_PARSE_BYTES = 256 << 20  # a module bigger than this is routed by its name only


def _head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(_SNIFF_BYTES)


def _is_text_module(head: bytes) -> bool:
    return head.lstrip().startswith(_TEXT_MAGIC)


def read_hlo_if_module(path: str | Path) -> Module | None:
    """The HLO module in `path`, or None if it is not one (so the caller can try other formats).

    Text is recognised from its first 4 KiB and `*.hlo.pb` by name (both then read, errors
    raised); another `*.pb` (not `*.xplane.pb`) is an HLO module only if it parses as one,
    and is read once while finding out.

    **Raises:** `InputError` for an unreadable file, or one that claims to be HLO and is broken.
    """
    p = Path(path)
    if not p.is_file():
        return None
    name = p.name.lower()
    try:
        head = _head(p)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=p) from None
    if _is_text_module(head) or name.endswith(".hlo.pb"):
        return load_hlo_file(p)
    if not name.endswith(".pb") or name.endswith(".xplane.pb") or p.stat().st_size > _MAX_SNIFF_PARSE_BYTES:
        return None
    try:
        return read_hlo_proto_bytes(read_input(p, _MAX_SNIFF_PARSE_BYTES, "an HLO dump"), origin=str(p))
    except InputError:
        return None


def _decoded(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"HLO text is not UTF-8 (byte {exc.start})", path=path) from None


def load_hlo_file(path: str | Path) -> Module:
    """Read an HLO module from `path` (`*.hlo.pb`/`*.pb` binary, `*.txt`/`*.hlo` text).

    **Raises:** `InputError` when the file is missing, unreadable or not an HLO module.
    """
    p = Path(path)
    if not p.exists():
        raise InputError("no such file", path=p)
    if p.is_dir():
        raise InputError("a directory, not a file (expected an HLO dump: *.hlo.pb, *.txt or *.hlo)", path=p)
    data = read_input(p, MAX_HLO_BYTES, "an HLO dump")
    name = p.name.lower()
    if _is_text_module(data[:_SNIFF_BYTES]):
        text = _decoded(data, p)
        del data  # a big text is held once while it is read
        return read_hlo_text(text, origin=str(p))
    if name.endswith(_BINARY_SUFFIXES):
        return read_hlo_proto_bytes(data, origin=str(p))
    if name.endswith(_TEXT_SUFFIXES):
        raise InputError("not an HLO module (no 'HloModule' header line)", path=p)
    raise InputError("not an HLO dump", path=p,
                     hint="expected *.hlo.pb (binary HloProto/HloModuleProto) or *.txt/*.hlo text")


_AFTER = re.compile(r"^(module_\d+\.[^/]*?)\.(?:[^/]*[._])?after_optimizations(\.hlo\.pb|\.pb|\.txt|\.hlo)$")


def dump_folder_files(folder: str | Path) -> list[Path]:
    """The after-optimization HLO of each module in an `--xla_dump_to` folder (the binary proto where
    XLA wrote both, it reads exactly), by module; [] when the folder holds none."""
    p = Path(folder)
    try:
        names = sorted(f.name for f in p.iterdir() if f.is_file())
    except OSError:
        return []
    chosen: dict[str, str] = {}
    for name in names:
        match = _AFTER.match(name)
        if match and (match[1] not in chosen or match[2] in (".hlo.pb", ".pb")):
            chosen[match[1]] = name
    return [p / chosen[module] for module in sorted(chosen)]


def load_dump_folder(folder: str | Path) -> list[tuple[Path, Module]]:
    """Every module an `--xla_dump_to` folder holds after optimization, with its file.

    **Raises:** `InputError` when one of them is unreadable or not HLO.
    """
    return [(f, load_hlo_file(f)) for f in dump_folder_files(folder)]


def decode_programs(protos: dict[int, bytes], path: str | Path, warnings: list[str]) -> dict[int, Module]:
    """The programs' HloProto bytes a profile reader hands over, decoded; a module that cannot be decoded
    costs only its program its HLO, with a warning."""
    if not protos:
        return {}
    modules: dict[int, Module] = {}
    for program, data in protos.items():
        try:
            modules[program] = read_hlo_proto_bytes(data, origin=f"{path} program {program}")
        except InputError as exc:  # a module refused must not cost the whole profile its events
            warnings.append(f"HLO of program {program} could not be decoded ({exc}); its ops have no HLO")
    return modules
