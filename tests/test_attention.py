"""Fused attention in every layout: FLOPs from what each call states, and the time good kernels take.

The TransformerEngine HLO under tests/data/te_attention/ is XLA's own printing of the calls TE's JAX
extension makes (make_te_hlo.py there: TE's operands and typed-FFI attributes, as its
cpp_extensions/attention.py passes them, through the same jax.ffi lowering). The cuDNN calls are this
project's real H100 captures (JAX 0.11.2, tests/data/captures/h100-jax0.11).
"""

from __future__ import annotations

import importlib.util
import json
import math
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from audit.costmodel.achievable import achievable_time
from audit.costmodel.attention import flops, pairs
from audit.costmodel.chips.catalog import CATALOG
from audit.costmodel.chips.hwfile import dumps, loads
from audit.costmodel.ops.module import cost_module
from audit.costmodel.costs import AttentionProblem, OpCost
from audit.costmodel.roofline import expect
from audit.base.errors import InputError
from audit.orchestration.pipeline import analyse_hlo, analyse_profile
from audit.parsers.hlo.text import parse_hlo_text

DATA = Path(__file__).parent / "data"
TE = DATA / "te_attention"
H100 = DATA / "captures" / "h100-jax0.11"


def _te_ops(name: str) -> dict[str, dict]:
    report = analyse_hlo(TE / f"{name}.hlo.txt", hardware="h100").to_json()
    return {o["custom_call_target"].split("_")[3]: o for o in report["ops"] if o["custom_call_target"].startswith("te_")}


# --- the problem a mask leaves ------------------------------------------------------------------

problems = st.builds(
    AttentionProblem, batch=st.integers(1, 3), heads=st.integers(1, 4), kv_heads=st.just(1),
    q_len=st.integers(1, 40), kv_len=st.integers(1, 40), qk_dim=st.sampled_from((32, 64, 128)),
    v_dim=st.sampled_from((32, 64, 128)), causal=st.booleans(), bottom_right=st.booleans(),
    window=st.tuples(st.integers(-1, 30), st.integers(-1, 30)))


@given(problems)
def test_pairs_are_every_pair_the_mask_lets_through(p: AttentionProblem):
    offset = p.kv_len - p.q_len if p.bottom_right else 0
    left, right = p.window
    seen = sum(1 for i in range(p.q_len) for j in range(p.kv_len)
               if not (p.causal and j > i + offset) and not (left >= 0 and j < i + offset - left)
               and not (right >= 0 and j > i + offset + right))
    assert pairs(p) == seen


@settings(deadline=None)  # counts pairs in Python: seconds on a shared, loaded machine
@given(problems)
def test_a_mask_never_adds_work(p: AttentionProblem):
    unmasked = AttentionProblem(p.batch, p.heads, p.kv_heads, p.q_len, p.kv_len, p.qk_dim, p.v_dim)
    causal = AttentionProblem(p.batch, p.heads, p.kv_heads, p.q_len, p.kv_len, p.qk_dim, p.v_dim, causal=True,
                              bottom_right=p.bottom_right)
    windowed = AttentionProblem(p.batch, p.heads, p.kv_heads, p.q_len, p.kv_len, p.qk_dim, p.v_dim, causal=True,
                                bottom_right=p.bottom_right, window=(p.window[0], -1))
    assert flops(windowed) <= flops(causal) <= flops(unmasked) == 2 * p.batch * p.heads * p.q_len * p.kv_len * (
        p.qk_dim + p.v_dim)


@given(problems)
def test_backward_is_two_and_a_half_forwards(p: AttentionProblem):
    def kernel(name: str) -> float:
        return flops(AttentionProblem(p.batch, p.heads, p.kv_heads, p.q_len, p.kv_len, p.qk_dim, p.qk_dim,
                                      kernel=name, causal=p.causal, window=p.window))
    assert kernel("backward") == 2.5 * kernel("forward")
    # A backward split in two kernels recomputes Q.K^T and dP in each: one forward's worth more.
    assert kernel("backward dK dV") + kernel("backward dQ") == kernel("backward") + kernel("forward")


def _legacy_call(operands: list[str], target: str = "te_fused_attn_forward") -> str:
    """A pre-FFI TransformerEngine call: its config is a packed C struct, printed escaped by XLA."""
    params = "\n".join(f"  %p{i} = {shape} parameter({i})" for i, shape in enumerate(operands))
    names = ", ".join(f"%p{i}" for i in range(len(operands)))
    return (f"HloModule m\nENTRY %main {{\n{params}\n  ROOT %a = (bf16[1]{{0}}, u8[64]{{0}}) custom-call({names}), "
            f'custom_call_target="{target}", backend_config="\\001\\000\\000\\000\\000\\000\\000\\000"\n}}\n')


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4096), st.integers(1, 32).filter(lambda h: h not in (2, 3)),
       st.sampled_from((64, 128)))  # 2 or 3 heads would make [b, s, 3, 3, d] name two layouts (of equal FLOPs)
def test_packed_and_separate_layouts_of_one_problem_give_the_same_flops(b: int, s: int, h: int, d: int):
    layouts = {"BS3HD": [f"bf16[{b},{s},3,{h},{d}]"], "BSH3D": [f"bf16[{b},{s},{h},3,{d}]"],
               "BSHD_BS2HD": [f"bf16[{b},{s},{h},{d}]", f"bf16[{b},{s},2,{h},{d}]"],
               "BSHD_BSHD_BSHD": [f"bf16[{b},{s},{h},{d}]"] * 3}
    counted = {}
    for layout, operands in layouts.items():
        a = cost_module(parse_hlo_text(_legacy_call(operands)))["a"]
        assert a.attention is not None and layout in a.attention.config
        counted[layout] = a.flops
    assert len(set(counted.values())) == 1
    assert counted["BS3HD"] == 2 * b * h * (s * (s + 1) // 2) * 2 * d  # no mask stated: counted as causal


@settings(max_examples=60, deadline=None)
@given(problems, st.sampled_from(sorted(CATALOG)), st.sampled_from(("bf16", "f16", "f8e4m3fn", "f32")))
def test_attention_is_never_achievable_faster_than_its_roofline(p: AttentionProblem, chip: str, dtype: str):
    size = {"f32": 4, "f8e4m3fn": 1}.get(dtype, 2)
    cost = OpCost(flops=flops(p), bytes_read=size * p.batch * (p.heads * p.q_len * p.qk_dim + 2 * p.kv_heads * p.kv_len
                                                                * p.qk_dim), bytes_written=0.0, dtype=dtype, attention=p)
    hw = CATALOG[chip]
    exp = expect(cost, hw)
    reach = achievable_time(cost, exp, hw)
    assert exp.expected_s is not None and reach.seconds is not None and reach.seconds >= exp.expected_s


# --- TransformerEngine as its JAX extension emits it ---------------------------------------------

B, S, HEADS, D = 2, 2048, 16, 128
CAUSAL_PAIRS = S * (S + 1) // 2


@pytest.mark.parametrize("name,forward,words", [
    ("bs3hd_causal", 2 * B * HEADS * CAUSAL_PAIRS * 2 * D, ("qkv_layout 5 (BS3HD)", "mask_type 2 (CAUSAL)")),
    ("bs3hd_no_mask_legacy", 4 * B * HEADS * S * S * D, ("qkv_layout 5 (BS3HD)", "mask_type 0 (NO_MASK)")),
    ("bshd_bs2hd_padding", 4 * B * HEADS * 1024 * 4096 * D, ("BSHD_BS2HD", "PADDING", "S_q=1024, S_kv=4096")),
    ("bshd_gqa_padding_causal", 2 * B * 32 * CAUSAL_PAIRS * 2 * D, ("H=32 (8 KV heads)", "PADDING_CAUSAL")),
    # 512 queries aligned to the last of 2048 keys: query i sees keys 0..1536+i.
    ("bshd_causal_bottom_right", 2 * B * HEADS * sum(1537 + i for i in range(512)) * 2 * D,
     ("CAUSAL_BOTTOM_RIGHT", "causal bottom-right")),
    # window_size (255, 0): each query sees itself and the 255 keys before it.
    ("bshd_window", 2 * B * HEADS * sum(min(i + 1, 256) for i in range(S)) * 2 * D,
     ("window_size (255, 0)", "sliding window of 255 keys back")),
    ("sbhd_no_mask", 4 * B * HEADS * S * S * D, ("qkv_layout 4 (SBHD_SBHD_SBHD)",)),
    ("thd_padding_causal", 2 * B * HEADS * (4096 * 4097 // 2) * 2 * D,
     ("qkv_layout 14 (THD_THD_THD)", "max_segments_per_seq 8", "8 of equal length would be 8x less work")),
])
def test_transformer_engine_attention_is_priced_from_the_config_it_states(name: str, forward: int, words: tuple):
    ops = _te_ops(name)
    assert ops["forward"]["flops"] == forward and ops["backward"]["flops"] == 2.5 * forward
    for op in ops.values():
        text = " ".join(op["reasons"])
        assert op["lower_bound"] is None and op["verdict"] == "not measured" and op["bound_by"] != "unknown"
        assert all(w in text for w in words), (name, text)
        assert ("runtime operands" in text) == ("padding" in name or "thd" in name)


def test_a_packed_qkv_call_reads_and_writes_its_packed_arrays():
    ops = _te_ops("bs3hd_causal")
    qkv, o, stats = B * S * 3 * HEADS * D * 2, B * S * HEADS * D * 2, B * HEADS * S * 4
    assert ops["forward"]["bytes"] >= qkv + o + stats
    assert ops["backward"]["bytes"] >= qkv + stats + 2 * o + qkv  # reads QKV, stats, O, dO; writes dQKV


def test_a_call_without_ffi_attributes_is_read_from_its_operand_shapes():
    a = cost_module(parse_hlo_text(_legacy_call(["bf16[2,2048,3,16,128]", "bf16[0]", "s32[3]"],
                                                "te_self_fused_attn_forward")))["a"]
    assert a.attention is not None and a.lower_bound == ""
    assert a.flops == 2 * B * HEADS * CAUSAL_PAIRS * 2 * D
    assert any("counted as causal" in n and "twice this" in n for n in a.notes)


def test_attributes_that_do_not_match_the_operands_yield_to_the_shapes():
    text = (TE / "sbhd_no_mask.hlo.txt").read_text().replace("attn_heads = 16", "attn_heads = 48")
    report = analyse_hlo_text(text)
    forward = next(o for o in report["ops"] if o["custom_call_target"] == "te_fused_attn_forward_ffi")
    assert any("do not match Q" in r for r in forward["reasons"]) and forward["lower_bound"] is None


def test_a_paged_layout_is_a_bound_that_says_why():
    text = (TE / "sbhd_no_mask.hlo.txt").read_text().replace("qkv_layout = 4 ", "qkv_layout = 19 ")
    report = analyse_hlo_text(text)
    forward = next(o for o in report["ops"] if o["custom_call_target"] == "te_fused_attn_forward_ffi")
    assert forward["flops"] is None and forward["lower_bound"].startswith("paged attention")


def analyse_hlo_text(text: str) -> dict:
    return analyse_hlo(Path("m.hlo.txt"), hardware="h100", module=parse_hlo_text(text)).to_json()


# --- cuDNN on a real H100 ------------------------------------------------------------------------


@cache
def _report(capture: str) -> dict:
    return analyse_profile(H100 / capture).to_json()


def _attention(report: dict) -> list[dict]:
    return [o for o in report["ops"] if o["custom_call_target"].startswith("__cudnn$fmha")]


def test_each_cudnn_attention_op_is_costed_from_its_own_program():
    # Two programs are both jit__lambda and both hold a dot_product_attention_fwd.4: one causal.
    ops = {(o["program_id"], o["name"]): o for o in _attention(_report("microbench.xplane.pb"))}
    dense = 4 * 4 * 16 * 2048 * 2048 * 128  # 4*B*H*S^2*D, B=4 S=2048 H=16 D=128: 137 GFLOP
    causal = 2 * 4 * 16 * (2048 * 2049 // 2) * 256
    expected = {(206427, "dot_product_attention_fwd.4"): dense, (207752, "dot_product_attention_fwd.4"): causal,
                (207089, "dot_product_attention_fwd.5"): dense, (207089, "dot_product_attention_bwd.8"): 2.5 * dense,
                (208414, "dot_product_attention_fwd.5"): causal, (208414, "dot_product_attention_bwd.8"): 2.5 * causal}
    assert {k: o["flops"] / o["occurrences"] for k, o in ops.items()} == expected


def test_cudnn_attention_runs_at_what_the_held_out_figures_predict():
    # The H100 figures are fitted to the sweep capture; the microbenchmark is a separate capture.
    for o in _attention(_report("microbench.xplane.pb")):
        assert not o["flagged"] and 0.95 < o["measured_s"] / o["achievable_s"] < 1.05, o["name"]
        assert o["achievable_s"] >= o["expected_s"]


def test_grouped_query_heads_windows_and_padding_on_a_real_h100():
    ops = {o["program_id"]: o for o in _attention(_report("attention-sweep/attention-sweep.xplane.pb"))
           if "fwd" in o["name"]}
    gqa, window, padding = ops[19893], ops[27840], ops[22543]
    assert gqa["flops"] / gqa["occurrences"] == 4 * 4 * 32 * 2048 * 2048 * 128  # 32 query heads, 8 KV heads
    assert 0.9 < gqa["measured_s"] / gqa["achievable_s"] < 1.1  # held out of the fit
    # sliding_window_length 256: query i attends min(i + 1, 256) keys.
    assert window["flops"] / window["occurrences"] == 2 * 4 * 16 * sum(min(i + 1, 256) for i in range(2048)) * 256
    # Half the positions valid at runtime: the stated lengths bound the work, and the kernel beats that bound.
    assert any("runtime operands" in r for r in padding["reasons"])
    assert padding["measured_s"] < padding["achievable_s"] and not padding["flagged"]


def test_hlo_text_of_recent_xla_names_tuple_elements_without_get_tuple_element():
    # JAX 0.11's dumps pass the forward's softmax stats as `%dot_product_attention_fwd.5#1`.
    report = analyse_hlo(H100 / "attention" / "module_207089.jit__lambda.sm_9.0a_gpu_after_optimizations.txt",
                         hardware="h100").to_json()
    backward = next(o for o in report["ops"] if o["name"] == "dot_product_attention_bwd.8")
    assert backward["flops"] == 2.5 * 4 * 4 * 16 * 2048 * 2048 * 128
    step = analyse_hlo(H100 / "dump" / "module_0000.jit_train_step.sm_9.0a_gpu_after_optimizations.txt",
                       hardware="h100").to_json()
    assert step["summary"]["unmodeled_ops"] == 0


# --- the figures ---------------------------------------------------------------------------------


def test_every_chip_states_attention_figures_below_its_peak_with_sources():
    for name, hw in CATALOG.items():
        ach = hw.achievable
        assert ach is not None
        assert set(ach.attention_flops_per_s) == {"forward", "backward", "forward_causal", "backward_causal"}, name
        assert set(ach.attention_half_rate_keys) == {"forward", "backward"}, name
        for key, q in ach.attention_flops_per_s.items():
            assert 0 < q.value <= hw.peak("bf16").value and q.unit == "FLOP/s" and q.note, (name, key)
            assert q.kind == "measured" or q.note.startswith("estimate"), (name, key)
        # A causal mask leaves partly masked blocks: it never raises the rate.
        for direction in ("forward", "backward"):
            assert ach.attention_flops_per_s[f"{direction}_causal"].value <= ach.attention_flops_per_s[direction].value


def test_the_h100_figures_are_the_fit_to_its_sweep_capture():
    spec = importlib.util.spec_from_file_location("attention_rates", Path(__file__).parents[1] / "bench" /
                                                  "attention_rates.py")
    assert spec is not None and spec.loader is not None
    rates = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rates)
    SWEEP, fit, fitted, points = rates.SWEEP, rates.fit, rates.fitted, rates.points
    figures = fit([r for r in points(_report("attention-sweep/attention-sweep.xplane.pb"), SWEEP / "hlo")
                   if fitted(r)])
    ach = CATALOG["h100"].achievable
    for key in ("forward", "backward", "forward_causal", "backward_causal"):
        assert ach.attention_flops_per_s[key].value == pytest.approx(figures[key], rel=1e-3)
    for key in ("forward", "backward"):
        assert ach.attention_half_rate_keys[key].value == figures[f"{key}_half"]


def test_a_hardware_file_with_an_unknown_attention_key_is_refused():
    text = dumps(CATALOG["h100"]).replace("\nforward_causal = ", "\nforwards_causal = ")
    with pytest.raises(InputError) as raised:
        loads(text, "mine.toml")
    assert "attention_flops_per_s.forwards_causal" in str(raised.value) and "forward_causal" in str(raised.value)


def test_the_catalog_round_trips_its_attention_figures():
    hw = CATALOG["mi355x"]
    again = loads(dumps(hw), "mi355x.toml", provenance="catalog")
    assert again.achievable == hw.achievable and json.dumps(again.to_json()["achievable"], allow_nan=False)
    assert math.isfinite(again.achievable.attention_half_rate_keys["forward"].value)


def test_fp8_attention_runs_on_the_fp8_tensor_core_rate():
    dims = ('{"lhs_contracting_dimensions":["3"],"rhs_contracting_dimensions":["3"],'
            '"lhs_batch_dimensions":["0","2"],"rhs_batch_dimensions":["0","2"]}')
    text = ("HloModule m\nENTRY %main {\n" + "".join(
        f"  %{n} = f8e4m3fn[4,2048,16,128]{{3,2,1,0}} parameter({i})\n" for i, n in enumerate("qkv")) +
        '  ROOT %a = (f8e4m3fn[4,2048,16,128]{3,2,1,0}, u8[0]{0}) custom-call(%q, %k, %v), '
        'custom_call_target="__cudnn$fmhaSoftmaxF8", backend_config={"cudnn_fmha_backend_config":'
        f'{{"mask_type":"NO_MASK","bmm1_dot_dimension_numbers":{dims}}}}}\n}}\n')
    a = cost_module(parse_hlo_text(text))["a"]
    hw = CATALOG["h100"]
    reach = achievable_time(a, expect(a, hw), hw)
    assert a.flops == 4 * 4 * 16 * 2048 * 2048 * 128 and a.dtype == "f8e4m3fn"
    fp8, bf16 = (hw.achievable.matmul_flops_per_s[k].value for k in ("fp8", "bf16"))
    bf16_time = a.flops * (2048 + 335) / 2048 / hw.achievable.attention_flops_per_s["forward"].value
    assert reach.compute_s == pytest.approx(bf16_time * 1056 / 1024 * bf16 / fp8)  # 8 waves of 1024 blocks


@pytest.mark.parametrize("chip", ["mi300x", "mi355x", "tpu-v5p", "tpu-v7"])
def test_attention_rates_off_nvidia_say_they_are_carried_over_from_nvidia(chip):
    # AMD and TPU flash-attention rates are H100 cuDNN fits scaled to the chip: every op priced on one says so.
    from audit.costmodel.achievable import achievable_time
    from audit.costmodel.costs import AttentionProblem, OpCost
    from audit.costmodel.attention import flops
    from audit.costmodel.roofline import expect

    hw = CATALOG[chip]
    problem = AttentionProblem(batch=4, heads=16, kv_heads=16, q_len=4096, kv_len=4096, qk_dim=128, v_dim=128)
    cost = OpCost(flops=flops(problem), bytes_read=3 * 4 * 4096 * 16 * 128 * 2.0,
                  bytes_written=4 * 4096 * 16 * 128 * 2.0, dtype="bf16", attention=problem)
    reach = achievable_time(cost, expect(cost, hw), hw)
    assert hw.achievable.attention_flops_per_s["forward"].estimate
    assert any("carried over from NVIDIA measurements" in n for n in reach.notes), reach.notes
    h100 = CATALOG["h100"]
    assert not any("carried over" in n for n in achievable_time(cost, expect(cost, h100), h100).notes)


@given(problems)
def test_pairs_in_closed_form_are_the_masks_count_on_arrays(p: AttentionProblem):
    # The count of pairs takes no memory in the lengths: a config or shape stating 2^27 queries
    # allocated arrays of that many (4-5 GB from a 469-byte HLO). Same count as the arrays gave.
    import numpy as np

    left, right = p.window
    diagonal = np.arange(p.q_len, dtype=np.int64) + (p.kv_len - p.q_len if p.bottom_right else 0)
    last = np.full(p.q_len, p.kv_len - 1, dtype=np.int64)
    if p.causal or right >= 0:
        last = np.minimum(last, diagonal + (0 if p.causal else right))
    first = np.maximum(diagonal - left, 0) if left >= 0 else np.zeros(p.q_len, dtype=np.int64)
    assert pairs(p) == int(np.maximum(last - first + 1, 0).sum())


def test_pairs_of_huge_lengths_take_no_memory():
    import resource
    import time

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    n = 1 << 40
    assert pairs(AttentionProblem(1, 1, 1, n, n, 64, 64, causal=True)) == n * (n + 1) // 2
    assert pairs(AttentionProblem(1, 1, 1, n, n, 64, 64, window=(127, 0))) == 128 * n - 127 * 128 // 2
    assert time.perf_counter() - started < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB


# --- crafted configs: every number read is in range, or the call is priced as an opaque bound ---------

_CUDNN_DIMS = ('{"lhs_contracting_dimensions":["3"],"rhs_contracting_dimensions":["3"],'
               '"lhs_batch_dimensions":["0","2"],"rhs_batch_dimensions":["0","2"]}')


def _cudnn_module(config: str, q_len: int = 2048) -> str:
    return ("HloModule m\nENTRY %main {\n" + "".join(
        f"  %{n} = bf16[4,{q_len},16,128]{{3,2,1,0}} parameter({i})\n" for i, n in enumerate("qkv")) +
        f'  ROOT %a = (bf16[4,{q_len},16,128]{{3,2,1,0}}, u8[0]{{0}}) custom-call(%q, %k, %v), '
        f'custom_call_target="__cudnn$fmhaSoftmax", backend_config={{"cudnn_fmha_backend_config":{config}}}\n}}\n')


@pytest.mark.parametrize("config", [
    '{"mask_type":"CAUSAL","sliding_window_length":"abc","bmm1_dot_dimension_numbers":%s}',
    '{"mask_type":"CAUSAL","sliding_window_length":9223372036854775808,"bmm1_dot_dimension_numbers":%s}',
    '{"mask_type":"CAUSAL","sliding_window_length":1e400,"bmm1_dot_dimension_numbers":%s}',
    '{"mask_type":"CAUSAL","max_seg_per_batch":-7,"bmm1_dot_dimension_numbers":%s}',
    '{"mask_type":"CAUSAL","max_seg_per_batch":[1],"bmm1_dot_dimension_numbers":%s}',
    '{"mask_type":"CAUSAL","dropout_rate":"x","bmm1_dot_dimension_numbers":%s}',
    '[%s]',
])
def test_a_crafted_cudnn_config_is_priced_as_a_bound_never_negative(config: str) -> None:
    # GIVEN a cuDNN attention call whose config states a number no kernel has
    cost = cost_module(parse_hlo_text(_cudnn_module(config.replace("%s", _CUDNN_DIMS))))["a"]
    # THEN its figures are finite and never negative (no traceback, no negative pairs)
    assert (cost.flops or 0) >= 0 and (cost.bytes or 0) >= 0 and math.isfinite(cost.flops or 0)
    assert cost.attention is None or cost.attention.segments >= 1


@pytest.mark.parametrize(("old", "new"), [
    ("input_batch = 2 : i64", "input_batch = -2 : i64"),
    ("attn_heads = 16 : i64", "attn_heads = -16 : i64"),
    ("kv_max_seqlen = 2048 : i64", "kv_max_seqlen = 9223372036854775807 : i64"),
    ("kv_max_seqlen = 2048 : i64", "kv_max_seqlen = -5 : i64"),
    ("num_gqa_groups = 16 : i64", "num_gqa_groups = 0 : i64"),
    ("max_segments_per_seq = 1 : i64", "max_segments_per_seq = -3 : i64"),
    ("window_size_left = ", "window_size_left = 9223372036854775807 : i64, was = "),
])
def test_crafted_te_attributes_are_refused_as_numbers_no_call_has(old: str, new: str) -> None:
    # GIVEN a real TransformerEngine call whose attributes state a negative or absurd size
    text = (TE / "bshd_window.hlo.txt").read_text()
    assert old in text
    module = parse_hlo_text(text.replace(old, new, 1))
    # WHEN it is priced THEN nothing is negative or infinite, and a size out of range is named
    for cost in cost_module(module).values():
        assert (cost.flops or 0) >= 0 and (cost.bytes or 0) >= 0 and math.isfinite(cost.flops or 0)
        if cost.attention is not None:
            p = cost.attention
            assert min(p.batch, p.heads, p.kv_heads, p.qk_dim, p.v_dim, p.segments) >= 1
            assert min(p.q_len, p.kv_len) >= 0 and min(p.window) >= -1
