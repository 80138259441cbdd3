"""Collectives on a network: where devices sit and how long a collective takes there.

- `topology`: TPU torus coordinates, GPU NVLink domains, one CPU host; placing replica groups
- `mesh_layout`: a logical mesh laid on the physical topology (for `calc` and the planner)
- `collectives`: latency floor and bandwidth term of each collective on its placement
"""
