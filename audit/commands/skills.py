"""`audit skills install | show`: the skill document that tells a coding agent how to use audit."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import click

from ..atomic import write_text
from ..base.errors import UsageError

NAME = "audit"  # the skill's name: its folder, and `name` in its front matter
DEFAULT_DIR = ".claude/skills"  # where Claude Code looks for a project's skills


def skill_text() -> str:
    """The skill document as shipped in the package."""
    return (files("audit.skills") / "SKILL.md").read_text(encoding="utf-8")


@click.group("skills")
def command() -> None:
    """Skill documents for coding agents: when to use which audit tool and how to read the answers."""


@command.command("show")
def show() -> None:
    """Print the skill document (SKILL.md)."""
    click.echo(skill_text(), nl=False)


@command.command("install")
@click.option("--dir", "folder", default=DEFAULT_DIR, show_default=True, metavar="DIR",
              help="Skills folder: DIR/audit/SKILL.md is written (e.g. ~/.claude/skills for every project).")
@click.option("--force", is_flag=True, help="Replace a different SKILL.md already there.")
def install(folder: str, force: bool) -> None:
    """Write the skill to DIR/audit/SKILL.md, for an agent that reads skills from DIR."""
    target = Path(folder).expanduser() / NAME / "SKILL.md"
    text = skill_text()
    if target.exists() and not force and target.read_text(encoding="utf-8", errors="replace") != text:
        raise UsageError(f"{target} exists and differs from this version's skill", hint="--force replaces it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {target.parent}: {exc.strerror}") from None
    write_text(str(target), text)
    click.echo(f"Wrote {target}", err=True)
