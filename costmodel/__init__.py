"""Expected time of every op: hardware catalog, per-opcode costs, collectives on a topology, rooflines.

- `chips/`: what a chip can do (catalog, detection, CPU calibration)
- `ops/`: what an op costs (one handler per HLO opcode)
- `network/`: where devices sit and what a collective costs there
- `planner/`: the book's transformer planning math
- `records`: `OpCost` and `Expectation`, the records the model produces
- `roofline`: expected time and verdict per op; `optable`: measured joined with expected
- `napkin`: `audit calc` on the same functions
"""
