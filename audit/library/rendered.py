"""What `Report` and `Diff` share: every output format, rendered as the CLI writes it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from ..base.options import DEFAULTS

if TYPE_CHECKING:
    from ..reports.render import Renderer


class Rendered(ABC):
    """A document the renderers write; subclasses say which (`_renderer`) and how many rows the text shows."""

    _top = DEFAULTS.top

    @abstractmethod
    def _renderer(self) -> Renderer:
        """The renderer of this document (the report's or the diff's)."""

    def _render(self, fmt: str, *, top: int | None = None, html_path: str | None = None) -> str:
        from ..reports.render import Format
        from ..reports.sections import RenderOptions

        options = RenderOptions(top=self._top if top is None else top, html_path=html_path)
        return self._renderer().render(Format(fmt), options)

    def to_json(self) -> dict[str, Any]:
        """The JSON document `--json` writes."""
        import json

        return dict(json.loads(self._render("json")))

    def to_html(self) -> str:
        """The self-contained HTML page `--html` writes."""
        return self._render("html")

    def to_markdown(self, html_path: str | None = None) -> str:
        """The markdown `--markdown` writes (for a PR comment); `html_path`: where it links the page."""
        return self._render("markdown", html_path=html_path)

    def to_text(self, top: int | None = None) -> str:
        """The terminal summary, `top` rows."""
        return self._render("terminal", top=top)
