"""Pod scale: many host profiles read on a Dask cluster and reduced to one analysis.

Map per host, reduce across hosts. Each host file is read on a worker and reduced to
a compact `HostSummary` (per-op times, steps, idle, HLO fingerprints, device facts),
cached as Parquet; the driver combines summaries and never holds an event table.

- `files`: list a run's host files on any fsspec filesystem, and name each file's identity
- `summary`: the map step (one host file -> HostSummary) and its Parquet cache
- `cluster`: no cluster for one file, a local Dask cluster, or the user's by address
- `reduce`: run the map over every host and combine the summaries
- `analyses`: stragglers, slowest hosts, program mismatches, collective wait by host
"""
