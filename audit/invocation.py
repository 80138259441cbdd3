"""The command line this process was asked to run, for the "reproduce" line of a report."""

from __future__ import annotations

import shlex

_ARGV: list[str] = []


def remember(argv: list[str]) -> None:
    _ARGV[:] = list(argv)


def command_line() -> str:
    """`audit ...` exactly as invoked (arguments quoted for a shell)."""
    return "audit " + " ".join(shlex.quote(a) for a in _ARGV)


def options_end_marked() -> bool:
    """Whether the command line holds `--`, after which arguments are the workload's; True when unknown."""
    return not _ARGV or "--" in _ARGV
