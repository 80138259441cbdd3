"""The per-op table: measured time joined with expected time, and each op's verdict.

An analysis above the cost model: it takes the trace's op events and the cost model's
expectations, and writes the report model's `OpRecord`s (`audit.optable.record`).

- `carriers`: time measured under an op inside a fusion moved to the op that carries its work
- `join`: op events aggregated per device and per op, joined with HLO facts and costs (`Joined`)
- `command_buffers`: a CUDA graph's launch priced as the ops it runs
- `judge`: `judge_table`, joined facts to `OpRecord`s with their verdict, in one pass
- `verdict`: one op measured against its ceiling: flagged or not, and the reasons
- `waits`: when a GPU collective's time is a wait on other ranks
- `identical`, `beside`: identical ops judged together, and what ran beside an op
- `overlap`: how much of each asynchronous op hides behind compute, and the overlapped step
- `suggest`: what to try for a flagged op
"""
