"""What a chip can do: the `Hardware` value, the catalog, detection from a trace, the CPU's calibration record.

- `hardware`: `Hardware`, `Quantity` (a number with its unit, source and kind), `Interconnect`
- `hwfile`: the TOML hardware-file format, read and written for any `Hardware` field
- `data/`: the catalog itself, one hardware file per TPU/GPU
- `catalog`: those files and users' own (`AUDIT_HARDWARE_PATH`, `FILE.toml`); `lookup("NAME[:TOPOLOGY]")`
- `detect`: which chip a trace ran on, from its device plane
- `calibration`: the `cpu` entry, read from the record of this machine's measurement

A new chip is one file in `data/` (or in a directory on `AUDIT_HARDWARE_PATH`): no Python.
"""
