"""`audit.Diff`: what changed between two sides of runs, as `audit diff` reports it."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from html import escape
from typing import TYPE_CHECKING, Any

from ..base.options import DEFAULTS
from ..reports.model.diff import DiffModel
from .rendered import Rendered

if TYPE_CHECKING:
    import pandas as pd

    from ..reports.render import Renderer


class Diff(Rendered):
    """The comparison of two sides, in every format but CSV.

    **Attributes:**
    - `model`: the typed diff itself (`audit.reports.model.diff.DiffModel`), as every renderer takes it.
    - `data`: the same as the JSON document (schema audit.diff/v1) `--json` writes.
    - `verdict`: the step-time verdict (regression, improvement, no change, inconclusive, not compared).
    - `regression`: True when a gate tripped (the CLI then exits 1); `tripped` says which.
    """

    _top = DEFAULTS.diff_top  # rows of the text summary, as `audit diff` shows

    def __init__(self, model: DiffModel | Mapping[str, Any]) -> None:
        self.model = model if isinstance(model, DiffModel) else DiffModel.from_json(model)

    @cached_property
    def data(self) -> dict[str, Any]:
        return self.model.to_json()

    @property
    def verdict(self) -> str:
        return self.model.verdict

    @property
    def regression(self) -> bool:
        return self.model.regression

    @property
    def tripped(self) -> list[str]:
        """The gates that tripped, each in one line."""
        return list(self.model.tripped)

    def changed_ops(self) -> pd.DataFrame:
        """One row per matched op whose FLOPs, bytes or communicated bytes per step changed
        (columns such as `flops.base`, `flops.head`), most FLOPs changed first."""
        import pandas as pd

        return pd.json_normalize([r.to_json() for r in self.model.compile_time.changed_ops])

    def _renderer(self) -> Renderer:
        from ..reports.render import DiffRenderer

        return DiffRenderer(self.model)

    def __repr__(self) -> str:
        return f"<audit diff: {self.verdict}{', gate tripped' if self.regression else ''}>"

    def _repr_html_(self) -> str:
        return f"<pre>{escape(self.to_text())}</pre>"
