"""Orchestration: the one place each command's work is put together.

- `pipeline`: parsers -> cost model -> analyses -> the report (`audit inspect`, `audit run`)
- `runner`: the parent side of `audit run` (spawns the capture child, analyses what it wrote)
- `predict`: `audit run --target` (ahead-of-time compile, then the pipeline on the target chip)
- `report_rows`: report rows built from the joined op table
"""
