"""The report's sections, in order, each rendered for every format from one place.

A section is one topic of the report (verdict, flagged ops, collectives, the plan...) and
knows how it reads in the terminal, in markdown and in HTML; a format that has nothing to
show for it returns nothing. `REPORT_SECTIONS` is the one list every format walks, so a
part of the report reaches every format or says, here, why it does not.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model.report import ReportModel
from ._base import RenderOptions, Section, nothing
from . import (collectives, findings, flagged, interference, matching, memory, ops, plan, pod, programs, target,
               timeline, verdict, warnings)

__all__ = ["REPORT_SECTIONS", "RenderOptions", "Section"]


REPORT_SECTIONS: Sequence[Section[ReportModel]] = (
    Section("verdict", "Verdict", verdict.terminal, verdict.markdown, verdict.html),
    Section("findings", "Findings", findings.terminal, findings.markdown, findings.html,
            "What the step's time goes to, each cause with the time it costs per step and its evidence, "
            "largest first; the waterfall runs from the roofline step to the measured one."),
    Section("step", "Where the time goes", verdict.step_terminal, verdict.step_markdown, verdict.step_html),
    Section("programs", "Programs", programs.terminal, programs.markdown, programs.html,
            "A capture of several programs, one per step: each program's measured time per execution beside "
            "what it should take."),
    Section("warnings", "Warnings", warnings.terminal, warnings.markdown, warnings.html),
    Section("flagged", "Flagged ops", flagged.terminal, flagged.markdown, flagged.html,
            "The top offenders by wasted time (measured self time beyond the achievable time), "
            "with the rule that fired."),
    Section("interference", "Slowed by interference", interference.terminal, interference.markdown,
            interference.html),
    Section("memory", "Memory", memory.terminal, memory.markdown, memory.html,
            "Each program's device memory as XLA assigned it: the peak, where it is reached, what is live then."),
    # The terminal and markdown list the top ops; the page charts every op (and tables them last).
    Section("roofline", "Roofline", ops.terminal, ops.markdown, ops.roofline_html),
    Section("collectives", "Collectives", collectives.terminal, collectives.markdown, collectives.html),
    Section("plan", "Plan vs model vs measured", plan.terminal, plan.markdown, plan.html,
            "The book's closed forms for this configuration beside the cost model and the trace, "
            "with the main reasons wherever two of them differ by more than 2x."),
    Section("target", "Measured here vs predicted on the target", target.terminal, target.markdown, target.html,
            "Each framework op's measured time on this CPU next to its predicted time on the target chip, per step."),
    Section("matching", "Matching", matching.terminal, matching.markdown, matching.html,
            "How much measured GPU time the per-op table matched to HLO ops, and what the largest other ranges are."),
    Section("pod", "Pod", pod.terminal, pod.markdown, pod.html,
            "Across hosts: top hosts and ops, and distributions over every host (measured, from the trace)."),
    # A picture of one step: nothing to say in text that the sections above do not.
    Section("timeline", "Step timeline", nothing, nothing, timeline.html, "One representative step per device class."),
    Section("ops", "All ops", nothing, nothing, ops.table_html,
            "Per device, summed over occurrences in the analysed steps. Click a header to sort."),
)
