"""Facts kept once: opcode classes checked against XLA's parser, one dtype table, one mesh parser, one FLOP rule."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given, strategies as st
from jaxlib import _hlo

from audit.costmodel.chips.catalog import lookup
from audit.costmodel.napkin import matmul
from audit.costmodel.network.mesh_layout import parse_mesh
from audit.costmodel.ops.module import HANDLERS, cost_module
from audit.errors import InputError, UsageError
from audit.parsers.dtypes import DTYPE_BITS, canonical_dtype, element_bytes
from audit.parsers.hlo_opcodes import ARITHMETIC, COLLECTIVES, ELEMENTWISE, TRANSCENDENTAL
from audit.parsers.hlo_text import parse_hlo_text


def _xla_knows_opcode(opcode: str) -> bool:
    """Whether XLA's own HLO parser (jaxlib) reads `opcode` as an opcode; operand errors do not count."""
    text = f"HloModule m\nENTRY e {{ p = f32[4] parameter(0) ROOT r = f32[4] {opcode}(p) }}"
    try:
        _hlo.hlo_module_from_text(text)
    except Exception as exc:  # XLA raises RuntimeError with its status text
        return "Unknown opcode" not in str(exc) and "expects opcode" not in str(exc)
    return True


@pytest.mark.parametrize("opcode", sorted(set(ELEMENTWISE) | set(COLLECTIVES)))
def test_every_classified_opcode_is_an_xla_opcode(opcode):
    assert _xla_knows_opcode(opcode)


@pytest.mark.parametrize("misspelt", ["cos", "sin", "exp", "clz", "atan"])
def test_the_check_rejects_names_that_are_not_opcodes(misspelt):
    assert not _xla_knows_opcode(misspelt)


def test_elementwise_is_exactly_arithmetic_and_transcendental_and_each_has_a_cost_handler():
    assert not set(ARITHMETIC) & set(TRANSCENDENTAL)
    assert ELEMENTWISE == set(ARITHMETIC) | set(TRANSCENDENTAL) | {"bitcast-convert"}
    assert all(op in HANDLERS for op in ELEMENTWISE)


def test_collective_spellings_and_their_handlers_come_from_the_one_list():
    from audit.costmodel.ops import collective

    for kind in COLLECTIVES:
        for opcode in (kind, f"{kind}-start", f"{kind}-done"):
            assert opcode in HANDLERS, opcode
    assert set(collective.VOLUME) == set(COLLECTIVES)
    # The handlers' module writes no start or done spelling of its own beside the list.
    source = inspect.getsource(collective)
    relisted = [s for kind in COLLECTIVES for s in (f'"{kind}-start"', f'"{kind}-done"') if s in source]
    assert not relisted, relisted


@pytest.mark.parametrize("dtype", sorted(d for d, bits in DTYPE_BITS.items() if bits >= 8 and d != "pred"))
def test_every_sized_dtype_is_an_hlo_element_type(dtype):
    _hlo.hlo_module_from_text(f"HloModule m\nENTRY e {{ ROOT p = {dtype}[4] parameter(0) }}")


@pytest.mark.parametrize(("name", "hlo", "size"), [
    ("bfloat16", "bf16", 2), ("BF16", "bf16", 2), ("float32", "f32", 4), ("tf32", "f32", 4),
    ("int8", "s8", 1), ("fp8", "f8e4m3fn", 1), ("int4", "s4", 0.5), ("c64", "c64", 8)])
def test_names_people_type_map_to_one_hlo_type_and_size(name, hlo, size):
    assert canonical_dtype(name) == hlo
    assert element_bytes(name) == size


def test_unknown_and_sizeless_dtypes_have_no_size():
    assert canonical_dtype("f33") is None and element_bytes("token") is None


@given(st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,6}", fullmatch=True),
                       st.integers(1, 4096), min_size=1, max_size=4))
def test_mesh_text_and_mapping_parse_to_the_same_axes(mesh):
    text = ",".join(f"{k}={v}" for k, v in mesh.items())
    assert parse_mesh(text) == mesh == parse_mesh(mesh)


@pytest.mark.parametrize("bad", ["X=0", "X", "=4", "X=4,X=2", "X=four", "X=8,,Y=2"])
def test_a_bad_mesh_is_a_usage_error_on_the_command_line_and_an_input_error_in_a_workload(bad):
    with pytest.raises(UsageError, match="mesh"):
        parse_mesh(bad)
    with pytest.raises(InputError, match="mesh"):
        parse_mesh(bad, error=InputError)


def test_calc_matmul_counts_flops_with_the_auditors_dot_rule():
    module = parse_hlo_text("""HloModule m
ENTRY e {
  a = bf16[512,384]{1,0} parameter(0)
  b = bf16[384,256]{1,0} parameter(1)
  ROOT d = bf16[512,256]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
    audited = cost_module(module)["d"]
    napkin = matmul(512, 384, 256, "bf16", lookup("h100"))
    assert napkin["flops"] == audited.flops == 2 * 512 * 384 * 256
    assert napkin["bytes"] == audited.bytes_read + audited.bytes_written
