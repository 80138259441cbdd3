"""A run's host files, on local disk or any fsspec filesystem (gs://, s3://, memory://)."""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from ..base.errors import InputError, UsageError
from ..costmodel.units import count, stated
from ..parsers.wire.input_files import MAX_PROFILE_BYTES, is_url
from ..parsers.readers import list_hosts, reader_of_host, remote_suffix


@dataclass
class RunFiles:
    """The host files of one run; `paths` are local paths or fsspec URLs (`local` says which)."""

    run: str
    paths: list[str]
    warnings: list[str] = field(default_factory=list)
    local: bool = True


def list_host_files(path: str | Path, run: str | None = None) -> RunFiles:
    """Resolve a profile (local or a URL) to the host files of one run, by the reader of its format."""
    if is_url(path):
        with shared_budget():
            return _list_remote(str(path), run)
    _, found = list_hosts(Path(path), run)
    return RunFiles(run=found.run, paths=found.paths, warnings=found.warnings)


def _list_remote(path: str, run: str | None) -> RunFiles:
    """Remote storage is listed by file name: the files of the one format that names its files."""
    suffix = remote_suffix()
    fs, root = _filesystem(path)
    scheme = protocol(path)
    if root.endswith(suffix):
        if not remote(lambda: fs.exists(root), path, "cannot reach"):
            raise InputError("no such file", path=path)
        return RunFiles(run=root.rstrip("/").rsplit("/", 2)[-2] if "/" in root else "",
                         paths=[f"{scheme}://{root}"], local=False)
    listed = sorted(p for p in remote(lambda: fs.find(root), path, "cannot list") if p.endswith(suffix))
    if not listed:
        raise InputError(f"no {suffix} files found", path=path)
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
    return RunFiles(run=chosen, paths=paths, warnings=warnings, local=False)


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


# How long finding a remote path's files (credentials, listing) may take before the path is reported as
# out of reach: without a network, cloud clients retry for a minute or more. The calls that find one
# path's files share the budget, so an unreachable store costs it once, not once per call; each path a
# caller names gets its own. Reading a host file gets longer.
DEFAULT_REMOTE_TIMEOUT_S = 15.0
READ_TIMEOUT_FACTOR = 30
_CLIENT_LOGGERS = ("gcsfs", "s3fs", "aiobotocore", "botocore", "google", "google.auth", "fsspec", "urllib3")
_budget: ContextVar[tuple[float, float] | None] = ContextVar("remote_budget", default=None)
T = TypeVar("T")


def remote_timeout_s() -> float:
    """AUDIT_REMOTE_TIMEOUT in seconds, read at each use: a notebook may change it between calls."""
    text = os.environ.get("AUDIT_REMOTE_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_REMOTE_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise UsageError(f"AUDIT_REMOTE_TIMEOUT={text!r} is not a positive number of seconds")
    return seconds


@contextmanager
def shared_budget() -> Iterator[None]:
    """The remote calls inside share one budget of `remote_timeout_s()` seconds (a nested one joins it)."""
    if _budget.get() is not None:
        yield
        return
    seconds = remote_timeout_s()
    token = _budget.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _budget.reset(token)


def remote(call: Callable[[], T], path: str | Path, doing: str, timeout: float | None = None) -> T:
    """`call()` against a remote filesystem, within `timeout` seconds (default: what is left of the
    shared budget, or a whole budget outside one).

    **Raises:** `InputError` (one line) when it fails or takes too long: a remote store's failure (no
    network, no bucket, no credentials) is about the path the user gave, whatever the client raises.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    limit, budget = _limit(timeout)
    worker = threading.Thread(target=run, daemon=True)  # a hung client must not keep the process alive
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise InputError(f"{doing}: no answer within {stated(budget)} s "
                         "(no network, or the store is unreachable; AUDIT_REMOTE_TIMEOUT sets the limit)", path=path)
    error = box.get("error")
    if isinstance(error, InputError):
        raise error
    if error is not None:
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise InputError(f"{doing}: {type(error).__name__}{': ' + text[:200] if text else ''}", path=path)
    value: T = box["value"]
    return value


def _limit(timeout: float | None) -> tuple[float, float]:
    """(seconds this call may wait, the budget the error names): inside a shared budget, what is left
    of it (at least half a second, so a call made just in time is not refused unheard)."""
    if timeout is not None:
        return timeout, timeout
    budget = _budget.get()
    if budget is None:
        seconds = remote_timeout_s()
        return seconds, seconds
    ends, seconds = budget
    return max(0.5, ends - time.monotonic()), seconds


def fetch_bytes(path: str) -> bytes:
    """A remote host file's bytes, read where it lies (one host at a time, on the worker)."""
    fs, root = _filesystem(path)

    def fetch() -> bytes:
        with fs.open(root, "rb") as f:
            data = f.read(MAX_PROFILE_BYTES + 1)
        if len(data) > MAX_PROFILE_BYTES:
            raise InputError(f"more than {count(MAX_PROFILE_BYTES >> 20)} MiB, more than any profile this tool reads",
                             path=path)
        return bytes(data)

    return remote(fetch, path, "cannot read", timeout=READ_TIMEOUT_FACTOR * remote_timeout_s())


def identity(path: str) -> str:
    """A key that changes when the file does: for a local host, what its reader says changes with its
    content (path, size, modification time); for a remote one, its size and version (or etag)."""
    if not is_url(path):
        facts = reader_of_host(path).change_key(path)
    else:
        fs, root = _filesystem(path)
        info = remote(lambda: fs.info(root), path, "cannot read")
        version = next((str(info[k]) for k in ("etag", "ETag", "md5Hash", "mtime", "LastModified", "updated",
                                               "created") if info.get(k) is not None), "")
        facts = f"{path}|{info.get('size')}|{version}"
    return hashlib.sha256(facts.encode()).hexdigest()[:24]
