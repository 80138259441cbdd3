"""Exit codes and the project's error types, in the one module every layer may import.

Every layer raises these; only the CLI (and the capture child) turns them into exit codes.
"""

from __future__ import annotations

import enum
from typing import Any


class ExitCode(enum.IntEnum):
    """What `audit` returns to the shell; docs/robustness.md documents each one."""

    OK = 0
    GATE = 1  # a gate the user asked for tripped
    INPUT = 2  # bad input or usage
    WORKLOAD = 3  # the profiled workload itself raised
    INTERNAL = 4  # a bug in audit, not in the input
    INTERRUPTED = 130


class AuditError(Exception):
    """An error the user can act on, shown as one line; carries its exit code."""

    exit_code: ExitCode = ExitCode.INPUT

    def __init__(self, message: str, *, path: object = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = None if path is None else str(path)
        self.hint = hint

    def __reduce__(self) -> tuple[Any, ...]:  # keep path and hint when raised in a worker process
        return (_rebuild, (type(self), self.message, self.path, self.hint))

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class InputError(AuditError):
    """The input is missing, unreadable, or not what this tool reads (exit code 2)."""


class UsageError(AuditError):
    """Options or arguments that do not make sense together (exit code 2)."""


class GateError(AuditError):
    """A gate the user asked for tripped (exit code 1)."""

    exit_code = ExitCode.GATE


class WorkloadError(AuditError):
    """The profiled workload itself raised (exit code 3)."""

    exit_code = ExitCode.WORKLOAD


def _rebuild(cls: type[AuditError], message: str, path: str | None, hint: str | None) -> AuditError:
    return cls(message, path=path, hint=hint)
