"""The tools' output schemas: what each reply's structured content holds.

Every value is what the command's `--json` writes (the JSON report, `audit.report/v1`; the diff,
`audit.diff/v1`; the plan, calc and hardware documents), picked, never reformatted; the objects
inside keep that document's own fields, which its schema and docs/reading-a-report.md describe.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

JSON = dict[str, Any]


class Page(BaseModel):
    """Which rows of a longer list the reply holds."""

    offset: int = Field(description="Rows skipped before the first one shown.")
    shown: int = Field(description="Rows shown.")
    total: int = Field(description="Rows in all.")


class InspectResult(BaseModel):
    """An analysed profile, HLO dump or JSON report: its headline numbers and the ops that matter."""

    chip: str | None = Field(description="The chip the ops were judged against (the report's hardware.name).")
    hardware: JSON = Field(description="The chip's name, kind, vendor and where it was identified from.")
    source: JSON = Field(description="What was analysed (the report's source).")
    summary: JSON = Field(description="The report's summary: step times (summary.step_time_s, seconds per step), "
                                      "measured, expected (roofline) and achievable time, flagged ops.")
    warnings: list[str] = Field(description="What the reader of these numbers must know.")
    findings: list[JSON] | None = Field(
        description="The step's losses, ranked by the step time each costs (the report part `findings`), "
                    "or null when the analysis attached none.")
    flagged: list[JSON] = Field(description="Flagged ops, most wasted time first (the report's `flagged`).")
    top_ops: list[JSON] = Field(description="Ops with the most time, with the columns the terminal shows; "
                                            "`key` names one for `op` or the explain tool.")
    top_ops_page: Page
    op: JSON | None = Field(description="The full record (the report's ops[] entry) of the op asked for.")
    parts: JSON = Field(description="The named report parts asked for, as the JSON report has them.")


class DiffResult(BaseModel):
    """Two sides compared, as `audit diff --json` writes it."""

    verdict: str = Field(description="regression, improvement, no change, inconclusive or not compared.")
    regression: bool = Field(description="The gate's answer: true when a gate tripped (the CLI exits 1).")
    tripped: list[str] = Field(description="The gates that tripped, one line each.")
    diff: JSON = Field(description="The diff document (audit.diff/v1); op lists cut to `rows` rows each.")
    lists: dict[str, Page] = Field(description="For each op list of compile_time, which rows `diff` holds.")


class PlanResult(BaseModel):
    """`audit plan model|train|serve --json`: the plan and its breakdown."""

    kind: str
    plan: JSON


class CalcResult(BaseModel):
    """`audit calc matmul|collective --json`."""

    kind: str
    result: JSON


class HardwareResult(BaseModel):
    """`audit hardware list`, or `audit hardware show NAME --json`."""

    entries: list[JSON] | None = Field(description="list: one row per catalog entry (name, kind, where it is from).")
    hardware: JSON | None = Field(description="show: every figure with its unit and source.")


class ExplainResult(BaseModel):
    """One op: every figure with where it comes from, the verdict, why, and what to try."""

    key: str
    name: str
    module: str
    verdict: str
    figures: list[JSON] = Field(description="Each known figure: key, label, value (SI units), unit, text, "
                                            "source (hlo, trace, model, verdict; FLOPs and bytes: model, trace "
                                            "or xla) and what it means.")
    reasons: list[str]
    suggestion: str
    lower_bound: str | None = Field(description="Why the expected time is only a lower bound, if it is.")
    achievable_source: str = Field(description="The figures (and their sources) that set the achievable time.")
    hardware: JSON = Field(description="The chip it was judged against and where that was identified from.")
