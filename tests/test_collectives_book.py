"""Collective times against the worked numbers of "How to Scale Your Model" (chapters 2-3).

Each test names the section it checks. Tolerances are the book's own rounding (it writes
34e6 bytes for 33.55 MB, 8.4e6 for 8.39 MB, and so on).
"""

from __future__ import annotations

import pytest

from audit.costmodel.chips.catalog import lookup
from audit.costmodel.network.collectives import collective_time
from audit.costmodel.napkin import collective
from audit.costmodel.network.topology import place_pairs

V5E_8x4 = lookup("tpu-v5e:8x4")
V4_CUBE = lookup("tpu-v4:4x4x4")


def test_pop_quiz_2a_all_gather_without_wraparound_on_v5e():
    # Ch. 3, Case 2, Pop Quiz 2 (a): AllGather_Y([E_Y, F]) on v5e {'X': 8, 'Y': 4}, E=2048, F=8192.
    # No wraparound on a 4-long v5e axis: 3 * 8.4e6 / 4.5e10 = 560 us; measured 680 us.
    out = collective("all-gather", "bf16[2048,8192]", {"X": 8, "Y": 4}, ["Y"], V5E_8x4)
    assert out["wraparound"] is False
    assert out["hops"] == 3
    assert out["time_s"] == pytest.approx(560e-6, rel=0.01)
    assert 377e-6 <= out["time_s"] <= 680e-6
    assert out["bound_by"] == "collective"
    assert any("without a wraparound" in note for note in out["notes"])


def test_pop_quiz_2a_all_gather_with_wraparound_is_377us():
    # Same section: "T_comms = 34e6 / 9e10 = 377 us" with a full (bidirectional) ring.
    out = collective("all-gather", "bf16[2048,8192]", {"X": 8, "Y": 4}, ["Y"], V5E_8x4, wraparound="yes")
    assert out["wraparound"] is True
    assert out["bandwidth_bytes_per_s"] == pytest.approx(9e10)
    assert out["time_s"] == pytest.approx(377e-6, rel=0.015)


def test_pop_quiz_2b_small_all_gather_is_latency_bound():
    # Pop Quiz 2 (b): E = F = 256, 32 kB shards: "we're latency bound ... 3 hops ... roughly 3 us".
    out = collective("all-gather", "bf16[256,256]", {"X": 8, "Y": 4}, ["Y"], V5E_8x4)
    assert out["bound_by"] == "latency"
    assert out["time_s"] == pytest.approx(3e-6, rel=0.01)
    assert out["bandwidth_s"] < out["latency_s"]


def test_solution_3_2_all_gather_one_axis_of_a_v4_cube():
    # Solution 3.2 (1): AllGather_X([B_X, D_Y]) on v4 4x4x4, B=1024, D=4096: 2BD/(9e10*Y) = 23 us.
    out = collective("all-gather", "bf16[1024,1024]", {"X": 4, "Y": 4, "Z": 4}, ["X"], V4_CUBE)
    assert out["wraparound"] is True
    assert out["time_s"] == pytest.approx(23e-6, rel=0.02)


def test_solution_3_2_all_gather_two_axes_doubles_bandwidth():
    # Solution 3.2 (2): AllGather_XY([B_X, D_Y]): 2BD / (2 * 9e10) = 46 us; latency floor 4 us.
    out = collective("all-gather", "bf16[1024,4096]", {"X": 4, "Y": 4, "Z": 4}, ["X", "Y"], V4_CUBE)
    assert out["time_s"] == pytest.approx(46e-6, rel=0.02)
    assert out["hops"] == 4
    assert out["latency_s"] == pytest.approx(4e-6)
    assert out["bandwidth_bytes_per_s"] == pytest.approx(1.8e11)


def test_solution_3_2_all_reduce_is_twice_an_all_gather():
    # Solution 3.2 (3): AllReduce_Z([B_X, D_Y]{U_Z}): 4BD / (X*Y*W) = 11.6 us.
    out = collective("all-reduce", "bf16[256,1024]", {"X": 4, "Y": 4, "Z": 4}, ["Z"], V4_CUBE)
    assert out["time_s"] == pytest.approx(11.6e-6, rel=0.01)


def test_solution_3_3_tiny_all_gather_on_a_wrapped_axis_takes_two_hops():
    # Solution 3.3: AllGather_X([B_X]) with B=128 on v4 4x4x4: latency bound, "only 2 hops ... 2us".
    out = collective("all-gather", "bf16[128]", {"X": 4, "Y": 4, "Z": 4}, ["X"], V4_CUBE)
    assert out["bound_by"] == "latency"
    assert out["hops"] == 2
    assert out["time_s"] == pytest.approx(2e-6)


def test_all_to_all_is_a_quarter_of_an_all_gather_on_a_bidirectional_ring():
    # Ch. 3.3.1 and the 3.4 table: AllToAll = AllGather / 4 for a bidirectional ring. The
    # AllToAll's V is the local array, the AllGather's the whole (gathered) array.
    mesh = {"X": 4, "Y": 4, "Z": 4}
    gather = collective("all-gather", "bf16[4096,4096]", mesh, ["X"], V4_CUBE)
    a2a = collective("all-to-all", "bf16[1024,4096]", mesh, ["X"], V4_CUBE)
    assert a2a["bandwidth_s"] == pytest.approx(gather["bandwidth_s"] / 4)


def test_all_to_all_without_wraparound_costs_twice_as_much():
    # Solution 3.10 (4)-(5): bidirectional links halve an AllToAll's time on a ring.
    hw = lookup("tpu-v5e:16x4")
    wrapped = collective("all-to-all", "bf16[2048,8192]", {"X": 16, "Y": 4}, ["X"], hw)
    line = collective("all-to-all", "bf16[2048,8192]", {"X": 16, "Y": 4}, ["X"], hw, wraparound="no")
    assert wrapped["wraparound"] is True
    assert line["bandwidth_s"] == pytest.approx(2 * wrapped["bandwidth_s"])


def test_solution_2_5_point_to_point_across_a_4x4_v5e():
    # Solution 2.5: bf16[8,128,8192] from TPU{0,0} to TPU{3,3} on a v5e 4x4: six hops (first
    # byte after ~6 us) and both ports in use, 1.7e7 / 9e10 = 188 us in total.
    hw = lookup("tpu-v5e:4x4")
    placement = place_pairs([(0, 15)], hw)
    out = collective_time("collective-permute", 2 * 8 * 128 * 8192, placement, hw)
    assert out.hops == 6
    assert out.latency_s == pytest.approx(6e-6)
    assert out.time_s == pytest.approx(188e-6, rel=0.015)


@pytest.mark.parametrize("size, bound", [(40e3, "latency"), (50e3, "collective")])
def test_buffers_under_45kB_are_latency_bound_over_one_hop(size, bound):
    # Ch. 3, "A note on ICI latency": on v5e "sending any buffer under 4.5e10 * 1e-6 = 45kB
    # will be latency bound".
    placement = place_pairs([(0, 1)], V5E_8x4)
    assert collective_time("collective-permute", size, placement, V5E_8x4).bound_by == bound


def test_gpu_ring_inside_an_nvlink_domain_and_beyond_it():
    # Ch. 2 appendix A: GPUs talk point to point inside an NVLink "clique" and much more
    # slowly beyond it. A ring all-gather sends (n-1)/n of V per GPU at the NVLink rate.
    inside = collective("all-gather", "bf16[8192,8192]", {"X": 8}, ["X"], lookup("h100:8"))
    assert inside["link"] == "nvlink"
    assert inside["time_s"] == pytest.approx(2 * 8192 * 8192 * 7 / 8 / 4.5e11)
    across = collective("all-gather", "bf16[8192,8192]", {"X": 2, "Y": 8}, ["X", "Y"], lookup("h100:2x8"))
    assert across["link"] == "dcn" and across["leaves_domain"] is True
    assert across["time_s"] > 5 * inside["time_s"]
