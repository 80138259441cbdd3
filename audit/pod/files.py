"""A run's host files, on local disk or any fsspec filesystem (gs://, s3://, memory://)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..parsers.input_files import MAX_PROFILE_BYTES, read_input
from ..parsers.xplane import SUFFIX, find_profile_files, refuse_xprof_cache
from ..parsers.nsys import nsys_hosts
from ..parsers.nsys_jax import TRACE as NSYS_TRACE
from ..parsers.nsys_jax import split_host


def is_url(path: str | Path) -> bool:
    return "://" in str(path)


@dataclass
class HostFiles:
    """The host files of one run; `paths` are local paths or fsspec URLs."""

    run: str
    paths: list[str]
    warnings: list[str] = field(default_factory=list)
    local: bool = True


def list_host_files(path: str | Path, run: str | None = None) -> HostFiles:
    """Resolve a file, run dir or logdir (local or a URL) to the `.xplane.pb` files of one run."""
    if not is_url(path):
        nsys = nsys_hosts(path)
        if nsys is not None:
            return HostFiles(run=Path(path).name, paths=nsys)
        found = find_profile_files(path, run)
        return HostFiles(run=found.run, paths=[str(p) for p in found.paths], warnings=found.warnings)
    fs, root = _filesystem(str(path))
    scheme = protocol(str(path))
    if root.endswith(SUFFIX):
        if not fs.exists(root):
            raise InputError("no such file", path=path)
        return HostFiles(run=root.rstrip("/").rsplit("/", 2)[-2] if "/" in root else "",
                         paths=[f"{scheme}://{root}"], local=False)
    try:
        listed = sorted(p for p in fs.find(root) if p.endswith(SUFFIX))
    except OSError as exc:
        raise InputError(f"cannot list: {exc}", path=path) from None
    if not listed:
        raise InputError(f"no {SUFFIX} files found", path=path)
    runs = sorted({p.rsplit("/", 2)[-2] for p in listed})
    warnings = []
    if run is not None:
        if run not in runs:
            raise InputError(f"no run named {run!r}", path=path, hint=f"runs here: {', '.join(runs)}")
        chosen = run
    else:
        chosen = runs[-1]
        if len(runs) > 1:
            warnings.append(f"{path} holds {len(runs)} runs; reading the latest, {chosen!r} "
                            f"(pick another with --run NAME; others: {', '.join(runs[:-1])})")
    paths = [f"{scheme}://{p}" for p in listed if p.rsplit("/", 2)[-2] == chosen]
    return HostFiles(run=chosen, paths=paths, warnings=warnings, local=False)


def protocol(url: str) -> str:
    return str(url).split("://", 1)[0] if is_url(url) else "file"


def _filesystem(url: str):
    import fsspec

    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise InputError(f"no filesystem for this URL ({exc})", path=url,
                         hint="cloud paths need an extra: pip install 'roofline-audit[gcs]' or '[s3]'") from None


def read_bytes(path: str) -> bytes:
    """The whole host file, read where it lies (one host at a time, on the worker)."""
    if not is_url(path):
        refuse_xprof_cache(path)
        return read_input(path, MAX_PROFILE_BYTES, "an XSpace profile (.xplane.pb)")
    fs, root = _filesystem(path)
    try:
        with fs.open(root, "rb") as f:
            return f.read()
    except OSError as exc:
        raise InputError(f"cannot read: {exc}", path=path) from None


def identity(path: str) -> str:
    """A key that changes when the file does: its path, size and modification time (or etag)."""
    if not is_url(path):
        # One process of a combined nsys-jax archive is keyed by the archive and the process.
        local, member = split_host(path)
        # An unpacked archive changes in its files, not in its folder's entry.
        trace = local / NSYS_TRACE
        try:
            st = trace.stat() if local.is_dir() and trace.exists() else local.stat()
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", path=path) from None
        facts = f"{local.resolve()}|{member}|{st.st_size}|{st.st_mtime_ns}"
    else:
        fs, root = _filesystem(path)
        try:
            info = fs.info(root)
        except OSError as exc:
            raise InputError(f"cannot read: {exc}", path=path) from None
        version = next((str(info[k]) for k in ("etag", "ETag", "md5Hash", "mtime", "LastModified", "updated",
                                               "created") if info.get(k) is not None), "")
        facts = f"{path}|{info.get('size')}|{version}"
    return hashlib.sha256(facts.encode()).hexdigest()[:24]
