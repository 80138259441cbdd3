"""Collectives wherever XLA puts them: a fusion that carries one is priced as that collective.

The TPU forms are written as libtpu (0.0.42, JAX 0.10.2) compiles `data/workloads/fsdp_mlp.py`
ahead of time (`data/hlo/tpu-aot/`, README there), which is also how XLA's own docs show one
(`xla/docs/shapes.md`: `fusion(...), kind=kCustom, calls=%all-reduce-scatter.3`): an all-reduce
with `from-cross-replica-sharding` and a dynamic-slice at partition-id times the shard. The TPU
async collective fusion (start fusion with `AsyncCollectiveStart`, compute fusion
`%async_collective_fusion`, done fusion with `AsyncCollectiveDone`) is the one libtpu writes with
`--xla_tpu_enable_async_collective_fusion*` and `--xla_enable_async_all_gather`. The GPU forms are the ones XLA's own tests write:
`calls=%dynamic-slice-fusion` with `"name":"dynamic_address_computation"`
(dynamic_slice_fusion_rewriter_test.cc) and a `__triton_collective` fusion whose root is an
all-reduce-start (the XTile dialect test).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxlib import _hlo

from audit.costmodel.ops.module import cost_module
from audit.orchestration.pipeline import analyse_hlo
from audit.parsers.hlo.text import parse_hlo_text

TILED = "{1,0:T(8,128)(2,1)}"


def _add(dtype: str) -> str:
    return (f"%add (x: {dtype}[], y: {dtype}[]) -> {dtype}[] {{\n  %x = {dtype}[] parameter(0)\n"
            f"  %y = {dtype}[] parameter(1)\n  ROOT %s = {dtype}[] add(%x, %y)\n}}\n\n")

# TPU async collective fusion, as libtpu writes it (the flag and state buffers trimmed to two).
ASYNC_COLLECTIVE_FUSION = """HloModule jit_step, is_scheduled=true, num_partitions=4

%start_computation (param_0: bf16[2048,4096]) -> (bf16[2048,4096], bf16[8192,4096], s32[2], u32[]) {
  %param_0 = bf16[2048,4096]{1,0:T(8,128)(2,1)} parameter(0)
  %all-gather.1 = bf16[8192,4096]{1,0:T(8,128)(2,1)} all-gather(%param_0), channel_id=5, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true, frontend_attributes={chain_id="2"}
  ROOT %custom-call.1 = (bf16[2048,4096]{1,0:T(8,128)(2,1)}, bf16[8192,4096]{1,0:T(8,128)(2,1)}, s32[2]{0:S(4)}, u32[]{:S(2)}) custom-call(%all-gather.1), custom_call_target="AsyncCollectiveStart"
}

%async_collective_fusion (param_0.1: bf16[2048,4096], param_1.1: bf16[8192,4096], param_2.1: s32[2], param_3.1: u32[], param_4.1: bf16[4096,8192], param_5.1: bf16[8192,8192]) -> (bf16[4096,8192], bf16[2048,4096], bf16[8192,4096], bf16[8192,4096], s32[2], u32[]) {
  %param_4.1 = bf16[4096,8192]{1,0:T(8,128)(2,1)} parameter(4)
  %param_5.1 = bf16[8192,8192]{1,0:T(8,128)(2,1)} parameter(5)
  %convolution.1 = bf16[4096,8192]{1,0:T(8,128)(2,1)} convolution(%param_4.1, %param_5.1), dim_labels=bf_io->bf
  %param_0.1 = bf16[2048,4096]{1,0:T(8,128)(2,1)} parameter(0)
  %param_1.1 = bf16[8192,4096]{1,0:T(8,128)(2,1)} parameter(1)
  %all-gather.2 = bf16[8192,4096]{1,0:T(8,128)(2,1)} all-gather(%param_0.1), channel_id=5, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true, frontend_attributes={chain_id="2"}
  %param_2.1 = s32[2]{0:S(4)} parameter(2)
  %param_3.1 = u32[]{:S(2)} parameter(3)
  ROOT %tuple.1 = (bf16[4096,8192]{1,0:T(8,128)(2,1)}, bf16[2048,4096]{1,0:T(8,128)(2,1)}, bf16[8192,4096]{1,0:T(8,128)(2,1)}, bf16[8192,4096]{1,0:T(8,128)(2,1)}, s32[2]{0:S(4)}, u32[]{:S(2)}) tuple(%convolution.1, %param_0.1, %param_1.1, %all-gather.2, %param_2.1, %param_3.1)
}

%done_computation (param_0.2: bf16[2048,4096], param_1.2: bf16[8192,4096], param_2.2: s32[2], param_3.2: u32[]) -> bf16[8192,4096] {
  %param_0.2 = bf16[2048,4096]{1,0:T(8,128)(2,1)} parameter(0)
  %param_1.2 = bf16[8192,4096]{1,0:T(8,128)(2,1)} parameter(1)
  %all-gather.3 = bf16[8192,4096]{1,0:T(8,128)(2,1)} all-gather(%param_0.2), channel_id=5, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true, frontend_attributes={chain_id="2"}
  %param_2.2 = s32[2]{0:S(4)} parameter(2)
  %param_3.2 = u32[]{:S(2)} parameter(3)
  ROOT %custom-call.2 = bf16[8192,4096]{1,0:T(8,128)(2,1)} custom-call(%param_0.2, %param_1.2, %all-gather.3, %param_2.2, %param_3.2), custom_call_target="AsyncCollectiveDone"
}

ENTRY %main (w: bf16[2048,4096], x: bf16[4096,8192], v: bf16[8192,8192]) -> (bf16[4096,8192], bf16[8192,4096]) {
  %w = bf16[2048,4096]{1,0:T(8,128)(2,1)} parameter(0)
  %x = bf16[4096,8192]{1,0:T(8,128)(2,1)} parameter(1)
  %v = bf16[8192,8192]{1,0:T(8,128)(2,1)} parameter(2)
  %async-collective-start = (bf16[2048,4096]{1,0:T(8,128)(2,1)}, bf16[8192,4096]{1,0:T(8,128)(2,1)}, s32[2]{0:S(4)}, u32[]{:S(2)}) fusion(%w), kind=kCustom, output_to_operand_aliasing={{0}: (0, {})}, calls=%start_computation
  %gte.0 = bf16[2048,4096]{1,0:T(8,128)(2,1)} get-tuple-element(%async-collective-start), index=0
  %gte.1 = bf16[8192,4096]{1,0:T(8,128)(2,1)} get-tuple-element(%async-collective-start), index=1
  %gte.2 = s32[2]{0:S(4)} get-tuple-element(%async-collective-start), index=2
  %gte.3 = u32[]{:S(2)} get-tuple-element(%async-collective-start), index=3
  %fusion.1 = (bf16[4096,8192]{1,0:T(8,128)(2,1)}, bf16[2048,4096]{1,0:T(8,128)(2,1)}, bf16[8192,4096]{1,0:T(8,128)(2,1)}, bf16[8192,4096]{1,0:T(8,128)(2,1)}, s32[2]{0:S(4)}, u32[]{:S(2)}) fusion(%gte.0, %gte.1, %gte.2, %gte.3, %x, %v), kind=kOutput, output_to_operand_aliasing={{1}: (0, {}), {2}: (1, {}), {3}: (1, {}), {4}: (2, {}), {5}: (3, {})}, calls=%async_collective_fusion
  %gte.4 = bf16[4096,8192]{1,0:T(8,128)(2,1)} get-tuple-element(%fusion.1), index=0
  %gte.5 = bf16[2048,4096]{1,0:T(8,128)(2,1)} get-tuple-element(%fusion.1), index=1
  %gte.6 = bf16[8192,4096]{1,0:T(8,128)(2,1)} get-tuple-element(%fusion.1), index=3
  %gte.7 = s32[2]{0:S(4)} get-tuple-element(%fusion.1), index=4
  %gte.8 = u32[]{:S(2)} get-tuple-element(%fusion.1), index=5
  %async-collective-done = bf16[8192,4096]{1,0:T(8,128)(2,1)} fusion(%gte.5, %gte.6, %gte.7, %gte.8), kind=kCustom, output_to_operand_aliasing={{}: (1, {})}, calls=%done_computation
  ROOT %out = (bf16[4096,8192]{1,0:T(8,128)(2,1)}, bf16[8192,4096]{1,0:T(8,128)(2,1)}) tuple(%gte.4, %async-collective-done)
}
"""

# GPU: a reduce-scatter into a dynamic-update-slice, fused by XLA's DynamicSliceFusionRewriter.
GPU_DYNAMIC_SLICE_FUSION = """HloModule test, is_scheduled=true, num_partitions=2

%add (param_0: f16[], param_1: f16[]) -> f16[] {
  %param_0 = f16[] parameter(0)
  %param_1 = f16[] parameter(1)
  ROOT %add.1 = f16[] add(%param_0, %param_1)
}

%dynamic-slice-fusion (p0: f16[128,128], p1: f16[128,128], p2: u32[], p3: u32[]) -> f16[128,128] {
  %p0 = f16[128,128]{1,0} parameter(0)
  %p1 = f16[128,128]{1,0} parameter(1)
  %p2 = u32[] parameter(2)
  %p3 = u32[] parameter(3)
  %reduce-scatter = f16[64,128]{1,0} reduce-scatter(%p0), channel_id=64, replica_groups={{0,1}}, use_global_device_ids=true, dimensions={0}, to_apply=%add
  ROOT %dynamic-update-slice = f16[128,128]{1,0} dynamic-update-slice(%p1, %reduce-scatter, %p2, %p3)
}

ENTRY %main.9 (param_0.1: f16[128,128], param_1.1: f16[128,128]) -> f16[128,128] {
  %param_0.1 = f16[128,128]{1,0} parameter(0)
  %param_1.1 = f16[128,128]{1,0} parameter(1)
  %constant_20 = u32[] constant(20)
  %constant_0 = u32[] constant(0)
  ROOT %address_computation = f16[128,128]{1,0} fusion(%param_0.1, %param_1.1, %constant_20, %constant_0), kind=kCustom, calls=%dynamic-slice-fusion, backend_config={"fusion_backend_config":{"kind":"__custom_fusion","custom_fusion_config":{"name":"dynamic_address_computation"}}}
}
"""

# GPU: XLA's one-shot all-reduce emitted by Triton (`__triton_collective`), its root an all-reduce-start.
GPU_TRITON_COLLECTIVE = """HloModule wrapped_module_all-reduce-start, num_partitions=2

%apply_op (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %apply_op = f32[] add(%x, %y)
}

%wrapped_all-reduce-start (param: f32[65536]) -> f32[65536] {
  %param = f32[65536]{0} parameter(0)
  ROOT %all-reduce-start = f32[65536]{0} all-reduce-start(%param), replica_groups={{0,1}}, to_apply=%apply_op
}

ENTRY %entry (param.1: f32[65536]) -> f32[65536] {
  %param.1 = f32[65536]{0} parameter(0)
  ROOT %fusion = f32[65536]{0} fusion(%param.1), kind=kLoop, calls=%wrapped_all-reduce-start, backend_config={"fusion_backend_config":{"kind":"__triton_collective","block_level_fusion_config":{"num_warps":"16","output_tiles":[{"sizes":["4096"]}],"num_ctas":1,"num_stages":1}}}
}
"""


def _groups(n: int) -> str:
    return "replica_groups={{" + ",".join(str(i) for i in range(n)) + "}}"


def reduce_scatter_texts(dims: tuple[int, ...], dim: int, n: int, groups: str = "",
                         layout: str = TILED, dtype: str = "bf16") -> tuple[str, str]:
    """(plain reduce-scatter, TPU all-reduce-scatter fusion) of one array over n devices."""
    groups = groups or _groups(n)
    out = tuple(d // n if i == dim else d for i, d in enumerate(dims))
    arr_in, arr_out = f"{dtype}[{','.join(map(str, dims))}]", f"{dtype}[{','.join(map(str, out))}]"
    shape_in, shape_out = arr_in + layout, arr_out + layout
    head = f"HloModule m, is_scheduled=true, num_partitions={n}\n\n{_add(dtype)}"
    plain = (f"{head}ENTRY %main (p: {arr_in}) -> {arr_out} {{\n"
             f"  %p = {shape_in} parameter(0)\n"
             f"  ROOT %rs = {shape_out} reduce-scatter(%p), channel_id=1, {groups}, use_global_device_ids=true, "
             f"dimensions={{{dim}}}, to_apply=%add\n}}\n")
    offsets = ", ".join("%offset" if i == dim else "%zero" for i in range(len(dims)))
    fused = (f"{head}%all-reduce-scatter.3 (input: {arr_in}) -> {arr_out} {{\n"
             f"  %input = {shape_in} parameter(0)\n"
             f"  %all-reduce.2 = {shape_in} all-reduce(%input), channel_id=1, {groups}, use_global_device_ids=true, "
             f"to_apply=%add, frontend_attributes={{from-cross-replica-sharding=\"true\"}}\n"
             f"  %partition-id = u32[] partition-id()\n  %shard = u32[] constant({out[dim]})\n"
             f"  %offset = u32[] multiply(%partition-id, %shard)\n  %zero = u32[] constant(0)\n"
             f"  ROOT %dynamic-slice = {shape_out} dynamic-slice(%all-reduce.2, {offsets}), "
             f"dynamic_slice_sizes={{{','.join(map(str, out))}}}\n}}\n\n"
             f"ENTRY %main (p: {arr_in}) -> {arr_out} {{\n"
             f"  %p = {shape_in} parameter(0)\n"
             f"  ROOT %fusion.3 = {shape_out} fusion(%p), kind=kCustom, calls=%all-reduce-scatter.3\n}}\n")
    return plain, fused


def _report(tmp_path: Path, name: str, text: str, hardware: str) -> dict:
    path = tmp_path / f"{name}.hlo"
    path.write_text(text)
    return analyse_hlo(path, hardware=hardware).to_json()


def _op(report: dict, name: str) -> dict:
    return next(o for o in report["ops"] if o["name"] == name)


def _row(report: dict, name: str) -> dict:
    return next(c for c in report["collectives"] if c["name"] == name)


def test_the_written_forms_are_valid_hlo_for_xlas_own_parser():
    plain, fused = reduce_scatter_texts((4096, 14336), 0, 8)
    for text in (plain, fused, ASYNC_COLLECTIVE_FUSION, GPU_DYNAMIC_SLICE_FUSION, GPU_TRITON_COLLECTIVE):
        assert _hlo.hlo_module_from_text(text) is not None


@pytest.mark.parametrize("hardware", ["tpu-v5p:2x2x2", "tpu-v6e:2x4", "tpu-v5e:2x4"])
def test_a_tpu_reduce_scatter_fusion_is_priced_as_the_plain_reduce_scatter_of_the_same_data(tmp_path, hardware):
    plain_text, fused_text = reduce_scatter_texts((4096, 14336), 0, 8)
    plain, fused = _report(tmp_path, "plain", plain_text, hardware), _report(tmp_path, "fused", fused_text, hardware)
    rs, fusion = _op(plain, "rs"), _op(fused, "fusion.3")
    # Before: memory traffic only (on v6e 73 us against 398 us for the reduce-scatter).
    assert fusion["bound_by"] == rs["bound_by"] == "collective"
    assert fusion["expected_s"] == pytest.approx(rs["expected_s"], rel=0.2)
    assert fusion["achievable_s"] == pytest.approx(rs["achievable_s"], rel=0.2)
    # The transfer once: what one device sends, as the plain reduce-scatter sends it (V(n-1)/n).
    assert fusion["comm_bytes"] == rs["comm_bytes"] == 4096 * 14336 * 2 * 7 / 8
    # The same combines, plus the fused compute (the shard offset's multiply); the same HBM traffic.
    assert fusion["flops"] == rs["flops"] + 1 and fusion["bytes"] == rs["bytes"]
    row = _row(fused, "fusion.3")
    assert (row["kind"], row["bytes"], row["group_size"]) == ("reduce-scatter", 4096 * 14336 * 2, 8)
    assert row["fused"] == "all-reduce-scatter.3" and _row(plain, "rs")["fused"] == ""


@settings(max_examples=25, deadline=None)
@given(rows=st.sampled_from([8, 64, 1024, 8192]), cols=st.sampled_from([128, 512, 4096]),
       n=st.sampled_from([2, 4, 8]), dim=st.sampled_from([0, 1]))
def test_fused_and_plain_reduce_scatters_send_the_same_bytes_over_the_same_groups(rows, cols, n, dim):
    plain_text, fused_text = reduce_scatter_texts((rows * n, cols * n), dim, n)
    plain = cost_module(parse_hlo_text(plain_text))["rs"]
    fused = cost_module(parse_hlo_text(fused_text))["fusion.3"]
    assert fused.collective is not None and plain.collective is not None
    assert fused.collective.kind == "reduce-scatter"
    assert fused.collective.bytes == plain.collective.bytes == rows * n * cols * n * 2
    assert fused.collective.groups == plain.collective.groups
    assert fused.comm_bytes == plain.comm_bytes == pytest.approx(fused.collective.bytes * (n - 1) / n)
    assert fused.flops == plain.flops + 1  # the combines, (n-1)/n of the elements, and the offset's multiply


def test_an_all_reduce_a_fusion_keeps_whole_stays_an_all_reduce():
    _, fused_text = reduce_scatter_texts((4096, 512), 0, 8)
    whole = fused_text.replace("ROOT %dynamic-slice = bf16[512,512]", "%dynamic-slice = bf16[512,512]").replace(
        "dynamic_slice_sizes={512,512}\n}", "dynamic_slice_sizes={512,512}\n"
        "  ROOT %sum = bf16[4096,512]{1,0:T(8,128)(2,1)} add(%all-reduce.2, %all-reduce.2)\n}").replace(
        "-> bf16[512,512] {\n  %input", "-> bf16[4096,512] {\n  %input").replace(
        "ROOT %fusion.3 = bf16[512,512]", "ROOT %fusion.3 = bf16[4096,512]").replace(
        "-> bf16[512,512] {\n  %p", "-> bf16[4096,512] {\n  %p")
    fused = cost_module(parse_hlo_text(whole))["fusion.3"]
    assert fused.collective is not None and fused.collective.kind == "all-reduce"
    assert fused.comm_bytes == pytest.approx(2 * 4096 * 512 * 2 * 7 / 8)
    assert fused.flops == pytest.approx(4096 * 512 * 7 / 8 + 4096 * 512)  # combines, then the fused add


def _plain_all_gather(n: int = 4) -> str:
    return (f"HloModule m, is_scheduled=true, num_partitions={n}\n\nENTRY %main (w: bf16[2048,4096]) -> bf16[8192,4096] {{\n"
            f"  %w = bf16[2048,4096]{TILED} parameter(0)\n"
            f"  ROOT %ag = bf16[8192,4096]{TILED} all-gather(%w), channel_id=5, {_groups(n)}, dimensions={{0}}, "
            "use_global_device_ids=true\n}\n")


def test_an_async_collective_fusion_carries_its_transfer_once_beside_its_matmul(tmp_path):
    report = _report(tmp_path, "acf", ASYNC_COLLECTIVE_FUSION, "tpu-v5p:2x2x1")
    plain = _report(tmp_path, "ag", _plain_all_gather(), "tpu-v5p:2x2x1")
    start, compute, done = (_op(report, n) for n in ("async-collective-start", "fusion.1", "async-collective-done"))
    # The transfer once, on the compute fusion that carries it: not on the start, not again on the done.
    assert start["expected_s"] == done["expected_s"] == 0.0 and not start["comm_bytes"] and not done["comm_bytes"]
    assert sum(o["comm_bytes"] or 0 for o in report["ops"]) == _op(plain, "ag")["comm_bytes"]
    assert compute["comm_s"] == pytest.approx(_op(plain, "ag")["comm_s"], rel=1e-9)
    # Its own matmul counts, and the buffers it threads through for the collective are not traffic:
    # it reads x, v and the shard, writes its product and the gathered array.
    assert compute["flops"] == 2 * 4096 * 8192 * 8192
    assert compute["bytes"] == 2 * (4096 * 8192 + 8192 * 8192 + 4096 * 8192) + _op(plain, "ag")["bytes"]
    # Bound as a plain op: the matmul outlasts the gather, which hides behind it.
    assert compute["bound_by"] == "compute" and compute["expected_s"] == pytest.approx(compute["compute_s"])
    summary = report["summary"]
    assert summary["exposed_comm_s"] == 0.0
    assert summary["hidden_comm_s"] == pytest.approx(compute["comm_s"])
    row = _row(report, "fusion.1")
    assert (row["kind"], row["bytes"], row["group_size"], row["fused"]) == (
        "all-gather", 8192 * 4096 * 2, 4, "async_collective_fusion")


def test_compute_fusions_that_continue_one_collective_share_it():
    two = ASYNC_COLLECTIVE_FUSION.replace(
        "  %async-collective-done = ",
        "  %fusion.2 = (bf16[4096,8192]{1,0:T(8,128)(2,1)}, bf16[2048,4096]{1,0:T(8,128)(2,1)}, "
        "bf16[8192,4096]{1,0:T(8,128)(2,1)}, bf16[8192,4096]{1,0:T(8,128)(2,1)}, s32[2]{0:S(4)}, u32[]{:S(2)}) "
        "fusion(%gte.5, %gte.6, %gte.7, %gte.8, %gte.4, %v), kind=kOutput, calls=%async_collective_fusion\n"
        "  %async-collective-done = ")
    costs = cost_module(parse_hlo_text(two))
    gather = cost_module(parse_hlo_text(_plain_all_gather()))["ag"]
    assert costs["fusion.1"].comm_bytes == costs["fusion.2"].comm_bytes == gather.comm_bytes / 2
    assert sum(c.comm_bytes for c in costs.values()) == gather.comm_bytes


def test_a_start_fusion_no_compute_fusion_continues_carries_the_collective_itself():
    alone = ASYNC_COLLECTIVE_FUSION.replace("calls=%async_collective_fusion", "calls=%async_collective_fusion_kept")
    alone = alone.replace("%async_collective_fusion (", "%async_collective_fusion_kept (").replace(
        "channel_id=5, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true, "
        "frontend_attributes={chain_id=\"2\"}\n  %param_2.1", "channel_id=6, replica_groups={{0,1,2,3}}, "
        "dimensions={0}, use_global_device_ids=true\n  %param_2.1")
    costs = cost_module(parse_hlo_text(alone))
    gather = cost_module(parse_hlo_text(_plain_all_gather()))["ag"]
    start = costs["async-collective-start"]
    assert start.collective is not None and start.comm_bytes == gather.comm_bytes
    assert (start.bytes_read, start.bytes_written) == (gather.bytes_read, gather.bytes_written)
    assert costs["async-collective-done"].comm_bytes == 0


def test_a_gpu_dynamic_slice_fusion_is_priced_as_its_reduce_scatter_updating_in_place():
    fused = cost_module(parse_hlo_text(GPU_DYNAMIC_SLICE_FUSION))["address_computation"]
    plain = cost_module(parse_hlo_text(reduce_scatter_texts((128, 128), 0, 2, layout="{1,0}")[0]))["rs"]
    assert fused.collective is not None and fused.collective.kind == "reduce-scatter"
    assert fused.comm_bytes == plain.comm_bytes == 128 * 128 * 2 / 2
    # Reads the reduced input (and the two u32 offsets); the destination is updated in place, so
    # only the shard is written and the destination is not read.
    assert (fused.bytes_read, fused.bytes_written) == (128 * 128 * 2 + 2 * 4, 64 * 128 * 2)


def test_a_gpu_triton_collective_fusion_is_priced_as_its_all_reduce():
    fused = cost_module(parse_hlo_text(GPU_TRITON_COLLECTIVE))["fusion"]
    assert fused.collective is not None and fused.collective.kind == "all-reduce"
    assert fused.comm_bytes == 2 * 65536 * 4 / 2  # 2V(n-1)/n on two devices
    assert fused.collective.fused == "wrapped_all-reduce-start"


def test_a_fusion_wrapped_in_an_async_start_counts_its_collective_once(tmp_path):
    wrapped = GPU_DYNAMIC_SLICE_FUSION.replace("ENTRY %main.9", (
        "%wrapped (w0: f16[128,128], w1: f16[128,128], w2: u32[], w3: u32[]) -> f16[128,128] {\n"
        "  %w0 = f16[128,128]{1,0} parameter(0)\n  %w1 = f16[128,128]{1,0} parameter(1)\n"
        "  %w2 = u32[] parameter(2)\n  %w3 = u32[] parameter(3)\n"
        "  ROOT %address_computation = f16[128,128]{1,0} fusion(%w0, %w1, %w2, %w3), kind=kCustom, "
        "calls=%dynamic-slice-fusion\n}\n\nENTRY %main.9")).replace(
        "  ROOT %address_computation = f16[128,128]{1,0} fusion(%param_0.1, %param_1.1, %constant_20, %constant_0)",
        "  %start = ((f16[128,128]{1,0}, f16[128,128]{1,0}, u32[], u32[]), f16[128,128]{1,0}, s32[]) "
        "async-start(%param_0.1, %param_1.1, %constant_20, %constant_0), calls=%wrapped\n"
        "  ROOT %done = f16[128,128]{1,0} async-done(%start)\n  %unused = f16[128,128]{1,0} fusion(%param_0.1, "
        "%param_1.1, %constant_20, %constant_0)")
    wrapped = wrapped.replace("  %unused = f16[128,128]{1,0} fusion(%param_0.1, %param_1.1, %constant_20, "
                              "%constant_0), kind=kCustom, calls=%dynamic-slice-fusion, backend_config="
                              "{\"fusion_backend_config\":{\"kind\":\"__custom_fusion\",\"custom_fusion_config\":"
                              "{\"name\":\"dynamic_address_computation\"}}}\n", "")
    assert _hlo.hlo_module_from_text(wrapped) is not None
    report = _report(tmp_path, "wrapped", wrapped, "h100:2")
    assert [c["name"] for c in report["collectives"]] == ["start"]
    assert sum(o["comm_bytes"] or 0 for o in report["ops"]) == 128 * 128 * 2 / 2


def _layout_text(shape) -> str:
    tiles = "".join(f"T({','.join(map(str, t))})" for t in shape.tiles)
    return "{" + ",".join(map(str, shape.layout)) + (f":{tiles}" if tiles else "") + "}"


def test_on_the_real_v6e_llama_step_offloaded_and_fused_reduce_scatters_price_as_plain_ones(tmp_path):
    """The real Llama3-8B step runs its FSDP reduce-scatters on SparseCore (async-start -> call ->
    reduce-scatter); the same data as a TensorCore all-reduce-scatter fusion, as XLA writes it
    when it does not offload, and as a plain reduce-scatter are priced alike."""
    from conftest import shared_fixture

    path = shared_fixture("tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt")
    module = parse_hlo_text(path.read_text())
    report = analyse_hlo(path, hardware="tpu-v6e:2x4").to_json()
    carriers = {name.lstrip("%"): i.name for _, i in module.instructions() if i.opcode == "call"
                for name in i.called}
    starts = {i.called[0].lstrip("%"): i.name for _, i in module.instructions() if i.opcode == "async-start"}
    priced: dict[tuple, tuple[dict, dict]] = {}
    offloads = 0
    for comp, rs in module.instructions():
        if rs.opcode != "reduce-scatter":
            continue
        source = module.find(rs.operands[0])
        assert source is not None
        shape, dim = source[1].shape, rs.dimensions[0]
        key = (shape.dtype, shape.dims, dim)
        if key not in priced:
            plain_text, fused_text = reduce_scatter_texts(shape.dims, dim, 8, "replica_groups=[1,8]<=[8]",
                                                          _layout_text(shape), shape.dtype)
            priced[key] = (_op(_report(tmp_path, f"plain{len(priced)}", plain_text, "tpu-v6e:2x4"), "rs"),
                           _op(_report(tmp_path, f"fused{len(priced)}", fused_text, "tpu-v6e:2x4"), "fusion.3"))
        rs_op, fusion = priced[key]
        assert fusion["expected_s"] == pytest.approx(rs_op["expected_s"], rel=0.2), key
        assert fusion["achievable_s"] == pytest.approx(rs_op["achievable_s"], rel=0.2), key
        offload = _op(report, starts[next(c.name for c in module.computations.values()
                                          if any(i.name == carriers[comp.name] for i in c.instructions))])
        # The offloads in the layer loop have their figures summed over the loop's trips.
        runs = offload["occurrences"]
        assert offload["expected_s"] / runs == pytest.approx(rs_op["expected_s"], rel=0.2), key
        assert offload["comm_bytes"] / runs == fusion["comm_bytes"] == rs_op["comm_bytes"], key
        offloads += 1
    # Every weight gradient of the step: attention, MLP (both scatter dimensions) and embedding.
    assert (offloads, len(priced)) == (8, 6)


AOT = Path(__file__).parent / "data" / "hlo" / "tpu-aot"


def test_on_real_v5p_hlo_each_all_reduce_scatter_fusion_is_priced_as_the_plain_reduce_scatter(tmp_path):
    """libtpu pads the gradient (4096 rows to 4224 on 4 chips) before its all-reduce-scatter and
    realigns the shard with a collective-permute after; the fusion moves 3% more than the plain
    reduce-scatter of the gradient and is priced within 20% of it."""
    path = AOT / "fsdp_mlp.tpu-v5p-2x2x1.after_optimizations.txt"
    module = parse_hlo_text(path.read_text())
    report = analyse_hlo(path, hardware="tpu-v5p:2x2x1").to_json()
    rows = [c for c in report["collectives"] if c["fused"].startswith("all-reduce-scatter")]
    assert len(rows) == 4  # a weight gradient per matrix of the two layers
    for row in rows:
        found = module.find(row["name"])
        assert found is not None
        gradient = module.find(found[1].operands[0])
        assert gradient is not None
        plain_text, _ = reduce_scatter_texts(gradient[1].shape.dims, 0, 4)
        plain = _op(_report(tmp_path, row["name"], plain_text, "tpu-v5p:2x2x1"), "rs")
        fusion = _op(report, row["name"])
        assert (row["kind"], row["group_size"]) == ("reduce-scatter", 4)
        assert fusion["bound_by"] == plain["bound_by"] == "collective"
        assert fusion["expected_s"] == pytest.approx(plain["expected_s"], rel=0.2)  # before: 6.4x below it
        assert fusion["achievable_s"] == pytest.approx(plain["achievable_s"], rel=0.2)
        assert fusion["comm_bytes"] == pytest.approx(plain["comm_bytes"], rel=0.05)


def test_the_collectives_section_lists_a_fused_collective_with_its_kind_bytes_and_group(tmp_path):
    from conftest import render

    _, fused_text = reduce_scatter_texts((4096, 14336), 0, 8)
    report = _report(tmp_path, "fused", fused_text, "tpu-v6e:2x4")
    terminal = render(report, "terminal")
    line = next(x for x in terminal.splitlines() if x.strip().startswith("fusion.3 ("))
    assert "(reduce-scatter (fused: all-reduce-scatter.3))" in line and "Group 8" in line
    assert "Bytes 117" in line  # 4096 x 14336 bf16 = 117.4 MB
    markdown = render(report, "markdown").replace("\\", "").split("### Collectives")[1]
    row = next(x for x in markdown.splitlines() if x.startswith("| fusion.3 |"))
    assert "| reduce-scatter (fused: all-reduce-scatter.3) |" in row and "| 8 |" in row
    html = render(report, "html")
    assert "reduce-scatter (fused: all-reduce-scatter.3)" in html


def _sent_by_kind(report: dict) -> dict[str, float]:
    kinds = {c["name"]: c["kind"] for c in report["collectives"]}
    out: dict[str, float] = {}
    for o in report["ops"]:
        if o["comm_bytes"]:
            out[kinds[o["name"]]] = out.get(kinds[o["name"]], 0.0) + o["comm_bytes"]
    return out


def test_on_real_v5p_async_collective_fusions_the_gathers_move_once_and_hide_behind_the_matmuls():
    """The same step compiled twice by libtpu: with plain all-gathers, and with three of them in
    async collective fusions (start, compute fusion, done) beside the layers' matmuls."""
    plain = analyse_hlo(AOT / "fsdp_mlp.tpu-v5p-2x2x1.after_optimizations.txt", hardware="tpu-v5p:2x2x1").to_json()
    fused = analyse_hlo(AOT / "fsdp_mlp.tpu-v5p-2x2x1.async_collective_fusion.txt",
                        hardware="tpu-v5p:2x2x1").to_json()
    assert _sent_by_kind(fused) == _sent_by_kind(plain)  # the same data crosses the links, once
    for o in fused["ops"]:
        if o["name"].startswith(("async-collective-start", "async-collective-done")):
            assert o["expected_s"] == 0.0 and not o["comm_bytes"], o["name"]
    carriers = [c for c in fused["collectives"] if c["fused"].startswith("async_collective_fusion")]
    assert [(c["kind"], c["bytes"], c["group_size"]) for c in carriers] == [("all-gather", 8192 * 4096 * 2, 4)] * 3
    gather_s = next(o["comm_s"] for o in plain["ops"] if o["opcode"] == "all-gather")
    hidden = 0.0
    for c in carriers:
        op = _op(fused, c["name"])
        assert op["bound_by"] == "compute" and op["comm_s"] == pytest.approx(gather_s)
        hidden += op["comm_s"]
    # Each gather hides behind its fusion's matmul: the step exposes that much less communication.
    assert fused["summary"]["exposed_comm_s"] == pytest.approx(plain["summary"]["exposed_comm_s"] - hidden)
