"""Child processes of `audit run`: each runs with its own JAX configuration (`python -P -m ...`).

- `capture`: runs a workload under `jax.profiler` and writes the capture
- `aot`: compiles a workload's step for a TPU topology this machine does not have
"""
