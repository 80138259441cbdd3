"""Expected time of every op: hardware catalog, per-opcode costs, collectives on a topology, rooflines.

It prices: HLO and hardware in, expectations out. It reads no trace and judges nothing; joining
the measured ops with these expectations and deciding their verdicts is the op table's
(`audit.optable`), above it.

- `chips/`: what a chip can do (catalog, detection, CPU calibration)
- `ops/`: what an op costs (one handler per HLO opcode)
- `network/`: where devices sit and what a collective costs there
- `planner/`: the book's transformer planning math
- `costs`: `OpCost` and `Expectation`, what an op costs and how long it should take
- `roofline`: expected time per op; `schedule`: the step with asynchronous work overlapped
- `units`: the one number formatter
- `napkin`: `audit calc` on the same functions
"""
