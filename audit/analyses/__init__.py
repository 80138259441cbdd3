"""Analyses over the per-op table, the steps and other reports; each returns plain data for reports.

- `steps`: step table, idle time, timeline, overlapped collectives
- `plan_vs_profile`, `plan_gaps`: napkin plan, cost model and measurement of one step, and why they differ
- `xla_gap`: our predicted step against XLA's `optimal_seconds`, in numbers
- `compare_target`: measured on this CPU next to predicted on a target, per framework op
- `diff_verdict`: `audit diff`'s analysis, two sides of runs in, a typed `DiffModel` out, built from
  `diff_pairing` (ops paired across compiles), `diff_program` (what changed in the program, exact) and
  `diff_timing` (what changed in time, against run-to-run noise)
"""
