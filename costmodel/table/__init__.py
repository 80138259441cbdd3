"""The per-op table: measured time joined with expected time, and each op's verdict.

- `join`: op events aggregated per device and per op, joined with HLO facts and costs (`Joined`)
- `judge`: `judge_table`, joined facts to `OpRecord`s with their verdict, in one pass
- `record`: `OpRecord` and `CollectiveRow`, typed end to end, JSON only at the edge
- `columns`: every column declared once (header, unit, origin) for CSV, HTML, terminal, markdown
- `overlap`: how much of each asynchronous op hides behind compute, and the overlapped step
- `suggest`: what to try for a flagged op
"""
