"""Child processes: each runs with its own JAX configuration (`python -P -m ...` or `python -m ...`).

- `capture`: runs a workload under `jax.profiler` and writes the capture (`audit run`)
- `aot`: compiles a workload's step for a TPU topology this machine does not have (`audit run --target`)
- `calibrate`: measures this machine's CPU with JAX for the `cpu` hardware entry
"""
