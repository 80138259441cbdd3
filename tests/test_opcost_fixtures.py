"""The per-op cost model on real dumps: a MaxText train step on H100 and a Llama3-8B step on TPU v6e."""

from __future__ import annotations

import json
import math

import pytest

from audit.costmodel.ops.module import cost_module, module_totals, unmodeled_ops
from audit.costmodel.ops.base import CostContext, cost_instruction
from audit.parsers.hlo.files import load_hlo_file
from audit.parsers.hlo.model import Instruction, Module
from conftest import shared_fixture

MAXTEXT = "gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb"
V6E = "tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"
COLLECTIVE_STARTS = ("all-gather-start", "all-reduce-start", "collective-permute-start", "all-gather",
                     "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")


@pytest.fixture(scope="module")
def maxtext():
    module = load_hlo_file(shared_fixture(MAXTEXT))
    return module, cost_module(module, num_partitions=4)


@pytest.fixture(scope="module")
def v6e():
    module = load_hlo_file(shared_fixture(V6E))
    return module, cost_module(module, num_partitions=8)


def gemm_flops_from_operands(module: Module, gemm: Instruction) -> int:
    """2*B*M*N*K straight from the operand shapes and the dot dimensions in backend_config."""
    dims = json.loads(gemm.backend_config)["gemm_backend_config"]["dot_dimension_numbers"]
    lhs, rhs = (module.find(name)[1].shape for name in gemm.operands[:2])
    k = math.prod(lhs.dims[int(d)] for d in dims["lhs_contracting_dimensions"])
    b = math.prod(lhs.dims[int(d)] for d in dims["lhs_batch_dimensions"])
    m = lhs.elements // (k * b)
    n = rhs.elements // (k * b)
    return 2 * b * m * n * k


def test_every_cublas_gemm_costs_two_m_n_k(maxtext):
    module, costs = maxtext
    gemms = [(comp, i) for comp, i in module.instructions() if i.custom_call_target == "__cublas$gemm"]
    assert len(gemms) == 159
    for comp, gemm in gemms:
        expected = gemm_flops_from_operands(module, gemm)
        assert expected > 0
        # Gemms inside address-computation fusions are costed through their fusion.
        c = costs.get(gemm.name) or cost_instruction(gemm, CostContext(module, comp, 4))
        assert c.flops == expected, gemm.name
        assert c.provenance == "model" and c.bytes > 0


def test_fusions_holding_gemms_carry_their_flops(maxtext):
    module, costs = maxtext
    for _comp, fusion in module.instructions():
        if fusion.opcode != "fusion" or fusion.name not in costs:
            continue
        inner = module.computations[fusion.called[0]]
        gemm_flops = sum(gemm_flops_from_operands(module, i) for i in inner.instructions
                         if i.custom_call_target == "__cublas$gemm")
        assert costs[fusion.name].flops >= gemm_flops


def test_maxtext_collectives_move_bytes(maxtext):
    module, costs = maxtext
    collective_ops = [name for name, c in costs.items() if c.collective is not None]
    assert len(collective_ops) >= 20
    for name in collective_ops:
        c = costs[name]
        assert c.comm_bytes > 0 and c.collective.bytes > 0, name
        assert c.collective.group_size == 4
    for name, c in costs.items():
        op = module.find(name)[1]
        if op.opcode in COLLECTIVE_STARTS and not any(n.startswith("costed on") for n in c.notes):
            assert c.comm_bytes > 0, name
        if op.opcode.endswith("-done"):
            assert c.bytes == 0 and "completes" in c.notes[0]


def test_nothing_is_silently_zero(maxtext, v6e):
    for module, costs in (maxtext, v6e):
        for name, c in costs.items():
            if not c.modeled:
                assert c.flops is None and c.bytes is None and c.reason, name
            elif not (c.flops or c.bytes or c.comm_bytes):
                assert c.notes, f"{name} costs nothing and does not say why"
        totals = module_totals(module, costs)
        assert totals["unmodeled_ops"] == len(unmodeled_ops(costs))


def test_maxtext_loops_use_known_trip_counts(maxtext):
    module, costs = maxtext
    trips = {c.trip_count for c in costs.values()}
    assert {2, 3} <= trips
    totals = module_totals(module, costs)
    per_run = sum(c.flops for c in costs.values() if c.flops)
    assert totals["flops"] > per_run and totals["unknown_trip_count_ops"] == 0


def test_v6e_dump_costs_with_tiles_mosaic_kernels_and_async_collectives(v6e):
    module, costs = v6e
    assert len(costs) > 1000
    mosaic = [n for n, c in costs.items() if module.find(n)[1].custom_call_target == "tpu_custom_call"]
    assert len(mosaic) == 3
    assert all(costs[n].provenance == "xla" and costs[n].flops > 1e12 for n in mosaic)
    starts = [n for n, c in costs.items() if module.find(n)[1].opcode == "async-start"]
    assert len(starts) == 30
    assert all(costs[n].collective is not None and costs[n].comm_bytes > 0 for n in starts)
    # The layer loop has no known_trip_count; its counted-loop form gives 32 layers.
    assert 32 in {c.trip_count for c in costs.values()}


def test_v6e_tile_padding_counts_in_bytes(v6e):
    module, costs = v6e
    # bf16[32,512]{T(8,128)(2,1)} is unpadded; s32[]{:T(128)} scalars occupy a full 512-byte tile.
    padded = [n for n, c in costs.items() if module.find(n)[1].opcode == "copy"
              and str(module.find(n)[1].shape) == "s32[]"]
    assert padded and all(costs[n].bytes_written in (0, 512) for n in padded)
    assert any(costs[n].bytes_written == 512 for n in padded)


def test_v6e_step_flops_are_those_of_an_8b_model(v6e):
    module, costs = v6e
    flops = module_totals(module, costs)["flops"]
    # 6 * 8e9 params * 32768 tokens per device is 1.6e15; remat and attention add to it.
    assert 1.5e15 < flops < 4e15


def test_partitioned_step_does_a_quarter_of_the_global_programs_flops(maxtext):
    # Before SPMD partitioning the module is the global program; after it, one of 4 FSDP shards.
    before = load_hlo_file(shared_fixture(MAXTEXT.replace("sm_9.0_gpu_after", "before")))
    global_flops = module_totals(before, cost_module(before))["flops"]
    module, costs = maxtext
    per_device = module_totals(module, costs)["flops"]
    assert per_device == pytest.approx(global_flops / 4, rel=0.01)
