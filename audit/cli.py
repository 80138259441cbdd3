"""The `audit` command line: subcommands are discovered from `audit.commands`, errors map to exit codes.

Exit codes are `audit.base.errors.ExitCode`.
"""

from __future__ import annotations

import gc
import importlib
import os
import pkgutil
import shlex
import sys
from typing import Sequence

import click

from . import __version__
from .commands import __path__ as _commands_path
from .invocation import remember
from .base.errors import AuditError, ExitCode, GateError, UsageError


class _Group(click.Group):
    """Loads a subcommand's module only when it is used, so `audit --help` stays fast."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = [m.name for m in pkgutil.iter_modules(_commands_path) if not m.name.startswith("_")]
        return sorted(n.replace("_", "-") for n in names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = cmd_name.replace("-", "_")
        if not module_name.isidentifier():  # a path, not a command: `audit trace.xplane.pb`
            return None
        try:
            module = importlib.import_module(f"{__package__}.commands.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.commands.{module_name}":
                return None
            raise
        return getattr(module, "command", None)


    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        word = args[0] if args else ""
        if word and self.get_command(ctx, word) is None and _looks_like_a_path(word):
            if word.endswith(".py"):
                raise UsageError(f"'{word}' is not a command; to profile a workload and audit it: "
                                 f"audit run {shlex.quote(word)}")
            raise UsageError(f"'{word}' is not a command; to audit a profile or an HLO dump: "
                             f"audit inspect {shlex.quote(word)}")
        return super().resolve_command(ctx, args)


def _looks_like_a_path(word: str) -> bool:
    """A word the user meant as an input: it exists, or it holds a dot or a slash as paths do."""
    return not word.startswith("-") and (any(c in word for c in "./\\") or os.path.exists(word))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="audit")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Profile analyzer and roofline auditor for JAX."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _save_traceback() -> str | None:
    """Write the current exception's traceback to a fresh file in the temp dir; its path, or None."""
    import tempfile
    import traceback

    try:
        fd, path = tempfile.mkstemp(prefix="audit-internal-error-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write(f"audit {__version__}: {' '.join(sys.argv)}\n")
            traceback.print_exc(file=f)
        return path
    except OSError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code instead of raising."""
    args = list(sys.argv[1:] if argv is None else argv)
    remember(args)
    # A big program's analysis makes millions of small objects that form no cycles; at the collector's
    # default pace (a pass every 700 allocations) looking for cycles takes a fifth of its time.
    gc.set_threshold(100_000, 50, 100)
    debug = "--debug" in args
    try:
        rv = cli.main(args=args, prog_name="audit", standalone_mode=False)
    except GateError as exc:  # not an error: the check the user asked for failed
        click.echo(f"audit: gate: {exc}", err=True)
        return exc.exit_code
    except AuditError as exc:
        if debug:
            raise
        click.echo(f"audit: error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("audit: interrupted", err=True)
        return ExitCode.INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return ExitCode.INPUT
    except click.exceptions.Exit as exc:
        return int(exc.exit_code or 0)
    except KeyboardInterrupt:
        click.echo("audit: interrupted", err=True)
        return ExitCode.INTERRUPTED
    except Exception as exc:  # a bug in audit, not bad input: exit 4, traceback kept in a file
        if debug:
            raise
        where = _save_traceback()
        detail = f"details in {where}" if where else "rerun with --debug for a traceback"
        click.echo(f"audit: internal error: {type(exc).__name__}: {exc} (please report; {detail})", err=True)
        return ExitCode.INTERNAL
    # Commands may return their exit code (e.g. `audit diff` returns 1 on a regression).
    return rv if isinstance(rv, int) else ExitCode.OK
