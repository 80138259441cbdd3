"""Text safe in a GitHub-flavoured markdown table, and plain-text table helpers."""

from __future__ import annotations

from collections.abc import Sequence

from ..base.options import DEFAULTS

MAX_TEXT = DEFAULTS.markdown_cell
_SPECIAL = "\\`*_[]<>|#~&!"


def md_text(value: object, limit: int = MAX_TEXT) -> str:
    """Plain text safe in a GFM table cell: one line, shortened, markdown punctuation escaped."""
    text = " ".join(str(value if value is not None else "").split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return "".join("\\" + ch if ch in _SPECIAL else ch for ch in text)


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GFM table; cells are already escaped."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def clip(text: str, width: int) -> str:
    """One terminal cell, shortened to `width` characters."""
    return text if len(text) <= width else text[: width - 1] + "…"


def more(shown: int, total: int, what: str = "in the full report") -> list[str]:
    """A note that a list was capped."""
    return ["", f"…and {total - shown} more {what}."] if total > shown else []
