"""Properties of the cost formulas: scaling, monotonicity, exact window counts, opcode coverage."""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from audit.costmodel.ops.layout import leaf_bytes, padded_elements
from audit.costmodel.ops.module import HANDLERS, UNMODELED, cost_module
from audit.costmodel.ops.window import WindowDim, conv_valid_positions
from audit.parsers.hlo.model import Computation, DotDims, Instruction, Module, Shape

# Every opcode of XLA's HLO_OPCODE_LIST (xla/hlo/ir/hlo_opcode.h), by its printed name.
XLA_OPCODES = """
abs acos acosh add add-dependency after-all all-gather all-gather-done all-gather-start all-reduce
all-reduce-done all-reduce-start all-to-all and asin asinh async-done async-start async-update
atan2 atanh batch-norm-grad batch-norm-inference batch-norm-training bitcast bitcast-convert broadcast
call cbrt ceil cholesky clamp count-leading-zeros collective-broadcast collective-permute
collective-permute-done collective-permute-start collective-reduce compare complex concatenate
conditional constant convert convolution copy copy-done copy-start cosine cosh custom-call divide
domain dot dynamic-reshape dynamic-slice dynamic-update-slice erf exponential exponential-minus-one
fft floor fusion gather get-dimension-size get-tuple-element imag infeed iota is-finite log
log-plus-one logistic map maximum minimum mulhi multiply negate not opt-barrier or outfeed pad
parameter partition-id popcnt power ragged-all-to-all ragged-dot real recv recv-done reduce
reduce-precision reduce-scatter reduce-window remainder replica-id reshape reverse rng
rng-bit-generator rng-get-and-update-state round-nearest-afz round-nearest-even rsqrt scaled-dot scan
scatter select select-and-scatter send send-done set-dimension-size shift-left shift-right-arithmetic
shift-right-logical shuffle sign sine sinh slice sort sqrt stochastic-convert subtract tan tanh topk
transpose triangular-solve tuple while xor
""".split()

DTYPES = ["pred", "s4", "u2", "s8", "f8e4m3fn", "bf16", "f16", "f32", "s64", "c64"]


def test_every_xla_opcode_is_handled_or_explicitly_unmodeled():
    assert len(XLA_OPCODES) == 135  # XLA has atan2 but no atan
    missing = [op for op in XLA_OPCODES if op not in HANDLERS and op not in UNMODELED]
    assert missing == []
    assert not set(HANDLERS) & set(UNMODELED)
    assert all(reason for reason in UNMODELED.values())


def dot_module(batch: int, m: int, n: int, k: int, dtype: str) -> Module:
    lhs = Instruction("lhs", "parameter", Shape(dtype, (batch, m, k)), attributes=(("parameter_number", "0"),))
    rhs = Instruction("rhs", "parameter", Shape(dtype, (batch, k, n)), attributes=(("parameter_number", "1"),))
    dot = Instruction("d", "dot", Shape(dtype, (batch, m, n)), ("lhs", "rhs"),
                      dot=DotDims((0,), (0,), (2,), (1,)))
    return Module("m", {"main": Computation("main", [lhs, rhs, dot])}, "main")


dims = st.integers(min_value=1, max_value=512)


@given(batch=st.integers(1, 16), m=dims, n=dims, k=dims, dtype=st.sampled_from(["bf16", "f32", "f8e4m3fn"]))
def test_doubling_the_batch_doubles_dot_flops_and_bytes(batch, m, n, k, dtype):
    one = cost_module(dot_module(batch, m, n, k, dtype))["d"]
    two = cost_module(dot_module(2 * batch, m, n, k, dtype))["d"]
    assert one.flops == 2 * batch * m * n * k
    assert two.flops == 2 * one.flops
    assert two.bytes == 2 * one.bytes


tiles = st.sampled_from([(), ((8, 128),), ((8, 128), (2, 1)), ((128,),), ((4, 128),), ((512,), (128,), (4, 1))])


@given(dtype=st.sampled_from(DTYPES), shape=st.lists(st.integers(0, 300), min_size=0, max_size=4),
       axis=st.integers(0, 3), grow=st.integers(1, 300), tile=tiles)
def test_bytes_never_shrink_when_a_dimension_grows(dtype, shape, axis, grow, tile):
    layout = tuple(reversed(range(len(shape))))
    small = Shape(dtype, tuple(shape), layout, tile)
    if shape:
        bigger = list(shape)
        bigger[axis % len(shape)] += grow
        large = Shape(dtype, tuple(bigger), layout, tile)
        assert leaf_bytes(large) >= leaf_bytes(small)
    assert leaf_bytes(small) >= small.byte_size  # padding only ever adds


@given(shape=st.lists(st.integers(1, 300), min_size=1, max_size=4), tile=tiles.filter(bool))
def test_padded_footprint_is_whole_tiles(shape, tile):
    s = Shape("f32", tuple(shape), tuple(reversed(range(len(shape)))), tile)
    assert padded_elements(s) % math.prod(tile[0]) == 0
    assert padded_elements(s) >= s.elements


def brute_force_valid(in_size: int, out_size: int, w: WindowDim) -> int:
    dilated = (in_size - 1) * w.lhs_dilation + 1
    count = 0
    for o in range(out_size):
        for k in range(w.size):
            idx = o * w.stride + k * w.rhs_dilation - w.pad_low
            if 0 <= idx < dilated and idx % w.lhs_dilation == 0:
                count += 1
    return count


@settings(max_examples=200)
@given(in_size=st.integers(1, 40), size=st.integers(1, 7), stride=st.integers(1, 4),
       pad_low=st.integers(-3, 6), pad_high=st.integers(-3, 6), lhs_d=st.integers(1, 3), rhs_d=st.integers(1, 3))
def test_convolution_valid_positions_match_enumeration(in_size, size, stride, pad_low, pad_high, lhs_d, rhs_d):
    w = WindowDim(size, stride, pad_low, pad_high, lhs_d, rhs_d)
    padded = (in_size - 1) * lhs_d + 1 + pad_low + pad_high
    span = (size - 1) * rhs_d + 1
    out_size = max(0, (padded - span) // stride + 1)
    assert conv_valid_positions(in_size, out_size, w) == brute_force_valid(in_size, out_size, w)


def gather_module(n: int, local: int) -> Module:
    x = Instruction("x", "parameter", Shape("f32", (local,)), attributes=(("parameter_number", "0"),))
    group = tuple(range(n))
    ag = Instruction("ag", "all-gather", Shape("f32", (local * n,)), ("x",), replica_groups=(group,),
                     dimensions=(0,))
    return Module("m", {"main": Computation("main", [x, ag])}, "main")


@given(n=st.integers(1, 64), local=st.integers(1, 4096))
def test_all_gather_sends_all_but_its_own_share(n, local):
    c = cost_module(gather_module(n, local))["ag"]
    volume = 4 * local * n
    assert c.collective.bytes == volume and c.collective.group_size == n
    assert c.comm_bytes == volume * (n - 1) / n
    assert c.comm_bytes < volume or n == 1
