"""Orchestration: the one place each command's work is put together.

- `pipeline`: parsers -> cost model -> judged op table -> the report (`audit inspect`, `audit run`)
- `analysis`: what every input shares: how ops are judged (`Options`), the chip, every op's cost and
  expected time, the predicted report of programs compiled but not run; it calls no entry point
- `hlo_dumps`: `audit inspect` of an HLO dump (a file or an `--xla_dump_to` folder)
- `assemble`: the one place a `ReportModel` is built from judged ops (summary, flagged, collectives)
- `caveats`: what a report must say about its own limits (loops, topology, unmodeled ops)
- `runner`: the parent side of `audit run` (spawns the capture child, analyses what it wrote)
- `calibrate`: this machine's CPU measured (in the `child.calibrate` process) and its record kept
- `predict`: `audit run --target` (ahead-of-time compile, then the pipeline on the target chip)
"""
