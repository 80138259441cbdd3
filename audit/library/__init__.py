"""audit as a library: the calls the CLI is built on, for notebooks and scripts.

`inspect` analyses a profile or HLO dump, `load` reads a JSON report back, `diff` compares
two sides of runs; `Report` and `Diff` are what they return.
"""

from __future__ import annotations

from .calls import diff, inspect, load
from .diff import Diff
from .report import Report

__all__ = ["Diff", "Report", "diff", "inspect", "load"]
