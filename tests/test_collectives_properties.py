"""Properties of the collective time formulas (book ch. 3), over shapes, mesh sizes and chips."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.costmodel.chips.catalog import lookup
from audit.costmodel.network.collectives import collective_time
from audit.costmodel.network.mesh_layout import mesh_group

CHIPS = {name: lookup(name) for name in ("tpu-v5e", "tpu-v4", "tpu-v5p", "h100", "mi300x")}
KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
RING_KINDS = ("all-gather", "reduce-scatter", "all-reduce")

volumes = st.floats(min_value=1.0, max_value=1e10, allow_nan=False, allow_infinity=False)
axis_sizes = st.sampled_from([2, 3, 4, 6, 8, 12, 16])


def _placement(chip: str, sizes: tuple[int, ...], axes: list[str]):
    names = ["X", "Y", "Z"][: len(sizes)]
    return mesh_group(dict(zip(names, sizes)), axes, CHIPS[chip])


@settings(max_examples=60, deadline=None)
@given(chip=st.sampled_from(sorted(CHIPS)), kind=st.sampled_from(KINDS), x=axis_sizes, y=axis_sizes,
       v1=volumes, v2=volumes, wrap=st.sampled_from(["auto", "yes", "no"]))
def test_time_never_decreases_when_bytes_grow(chip, kind, x, y, v1, v2, wrap):
    placement = _placement(chip, (x, y), ["X"])
    small, large = sorted((v1, v2))
    t_small = collective_time(kind, small, placement, CHIPS[chip], wrap)
    t_large = collective_time(kind, large, placement, CHIPS[chip], wrap)
    assert t_small.time_s <= t_large.time_s
    assert t_small.latency_s == t_large.latency_s  # the floor does not depend on bytes


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(RING_KINDS), n=st.sampled_from([4, 6, 8, 10, 12, 16]),
       m=st.sampled_from([4, 6, 8, 10, 12, 16]), volume=st.floats(min_value=1e8, max_value=1e10))
def test_bandwidth_bound_time_is_independent_of_ring_size(kind, n, m, volume):
    # Ch. 3 takeaway: in the throughput-bound regime the time depends on the array size and the
    # link bandwidth, not on the number of devices (full rings, i.e. with wraparound).
    hw = CHIPS["tpu-v5e"]
    a = collective_time(kind, volume, _placement("tpu-v5e", (n, 2), ["X"]), hw, "yes")
    b = collective_time(kind, volume, _placement("tpu-v5e", (m, 2), ["X"]), hw, "yes")
    assert a.bound_by == b.bound_by == "collective"
    assert a.time_s == pytest.approx(b.time_s)
    per_gather = volume / (2 * hw.interconnect.link_bytes_per_s.value)
    assert a.time_s == pytest.approx(per_gather * (2 if kind == "all-reduce" else 1))


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(RING_KINDS), n=axis_sizes, volume=st.floats(min_value=1e8, max_value=1e10))
def test_line_time_stays_within_one_way_bounds(kind, n, volume):
    # Without a wraparound: (n-1)/n * V over one-way bandwidth, between V/(2W) and V/W.
    hw = CHIPS["tpu-v5e"]
    t = collective_time(kind, volume, _placement("tpu-v5e", (n, 2), ["X"]), hw, "no")
    one_way = volume / hw.interconnect.link_bytes_per_s.value * (2 if kind == "all-reduce" else 1)
    assert one_way / 2 - 1e-12 <= t.bandwidth_s <= one_way


@settings(max_examples=60, deadline=None)
@given(chip=st.sampled_from(sorted(CHIPS)), kind=st.sampled_from(KINDS), x=axis_sizes, y=axis_sizes,
       two_axes=st.booleans(), wrap=st.sampled_from(["auto", "yes", "no"]))
def test_latency_bound_below_the_crossover_and_bandwidth_bound_above(chip, kind, x, y, two_axes, wrap):
    hw = CHIPS[chip]
    placement = _placement(chip, (x, y), ["X", "Y"] if two_axes else ["X"])
    unit = collective_time(kind, 1.0, placement, hw, wrap)
    crossover = unit.latency_s / unit.bandwidth_s  # bytes where the two terms meet
    below = collective_time(kind, 0.9 * crossover, placement, hw, wrap)
    above = collective_time(kind, 1.1 * crossover, placement, hw, wrap)
    assert below.bound_by == "latency" and below.time_s == below.latency_s
    assert above.bound_by == "collective" and above.time_s == above.bandwidth_s > above.latency_s


@settings(max_examples=60, deadline=None)
@given(chip=st.sampled_from(sorted(CHIPS)), x=axis_sizes, y=axis_sizes, two_axes=st.booleans(),
       volume=st.floats(min_value=1e9, max_value=1e11), wrap=st.sampled_from(["auto", "yes", "no"]))
def test_all_reduce_is_twice_an_all_gather_when_bandwidth_bound(chip, x, y, two_axes, volume, wrap):
    # Ch. 3, Case 3: an AllReduce is a ReduceScatter plus an AllGather.
    hw = CHIPS[chip]
    placement = _placement(chip, (x, y), ["X", "Y"] if two_axes else ["X"])
    gather = collective_time("all-gather", volume, placement, hw, wrap)
    reduce = collective_time("all-reduce", volume, placement, hw, wrap)
    assert gather.bound_by == reduce.bound_by == "collective"
    assert reduce.time_s == pytest.approx(2 * gather.time_s)
    assert collective_time("reduce-scatter", volume, placement, hw, wrap).time_s == pytest.approx(gather.time_s)
