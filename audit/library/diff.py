"""`audit.Diff`: what changed between two sides of runs, as `audit diff` reports it."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import TYPE_CHECKING, Any

from ..options import DEFAULTS
from .rendered import Rendered

if TYPE_CHECKING:
    import pandas as pd

    from ..reports.render import Renderer


class Diff(Rendered):
    """The comparison of two sides (schema audit.diff/v1 as `data`), in every format but CSV.

    `verdict` is the step-time verdict (regression, improvement, no change, inconclusive);
    `regression` is True when a gate tripped (the CLI then exits 1).
    """

    _top = DEFAULTS.diff_top  # rows of the text summary, as `audit diff` shows

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

    def _renderer(self) -> Renderer:
        from ..reports.render import DiffRenderer

        return DiffRenderer(self.data)

    def __repr__(self) -> str:
        return f"<audit diff: {self.verdict}{', gate tripped' if self.regression else ''}>"

    def _repr_html_(self) -> str:
        return f"<pre>{escape(self.to_text())}</pre>"
