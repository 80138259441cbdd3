"""Load an HLO module from a file: binary proto or text, chosen by content and extension."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from .hlo_model import Module
from .hlo_proto import read_hlo_proto_bytes
from .hlo_text import parse_hlo_text

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


def _parses_as_module(path: Path) -> bool:
    try:
        if path.stat().st_size > _MAX_SNIFF_PARSE_BYTES:
            return False
        read_hlo_proto_bytes(path.read_bytes())
    except (InputError, OSError):
        return False
    return True


def looks_like_hlo_file(path: str | Path) -> bool:
    """True for a readable HLO text file or binary HLO module.

    Text is recognised from its first 4 KiB; `*.hlo.pb` by name; another `*.pb` (not
    `*.xplane.pb`) only if it parses as an HLO module, so the CLI can route the rest elsewhere.
    """
    p = Path(path)
    if not p.is_file():
        return False
    name = p.name.lower()
    try:
        head = _head(p)
    except OSError:
        return False
    if _is_text_module(head):
        return True
    if name.endswith(".hlo.pb"):
        return bool(head)
    return name.endswith(".pb") and not name.endswith(".xplane.pb") and _parses_as_module(p)


def load_hlo_file(path: str | Path) -> Module:
    """Read an HLO module from `path` (`*.hlo.pb`/`*.pb` binary, `*.txt`/`*.hlo` text).

    **Raises:** `InputError` when the file is missing, unreadable or not an HLO module.
    """
    p = Path(path)
    if not p.exists():
        raise InputError("no such file", path=p)
    if not p.is_file():
        raise InputError("not a file (expected an HLO dump: *.hlo.pb, *.txt or *.hlo)", path=p)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=p) from None
    name = p.name.lower()
    if _is_text_module(data[:_SNIFF_BYTES]):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"HLO text is not UTF-8 (byte {exc.start})", path=p) from None
        return parse_hlo_text(text, origin=str(p))
    if name.endswith(_BINARY_SUFFIXES):
        return read_hlo_proto_bytes(data, origin=str(p))
    if name.endswith(_TEXT_SUFFIXES):
        raise InputError("not an HLO module (no 'HloModule' header line)", path=p)
    raise InputError("not an HLO dump", path=p,
                     hint="expected *.hlo.pb (binary HloProto/HloModuleProto) or *.txt/*.hlo text")
