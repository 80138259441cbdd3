"""`audit.Diff`: what changed between two sides of runs, as `audit diff` reports it."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


class Diff:
    """The comparison of two sides (schema audit.diff/v1 as `data`).

    `verdict` is the step-time verdict (regression, improvement, no change, inconclusive);
    `regression` is True when a gate tripped (the CLI then exits 1).
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = dict(data)

    @property
    def verdict(self) -> str:
        return str(self.data.get("verdict") or "unknown")

    @property
    def regression(self) -> bool:
        return bool(self.data.get("regression"))

    @property
    def tripped(self) -> list[str]:
        """The gates that tripped, each in one line."""
        return list((self.data.get("gates") or {}).get("tripped") or [])

    def changed_ops(self) -> pd.DataFrame:
        """One row per matched op whose FLOPs, bytes or communicated bytes per step changed
        (columns such as `flops.base`, `flops.head`), most FLOPs changed first."""
        import pandas as pd

        return pd.json_normalize(list((self.data.get("compile_time") or {}).get("changed_ops") or []))

    def to_json(self) -> dict[str, Any]:
        import json

        return dict(json.loads(self._render("json")))

    def to_html(self) -> str:
        return self._render("html")

    def to_markdown(self, html_path: str | None = None) -> str:
        return self._render("markdown", html_path=html_path)

    def to_text(self, top: int = 10) -> str:
        return self._render("terminal", top=top)

    def _render(self, fmt: str, *, top: int = 10, html_path: str | None = None) -> str:
        from ..reports.render import DiffRenderer, Format
        from ..reports.sections import RenderOptions

        return DiffRenderer(self.data).render(Format(fmt), RenderOptions(top=top, html_path=html_path))

    def __repr__(self) -> str:
        return f"<audit diff: {self.verdict}{', gate tripped' if self.regression else ''}>"

    def _repr_html_(self) -> str:
        return f"<pre>{escape(self.to_text())}</pre>"
