"""Per-opcode cost: FLOPs, transcendentals, bytes and communicated bytes of every HLO op.

- `base`: the dispatch table (`HANDLERS`, one handler per opcode) and what handlers share
- `compute`, `memory`, `collective`, `control`, `fusion`, `custom`: the handlers, by kind of op
- `loops`: while trip counts; `window`: convolution and reduce-window windows
- `layout`: bytes an array occupies (TPU tile padding)
- `module`: `cost_module`, the cost of every op of a module

A new opcode is one `@handles("opcode")` function in the handler module of its kind.
"""
