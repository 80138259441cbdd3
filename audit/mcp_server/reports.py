"""The reports the inspect and explain tools read: a JSON report loaded, or anything `audit inspect`
takes analysed by the same library call, kept in memory so that asking for more rows, one op's
record or an explanation does not analyse the same file again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ..library import Report, inspect, load
from ..base.options import DEFAULTS
from .progress import CallProgress

KEPT = 4  # reports held at once: a big program's report takes hundreds of MB


@dataclass(frozen=True)
class Analysis:
    """What `audit inspect` would be asked, besides the path."""

    hardware: str | None = None
    run: str | None = None
    min_efficiency: float = DEFAULTS.thresholds.min_efficiency
    min_share: float = DEFAULTS.thresholds.min_share
    allow_smaller: bool = False
    hlo: str | None = None
    cache: str | None = None


class Held:
    """A report and, once asked for, its JSON document (written once: a big program's takes seconds)."""

    def __init__(self, report: Report) -> None:
        self.report = report

    @cached_property
    def doc(self) -> dict[str, Any]:
        return self.report.model.to_json()


_kept: OrderedDict[tuple[object, ...], Held] = OrderedDict()
_lock = threading.Lock()


def report_of(path: str, how: Analysis, progress: CallProgress) -> Held:
    """The report of `path`: a JSON report as written, anything else analysed as `audit inspect` does."""
    key = (_identity(path), how)
    with _lock:
        if key in _kept:
            _kept.move_to_end(key)
            return _kept[key]
    name = Path(path).name or path
    if path.lower().endswith(".json"):
        progress.phase(f"reading the report {name}")
        report = load(path)
    else:
        progress.phase(f"analysing {name}")
        report = inspect(path, how.hardware, run=how.run, min_efficiency=how.min_efficiency,
                         min_share=how.min_share, allow_smaller=how.allow_smaller, hlo=how.hlo,
                         cache=how.cache, command=f"audit mcp: inspect {path}")
    held = Held(report)
    with _lock:
        _kept[key] = held
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    return held


def _identity(path: str) -> tuple[object, ...]:
    """The file as it is now: a path rewritten since (a new capture) is analysed again."""
    try:
        st = Path(path).stat()
    except OSError:
        return (path,)
    return (str(Path(path).resolve()), st.st_mtime_ns, st.st_size)
