"""What a person chooses about a report, and the default of each, stated once: when an op is flagged,
and how many rows the text lists.

The command-line options (`--min-efficiency`, `--min-share`, `--top`), the library's keyword
arguments (`audit.inspect`, `Report.to_text`), the op table's verdicts, the renderers and the
planner all read their defaults from `DEFAULTS`; no other module writes one
(tests/test_facts_once.py checks). Like `audit.base.errors`, this module sits below every layer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .errors import UsageError


@dataclass(frozen=True)
class Thresholds:
    """When an op is flagged: its achievable time is below `min_efficiency` of its measured time,
    and its self time is at least `min_share` of the measured op time. Program waste
    (`audit.analyses.waste`) is a finding when it costs at least `min_waste_share` of the step.

    **Raises:** `UsageError` for a threshold outside [0, 1].
    """

    min_efficiency: float = 0.5
    min_share: float = 0.01
    min_waste_share: float = 0.01  # program waste costing less of the step is not a finding

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
    memory_buffers: int = 8  # the largest buffers live at a program's memory peak that the report lists
    # The step diagnosis: host activity during idle between executions that takes at least this share of
    # the step is called host-bound (input-bound, dispatch-bound...); below it, idle with what the host ran.
    bound_share: float = 0.2
    dispatch_executions: int = 10  # program executions per step from which the time between them is launching
    finding_min_share: float = 0.005  # findings smaller than this share of the step are left out
    findings_top: int = 5  # findings the terminal and markdown list (the JSON and HTML hold all)
    good_kernels: float = 0.9  # judged ops at this share of their achievable time: "nothing to fix in the kernels"
    # D-sized activations per layer per token that `plan model` and the training closed forms keep
    # when no remat is stated: block remat, each layer's input (the least any policy keeps on chip)
    plan_checkpoints_per_layer: float = 1.0
    # Rows of the lists the formats show; the JSON holds every row unless said otherwise.
    markdown_flagged: int = 15  # flagged ops in markdown (the HTML lists all)
    html_flagged_open: int = 10  # flagged ops shown at once in HTML; the rest sit in a list that printing opens
    markdown_ops: int = 10  # ops in markdown's table of the largest
    markdown_programs: int = 15  # programs in markdown
    markdown_target: int = 15  # matched ops of a --target comparison in markdown
    markdown_warnings: int = 10  # warnings in markdown; the other formats list every one
    markdown_collectives: int = 10  # collectives in markdown
    terminal_collectives: int = 5  # the largest collectives: the terminal is read, the other formats searched
    html_collectives: int = 500  # collectives in the HTML table; the JSON has all
    markdown_beside: int = 10  # ops with what ran beside them, in markdown (the CSV and HTML have all)
    terminal_beside: int = 5  # the same in the terminal
    beside_ops: int = 5  # ops named as running beside one op
    unmatched_kept: int = 10  # the largest ops the trace-to-HLO matching could not explain, kept in the JSON
    unmatched_shown: int = 5  # of those, shown in the terminal and markdown
    host_functions: int = 8  # host functions kept per host, by their time while the devices idle
    pod_ranked: int = 10  # stragglers and slowest hosts a pod report keeps
    pod_rows: int = 5  # rows per pod list in the terminal and markdown
    markdown_cell: int = 90  # characters of text in a markdown table cell before it is shortened


DEFAULTS = Defaults()
