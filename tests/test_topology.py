"""Device placement: which physical axes a group spans, ring sizes, wraparounds, hops, domains."""

from __future__ import annotations

from dataclasses import replace

import pytest

from audit.costmodel.chips.catalog import lookup
from audit.costmodel.network.collectives import collective_time
from audit.costmodel.network.mesh_layout import mesh_group
from audit.costmodel.network.topology import place_group, place_groups, place_pairs, placement_for
from audit.base.errors import UsageError


def test_default_tpu_order_is_x_fastest():
    placement = placement_for(lookup("tpu-v5e:8x4"))
    assert placement.coord(0) == (0, 0)
    assert placement.coord(9) == (1, 1)
    assert placement.coord(31) == (7, 3)


def test_column_of_an_8x4_v5e_is_a_4_ring_without_wraparound():
    group = place_group([0, 8, 16, 24], lookup("tpu-v5e:8x4"))
    (axis,) = group.axes
    assert (axis.name, axis.size, axis.length, axis.wraparound, axis.hops) == ("y", 4, 4, False, 3)
    assert group.hops == 3 and group.wraparound is False and not group.leaves_domain


def test_full_16_axis_of_a_v5e_wraps():
    # Ch. 2: "TPU v5e ... wraparounds along any axis of size 16 (meaning an 8x16 has a
    # wraparound on the long axis)".
    hw = lookup("tpu-v5e:8x16")
    long_axis = place_group([8 * y for y in range(16)], hw)
    short_axis = place_group(list(range(8)), hw)
    assert long_axis.wraparound is True and long_axis.hops == 8
    assert short_axis.wraparound is False and short_axis.hops == 7


def test_part_of_a_wrapped_axis_is_a_line():
    group = place_group([0, 1, 2, 3], lookup("tpu-v5e:16x4"))
    assert group.axes[0].length == 16 and group.wraparound is False and group.hops == 3


def test_v4_full_cube_wraps_and_a_2x2x4_does_not():
    # Ch. 2 footnote 6: "a 2x2x4 won't have any wraparounds"; full 4x4x4 cubes do.
    assert place_group([0, 1, 2, 3], lookup("tpu-v4:4x4x4")).wraparound is True
    assert place_group([0, 4, 8, 12], lookup("tpu-v4:4x4x4")).axes[0].name == "y"
    assert place_group([0, 4, 8, 12], lookup("tpu-v4:2x2x4")).wraparound is False


def test_two_axis_group_spans_both_axes():
    group = place_group(list(range(32)), lookup("tpu-v5e:8x4"))
    assert [(a.name, a.size) for a in group.axes] == [("x", 8), ("y", 4)]
    assert group.hops == 7 + 3


def test_group_beyond_the_slice_leaves_it():
    group = place_group([0, 8], lookup("tpu-v5e:4x2"))
    assert group.leaves_domain and group.domains == 2
    assert collective_time("all-reduce", 1e9, group, lookup("tpu-v5e:4x2")).link == "dcn"


def test_gpu_nvlink_domains():
    hw = lookup("h100:2x8")
    inside, across = place_group(range(8), hw), place_group([0, 8], hw)
    assert inside.kind == "switch" and not inside.leaves_domain
    assert across.leaves_domain
    assert collective_time("all-gather", 1e9, inside, hw).link == "nvlink"
    assert collective_time("all-gather", 1e9, across, hw).link == "dcn"


def test_cpu_devices_are_one_host_and_approximate():
    hw = lookup("cpu")
    group = place_group(range(8), hw)
    assert group.kind == "host"
    result = collective_time("all-gather", 1e6, group, hw)
    assert result.approximate and result.link == "memory"


def test_explicit_coordinates_override_the_default_order():
    hw = lookup("tpu-v5e:4x2")
    coords = {0: (0, 0), 2: (1, 0), 4: (2, 0), 6: (3, 0)}
    group = place_group([0, 2, 4, 6], hw, coords)
    assert [(a.name, a.size) for a in group.axes] == [("x", 4)] and group.hops == 3
    with pytest.raises(UsageError, match="no coordinates"):
        place_group([0, 1], hw, {0: (0, 0)})


def test_strided_and_irregular_groups():
    strided = place_group([0, 2, 4, 6], lookup("tpu-v5e:4x2"))  # (0,0), (2,0), (0,1), (2,1)
    assert [(a.name, a.size, a.hops) for a in strided.axes] == [("x", 2, 2), ("y", 2, 1)]
    assert not any("not a full sub-grid" in n for n in strided.notes)
    diagonal = place_group([0, 5], lookup("tpu-v5e:4x2"))  # (0,0), (1,1)
    assert any("not a full sub-grid" in n for n in diagonal.notes)


def test_tpu_without_topology_assumes_one_and_says_so():
    group = place_group(range(8), lookup("tpu-v5e"))
    assert [a.size for a in group.axes] == [4, 2]
    assert any("topology assumed 4x2" in n for n in group.notes)


def test_two_cores_of_a_v2_chip_share_it():
    hw = lookup("tpu-v2:2x2")
    group = place_group([0, 1], hw)
    assert group.axes == ()
    assert collective_time("all-reduce", 1e6, group, hw).link == "memory"
    assert [a.size for a in place_group([0, 2], hw).axes] == [2]


def test_permute_hops_take_the_wraparound_when_there_is_one():
    assert place_pairs([(0, 15)], lookup("tpu-v5e:16x16")).hops == 1
    assert place_pairs([(0, 15)], lookup("tpu-v5e:16x4")).hops == 1
    assert place_pairs([(0, 7)], lookup("tpu-v5e:8x4")).hops == 7


def test_mesh_axes_are_laid_on_physical_axes_in_order():
    hw = lookup("tpu-v5e:8x4")
    assert [(a.name, a.size) for a in mesh_group({"X": 8, "Y": 4}, ["X"], hw).axes] == [("x", 8)]
    assert [(a.name, a.size) for a in mesh_group({"X": 8, "Y": 4}, ["Y"], hw).axes] == [("y", 4)]
    split = mesh_group({"A": 2, "B": 4, "C": 4}, ["B"], hw)  # A is x's outer half, B its inner 4
    assert [(a.name, a.size, a.hops) for a in split.axes] == [("x", 4, 3)]
    spill = mesh_group({"X": 32}, ["X"], hw)  # one mesh axis over the whole slice
    assert [a.name for a in spill.axes] == ["x", "y"]


@pytest.mark.parametrize("mesh, axes, message", [
    ({"X": 4, "Y": 4}, ["X"], "has 16 devices"),
    ({"X": 8, "Y": 4}, ["Z"], "must name mesh axes"),
    ({"X": 8, "Y": 4}, ["X", "X"], "twice"),
    ({"X": 3, "Y": 4}, ["X"], "has 12 devices"),
    ({"X": 0, "Y": 4}, ["X"], "positive"),
])
def test_bad_meshes_are_usage_errors(mesh, axes, message):
    with pytest.raises(UsageError, match=message):
        mesh_group(mesh, axes, lookup("tpu-v5e:8x4"))


def test_mesh_that_does_not_tile_the_topology():
    with pytest.raises(UsageError, match="does not tile"):
        mesh_group({"X": 4, "Y": 3}, ["X"], lookup("tpu-v5e:6x2"))


def test_duplicate_device_is_a_usage_error():
    with pytest.raises(UsageError, match="twice"):
        place_group([0, 0], lookup("tpu-v5e:4x2"))


def test_interleaved_groups_share_links():
    hw = lookup("tpu-v5e:4x2")
    assert place_groups([[0, 2], [1, 3]], hw).axes[0].shared_by == 2
    assert place_groups([[0, 1], [2, 3]], hw).axes[0].shared_by == 1
    assert place_groups([[0, 1], [4, 5]], hw).axes[0].shared_by == 1  # other row, other links


def test_outer_mesh_axis_rings_share_the_physical_axis():
    # Mesh {A: 2, B: 4} on an 8-long axis: A takes the outer half, so the four A-groups
    # {0,4}, {1,5}, {2,6}, {3,7} all cross the middle link, and each gets a quarter of it.
    hw = lookup("tpu-v5e:8")
    outer = mesh_group({"A": 2, "B": 4}, ["A"], hw)
    inner = mesh_group({"A": 2, "B": 4}, ["B"], hw)
    assert outer.devices == (0, 4) and outer.axes[0].shared_by == 4
    assert inner.axes[0].shared_by == 1
    alone = collective_time("all-gather", 1e9, replace(outer, axes=(replace(outer.axes[0], shared_by=1),)), hw)
    assert collective_time("all-gather", 1e9, outer, hw).bandwidth_s == pytest.approx(4 * alone.bandwidth_s)
