"""Every profile format this tool reads, in one registry.

Each format is one folder of parsers/ whose reader defines a `ProfileReader` (`profile.model`): what paths
it claims, the host files of a profile in it (one per host or process), how one host file is read
into a `HostProfile` and its programs' HLO, and what tells a cached read apart from a stale one.
The rest of the tool asks this module which reader a path or a host file belongs to: `pod/`
spreads `read_host` over the hosts, the pipeline reads the reader's facts (its clocks, its name in
the report), and nothing above parsers/ names a format. A new format is one folder and a line in
`_registry`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from .profile.model import HostFiles, ProfileReader


def _registry() -> tuple[ProfileReader, ...]:
    from .nsys.archive import READER as NSYS_JAX
    from .nsys.sqlite import READER as NSIGHT_SQLITE
    from .xplane.reader import READER as XPLANE

    # XPlane last: any other `.pb`, and a folder no other reader claims, are read as XPlane, whose
    # reader says in one line what is missing.
    return NSIGHT_SQLITE, NSYS_JAX, XPLANE


READERS: tuple[ProfileReader, ...] = _registry()
FALLBACK = READERS[-1]


def claimed(path: Path) -> bool:
    """Whether a profile format claims the local `path` (a file or a folder)."""
    return any(r.claims(path) for r in READERS)


def reader_for(path: Path) -> ProfileReader:
    """The reader of a local profile path: the first that claims it, else the fallback."""
    return next((r for r in READERS if r.claims(path)), FALLBACK)


def reader_of_host(host: str) -> ProfileReader:
    """The reader of one host file, as `list_hosts` named it."""
    return next((r for r in READERS if r.owns_host(host)), FALLBACK)


def reader_named(name: str) -> ProfileReader:
    return next(r for r in READERS if r.name == name)


def list_hosts(path: Path, run: str | None = None) -> tuple[ProfileReader, HostFiles]:
    """The reader of a local profile and its host files."""
    reader = reader_for(path)
    return reader, reader.list_hosts(path, run)


def remote_suffix() -> str:
    """The file ending of the one format read from remote storage (URLs list files by their name)."""
    return FALLBACK.suffix


def host_label(host: str) -> str:
    """A host file's name without the ending of its format."""
    suffix = reader_of_host(host).suffix
    name = host.rsplit("/", 1)[-1]
    return name.removesuffix(suffix) if suffix else name


def total_bytes(hosts: list[str]) -> int | None:
    """What the host files hold together (an archive of several hosts counted once); None for URLs."""
    from .wire.input_files import is_url
    from .nsys.archive import split_host

    if any(is_url(h) for h in hosts):
        return None
    try:
        return sum(_size(f) for f in {split_host(h)[0] for h in hosts})
    except OSError:
        return None


def _size(path: Path) -> int:
    """Bytes of a file, or of every file under a folder (an unpacked nsys-jax archive)."""
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def warm_up_all() -> Iterator[tuple[str, float]]:
    """Each reader's install-time warm-up (`ProfileReader.warm_up`): what it did, and its seconds."""
    for reader in READERS:
        if reader.warm_up is not None:
            start = time.perf_counter()
            said = reader.warm_up()
            yield said, time.perf_counter() - start

