"""The book's transformer math (ch. 4-8) as a planner, on the same catalog and collective model.

- `transformer`: parameters, FLOPs, KV cache and activations per token
- `chip_numbers`: the chip figures the planner needs, with sources
- `parallel`: compute- versus communication-bound per parallelism strategy
- `train`, `serve`: training and serving plans; `workload`: the plan of one profiled step
"""
