"""The step as the ops a framework runs, priced by the cost model that judges profiles."""

from __future__ import annotations

import pytest

from audit.costmodel.achievable import achievable_time
from audit.costmodel.chips.catalog import lookup
from audit.costmodel.costs import OpCost
from audit.costmodel.planner.layout import parse_layout
from audit.costmodel.planner.layout_memory import TrainBytes
from audit.costmodel.planner.layout_step import RunSpec, evaluate_layout
from audit.costmodel.planner.remat import policy
from audit.costmodel.planner.step_ops import CLASSES, StepShape, price_step
from audit.costmodel.planner.transformer import MODELS
from audit.costmodel.roofline import expect


def _dense(remat: str = "none", tokens: float = 8192, layout: str = "tp=8"):
    cfg, hw = MODELS["llama3-70b"], lookup("h100")
    lay = parse_layout(layout, 8)
    return price_step(cfg, lay, hw, StepShape(tokens, tokens / 4096, 4096), 10, 0, 1, policy(remat, cfg), 1e9)


def test_a_dense_step_prices_every_class_and_sums_them():
    r = _dense()
    assert set(r["by_class_s"]) == {"matmul", "attention", "elementwise", "embedding", "logits and loss", "optimizer"}
    assert r["total_s"] == pytest.approx(sum(r["by_class_s"].values()))
    assert r["total_s"] == pytest.approx(sum(r["by_op_s"].values()))
    assert list(r["by_class_s"]) == [c for c in CLASSES if c in r["by_class_s"]]
    assert any("matmul" in s for s in r["sources"]) and any("attention" in s for s in r["sources"])


def test_a_gemm_costs_what_inspect_would_say_of_it():
    """The ledger's QKV projection is the cost model's achievable time of that GEMM, times its count."""
    cfg, hw = MODELS["llama3-70b"], lookup("h100")
    r = _dense()
    d, qkv = cfg.d_model, (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim // 8
    cost = OpCost(2.0 * 8192 * qkv * d, 2.0 * (8192 * d + d * qkv), 2.0 * 8192 * qkv, dtype="bf16",
                  gemm=(1, 8192, qkv, d))
    one = achievable_time(cost, expect(cost, hw), hw).seconds
    assert r["by_op_s"]["QKV projection"] == pytest.approx(10 * one)


def test_full_remat_re_runs_the_forward_and_minimal_only_the_memory_bound_ops():
    none, minimal, full = _dense("none"), _dense("minimal"), _dense("full")
    assert minimal["by_class_s"]["matmul"] == pytest.approx(none["by_class_s"]["matmul"])
    assert minimal["by_class_s"]["elementwise"] > none["by_class_s"]["elementwise"]
    assert full["by_class_s"]["matmul"] == pytest.approx(none["by_class_s"]["matmul"] * 4 / 3, rel=0.02)
    assert full["by_class_s"]["attention"] > none["by_class_s"]["attention"]


def test_few_tokens_per_expert_run_below_the_large_gemm_rate():
    """A grouped GEMM of a few hundred tokens per expert takes longer per FLOP than the dense MLP's GEMM."""
    cfg, hw = MODELS["deepseek-v3-like"], lookup("h800")
    lay = parse_layout("dp=8,ep=8", 8)
    r = price_step(cfg, lay, hw, StepShape(1024, 1, 1024), 4, 3, 1, policy("none", cfg), 1e9)
    assert r["by_class_s"]["moe routing"] > 0
    rows = 1024 * cfg.experts_per_token * 8 / cfg.experts  # tokens per local expert
    assert rows == 256
    # forward and backward of the up GEMM, 3 layers x 32 local experts
    expert_flops = 2.0 * 3 * 3 * 32 * rows * cfg.d_model * 2 * cfg.expert_width
    dense_flops = 2.0 * 3 * 1 * 1024 * cfg.d_model * 2 * cfg.d_ff
    expert_rate = expert_flops / sum(v for k, v in r["by_op_s"].items() if k.startswith("expert up"))
    dense_rate = dense_flops / sum(v for k, v in r["by_op_s"].items() if k.startswith("MLP up"))
    assert expert_rate < dense_rate


def test_the_estimate_breaks_the_step_down_by_op_class_and_stays_above_the_bound():
    run = RunSpec(2**22, 4096, 512, TrainBytes())
    r = evaluate_layout(MODELS["llama3-70b"], run, lookup("h100"), parse_layout("tp=8,pp=4", 512))
    ops, est = r["ops_per_step"], r["step_time_achievable_s"]
    assert est["compute"] == pytest.approx(ops["total_s"])
    assert ops["total_s"] >= r["step_time_s"]["compute"]
    assert est["total"] >= r["step_time_s"]["total"]
