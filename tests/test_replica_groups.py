"""Replica groups in all of XLA's spellings expand to the device groups XLA means."""

from __future__ import annotations

import itertools
from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.base.errors import InputError
from audit.parsers.hlo.replica_groups import (
    iota_groups,
    mesh_groups,
    parse_replica_groups,
    parse_source_target_pairs,
)


def test_explicit_lists_and_the_empty_list():
    assert parse_replica_groups("{{0,1},{2,3}}") == ((0, 1), (2, 3))
    assert parse_replica_groups("{{0,1,2,3,4,5,6,7}}") == ((0, 1, 2, 3, 4, 5, 6, 7),)
    assert parse_replica_groups("{ {3, 1}, {2, 0} }") == ((3, 1), (2, 0))  # order kept
    assert parse_replica_groups("{}") == ()


def test_iota_without_transpose_is_consecutive_ranges():
    assert parse_replica_groups("[4,4]<=[16]") == tuple(tuple(range(4 * g, 4 * g + 4)) for g in range(4))
    assert parse_replica_groups("[1,8]<=[8]") == (tuple(range(8)),)


def test_transposed_iota_matches_xla():
    # The expansion XLA's own test states for IotaReplicaGroupList(2, 10, {4, 5}, {1, 0}).
    assert parse_replica_groups("[2,10]<=[4,5]T(1,0)") == (
        (0, 5, 10, 15, 1, 6, 11, 16, 2, 7),
        (12, 17, 3, 8, 13, 18, 4, 9, 14, 19),
    )
    assert parse_replica_groups("[2,8]<=[4,4]T(1,0)") == (
        (0, 4, 8, 12, 1, 5, 9, 13),
        (2, 6, 10, 14, 3, 7, 11, 15),
    )


def test_mesh_form_as_jax_prints_it():
    # From `compiled.as_text()` of a psum over one axis of a ('axis_0'=2, 'axis_1'=4) mesh.
    mesh = "mesh['axis_0'=2,'axis_1'=4]"
    assert parse_replica_groups(mesh + " {'axis_0'}") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert parse_replica_groups(mesh + " {'axis_1'}") == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert parse_replica_groups(mesh + " {'axis_0','axis_1'}") == (tuple(range(8)),)
    assert parse_replica_groups(mesh + " {'axis_1','axis_0'}") == ((0, 4, 1, 5, 2, 6, 3, 7),)


def test_mesh_form_with_device_ids_and_sub_axes():
    # Mesh devices [[0,2,4,6],[1,3,5,7]]: grouping over x pairs the columns.
    text = "mesh['x'=2,'y'=4], device_ids=([2,4]<=[4,2]T(1,0)) {'x'}"
    assert parse_replica_groups(text) == ((0, 1), (2, 3), (4, 5), (6, 7))
    # A sub-axis (pre-size 1, size 2) of y=4: y splits into [2 (grouped), 2].
    assert parse_replica_groups("mesh['a'=2,'b'=4] {'b':(1)2}") == ((0, 2), (1, 3), (4, 6), (5, 7))
    # Explicit device order, as XLA's test spells it with the older @mesh form.
    text = "@mesh<ooo=10>(devices=[10]8,3,7,5,4,2,6,0,1,9) {ooo:(5)2}"
    assert parse_replica_groups(text) == ((8, 3), (7, 5), (4, 2), (6, 0), (1, 9))
    assert parse_replica_groups("maximal_mesh[device_id=3] {}") == ((3,),)


def test_source_target_pairs():
    assert parse_source_target_pairs("{{0,1},{1,2},{2,0}}") == ((0, 1), (1, 2), (2, 0))
    with pytest.raises(InputError, match="pairs"):
        parse_source_target_pairs("{{0,1,2}}")


@pytest.mark.parametrize("text", [
    "[2,3]<=[8]",            # 6 devices in the groups, 8 in the iota
    "[2,4]<=[2,4]T(0,0)",    # not a permutation
    "[8]<=[8]",              # not [groups,size]
    "mesh['x'=2] {'z'}",     # axis not in the mesh
    "{{0,1},{2,3}",          # unbalanced
    "replicas",
    "{{}}",                  # a group of no device (device_count crashed on it: exit 4)
    "{{0,1},{}}",
])
def test_bad_spellings_raise_input_error(text):
    with pytest.raises(InputError):
        parse_replica_groups(text)


def _reference_iota(groups: int, size: int, dims: list[int], perm: list[int]) -> list[tuple[int, ...]]:
    """Independent expansion: walk the transposed index space, ravel in the original one."""
    strides = [prod(dims[i + 1:]) for i in range(len(dims))]
    flat = []
    for index in itertools.product(*(range(dims[p]) for p in perm)):
        original = [0] * len(dims)
        for k, p in enumerate(perm):
            original[p] = index[k]
        flat.append(sum(i * s for i, s in zip(original, strides)))
    return [tuple(flat[g * size:(g + 1) * size]) for g in range(groups)]


@st.composite
def iota_spellings(draw):
    dims = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    perm = draw(st.permutations(range(len(dims))))
    total = prod(dims)
    size = draw(st.sampled_from([d for d in range(1, total + 1) if total % d == 0]))
    return total // size, size, dims, list(perm)


@settings(max_examples=200, deadline=None)
@given(iota_spellings())
def test_iota_property_every_device_once_in_equal_groups(spec):
    groups, size, dims, perm = spec
    text = f"[{groups},{size}]<=[{','.join(map(str, dims))}]T({','.join(map(str, perm))})"
    parsed = parse_replica_groups(text)
    assert len(parsed) == groups and all(len(g) == size for g in parsed)
    assert sorted(d for g in parsed for d in g) == list(range(prod(dims)))
    assert list(parsed) == _reference_iota(groups, size, dims, perm)
    assert parsed == iota_groups(groups, size, dims, perm)


@st.composite
def mesh_specs(draw):
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    names = [f"a{i}" for i in range(len(sizes))]
    chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    return list(zip(names, sizes)), chosen


@settings(max_examples=200, deadline=None)
@given(mesh_specs())
def test_mesh_property_groups_vary_only_along_the_named_axes(spec):
    axes, chosen = spec
    sizes = [s for _, s in axes]
    names = [n for n, _ in axes]
    text = "mesh[" + ",".join(f"'{n}'={s}" for n, s in axes) + "] {" + ",".join(f"'{n}'" for n in chosen) + "}"
    parsed = parse_replica_groups(text)
    group_size = prod(sizes[names.index(n)] for n in chosen)
    assert all(len(g) == group_size for g in parsed)
    assert sorted(d for g in parsed for d in g) == list(range(prod(sizes)))
    fixed = [i for i, n in enumerate(names) if n not in chosen]
    for group in parsed:
        coords = [_unravel(d, sizes) for d in group]
        assert len({tuple(c[i] for i in fixed) for c in coords}) == 1
    assert parsed == mesh_groups(axes, chosen)


def _unravel(index: int, sizes: list[int]) -> list[int]:
    out = []
    for size in reversed(sizes):
        out.append(index % size)
        index //= size
    return out[::-1]


def test_an_empty_group_in_a_real_module_is_one_line(tmp_path):
    # GIVEN a real module whose all-reduce's groups are rewritten to `{{}}`
    import re

    from conftest import ROOT

    from audit.cli import main

    text = (ROOT / "tests" / "data" / "hlo" / "diff_base.hlo").read_text()
    crafted = re.sub(r"replica_groups=\{\{[^}]*\}(,\{[^}]*\})*\}", "replica_groups={{}}", text, count=1)
    assert crafted != text
    path = tmp_path / "m.hlo"
    path.write_text(crafted)
    # WHEN it is inspected THEN it is bad input naming the group, not an internal error
    assert main(["inspect", str(path), "-q", "--hardware", "h100:8"]) == 2
