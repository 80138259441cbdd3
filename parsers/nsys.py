"""Nsight Systems inputs, recognised by content: nsys-jax archives (zip or folder, one per process
or combined) and SQLite exports. Each process is one host of the profile, as an XPlane file is."""

from __future__ import annotations

import zipfile
from pathlib import Path

from ..errors import InputError
from .nsys_jax import find_hosts, is_host_path, looks_like_archive, read_archive_host
from .nsys_sqlite import looks_like_sqlite, read_sqlite_host
from .profile_model import HostProfile


def is_nsys_input(path: Path) -> bool:
    """An nsys-jax archive or folder of archives, or an SQLite file."""
    if path.is_file():
        return path.suffix.lower() in (".zip", ".sqlite") or looks_like_sqlite(path) or _is_zip(path)
    return path.is_dir() and find_hosts(path) is not None


def nsys_hosts(path: str | Path) -> list[str] | None:
    """The host paths of an Nsight Systems input, or None when `path` is not one.

    **Raises:** `InputError` for a zip that is not an nsys-jax archive, or an empty selection.
    """
    p = Path(path)
    if p.is_file() and (looks_like_sqlite(p) or p.suffix.lower() == ".sqlite"):
        return [str(p)]
    if p.is_file() and (_is_zip(p) or p.suffix == ".zip"):
        if not zipfile.is_zipfile(p):
            raise InputError("not a readable zip archive: truncated or damaged", path=p)
        if not looks_like_archive(p):
            raise InputError("a zip archive without nvtx_gpu_proj_trace/trace.parquet: not an nsys-jax output",
                             path=p)
    return find_hosts(p)


def read_nsys_host(host_path: str, hlo_dir: str | None = None) -> tuple[HostProfile, dict[int, bytes]] | None:
    """One process of an Nsight Systems input and its programs' HloProto bytes; None if the path is not one."""
    p = Path(host_path)
    if p.is_file() and (looks_like_sqlite(p) or p.suffix.lower() == ".sqlite"):
        return read_sqlite_host(host_path, hlo_dir)
    if is_host_path(host_path):
        return read_archive_host(host_path)
    return None


def _is_zip(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False
