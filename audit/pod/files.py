"""A run's host files, on local disk or any fsspec filesystem (gs://, s3://, memory://)."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

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
            _refuse_xplanes_beside(Path(path), nsys)
            return HostFiles(run=Path(path).name, paths=nsys)
        found = find_profile_files(path, run)
        return HostFiles(run=found.run, paths=[str(p) for p in found.paths], warnings=found.warnings)
    fs, root = _filesystem(str(path))
    scheme = protocol(str(path))
    if root.endswith(SUFFIX):
        if not remote(lambda: fs.exists(root), path, "cannot reach"):
            raise InputError("no such file", path=path)
        return HostFiles(run=root.rstrip("/").rsplit("/", 2)[-2] if "/" in root else "",
                         paths=[f"{scheme}://{root}"], local=False)
    listed = sorted(p for p in remote(lambda: fs.find(root), path, "cannot list") if p.endswith(SUFFIX))
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


def _refuse_xplanes_beside(path: Path, hosts: list[str]) -> None:
    """A folder of nsys-jax archives that also holds XPlane captures is two profiles, not one:
    reading only the archives would drop the captures without a word."""
    if not path.is_dir():
        return
    folders = [Path(h) for h in hosts if Path(h).is_dir()]
    beside = sorted(str(p.relative_to(path)) for p in path.rglob(f"*{SUFFIX}")
                    if not any(f == p or f in p.parents for f in folders))
    if beside:
        shown = ", ".join(beside[:3]) + (f" and {len(beside) - 3} more" if len(beside) > 3 else "")
        raise InputError(f"holds nsys-jax archives and XPlane captures ({shown}): two kinds of profile, "
                         "not one run", path=path, hint="inspect each on its own: an archive, or the folder of the captures")


def protocol(url: str) -> str:
    return str(url).split("://", 1)[0] if is_url(url) else "file"


def _filesystem(url: str) -> tuple[Any, str]:
    import fsspec

    for name in _CLIENT_LOGGERS:  # their retries and fallbacks are not our one line
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        fs, root = remote(lambda: fsspec.core.url_to_fs(url), url, "no filesystem for this URL")
        return fs, str(root)
    except InputError as exc:
        raise InputError(exc.message, path=url,
                         hint="cloud paths need an extra: pip install 'roofline-audit[gcs]' or '[s3]'") from None


# How long one remote call (listing, a file's facts) may take before the path is reported as out of
# reach: without a network, cloud clients retry for a minute or more. Reading a host file gets longer.
# The budget is shared by the calls that find the files (credentials, listing), so an unreachable
# store costs that long once, not once per call.
REMOTE_TIMEOUT_S = float(os.environ.get("AUDIT_REMOTE_TIMEOUT", "15"))
REMOTE_READ_TIMEOUT_S = 30 * REMOTE_TIMEOUT_S
_CLIENT_LOGGERS = ("gcsfs", "s3fs", "aiobotocore", "botocore", "google", "google.auth", "fsspec", "urllib3")
_budget_ends: list[float] = []
T = TypeVar("T")


def remote(call: Callable[[], T], path: str | Path, doing: str, timeout: float | None = None) -> T:
    """`call()` against a remote filesystem, within `timeout` seconds.

    **Raises:** `InputError` (one line) when it fails or takes too long: a remote store's failure (no
    network, no bucket, no credentials) is about the path the user gave, whatever the client raises.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)  # a hung client must not keep the process alive
    worker.start()
    if timeout is None:
        if not _budget_ends:
            _budget_ends.append(time.monotonic() + REMOTE_TIMEOUT_S)
        limit = max(0.5, _budget_ends[0] - time.monotonic())
    else:
        limit = timeout
    worker.join(limit)
    if worker.is_alive():
        raise InputError(f"{doing}: no answer within {REMOTE_TIMEOUT_S if timeout is None else limit:.0f} s "
                         "(no network, or the store is unreachable; AUDIT_REMOTE_TIMEOUT sets the limit)", path=path)
    error = box.get("error")
    if isinstance(error, InputError):
        raise error
    if error is not None:
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise InputError(f"{doing}: {type(error).__name__}{': ' + text[:200] if text else ''}", path=path)
    value: T = box["value"]
    return value


def total_bytes(paths: list[str]) -> int | None:
    """What the host files hold together (an archive of several hosts counted once); None for URLs."""
    if any(is_url(p) for p in paths):
        return None
    try:
        return sum(_size(f) for f in {split_host(p)[0] for p in paths})
    except OSError:
        return None


def _size(path: Path) -> int:
    """Bytes of a file, or of every file under a folder (an unpacked nsys-jax archive)."""
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def read_bytes(path: str) -> bytes:
    """The whole host file, read where it lies (one host at a time, on the worker)."""
    if not is_url(path):
        refuse_xprof_cache(path)
        return read_input(path, MAX_PROFILE_BYTES, "an XSpace profile (.xplane.pb)")
    fs, root = _filesystem(path)

    def fetch() -> bytes:
        with fs.open(root, "rb") as f:
            data = f.read(MAX_PROFILE_BYTES + 1)
        if len(data) > MAX_PROFILE_BYTES:
            raise InputError(f"more than {MAX_PROFILE_BYTES >> 20:,} MiB, more than any profile this tool reads",
                             path=path)
        return bytes(data)

    return remote(fetch, path, "cannot read", timeout=REMOTE_READ_TIMEOUT_S)


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
        info = remote(lambda: fs.info(root), path, "cannot read")
        version = next((str(info[k]) for k in ("etag", "ETag", "md5Hash", "mtime", "LastModified", "updated",
                                               "created") if info.get(k) is not None), "")
        facts = f"{path}|{info.get('size')}|{version}"
    return hashlib.sha256(facts.encode()).hexdigest()[:24]
