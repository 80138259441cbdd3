"""What every section is: a topic, and how it reads in each format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from ...base.options import DEFAULTS

if TYPE_CHECKING:
    from ...optable.record import OpRecord
    from ..model.report import ReportModel

D = TypeVar("D")


@dataclass(frozen=True)
class RenderOptions:
    """Choices of the person reading: how many rows the terminal lists, where the HTML report went."""

    top: int = DEFAULTS.top
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


def shared_modules(report: ReportModel) -> set[str]:
    """Module names that several programs of the report carry (a benchmark's `jit__lambda`s): an op
    is told apart by its program there."""
    seen: dict[str, set[int]] = {}
    for o in report.ops:
        seen.setdefault(o.module, set()).add(o.program_id)
    return {m for m, pids in seen.items() if len(pids) > 1}


def module_label(report: ReportModel) -> Callable[[OpRecord], str]:
    """An op's module as the text formats name it, with its program where the name is shared."""
    shared = shared_modules(report)
    return lambda o: f"{o.module}, program {o.program_id}" if o.module in shared else o.module
