"""Per-op cost handlers on small hand-written HLO: flops, bytes, layouts and trip counts."""

from __future__ import annotations

import pytest

from audit.costmodel.ops.layout import leaf_bytes, shape_bytes
from audit.costmodel.ops.module import cost_module, module_totals, unmodeled_ops
from audit.parsers.hlo.model import Shape
from audit.parsers.hlo.text import parse_hlo_text

ADD = """
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
"""


def costs_of(entry_body: str, extra: str = "", num_partitions: int | None = None):
    text = f"HloModule m\n{extra}\nENTRY %main {{\n{entry_body}\n}}\n"
    module = parse_hlo_text(text)
    return module, cost_module(module, num_partitions=num_partitions)


def test_dot_flops_are_two_m_n_k_and_bytes_are_operands_plus_result():
    _, costs = costs_of("""
  %x = f32[8,32]{1,0} parameter(0)
  %w = f32[32,16]{1,0} parameter(1)
  ROOT %d = f32[8,16]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}""")
    d = costs["d"]
    assert d.flops == 2 * 8 * 16 * 32
    assert d.bytes_read == (8 * 32 + 32 * 16) * 4
    assert d.bytes_written == 8 * 16 * 4
    assert d.provenance == "model" and d.dtype == "f32"


def test_batched_dot_counts_every_batch():
    _, costs = costs_of("""
  %x = bf16[4,8,32] parameter(0)
  %w = bf16[4,32,16] parameter(1)
  ROOT %d = bf16[4,8,16] dot(%x, %w), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}""")
    assert costs["d"].flops == 2 * 4 * 8 * 16 * 32
    assert costs["d"].bytes_read == (4 * 8 * 32 + 4 * 32 * 16) * 2


@pytest.mark.parametrize("window", ["window={size=3 pad=1_1}", ""])
def test_convolution_skips_taps_that_land_on_padding(window):
    # 10 outputs x 3 taps, minus the 2 taps that fall on the zero padding at either edge.
    sep = ", " if window else ""
    _, costs = costs_of(f"""
  %x = f32[1,10,1] parameter(0)
  %k = f32[3,1,1] parameter(1)
  ROOT %c = f32[1,10,1] convolution(%x, %k){sep}{window}, dim_labels=b0f_0io->b0f""")
    assert costs["c"].flops == 2 * (10 * 3 - 2)


def test_convolution_with_features_and_stride():
    _, costs = costs_of("""
  %x = f32[2,16,16,3] parameter(0)
  %k = f32[3,3,3,8] parameter(1)
  ROOT %c = f32[2,8,8,8] convolution(%x, %k), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f""")
    # Per spatial dim: 8 outputs x 3 taps, the last output's third tap is padding: 23 valid.
    assert costs["c"].flops == 2 * 2 * 8 * 3 * 23 * 23


def test_elementwise_flops_and_transcendentals_are_separate():
    _, costs = costs_of("""
  %x = f32[100] parameter(0)
  %e = f32[100] exponential(%x)
  ROOT %a = f32[100] add(%x, %e)""")
    assert (costs["e"].flops, costs["e"].transcendentals) == (0, 100)
    assert (costs["a"].flops, costs["a"].transcendentals) == (100, 0)
    assert costs["a"].bytes_read == 800 and costs["a"].bytes_written == 400


def test_reduce_costs_one_reducer_application_per_combine():
    _, costs = costs_of("""
  %x = f32[10,20] parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[10] reduce(%x, %z), dimensions={1}, to_apply=%add""", ADD)
    assert costs["r"].flops == 10 * 20 - 10
    assert "add" not in costs  # the reducer is not an op of its own


def test_reduce_window_counts_window_minus_one_per_output():
    _, costs = costs_of("""
  %x = f32[8,8] parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[4,4] reduce-window(%x, %z), window={size=2x2 stride=2x2}, to_apply=%add""", ADD)
    assert costs["r"].flops == 16 * 3


def test_slices_read_only_what_they_produce():
    _, costs = costs_of("""
  %x = f32[100,100] parameter(0)
  %i = s32[] parameter(1)
  %s = f32[10,100] slice(%x), slice={[0:10], [0:100]}
  %d = f32[10,100] dynamic-slice(%x, %i, %i), dynamic_slice_sizes={10,100}
  %u = f32[2,100] parameter(2)
  ROOT %p = f32[100,100] dynamic-update-slice(%x, %u, %i, %i)""")
    assert costs["s"].bytes_read == 4000 and costs["s"].bytes_written == 4000
    assert costs["d"].bytes_read == 4000 + 8 and costs["d"].bytes_written == 4000
    assert costs["p"].bytes_read == 800 + 8 and costs["p"].bytes_written == 800


FUSED = """
%fused (p0: f32[1000], p1: f32[10], p2: s32[]) -> f32[10] {
  %p0 = f32[1000] parameter(0)
  %p1 = f32[10] parameter(1)
  %p2 = s32[] parameter(2)
  %ds = f32[10] dynamic-slice(%p0, %p2), dynamic_slice_sizes={10}
  %m = f32[10] multiply(%ds, %p1)
  ROOT %a = f32[10] add(%m, %p1)
}
"""


def test_fusion_counts_inner_flops_and_only_the_slice_of_a_sliced_input():
    _, costs = costs_of("""
  %big = f32[1000] parameter(0)
  %small = f32[10] parameter(1)
  %i = s32[] parameter(2)
  ROOT %f = f32[10] fusion(%big, %small, %i), kind=kLoop, calls=%fused""", FUSED)
    f = costs["f"]
    assert f.flops == 20
    assert f.bytes_read == 40 + 40 + 4  # the 10-element slice, the small input, the index
    assert f.bytes_written == 40
    assert "ds" not in costs  # fused ops are inside the fusion's cost


IN_PLACE = """
%update (p0: bf16[64,128], p1: bf16[1,128], p2: s32[]) -> bf16[64,128] {
  %p0 = bf16[64,128] parameter(0)
  %p1 = bf16[1,128] parameter(1)
  %p2 = s32[] parameter(2)
  %z = s32[] constant(0)
  ROOT %dus = bf16[64,128] dynamic-update-slice(%p0, %p1, %p2, %z)
}
"""


def test_fusion_updating_an_input_in_place_reads_and_writes_only_the_update():
    _, costs = costs_of("""
  %cache = bf16[64,128] parameter(0)
  %row = bf16[1,128] parameter(1)
  %i = s32[] parameter(2)
  ROOT %f = bf16[64,128] fusion(%cache, %row, %i), kind=kLoop, calls=%update""", IN_PLACE)
    assert costs["f"].bytes_read == 256 + 4
    assert costs["f"].bytes_written == 256


@pytest.mark.parametrize("dtype,count,expected", [
    ("s4", 1000, 500), ("u2", 10, 3), ("f4e2m1fn", 7, 4), ("f8e4m3fn", 100, 100),
    ("f8e5m2", 3, 3), ("pred", 5, 5), ("bf16", 5, 10),
])
def test_sub_byte_and_fp8_dtypes_pack(dtype, count, expected):
    assert leaf_bytes(Shape(dtype, (count,))) == expected


@pytest.mark.parametrize("shape,expected", [
    (Shape("bf16", (5, 100), (1, 0), ((8, 128), (2, 1))), 8 * 128 * 2),
    (Shape("f32", (100, 5), (0, 1), ((8, 128),)), 8 * 128 * 4),  # minor dim is dims[0]
    (Shape("f32", (), (), ((128,),)), 128 * 4),  # a scalar fills one 128-lane tile
    (Shape("s8", (20,), (0,), ((512,), (128,), (4, 1))), 512),
    (Shape("f32", (16, 256), (1, 0), ((8, 128),)), 16 * 256 * 4),  # already a tile multiple
])
def test_tiled_layouts_pad_to_the_first_tile(shape, expected):
    assert leaf_bytes(shape) == expected


def test_tuples_sum_their_leaves_and_on_chip_leaves_cost_no_hbm_bytes():
    hbm = Shape("f32", (10,))
    vmem = Shape("f32", (10,), memory_space=1)
    both = Shape("tuple", tuple_shapes=(hbm, Shape("tuple", tuple_shapes=(hbm, vmem))))
    assert shape_bytes(both) == 80
    assert shape_bytes(both, hbm_only=False) == 120


def test_tiled_layout_in_hlo_text_pads_the_op_bytes():
    _, costs = costs_of("""
  %x = bf16[5,100]{1,0:T(8,128)(2,1)} parameter(0)
  ROOT %y = bf16[5,100]{1,0:T(8,128)(2,1)} negate(%x)""")
    assert costs["y"].bytes_read == 2048 and costs["y"].bytes_written == 2048
    assert costs["y"].flops == 500  # arithmetic counts logical elements, not padding


LOOP = """
%body (p: (s32[], f32[16,16])) -> (s32[], f32[16,16]) {
  %p = (s32[], f32[16,16]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[16,16] get-tuple-element(%p), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %y = f32[16,16] dot(%x, %x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (s32[], f32[16,16]) tuple(%next, %y)
}

%cond (q: (s32[], f32[16,16])) -> pred[] {
  %q = (s32[], f32[16,16]) parameter(0)
  %j = s32[] get-tuple-element(%q), index=0
  %n = s32[] constant(7)
  ROOT %lt = pred[] compare(%j, %n), direction=LT
}
"""


def loop_module(config: str):
    return costs_of(f"""
  %x0 = f32[16,16] parameter(0)
  %zero = s32[] constant(2)
  %init = (s32[], f32[16,16]) tuple(%zero, %x0)
  ROOT %w = (s32[], f32[16,16]) while(%init), condition=%cond, body=%body{config}""", LOOP)


def test_while_body_ops_carry_the_known_trip_count():
    module, costs = loop_module(', backend_config={"known_trip_count":{"n":"5"}}')
    assert costs["y"].trip_count == 5
    assert costs["lt"].trip_count == 6  # the condition runs once more than the body
    assert costs["w"].flops == 0 and "5 iterations" in costs["w"].notes[0]
    totals = module_totals(module, costs)
    assert totals["flops"] == 5 * (2 * 16 ** 3 + 1) + 6 * 1


def test_counted_loop_without_backend_config_is_inferred():
    _, costs = loop_module("")
    assert costs["y"].trip_count == 5  # from i = 2 while i < 7, step 1
    assert "inferred" in costs["w"].notes[0]


def test_loop_with_unrecognised_condition_has_unknown_trip_count():
    module, costs = costs_of("""
  %x0 = f32[16,16] parameter(0)
  %start = s32[] parameter(1)
  %init = (s32[], f32[16,16]) tuple(%start, %x0)
  ROOT %w = (s32[], f32[16,16]) while(%init), condition=%cond, body=%body""", LOOP)
    assert costs["y"].trip_count is None
    assert any("unknown number of times" in n for n in costs["y"].notes)
    totals = module_totals(module, costs)
    assert totals["unknown_trip_count_ops"] >= 1
    assert totals["flops"] == 0


def test_opaque_custom_call_is_listed_never_silently_zero():
    module, costs = costs_of("""
  %x = f32[8] parameter(0)
  ROOT %c = f32[8] custom-call(%x), custom_call_target="my_kernel\"""")
    c = costs["c"]
    # FLOPs unknown; it must still read its operand and write its result: a lower bound, listed.
    assert c.flops is None and c.bytes_read == 32 and c.bytes_written == 32
    assert "my_kernel" in c.lower_bound
    assert "my_kernel" in unmodeled_ops(costs)["c"]
    assert module_totals(module, costs)["unmodeled_ops"] == 1


def test_gemm_custom_call_costs_two_m_n_k_from_backend_config():
    config = ('{"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":'
              '{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],'
              '"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}}}')
    _, costs = costs_of(f"""
  %a = bf16[128,256] parameter(0)
  %b = bf16[256,64] parameter(1)
  ROOT %g = (bf16[128,64], s8[1024]) custom-call(%a, %b), custom_call_target="__cublas$gemm", backend_config={config}""")
    g = costs["g"]
    assert g.flops == 2 * 128 * 64 * 256
    assert g.bytes_written == 128 * 64 * 2  # the workspace is not output traffic


def test_mosaic_kernel_uses_its_cost_estimate():
    config = ('{"custom_call_config":{"body":"x","cost_estimate":{"flops":"1000","transcendentals":"10",'
              '"bytes_accessed":"4096","remote_bytes_transferred":"0"}}}')
    _, costs = costs_of(f"""
  %a = f32[32] parameter(0)
  ROOT %k = f32[32] custom-call(%a), custom_call_target="tpu_custom_call", backend_config={config}""")
    k = costs["k"]
    assert (k.flops, k.transcendentals, k.bytes, k.provenance) == (1000, 10, 4096, "xla")


def test_async_collective_costs_on_start_and_done_is_a_completion():
    _, costs = costs_of("""
  %x = f32[16] parameter(0)
  %s = (f32[16], f32[128]) all-gather-start(%x), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  ROOT %d = f32[128] all-gather-done(%s)""")
    s, d = costs["s"], costs["d"]
    assert s.collective.kind == "all-gather" and s.collective.group_size == 8
    assert s.collective.bytes == 512 and s.comm_bytes == 512 * 7 / 8
    assert (d.flops, d.bytes, d.comm_bytes) == (0, 0, 0) and "completes s" in d.notes[0]


def test_all_reduce_without_groups_spans_num_partitions():
    _, costs = costs_of("""
  %x = f32[1024] parameter(0)
  ROOT %r = f32[1024] all-reduce(%x), replica_groups={}, to_apply=%add""", ADD, num_partitions=4)
    r = costs["r"]
    assert r.collective.group_size == 4 and r.comm_bytes == 2 * 4096 * 3 / 4
    assert r.flops == 1024 * 3 / 4


def test_all_reduce_without_groups_or_device_count_is_unknown():
    _, costs = costs_of("""
  %x = f32[1024] parameter(0)
  ROOT %r = f32[1024] all-reduce(%x), replica_groups={}, to_apply=%add""", ADD)
    assert costs["r"].provenance == "unknown" and "num_partitions" in costs["r"].reason


def test_opcode_without_handler_is_unmodeled_with_a_reason():
    _, costs = costs_of("""
  %x = f32[4] parameter(0)
  %s = f32[4] parameter(1)
  %o = f32[4] parameter(2)
  ROOT %b = (f32[4], f32[4], f32[4]) batch-norm-training(%x, %s, %o), epsilon=0.001, feature_index=0""")
    assert costs["b"].flops is None and "expanded" in costs["b"].reason


BRANCHES = """
%yes (a: f32[64]) -> f32[64] {
  %a = f32[64] parameter(0)
  ROOT %e = f32[64] exponential(%a)
}

%no (b: f32[64]) -> f32[64] {
  %b = f32[64] parameter(0)
  ROOT %n = f32[64] negate(%b)
}
"""


def test_conditional_branches_are_costed_but_run_an_unknown_number_of_times():
    module, costs = costs_of("""
  %p = pred[] parameter(0)
  %x = f32[64] parameter(1)
  ROOT %c = f32[64] conditional(%p, %x, %x), true_computation=%yes, false_computation=%no""", BRANCHES)
    assert costs["c"].flops == 0 and "branches" in costs["c"].notes[0]
    assert costs["e"].transcendentals == 64 and costs["e"].trip_count is None
    assert costs["n"].flops == 64 and costs["n"].trip_count is None
    assert module_totals(module, costs)["unknown_trip_count_ops"] == 2


WRAPPED = """
%gather (p: f32[32]) -> f32[256] {
  %p = f32[32] parameter(0)
  ROOT %ag = f32[256] all-gather(%p), replica_groups=[1,8]<=[8], dimensions={0}
}
"""


def test_async_start_carries_the_wrapped_collective_and_the_wrapped_op_is_not_counted_twice():
    module, costs = costs_of("""
  %x = f32[32] parameter(0)
  %s = ((f32[32]), f32[256]) async-start(%x), calls=%gather
  ROOT %d = f32[256] async-done(%s)""", WRAPPED)
    s = costs["s"]
    assert s.collective.kind == "all-gather" and s.collective.group_size == 8
    assert s.comm_bytes == 1024 * 7 / 8
    assert costs["ag"].comm_bytes == 0 and "costed on s" in costs["ag"].notes[0]
    assert module_totals(module, costs)["comm_bytes"] == s.comm_bytes


def fmha_config(key: str, mask: str) -> str:
    dims = ('{"lhs_contracting_dimensions":["3"],"rhs_contracting_dimensions":["3"],'
            '"lhs_batch_dimensions":["0","2"],"rhs_batch_dimensions":["0","2"]}')
    return f'{{"cudnn_fmha_backend_config":{{"mask_type":"{mask}","{key}":{dims}}}}}'


# A top-left causal mask over 128 queries and 256 keys lets query i see keys 0..i: 128*129/2 pairs.
TOP_LEFT = 128 * 129 / 2 / (128 * 256)


@pytest.mark.parametrize("target,key,mask,scale", [
    ("__cudnn$fmhaSoftmax", "bmm1_dot_dimension_numbers", "NO_MASK", 1.0),
    ("__cudnn$fmhaSoftmax", "bmm1_dot_dimension_numbers", "CAUSAL", TOP_LEFT),
    ("__cudnn$fmhaSoftmaxBackward", "bmm2_grad_gemm2_dot_dimension_numbers", "NO_MASK", 2.5),
])
def test_cudnn_attention_costs_its_two_batched_matmuls(target, key, mask, scale):
    # Q, K, V in BTNH layout: batch 2, 128 query and 256 key positions, 4 heads of 64.
    _, costs = costs_of(f"""
  %q = bf16[2,128,4,64] parameter(0)
  %k = bf16[2,256,4,64] parameter(1)
  %v = bf16[2,256,4,64] parameter(2)
  ROOT %a = (bf16[2,128,4,64], u8[0]) custom-call(%q, %k, %v), custom_call_target="{target}", backend_config={fmha_config(key, mask)}""")
    forward = 2 * (2 * 4) * 128 * 256 * (64 + 64)
    assert costs["a"].flops == forward * scale
    assert costs["a"].transcendentals == 2 * 4 * 128 * 256 * (scale if mask == "CAUSAL" else 1)


def test_an_operand_named_as_a_tuple_element_has_that_elements_shape():
    # Recent XLA prints element N of a tuple-shaped op as `%op#N`, with no get-tuple-element.
    _, costs = costs_of("""
  %x = f32[64,32]{1,0} parameter(0)
  %s = (f32[64,32]{1,0}, f32[64]{0}) sort(%x, %x), dimensions={1}, to_apply=%lt
  ROOT %e = f32[64]{0} exponential(%s#1)""", """
%lt (a: f32[], b: f32[], c: f32[], d: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %c = f32[] parameter(2)
  %d = f32[] parameter(3)
  ROOT %r = pred[] compare(%a, %b), direction=LT
}""")
    assert costs["e"].modeled and costs["e"].bytes_read == 64 * 4 and costs["e"].transcendentals == 64


def test_a_jax_0_11_training_step_dump_costs_every_op():
    from pathlib import Path

    dump = (Path(__file__).parent / "data" / "captures" / "h100-jax0.11" / "dump" /
            "module_0000.jit_train_step.sm_9.0a_gpu_after_optimizations.txt")
    module = parse_hlo_text(dump.read_text(), str(dump))
    assert "#1" in dump.read_text() and unmodeled_ops(cost_module(module)) == {}
