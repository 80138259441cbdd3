"""What every section is: a topic, and how it reads in each format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

D = TypeVar("D")


@dataclass(frozen=True)
class RenderOptions:
    """Choices of the person reading: how many rows the terminal lists, where the HTML report went."""

    top: int = 15
    html_path: str | None = None


def nothing(_: object, __: RenderOptions) -> None:
    """A format that has nothing to show for a section."""
    return None


@dataclass(frozen=True)
class Section(Generic[D]):
    """One section of a document `D`: its anchor id and heading, and how each format renders it.

    The terminal and markdown renderers return lines, the HTML one a fragment; None leaves
    the section out of that format (no data, or nothing a text format can show).
    """

    id: str
    title: str
    terminal: Callable[[D, RenderOptions], list[str] | None]
    markdown: Callable[[D, RenderOptions], list[str] | None]
    html: Callable[[D, RenderOptions], str | None]
    intro: str = ""
