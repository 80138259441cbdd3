"""Write output files without harming what is there.

A regular file (or a path that does not exist yet) is written atomically: a temporary file
beside the target, then a rename, so a reader never sees half a report. Anything else the
user names (a character device such as `/dev/null`, a FIFO, `/dev/stdout`, a terminal) is
written straight into: renaming over it would replace the device node or the pipe with a
plain file. A symlink to a regular file is followed, so the link stays a link.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

from .base.errors import InputError

# Paths that name a process's streams or a device; never replaced, whatever they resolve to.
_STREAM_ROOTS = ("/dev/", "/proc/")


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` (or stdout for "-"); the old file is replaced only when complete."""
    if str(path) == "-":
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
        return
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path`: atomically for a regular file, straight into a device or FIFO.

    **Raises:** `InputError` when the directory is missing or not writable, or the path is a directory.
    """
    target = Path(path)
    if _is_stream(target):
        _write_straight(target, data)
        return
    real = Path(os.path.realpath(target)) if target.is_symlink() else target
    if real.is_dir():
        raise InputError("is a directory, not an output file", path=target)
    _write_atomic(real, data, shown=target)


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Whether writing `path` goes into a stream or device (written straight) rather than a regular file."""
    return str(path) == "-" or _is_stream(Path(path))


def _is_stream(target: Path) -> bool:
    if str(target).startswith(_STREAM_ROOTS):
        return True
    try:
        mode = os.stat(target).st_mode  # follows links: a link to a FIFO is a FIFO
    except OSError:
        return False  # not there yet (or a dangling link): a new regular file
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _write_straight(target: Path, data: bytes) -> None:
    try:
        # No O_CREAT: a stream path that vanished is not recreated as a file under /dev.
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"cannot write here: {exc.strerror}", path=target) from None
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror}", path=target) from None
    finally:
        os.close(fd)


def _write_atomic(target: Path, data: bytes, shown: Path) -> None:
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
    except OSError as exc:
        _discard(tmp)
        raise InputError(f"cannot write: {exc.strerror or exc}", path=shown) from None
    except BaseException:
        _discard(tmp)
        raise


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
