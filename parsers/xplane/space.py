"""Decode `.xplane.pb` files; `parsers.profile.files` finds them (a single file, a run directory, or a
TensorBoard logdir).

Layout written by `jax.profiler.trace(logdir)`:
`logdir/plugins/profile/<run>/<host>.xplane.pb`, one file per host.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from ...base.errors import InputError
from ..wire.input_files import MAX_PROFILE_BYTES, read_input
from ..profile.model import HostFiles
from ..profile.files import SUFFIX, find_profile_files, refuse_xprof_cache
from .lazy import Space, split_xspace
from .schema import XSpace

_PLANE_PREFIXES = ("/host:", "/device:", "Task Environment", "#Chip", "Host CPUs", "Syscalls")


def read_xspace(path: str | Path) -> Space:
    """Decode one `.xplane.pb`, or raise InputError saying in one line why it is not an XSpace."""
    p = Path(path)
    refuse_xprof_cache(p)
    return decode_xspace(read_input(p, MAX_PROFILE_BYTES, "an XSpace profile (.xplane.pb)"), p)


def decode_xspace(data: bytes, origin: str | Path = "") -> Space:
    """Decode XSpace bytes, lines left encoded until read; `origin` names the source in errors."""
    if not data:
        raise InputError("file is empty, not an XSpace profile", path=origin)
    kind = _foreign_kind(data)
    if kind:
        raise InputError(f"this is {kind}, not an XSpace profile (.xplane.pb)", path=origin)
    space = XSpace()
    try:
        rest, planes, lines = split_xspace(data)
        space.ParseFromString(rest)
        for plane in planes:
            space.planes.add().ParseFromString(plane)
    except (DecodeError, ValueError):
        raise InputError("truncated or corrupt, or not an XSpace profile at all (protobuf decode failed)",
                         path=origin) from None
    if not _looks_like_xspace(space):
        raise InputError("a protobuf message but not an XSpace profile (no profiler planes)", path=origin)
    return Space(space, str(origin), lines)


def _foreign_kind(data: bytes) -> str:
    head = data[:16]
    if head.startswith(b"\x89PNG"):
        return "a PNG image"
    if head.startswith(b"\x1f\x8b"):
        return "gzip-compressed data (a .trace.json.gz? decompress it or pass the .xplane.pb)"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive"
    sample = data[:4096]
    if sample.lstrip()[:1] in (b"{", b"[") or _is_text(sample):
        return "a text file"
    return ""


def _is_text(sample: bytes) -> bool:
    try:
        text = sample.decode("utf-8")
    except UnicodeDecodeError:
        return False
    printable = sum(c.isprintable() or c in "\n\r\t" for c in text)
    return printable >= 0.95 * len(text)


def _looks_like_xspace(space: Any) -> bool:
    names = [plane.name for plane in space.planes]
    return any(name.startswith(_PLANE_PREFIXES) for name in names)


def claims(path: Path) -> bool:
    """A `.xplane.pb`, or a run directory or logdir holding them."""
    if path.is_dir():
        return any(path.glob(f"*{SUFFIX}")) or any((path / sub).is_dir() for sub in ("plugins", "profile"))
    return path.name.lower().endswith(SUFFIX)


def list_hosts(path: Path, run: str | None) -> HostFiles:
    found = find_profile_files(path, run)
    return HostFiles(run=found.run, paths=[str(p) for p in found.paths], warnings=found.warnings)

