#!/bin/bash
# Captures the real GPU inputs under tests/data/captures/<gpu>-jax<version>/ on one GPU of a machine
# with JAX (CUDA) and roofline-audit installed. Run from any folder but the project root, whose
# audit/ folder would shadow the installed package: bash /path/to/capture.sh /path/to/project OUT
set -u
R=$1; W=$2; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv > "$W/nvidia-smi.csv"
XLA_FLAGS="--xla_dump_to=$W/micro/dump --xla_dump_hlo_as_text" python3 "$R/bench/gpu_capture/microbench.py" "$W/micro"
# A training step as XLA runs it by default (CUDA graphs: one command_buffer op per graph) ...
XLA_FLAGS="--xla_dump_to=$W/run-big/dump --xla_dump_hlo_as_text" python3 -m audit run "$R/workloads/transformer.py" \
  --platform cuda --steps 3 --out "$W/run-big" -- --layers 4 --d-model 2048 --d-ff 8192 --heads 16 --seq 2048 \
  --batch 8 --sharding dp
# ... and with command buffers off, one kernel per op.
XLA_FLAGS="--xla_gpu_enable_command_buffer= --xla_dump_to=$W/run-big-nocb/dump --xla_dump_hlo_as_text" \
  python3 -m audit run "$R/workloads/transformer.py" --platform cuda --steps 3 --out "$W/run-big-nocb" -- \
  --layers 4 --d-model 2048 --d-ff 8192 --heads 16 --seq 2048 --batch 8 --sharding dp
