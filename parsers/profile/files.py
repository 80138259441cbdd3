"""Where a profile's files are and what they hold at a glance, without decoding them.

`find_profile_files` resolves a file, run directory or TensorBoard logdir to one run's
`.xplane.pb` files; `plane_names` reads the plane names from a file's first bytes. Nothing
here imports protobuf, numpy or pandas: an analysis glances at its input before loading those
(`input_glance`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ...base.errors import InputError
from ..wire.protowire import varint

SUFFIX = ".xplane.pb"

# Files XProf writes beside the profiles it has opened: its own derived data, not profiles.
XPROF_CACHE_SUFFIXES = (".op_stats_v2.pb", ".flat_op_stats_v2.pb", ".op_stats.pb", ".dcn_collective_stats.pb",
                        ".smart_suggestion.pb")


@dataclass
class ProfileFiles:
    """The per-host files of one profile run, and what was chosen on the way."""

    run: str
    paths: list[Path]
    warnings: list[str] = field(default_factory=list)


def find_profile_files(path: str | Path, run: str | None = None) -> ProfileFiles:
    """Resolve a file, run directory or logdir to the `.xplane.pb` files of one run.

    In a logdir with several runs the newest run (runs are named by UTC time) is
    taken and a warning names the others; `run` picks one by name.
    """
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or directory", path=p)
    refuse_xprof_cache(p)
    if not p.is_dir():  # a file, or a FIFO or device whose reader says what it is
        if run is not None:
            raise InputError(f"run={run!r} applies to a logdir, but this is a single file", path=p)
        return ProfileFiles(run=p.parent.name, paths=[p])
    files = sorted(p.glob(f"*{SUFFIX}"))
    if files:
        if run is not None and run != p.name:
            raise InputError(f"run={run!r} asked for, but this is the run directory {p.name!r}", path=p)
        return ProfileFiles(run=p.name, paths=files)
    return _from_logdir(p, run)


def _from_logdir(p: Path, run: str | None) -> ProfileFiles:
    runs_root = next((r for r in (p / "plugins" / "profile", p / "profile", p) if _runs_in(r)), None)
    if runs_root is None:
        raise InputError(f"no {SUFFIX} profiles found", path=p,
                         hint="expected FILE.xplane.pb, a run dir, or a logdir with plugins/profile/<run>/")
    runs = _runs_in(runs_root)
    if run is not None:
        if run not in runs:
            raise InputError(f"no run named {run!r}", path=runs_root, hint=f"runs here: {', '.join(runs)}")
        chosen, warnings = run, list[str]()
    else:
        chosen = runs[-1]
        warnings = []
        if len(runs) > 1:
            warnings.append(f"{runs_root} holds {len(runs)} runs; reading the latest, {chosen!r} "
                            f"(pick another with run=NAME; others: {', '.join(runs[:-1])})")
    return ProfileFiles(run=chosen, paths=sorted((runs_root / chosen).glob(f"*{SUFFIX}")), warnings=warnings)


def _runs_in(root: Path) -> list[str]:
    """Sub-directories of `root` that hold profiles, oldest first (names are timestamps)."""
    if not root.is_dir():
        return []
    runs = [d for d in root.iterdir() if d.is_dir() and any(d.glob(f"*{SUFFIX}"))]
    return sorted(d.name for d in runs)


def refuse_xprof_cache(path: str | Path) -> None:
    """**Raises:** `InputError` when `path` is one of XProf's cache files (OpStats, tool data)."""
    if Path(path).name.lower().endswith(XPROF_CACHE_SUFFIXES):
        raise InputError(f"an XProf cache file, not a profile; point audit at the {SUFFIX} beside it", path=path)


def plane_names(path: str | Path) -> list[str] | None:
    """The plane names of an `.xplane.pb`, read from the first bytes of each plane while the rest
    (its lines, most of the file) is skipped unread; None when the file is not laid out as an
    XSpace, or not a regular file (opening a FIFO would wait for its writer). A glance, for deciding
    what to prepare: `read_xspace` is what checks a file."""
    if not Path(path).is_file():
        return None
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            names: list[str] = []
            pos = 0
            while pos < size and len(names) < _MAX_PLANES:
                f.seek(pos)
                head = f.read(20)
                tag, at = _varint(head, 0)
                length, at = _varint(head, at) if tag & 7 == 2 else (-1, at)
                if length < 0 or at > len(head):
                    return None
                if tag >> 3 == 1:  # a plane: its id and name come first
                    f.seek(pos + at)
                    names.append(_plane_name(f.read(min(length, _NAME_BYTES))))
                pos += at + length
            return names if pos == size else None
    except OSError:
        return None


_MAX_PLANES = 100_000
_NAME_BYTES = 4096


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """(value, next position) of the varint at `at`; a position past the data when it is cut short."""
    try:
        return varint(memoryview(data), at, len(data))
    except ValueError:
        return -1, len(data) + 1


def _plane_name(head: bytes) -> str:
    at = 0
    while at < len(head):
        tag, at = _varint(head, at)
        if tag == 0x12:  # field 2, the name
            length, at = _varint(head, at)
            return head[at:at + length].decode("utf-8", "replace") if length >= 0 else ""
        if tag & 7 != 0:
            return ""
        _, at = _varint(head, at)
    return ""
