"""What a chip can do: the `Hardware` value, the catalog, detection from a trace, CPU calibration.

- `hardware`: `Hardware`, `Quantity` (a number with its unit and source), `Interconnect`
- `catalog`: one entry per TPU/GPU; `lookup("NAME[:TOPOLOGY]")`
- `detect`: which chip a trace ran on, from its device plane
- `calibrate`: the `cpu` entry, measured on this machine and cached

A new chip is one catalog entry.
"""
