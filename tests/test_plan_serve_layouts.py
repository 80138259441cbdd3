"""`audit plan serve` on TP/PP/DP/EP layouts, and prefill/decode servers for a traffic (book ch. 7)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from audit.cli import main
from audit.costmodel.chips.catalog import lookup
from audit.costmodel.planner.layout import parse_layout
from audit.costmodel.planner.serve import ServeSetup, plan_serve
from audit.costmodel.planner.serve_layout import experts_touched, serve_layout
from audit.costmodel.planner.transformer import MODELS, kv_bytes_per_token, param_breakdown

LLAMA_405B = MODELS["llama3-405b"]


def test_llama3_405b_on_two_nodes_splits_weights_and_kv_over_tp_and_pp():
    s = ServeSetup(64, 8192, 16)
    r = serve_layout(LLAMA_405B, s, lookup("h100"), parse_layout("tp=8,pp=2", 16))
    assert r["valid"] and r["fits"]
    mem = r["memory_per_chip_bytes"]
    assert mem["params"] == pytest.approx(param_breakdown(LLAMA_405B)["total"] * 2 / 16, rel=0.03)
    assert mem["kv_cache"] == pytest.approx(64 * 8192 * kv_bytes_per_token(LLAMA_405B) / 16, rel=0.03)
    d = r["decode"]
    assert d["bound_by"] == "memory (weights)"
    # two microbatches in flight, each reading the stage's weights: twice one stage's work
    part = d["per_stage_microbatch_s"]
    assert d["step_s"] >= 2 * (part["kv_s"] + part["weights_s"])
    assert set(r["levels"].values()) >= {"NVLink", "inter-node network"}


def test_tp_beyond_the_kv_heads_replicates_them_in_memory():
    """8 KV heads on 16 TP ranks: each rank keeps one, so the cache per chip is twice an even split."""
    s = ServeSetup(8, 4096, 16)
    dp_tp = serve_layout(LLAMA_405B, s, lookup("h100"), parse_layout("dp=2,tp=8", 16))
    tp16 = serve_layout(LLAMA_405B, s, lookup("h100"), parse_layout("tp=16", 16))
    assert dp_tp["valid"] and tp16["valid"]
    even = 8 * 4096 * kv_bytes_per_token(LLAMA_405B) / 16
    assert dp_tp["memory_per_chip_bytes"]["kv_cache"] == pytest.approx(even)
    assert tp16["memory_per_chip_bytes"]["kv_cache"] == pytest.approx(2 * even)
    # TP 16 spans two 8-GPU nodes: its all-reduces reach the inter-node network
    assert tp16["decode"]["per_stage_microbatch_s"]["tp_comm_s"] > dp_tp["decode"]["per_stage_microbatch_s"]["tp_comm_s"]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4096))
def test_an_moe_decode_reads_more_experts_as_the_batch_grows(tokens):
    cfg = MODELS["deepseek-v3-like"]
    assert 0 < experts_touched(cfg, tokens) <= experts_touched(cfg, tokens + 1) <= 1
    assert experts_touched(MODELS["llama3-8b"], tokens) == 1


def test_expert_parallel_serving_prices_the_all_to_all():
    cfg = MODELS["deepseek-v3-like"]
    r = serve_layout(cfg, ServeSetup(256, 4096, 32, param_dtype="fp8"), lookup("h100"),
                     parse_layout("dp=32,ep=32", 32))
    assert r["valid"] and r["layout"]["label"] == "dp=32,ep=32"
    assert r["decode"]["per_stage_microbatch_s"]["ep_comm_s"] > 0


def test_prefill_and_decode_servers_scale_with_the_traffic(capsys):
    args = ["plan", "serve", "--model", "llama3-70b", "--batch", "32", "--context", "8192", "--hardware", "h100",
            "--chips", "8", "--layout", "tp=8", "--prefill-tokens", "2048", "--output-tokens", "256", "--json", "-"]
    assert main([*args, "--requests-per-s", "10"]) == 0
    low = json.loads(capsys.readouterr().out)["disaggregated"]
    assert main([*args, "--requests-per-s", "40"]) == 0
    high = json.loads(capsys.readouterr().out)["disaggregated"]
    assert high["decode_servers"] >= 3 * low["decode_servers"] and high["prefill_servers"] >= low["prefill_servers"]
    assert low["prefill_servers"] >= 1 and low["decode_servers"] >= 1
    served = low["decode_servers"] * low["decode_requests_per_s_per_server"]
    assert served >= 10 > (low["decode_servers"] - 1) * low["decode_requests_per_s_per_server"]
    assert main(args[:-2] + ["--requests-per-s", "10"]) == 0
    out = capsys.readouterr().out
    assert "prefill +" in out and "decode servers" in out and "serving layout tp=8" in out


def test_server_sizing_needs_prompt_and_output_lengths(capsys):
    assert main(["plan", "serve", "--model", "llama3-70b", "--batch", "8", "--context", "1024", "--hardware", "h100",
                 "--chips", "8", "--requests-per-s", "5"]) == 2
    assert "--output-tokens" in capsys.readouterr().err


def test_the_book_serving_numbers_are_unchanged_by_a_layout():
    s = ServeSetup(32, 8192, 8, "int8", "int8")
    plain = plan_serve(MODELS["llama3-70b"], s, lookup("tpu-v5e:4x2"))
    with_layout = plan_serve(MODELS["llama3-70b"], s, lookup("tpu-v5e:4x2"), parse_layout("tp=8", 8))
    assert plain["decode"] == with_layout["decode"] and with_layout["layout"]["valid"]


def test_decode_servers_are_sized_on_the_layouts_step_and_the_plan_says_which_step():
    """With a layout, the servers decode on it (what would be deployed); the book's even spread stays the
    plan's `decode` bound, and the sizing names the step it used, an invalid layout included."""
    cfg, hw, traffic = MODELS["llama3-70b"], lookup("h100"), {"requests_per_s": 10, "output_tokens": 256}
    r = plan_serve(cfg, ServeSetup(32, 8192, 8, prefill_tokens=2048), hw, parse_layout("tp=4,pp=2", 8), **traffic)
    on_layout, even = r["disaggregated"], r["decode"]
    assert on_layout["decode_on"] == "layout tp=4,pp=2"
    assert on_layout["decode_step_s"] == r["layout"]["decode"]["step_s"] > even["step_s"]
    assert on_layout["decode_requests_per_s_per_server"] == pytest.approx(r["layout"]["decode"]["tokens_per_s"] / 256)
    odd = plan_serve(cfg, ServeSetup(31, 8192, 8, prefill_tokens=2048), hw, parse_layout("dp=2,tp=4", 8), **traffic)
    assert not odd["layout"]["valid"]
    assert odd["disaggregated"]["decode_on"] == "even spread over the chips; layout dp=2,tp=4 is not valid"
    assert odd["disaggregated"]["decode_step_s"] == odd["decode"]["step_s"]


def test_serving_layouts_are_searched_fastest_first():
    r = plan_serve(LLAMA_405B, ServeSetup(64, 8192, 16), lookup("h100"))
    found = r["layout_search"]
    steps = [lay["decode"]["step_s"] for lay in found["layouts"]]
    assert steps == sorted(steps) and found["fitting"] >= 1
    best = found["best"]
    assert best["fits"] and best["layout"]["tp"] == 8  # TP inside the node beats pipelining a memory-bound decode
    assert all(lay["valid"] and lay["layout"]["chips"] == 16 for lay in found["layouts"])
