"""Write output files atomically: a temporary file beside the target, then a rename."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from .errors import InputError


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` (or stdout for "-"); the old file is replaced only when complete."""
    if str(path) == "-":
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
        return
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError("output directory does not exist", path=parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise InputError(f"cannot write here: {exc.strerror}", path=parent) from None
    try:
        # mkstemp creates 0600; give the file the mode a plain open() would (or the old file's).
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
