"""What a person chooses about a report, and the default of each, stated once: when an op is flagged,
and how many rows the text lists.

The command-line options (`--min-efficiency`, `--min-share`, `--top`), the library's keyword
arguments (`audit.inspect`, `Report.to_text`), the op table's verdicts, the renderers and the
planner all read their defaults from `DEFAULTS`; no other module writes one
(tests/test_facts_once.py checks). Like `audit.errors`, this module sits below every layer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .errors import UsageError


@dataclass(frozen=True)
class Thresholds:
    """When an op is flagged: its achievable time is below `min_efficiency` of its measured time,
    and its self time is at least `min_share` of the measured op time.

    **Raises:** `UsageError` for a threshold outside [0, 1].
    """

    min_efficiency: float = 0.5
    min_share: float = 0.01

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not 0.0 <= value <= 1.0:
                raise UsageError(f"{f.name} must be between 0 and 1, got {value}")


@dataclass(frozen=True)
class Defaults:
    """The default of every choice above."""

    thresholds: Thresholds = Thresholds()
    top: int = 15  # ops the terminal summary of a report lists (--top of run and inspect)
    diff_top: int = 10  # rows of each table in the terminal summary of `audit diff`
    plan_top: int = 5  # layouts `audit plan` lists (its --top)
    # D-sized activations per layer per token that `plan model` and the training closed forms keep
    # when no remat is stated: block remat, each layer's input (the least any policy keeps on chip)
    plan_checkpoints_per_layer: float = 1.0


DEFAULTS = Defaults()
