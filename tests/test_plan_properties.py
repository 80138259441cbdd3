"""Properties of the planner's formulas, and its FLOP count against XLA's for a real JAX model."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.costmodel.chips.catalog import lookup
from audit.costmodel.planner.chip_numbers import chip_numbers
from audit.costmodel.planner.parallel import Parallel, all_strategies
from audit.costmodel.planner.serve import ServeSetup, plan_serve
from audit.costmodel.planner.train import TrainSetup, plan_train, time_at_mfu, total_flops
from audit.costmodel.planner.workload import plan_for_config
from audit.costmodel.planner.transformer import MODELS, ModelConfig, param_breakdown, params_read_per_step

models = st.sampled_from(sorted(MODELS))
pow2 = st.integers(min_value=0, max_value=13).map(lambda e: 2 ** e)


@settings(max_examples=60, deadline=None)
@given(models, st.floats(1e6, 1e14), st.integers(1, 1000), st.integers(1, 32768))
def test_training_flops_linear_in_tokens(name, tokens, factor, seq):
    cfg = MODELS[name]
    one = total_flops(cfg, TrainSetup(tokens, 1e6, 8, seq=seq))
    many = total_flops(cfg, TrainSetup(tokens * factor, 1e6, 8, seq=seq))
    assert many == pytest.approx(one * factor, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.floats(1e18, 1e26), st.integers(1, 100_000), st.integers(2, 64), st.floats(0.05, 1.0))
def test_time_inversely_proportional_to_chips(flops, chips, k, mfu):
    t1 = time_at_mfu(flops, chips, 4.59e14, mfu)
    tk = time_at_mfu(flops, chips * k, 4.59e14, mfu)
    assert t1 == pytest.approx(k * tk, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(models, st.integers(1, 8).map(lambda n: 64 * n), st.floats(1e5, 1e8), st.integers(2, 16))
@pytest.mark.slow
def test_plan_time_inversely_proportional_to_chips(name, chips, batch, k):
    hw = lookup("tpu-v5p")
    one = plan_train(MODELS[name], TrainSetup(1e12, batch, chips), hw)["time_s"]
    more = plan_train(MODELS[name], TrainSetup(1e12, batch, chips * k), hw)["time_s"]
    assert one == pytest.approx(k * more, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.floats(1e3, 1e9), pow2, st.integers(1, 4), st.sampled_from([1, 2, 3]),
       st.integers(1024, 131072), st.sampled_from(["tpu-v5p", "tpu-v5e", "tpu-v6e", "tpu-v4"]))
def test_compute_bound_at_b_stays_compute_bound_at_2b(batch, chips, pods, axes, d_ff, chip):
    c = chip_numbers(lookup(chip))
    def verdicts(b: float) -> dict:
        p = Parallel(b / pods, chips, pods, d_ff, c.alpha, axes, c.flops_per_s.value / c.dcn_bytes_per_s.value)
        return {v.strategy: v for v in all_strategies(p)}
    at_b, at_2b = verdicts(batch), verdicts(2 * batch)
    for name, v in at_b.items():
        assert at_2b[name].ratio >= v.ratio * (1 - 1e-12)
        if v.bound == "compute":
            assert at_2b[name].bound == "compute"


@settings(max_examples=60, deadline=None)
@given(models, st.integers(1, 256), st.integers(128, 32768), pow2)
def test_decode_step_grows_with_batch_and_shrinks_with_chips(name, batch, context, chips):
    hw = lookup("tpu-v5e")
    base = plan_serve(MODELS[name], ServeSetup(batch, context, chips), hw)["decode"]
    bigger = plan_serve(MODELS[name], ServeSetup(batch + 1, context, chips), hw)["decode"]
    wider = plan_serve(MODELS[name], ServeSetup(batch, context, chips * 2), hw)["decode"]
    assert bigger["step_s"] >= base["step_s"]
    assert bigger["tokens_per_s"] >= base["tokens_per_s"] * (1 - 1e-12)
    assert wider["step_s"] == pytest.approx(base["step_s"] / 2, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 64).map(lambda n: 64 * n), st.integers(1, 64), st.integers(1, 8),
       st.integers(1, 4).map(lambda n: 64 * n), st.booleans(), st.booleans())
def test_param_parts_sum_to_total(layers, d_model, heads, group, head_dim, gated, tied):
    cfg = ModelConfig(layers, d_model, 4 * d_model, heads * group, heads, head_dim, 1000,
                      gated_mlp=gated, tied_embeddings=tied)
    p = param_breakdown(cfg)
    assert p["total"] == p["attention"] + p["mlp"] + p["embeddings"] + p["norms"] == p["active"]


def test_moe_active_params_are_the_routed_share():
    cfg = MODELS["deepseek-v3-like"]
    p = param_breakdown(cfg)
    assert p["total"] == pytest.approx(671e9, rel=0.01)
    assert p["active"] == pytest.approx(37e9, rel=0.01)
    dense = dataclasses.replace(cfg, experts_per_token=cfg.experts)
    assert param_breakdown(dense)["active"] == param_breakdown(dense)["total"]


def _jax_forward_flops(cfg: dict) -> float:
    """XLA's FLOP count for a real forward pass: embedding, attention + gated MLP layers, unembed."""
    import jax
    import jax.numpy as jnp

    L, D, F, N, H, V = (cfg[k] for k in ("layers", "d_model", "d_ff", "heads", "head_dim", "vocab"))
    B, T = cfg["batch"], cfg["seq"]
    shapes = {"embed": (V, D), "wq": (L, D, N, H), "wk": (L, D, N, H), "wv": (L, D, N, H), "wo": (L, N, H, D),
              "w1": (L, D, F), "w2": (L, D, F), "w3": (L, F, D), "unembed": (D, V)}
    params = {k: jax.ShapeDtypeStruct(s, jnp.float32) for k, s in shapes.items()}

    def forward(p, tokens):
        x = p["embed"][tokens]
        for i in range(L):
            q, k, v = (jnp.einsum("btd,dnh->btnh", x, p[w][i]) for w in ("wq", "wk", "wv"))
            a = jax.nn.softmax(jnp.einsum("btnh,bsnh->bnts", q, k), axis=-1)
            x = x + jnp.einsum("btnh,nhd->btd", jnp.einsum("bnts,bsnh->btnh", a, v), p["wo"][i])
            x = x + (jax.nn.silu(x @ p["w1"][i]) * (x @ p["w2"][i])) @ p["w3"][i]
        return x @ p["unembed"]

    tokens = jax.ShapeDtypeStruct((B, T), jnp.int32)
    return float(jax.jit(forward).lower(params, tokens).compile().cost_analysis()["flops"])


def test_forward_flops_match_xla_for_a_real_jax_model():
    cfg = dict(layers=2, d_model=256, d_ff=1024, heads=4, kv_heads=4, head_dim=64, vocab=512,
               batch=2, seq=64, dtype="f32", sharding="none", mesh=None, kind="forward")
    planned = plan_for_config(cfg, lookup("tpu-v5e"))["flops_per_step"]
    # The plan counts matmuls only; XLA adds softmax and activation elementwise work (<1% here).
    assert planned == pytest.approx(_jax_forward_flops(cfg), rel=0.01)


def test_plan_for_config_sharding_moves_time_between_bounds():
    cfg = dict(layers=4, d_model=1024, d_ff=4096, heads=8, kv_heads=8, head_dim=128, vocab=32000,
               batch=8, seq=512, dtype="bf16")
    hw = lookup("tpu-v5e:4x2")
    none = plan_for_config({**cfg, "sharding": "none", "mesh": {"data": 8}}, hw)
    fsdp = plan_for_config({**cfg, "sharding": "fsdp", "mesh": {"data": 8}}, hw)
    tp = plan_for_config({**cfg, "sharding": "tp", "mesh": "model=8"}, hw)
    assert fsdp["flops_per_step"] == none["flops_per_step"] == tp["flops_per_step"]
    assert fsdp["step_time_lower_bound_s"]["compute"] == pytest.approx(none["step_time_lower_bound_s"]["compute"] / 8)
    assert none["step_time_lower_bound_s"]["collective"] == 0
    assert fsdp["step_time_lower_bound_s"]["collective"] > 0
    assert {c["kind"] for c in fsdp["collectives"]} == {"all-gather", "reduce-scatter"}
    assert tp["hbm_bytes_per_device"] == pytest.approx(none["hbm_bytes_per_device"] / 8)
    assert fsdp["param_bytes"] == param_breakdown(ModelConfig(4, 1024, 4096, 8, 8, 128, 32000))["total"] * 2


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 5000))
def test_moe_decode_reads_only_routed_experts(tokens):
    cfg = MODELS["deepseek-v3-like"]
    p = param_breakdown(cfg)
    read = params_read_per_step(cfg, tokens)
    assert read <= params_read_per_step(cfg, tokens + 1) <= p["total"]
    if tokens == 1:
        assert read == pytest.approx(p["active"])
    dense = MODELS["llama3-8b"]
    assert params_read_per_step(dense, tokens) == param_breakdown(dense)["total"]


def test_gpu_nodes_are_pods_over_dcn():
    r = plan_train(MODELS["llama3-8b"], TrainSetup(1e12, 4e6, 64), lookup("h100:8x8"))
    fsdp = {s["strategy"]: s for s in r["strategies"]}["fsdp"]
    assert fsdp["degrees"] == {"fsdp": 8, "tp": 1, "pods": 8}
    assert fsdp["dcn_ratio"] is not None


TRAIN_TARGETS = ["tpu-v5p:16x20x28", "tpu-v5p:4x4x8", "tpu-v5e:16x16", "tpu-v6e:8x4", "h100:8x8", "mi355x:8x4"]


@pytest.mark.slow  # 80 plan searches: 14-20 s on two cores
@settings(max_examples=80, deadline=None)
@given(st.sampled_from(sorted(MODELS)), st.sampled_from(TRAIN_TARGETS), st.sampled_from([1e6, 4e6, 16e6]))
def test_every_feasible_plan_shards_whole_heads_on_physical_axes(name, target, batch):
    """A plan a model can run: TP divides heads, KV heads and d_ff, every degree divides the chip
    count, TP fits one axis of the slice (TPU) or the NVLink/xGMI domain (GPU)."""
    cfg, hw = MODELS[name], lookup(target)
    chips = 1
    for n in hw.topology:
        chips *= n
    r = plan_train(cfg, TrainSetup(1e12, batch, chips), hw)
    domain = hw.interconnect.domain_size
    for row in r["strategies"]:
        if not row["feasible"]:
            assert any("not allowed" in n for n in row["notes"])
            continue
        deg = row["degrees"]
        tp = deg.get("tp", 1)
        per_pod = chips // deg["pods"]
        assert cfg.heads % tp == 0 and cfg.d_ff % tp == 0
        assert cfg.kv_heads % tp == 0 or tp % cfg.kv_heads == 0  # fewer KV heads are replicated
        assert all(per_pod % v == 0 for k, v in deg.items() if k != "pods")
        assert deg.get("dp", deg.get("fsdp", 1)) * tp == per_pod
        axes = hw.topology if hw.kind == "tpu" else (domain,)
        assert any(n % tp == 0 for n in axes)
    rec = r["recommendation"]
    if rec["strategy"] is not None:
        assert {row["strategy"]: row for row in r["strategies"]}[rec["strategy"]]["feasible"]


def test_llama3_70b_on_a_full_v5p_pod_recommends_degrees_it_can_run():
    """8960 v5p chips: the book's unconstrained optimum is X ~ 1619 (TP ~ 5.5); LLaMA-3 70B has 64 heads
    and 8 KV heads, so TP is at most 8 and a power of two, and pure 8960-way TP is not a plan."""
    r = plan_train(MODELS["llama3-70b"], TrainSetup(15e12, 4e6, 8960), lookup("tpu-v5p"))
    rec = r["recommendation"]["degrees"]
    assert rec["tp"] in (2, 4, 8) and rec["fsdp"] * rec["tp"] == 8960
    rows = {row["strategy"]: row for row in r["strategies"]}
    assert not rows["tp"]["feasible"]
    assert "16x20x28" in " ".join(rows["fsdp+tp"]["notes"])


def test_serving_says_when_the_model_parallel_degree_splits_heads():
    """Whole query heads per chip are required; fewer KV heads than chips are replicated, and said so."""
    from audit.costmodel.planner.serve import ServeSetup as Setup

    replicated = plan_serve(MODELS["llama3-70b"], Setup(32, 8192, 16), lookup("tpu-v5e:4x4"))["model_parallel"]
    whole = plan_serve(MODELS["llama3-70b"], Setup(32, 8192, 8), lookup("tpu-v5e:4x2"))["model_parallel"]
    split = plan_serve(MODELS["llama3-70b"], Setup(32, 8192, 48), lookup("tpu-v5e"))["model_parallel"]
    assert replicated["degree_allowed"] and "8 KV heads on 2 chips" in replicated["degree_note"]
    assert whole["degree_allowed"] and whole["degree_note"] == ""
    assert not split["degree_allowed"] and "heads (64)" in split["degree_note"]


def test_a_workloads_mode_sets_what_the_plan_prices():
    """The reference workloads say `mode` (decode.py: "decode", transformer.py --mode forward); the plan
    read only `kind`, so the decode workload was planned as a training step over batch x max_len tokens:
    8.05 GFLOP per device against the program's 13.2 MFLOP, a 'lower bound' 6x above the measured step."""
    cfg = dict(layers=2, d_model=256, d_ff=1024, heads=4, kv_heads=4, head_dim=64, vocab=512,
               batch=8, seq=256, dtype="bf16", sharding="tp", mesh={"model": 4})
    hw = lookup("tpu-v5e:2x2")
    decode = plan_for_config({**cfg, "mode": "decode"}, hw)
    assert decode["kind"] == "decode" and decode["tokens_per_step"] == 8
    assert decode == plan_for_config({**cfg, "kind": "decode"}, hw)
    forward = plan_for_config({**cfg, "mode": "forward"}, hw)
    train = plan_for_config({**cfg, "mode": "train"}, hw)
    assert forward["kind"] == "forward" and train["flops_per_step"] == pytest.approx(3 * forward["flops_per_step"],
                                                                                      rel=0.05)


def test_a_collective_the_plan_lacks_is_named_as_the_programs():
    """'not in the plan (all-gather, reduce-scatter): all-reduce 49.2 kB' read as if the plan lacked the
    all-gather; the reason says which kinds the plan has and which of the program's it does not."""
    from types import SimpleNamespace

    from audit.analyses.plan_gaps import _comm_reasons

    op = SimpleNamespace(comm_bytes=49152.0, category="all-reduce", opcode="all-reduce")  # the fields it reads
    reasons = _comm_reasons([op], 1.0, {"collectives": [{"kind": "all-gather"}, {"kind": "reduce-scatter"}]})
    assert reasons[-1] == ("collectives the plan does not have (it plans all-gather, reduce-scatter): "
                           "all-reduce 49.2 kB")
