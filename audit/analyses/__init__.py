"""Analyses over the per-op table, the steps and other reports; each returns plain data for reports.

- `steps`: step table, idle time, time by bound, timeline, overlapped collectives
- `suggestions`: a concrete thing to try for a flagged op
- `plan_vs_profile`: napkin plan, cost model and measurement of one step, side by side
- `compare_target`: measured on this CPU next to predicted on a target, per framework op
- `diffing`: what changed between two reports, in the program and in time
"""
