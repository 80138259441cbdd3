"""Read an input file's bytes with a size cap, refusing what is not a file.

Every reader of a local input comes through here, so a device behind a file name (`/dev/zero`
named `x.json`) is refused instead of read until memory runs out, a FIFO is read like a pipe
(up to the cap; no writer means empty, never a hang in `open`), and a file bigger than any
real input of its kind is refused before a byte is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ...base.errors import InputError

# Caps by kind: far above real inputs (a 4,096-host pod's host file is a few hundred MB; a
# MaxText HLO dump tens of MB; protobuf itself stops at 2 GiB), far below what hurts a machine.
MAX_PROFILE_BYTES = 2 << 30
MAX_HLO_BYTES = 2 << 30
MAX_REPORT_BYTES = 512 << 20
_CHUNK = 1 << 20

_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket",
          stat.S_IFDIR: "a directory"}


def is_url(path: str | Path) -> bool:
    """A path on remote storage (gs://, s3://, memory://), read through fsspec."""
    return "://" in str(path)


def read_input(path: str | Path, limit: int, what: str) -> bytes:
    """The bytes of `path`, a regular file or a FIFO of at most `limit` bytes; `what` names the
    expected input in errors ("an XSpace profile").

    **Raises:** `InputError` for a missing path, a device, socket or directory, or more than `limit` bytes.
    """
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=p) from None
    kind = _KINDS.get(stat.S_IFMT(mode))
    if kind is not None:
        raise InputError(f"this is {kind}, not {what}", path=p)
    try:
        # O_NONBLOCK: opening a FIFO nobody writes to returns at once (and reads as empty).
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=p) from None
    try:
        os.set_blocking(fd, True)
        if stat.S_ISREG(mode):
            size = os.fstat(fd).st_size
            if size > limit:
                raise InputError(f"{_size(size)} is more than any {what} this tool reads (at most {_size(limit)})",
                                 path=p)
            with os.fdopen(os.dup(fd), "rb", buffering=0) as f:
                data = f.readall()  # one buffer sized from the file, not chunks joined
            if len(data) > limit:  # grew while being read
                raise InputError(f"more than {_size(limit)}, more than any {what} this tool reads", path=p)
            return data
        return _read_up_to(fd, limit, p, what)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=p) from None
    finally:
        os.close(fd)


def _read_up_to(fd: int, limit: int, p: Path, what: str) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            raise InputError(f"more than {_size(limit)}, more than any {what} this tool reads", path=p)


def is_special(path: str | Path) -> bool:
    """Whether `path` exists and is neither a regular file nor a directory (a FIFO, device or socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _size(n: int) -> str:
    """A size exactly: whole MiB (the limits), else bytes (a file's own size; rounded it could read as the limit)."""
    return f"{n >> 20:,} MiB" if n and n % (1 << 20) == 0 else f"{n:,} bytes"
