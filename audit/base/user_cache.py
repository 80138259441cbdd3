"""Where audit keeps what it can compute again: the user's cache directory, never beside an input.

One root for every cache (XDG: `$XDG_CACHE_HOME/audit`, else `~/.cache/audit`), one subfolder
per kind, so a user finds and clears them in one place:

| kind | what | moved by |
|---|---|---|
| `summaries` | per-host profile summaries (Parquet) for fast re-analysis | `AUDIT_CACHE` (empty: off), `--cache DIR` |
| `calibration` | this machine's measured CPU ceilings (JSON) | `AUDIT_CACHE_DIR` |

What an install prepares ahead (`python -m audit.prepare`, run by `make install`) goes to the
install's own folder instead (`install_dir`, under `sys.prefix`), so a fresh home directory,
as on a CI runner, finds it: the CPU calibration there, the compiled decoder beside its module.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Literal

CacheKind = Literal["summaries", "calibration"]
SUMMARIES_ENV = "AUDIT_CACHE"


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/audit`, else `~/.cache/audit` (XDG's default)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "audit"


def cache_dir(kind: CacheKind) -> Path:
    """The folder for one kind of cache under the root (not created here)."""
    return cache_root() / kind


def summaries_dir() -> str | None:
    """Where per-host summaries are kept by default: `$AUDIT_CACHE` (set and empty: nowhere),
    else the `summaries` folder of the user cache."""
    if SUMMARIES_ENV in os.environ:
        return os.environ[SUMMARIES_ENV] or None
    return str(cache_dir("summaries"))


def install_dir(kind: CacheKind) -> Path:
    """The install's own folder for what it prepared ahead: `<sys.prefix>/share/audit/<kind>`."""
    return Path(sys.prefix) / "share" / "audit" / kind
