"""Roofline expectation and verdict against the book's worked numbers (chapters 1, 2, 9),
and against real JAX programs compiled on simulated CPU devices."""

from __future__ import annotations

from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from audit.costmodel.chips.catalog import lookup
from audit.costmodel.chips.hardware import Quantity
from audit.costmodel.napkin import collective, matmul
from audit.costmodel.ops.module import cost_module
from audit.costmodel.costs import CollectiveInfo, OpCost
from audit.costmodel.roofline import expect
from audit.optable.verdict import flag_reasons, judge
from audit.parsers.hlo.text import parse_hlo_text

# Ch. 1 uses 8.2e11 B/s for the v5e's HBM ("1.97e14 / 8.20e11 = 240"); the ch. 2 table says 8.1e11.
V5E_CH1 = replace(lookup("tpu-v5e"), hbm_bytes_per_s=Quantity(8.2e11, "B/s", "user", "book ch. 1"))


def test_ch1_t_math_on_h100_and_v6e():
    # Ch. 1.1: 1e12 FLOPs take 1e12 / 9.89e14 = 1.01 ms on an H100 and 1e12 / 9.1e14 = 1.1 ms on a v6e.
    work = OpCost(flops=1e12, bytes_read=1e3, bytes_written=1e3, dtype="bf16")
    assert expect(work, lookup("h100")).compute_s == pytest.approx(1.01e-3, rel=0.01)
    assert expect(work, lookup("tpu-v6e")).compute_s == pytest.approx(1.1e-3, rel=0.02)


def test_ch1_v5e_ridge_is_240_flops_per_byte():
    # Ch. 1.1: "For the TPU v5e MXU, this is about 240 FLOPs/byte" (1.97e14 / 8.2e11).
    assert matmul(1024, 1024, 1024, "bf16", V5E_CH1)["ridge_intensity"] == pytest.approx(240, rel=0.005)


@pytest.mark.parametrize("batch, bound", [(128, "memory"), (200, "memory"), (300, "compute"), (1024, "compute")])
def test_ch1_matmul_is_compute_bound_above_240_tokens(batch, bound):
    # Ch. 1.1.2, eq. (2): a bf16 matmul with D, F >> B is compute-bound when B > 240.
    out = matmul(batch, 16384, 16384, "bf16", V5E_CH1)
    assert out["bound_by"] == bound
    d = f = 16384
    assert out["intensity"] == pytest.approx(batch * d * f / (batch * d + d * f + batch * f))


@pytest.mark.parametrize("batch, bound", [(220, "memory"), (270, "compute")])
def test_solution_1_1_int8_rule_is_243_tokens(batch, bound):
    # Solution 1.1: int8 intensity 3.94e14 / 8.1e11 = 486, so the rule becomes B > 243.
    out = matmul(batch, 16384, 16384, "int8", lookup("tpu-v5e"))
    assert out["ridge_intensity"] == pytest.approx(486, rel=0.01)
    assert out["bound_by"] == bound


def test_solution_1_5_h100_critical_batch_is_about_298():
    # Solution 1.5: 1e15 / 3.35e12 = 298 (dense bf16 peak is half the sparse datasheet number).
    assert matmul(1024, 1024, 1024, "bf16", lookup("h100"))["ridge_intensity"] == pytest.approx(298, rel=0.02)


@pytest.mark.parametrize("batch, bound", [(250, "memory"), (285, "compute")])
def test_solution_2_4_int8_weight_matmul_crossover_near_271(batch, bound):
    # Solution 2.4: int8[16384, 4096] x int8[B, 4096] on one v5e is FLOPs-bound for B > 271
    # (the book rounds 1.34e8 FLOPs per token down to 1.3e8; exact numbers cross at 263).
    assert matmul(batch, 4096, 16384, "int8", lookup("tpu-v5e"))["bound_by"] == bound


def test_ch9_tpu_v2_sharded_matmul_is_95_6_ms():
    # Ch. 9.2.4: the 4-way DP x 2-way MP up-projection bf16[8,1024,8192] x bf16[8192,16384] per
    # core on TPU v2 (23e12 FLOP/s per core): 2*32*1024*8192*32768 / (23e12*8) = 95.6 ms, measured 96 ms.
    out = matmul(8 * 1024, 8192, 16384, "bf16", lookup("tpu-v2"))
    assert out["bound_by"] == "compute"
    assert out["time_s"] == pytest.approx(95.6e-3, rel=0.002)
    flagged, efficiency = judge(out["time_s"], 96e-3, 0.4)
    assert not flagged and efficiency == pytest.approx(0.996, abs=0.002)


def test_all_gather_measured_at_680us_is_not_flagged_but_a_slow_one_is():
    # Ch. 3, Pop Quiz 2: 680 us measured against ~560 us expected is reasonable; 3 ms is not.
    hw = lookup("tpu-v5e:8x4")
    info = CollectiveInfo("all-gather", 2048 * 8192 * 2, 4, groups=((0, 8, 16, 24),))
    cost = OpCost(flops=0.0, bytes_read=2048 * 8192 // 2, bytes_written=2048 * 8192 * 2,
                  dtype="bf16", collective=info)
    exp = expect(cost, hw)
    assert exp.bound_by == "collective"
    assert exp.comm_s == pytest.approx(560e-6, rel=0.01)
    assert judge(exp.expected_s, 680e-6, 0.3)[0] is False
    flagged, efficiency = judge(exp.expected_s, 3e-3, 0.3)
    assert flagged and efficiency == pytest.approx(0.187, rel=0.01)
    assert judge(exp.expected_s, 3e-3, 0.001)[0] is False  # too small a share of the step
    reasons = flag_reasons(cost, exp, 3e-3, hw)
    assert any(r.startswith("all-gather reached 8.39 GB/s of 45.0 GB/s") for r in reasons)


def test_small_batch_matmul_reason_names_the_critical_batch():
    # Ch. 1.1.2 takeaway: a bf16 matmul needs > 240 tokens (its M) per device to be compute-bound.
    d = f = 32768
    cost = OpCost(flops=2 * 64 * d * f, bytes_read=2 * (64 * d + d * f), bytes_written=2 * 64 * f,
                  dtype="bf16", gemm=(1, 64, f, d))
    exp = expect(cost, V5E_CH1)
    assert exp.bound_by == "memory"
    reasons = flag_reasons(cost, exp, 4 * exp.expected_s, V5E_CH1)
    assert any("a matmul M=64 N=32,768 K=32,768 does 63.8 FLOP/B, below the 240 FLOP/B" in r
               and "its smallest dimension, M=64, limits it" in r for r in reasons)


def test_opaque_custom_call_has_no_expectation():
    cost = OpCost(flops=None, bytes_read=None, bytes_written=None, provenance="unknown",
                  reason="opaque custom call: no cost available")
    exp = expect(cost, lookup("tpu-v5e"))
    assert exp.expected_s is None and exp.bound_by == "unknown"
    assert flag_reasons(cost, exp, 1e-3, lookup("tpu-v5e")) == ["opaque custom call: no cost available"]
    assert judge(exp.expected_s, 1e-3, 0.5) == (False, None)


def test_padding_notes_and_f32_on_the_mxu_become_reasons():
    cost = OpCost(flops=2 * 100 * 4096 * 4096, bytes_read=4 * (100 * 4096 + 4096 * 4096),
                  bytes_written=4 * 100 * 4096, dtype="f32", notes=("dimension 100 pads to 128 on the MXU",))
    reasons = expect(cost, lookup("tpu-v5e")).reasons
    assert "dimension 100 pads to 128 on the MXU" in reasons
    assert any(r.startswith("f32 matmul on the MXU") for r in reasons)


def test_tiny_op_is_latency_bound_by_the_per_op_overhead():
    hw = lookup("h100")
    exp = expect(OpCost(flops=10.0, bytes_read=64.0, bytes_written=64.0, dtype="f32"), hw)
    assert exp.bound_by == "latency"
    assert exp.expected_s == pytest.approx(hw.op_overhead_s.value, rel=0.01)


def test_judge_rejects_nonsense_thresholds():
    from audit.base.errors import UsageError
    from audit.base.options import Thresholds

    with pytest.raises(UsageError, match="min_efficiency must be between 0 and 1"):
        Thresholds(min_efficiency=-0.1)
    with pytest.raises(UsageError, match="min_share must be between 0 and 1"):
        Thresholds(min_share=2.0)
    assert judge(1.0, 2.0, 0.5, Thresholds(min_efficiency=0.6)) == (True, 0.5)
    assert judge(1.0, 2.0, 0.5, Thresholds(min_efficiency=0.4)) == (False, 0.5)


def test_real_jax_matmul_audit_matches_calc():
    # The napkin (audit calc) and the audit of the compiled op must agree.
    f = jax.jit(lambda a, b: a @ b)
    a = jnp.zeros((256, 512), jnp.float32)
    b = jnp.zeros((512, 1024), jnp.float32)
    costs = cost_module(parse_hlo_text(f.lower(a, b).compile().as_text()))
    dot = max(costs.values(), key=lambda c: c.flops or 0.0)
    hw = lookup("tpu-v5e")
    napkin = matmul(256, 512, 1024, "f32", hw)
    exp = expect(dot, hw)
    assert dot.flops == napkin["flops"] and dot.bytes == napkin["bytes"]
    assert exp.expected_s == pytest.approx(napkin["time_s"])
    assert exp.bound_by == napkin["bound_by"]


def test_real_jax_all_gather_audit_matches_calc():
    # shard_map all-gather over mesh axis X of a {X: 4, Y: 2} mesh laid on a v5e 4x2 slice.
    devices = np.array(jax.devices()[:8]).reshape(2, 4).T  # mesh[x, y] = device x + 4y
    mesh = Mesh(devices, ("X", "Y"))
    gather = jax.jit(jax.shard_map(lambda x: jax.lax.all_gather(x, "X", tiled=True), mesh=mesh,
                                   in_specs=P("X"), out_specs=P(), check_vma=False))
    text = gather.lower(jnp.zeros((2048, 8192), jnp.float32)).compile().as_text()
    costs = cost_module(parse_hlo_text(text))
    cost = next(c for c in costs.values() if c.collective is not None)
    # Replica groups name logical partitions; the device assignment is the mesh, flattened.
    coords = {p: (d.id % 4, d.id // 4) for p, d in enumerate(mesh.devices.flat)}
    hw = lookup("tpu-v5e:4x2")
    exp = expect(cost, hw, coords=coords)
    napkin = collective("all-gather", "f32[2048,8192]", {"X": 4, "Y": 2}, ["X"], hw)
    assert exp.comm_s == pytest.approx(napkin["time_s"])
    assert exp.collective.hops == napkin["hops"] == 3
    assert exp.bound_by == "collective"
