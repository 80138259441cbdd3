"""The worked numbers of "How to Scale Your Model" ch. 4-8, reproduced by the planner.

Each test names the section it checks. Tolerances are the book's own rounding; where the
book's arithmetic disagrees with its formula, the test says so and follows the formula.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from audit.costmodel.chips.catalog import lookup
from audit.costmodel.chips.hardware import Quantity
from audit.costmodel.planner.chip_numbers import chip_numbers
from audit.costmodel.planner.parallel import Parallel, compute_bound_x_range, data_parallel, mixed, tensor_parallel, x_opt
from audit.costmodel.planner.serve import ServeSetup, decode_step_time, plan_serve
from audit.costmodel.planner.train import TrainSetup, memory_totals, min_chips_by_memory, plan_train, time_at_mfu
from audit.costmodel.planner.transformer import (MODELS, ModelConfig, activation_bytes_per_token, attention_crossover_seq,
                                         kv_bytes_per_token, matmul_params, param_breakdown,
                                         training_flops_per_token)

DAY, YEAR = 86400.0, 365 * 86400.0
V5P_C = 4.59e14
LLAMA3_70B = MODELS["llama3-70b"]
LLAMA2_13B = MODELS["llama2-13b"]


def v5e_at(hbm_bytes_per_s: float, topology: str) -> object:
    """v5e with the HBM bandwidth a chapter uses (ch. 7 uses 8.2e11; the ch. 2 table says 8.1e11)."""
    hw = lookup(f"tpu-v5e:{topology}")
    return dataclasses.replace(hw, hbm_bytes_per_s=Quantity(hbm_bytes_per_s, "B/s", "user", "book ch. 7"))


def v5p_parallel(batch: float, chips: int, d_ff: int, axes: int = 3) -> Parallel:
    alpha = chip_numbers(lookup("tpu-v5p")).alpha
    return Parallel(batch_per_pod=batch, chips_per_pod=chips, pods=1, d_ff=d_ff, alpha=alpha, axes=axes)


# ---- ch. 4: transformer accounting ----

def test_attention_overtakes_matmuls_at_8d_4_3():
    """Sec. 4.3: with F = 4D, D = NH and K = N, attention FLOPs dominate once T > 8D."""
    cfg = ModelConfig(8, 8192, 4 * 8192, 64, 64, 128, 32000)
    assert attention_crossover_seq(cfg) == pytest.approx(8 * 8192)
    # "For D ~ 8k, this would be ~64K tokens."
    assert attention_crossover_seq(cfg) == pytest.approx(64e3, rel=0.05)


def test_gemma_27b_crossover_4_3():
    """Sec. 4.3 says Gemma-27B (D = 4608) turns attention-dominant "around 32k": the 8D rule gives
    36,864, which the book rounds down. The real config (F = 8D, NH < D) moves it further out."""
    book_shape = ModelConfig(46, 4608, 4 * 4608, 36, 36, 128, 256000)
    assert attention_crossover_seq(book_shape) == pytest.approx(36864)
    assert attention_crossover_seq(MODELS["gemma-27b"]) > 36864


def test_six_n_rule_4_3():
    """Sec. 4.3: training FLOPs per token are 6 x parameters when attention is neglected."""
    assert training_flops_per_token(LLAMA3_70B, 0) == pytest.approx(6 * matmul_params(LLAMA3_70B))


def test_kv_cache_8gib_4_4_3():
    """Sec. 4.4.3: 8k context, 64 layers, KH = 8192 in int8 is 2 * 8192 * 64 * 8192 bytes = 8 GiB."""
    cfg = ModelConfig(64, 8192, 4 * 8192, 64, 64, 128, 32000)
    assert kv_bytes_per_token(cfg, "int8") * 8192 == 8 * 2**30


def test_activation_memory_4_4_2():
    """Sec. 4.4.2: 4M tokens, L = 64, D = 8192 in bf16 save ~84 TB without remat, 4.2 TB with block remat."""
    cfg = ModelConfig(64, 8192, 4 * 8192, 64, 64, 128, 32000)
    assert 4e6 * activation_bytes_per_token(cfg, None) == pytest.approx(84e12, rel=0.01)
    assert 4e6 * activation_bytes_per_token(cfg, 1) == pytest.approx(4.2e12, rel=0.01)


# ---- ch. 5: parallelism for training on TPU v5p ----

def test_data_parallel_critical_batch_5_1_1():
    """Sec. 5.1.1: per-chip batch must exceed C / W_ici = 2550 on one axis, 850 on three;
    a full pod of 8960 chips then needs 7.6M tokens per batch."""
    assert data_parallel(v5p_parallel(1e6, 8960, 28672, axes=1)).critical_batch_per_chip == pytest.approx(2550)
    three = data_parallel(v5p_parallel(1e6, 8960, 28672, axes=3)).critical_batch_per_chip
    assert three == pytest.approx(850)
    assert three * 8960 == pytest.approx(7.6e6, rel=0.01)


def test_fsdp_scale_examples_5_1_2():
    """Sec. 5.1.2: DeepSeek-V2's 40M batch scales to ~47,000 chips; LLaMA-3 70B with 16M tokens on
    16e6 / 850 = 18,823 chips at 50% MFU trains in ~17 days."""
    crit = data_parallel(v5p_parallel(1e6, 8960, 28672), "fsdp").critical_batch_per_chip
    assert 40e6 / crit == pytest.approx(47_000, rel=0.01)
    chips = 16e6 / crit
    assert chips == pytest.approx(18_823, rel=0.001)
    assert time_at_mfu(6.3e24, round(chips), V5P_C, 0.5) / DAY == pytest.approx(17, rel=0.02)


def test_tensor_parallel_limit_5_1_3():
    """Sec. 5.1.3: TP is compute-bound while Y < n_axes * F / 2550: LLaMA-3 70B (F ~ 30k) allows
    ~11 per axis, 8-way needs F ~ 20k, Gemma 7B (F ~ 50k, both gated up-projections) ~19."""
    assert tensor_parallel(v5p_parallel(1e6, 8, 30000, axes=1)).max_tp_degree == pytest.approx(11.76, rel=0.01)
    assert 8 * chip_numbers(lookup("tpu-v5p")).alpha == pytest.approx(20_400)
    assert tensor_parallel(v5p_parallel(1e6, 8, 49152, axes=1)).max_tp_degree == pytest.approx(19.3, rel=0.01)
    assert tensor_parallel(v5p_parallel(1e6, 16, 30000, axes=1)).bound == "communication"
    assert tensor_parallel(v5p_parallel(1e6, 8, 30000, axes=1)).bound == "compute"


def test_mixed_fsdp_tp_x_opt_5_1_4():
    """Sec. 5.1.4: N = 64 (4x4x4), B = 48,000, F = 32,768 gives X_opt ~ 13.9 (the formula with
    M_X = 2, M_Y = 1 gives 13.7), so 16-way FSDP x 4-way TP; the critical batch is ~400 per chip."""
    p = v5p_parallel(48_000, 64, 32768)
    assert x_opt(p) == pytest.approx(13.9, rel=0.02)
    v = mixed(p)
    assert v.degrees["fsdp"] == 16 and v.degrees["tp"] == 4
    assert v.critical_batch_per_chip == pytest.approx(400, rel=0.01)


def test_mixed_critical_batch_figure_16_5_1_4():
    """Sec. 5.1.4, figure 16: 4096 * 2 * 2550^2 / (8192 * 4) evaluates to 1.6e6 tokens; the book
    prints 1.6e10 (a slip: the text itself says comms-bound below 1.5e6)."""
    crit = mixed(v5p_parallel(1e6, 4096, 8192 * 4)).critical_batch_per_chip
    assert crit * 4096 == pytest.approx(1.6e6, rel=0.03)


def test_scaling_llama3_between_pods_5_1_6():
    """Sec. 5.1.6, F ~ 30k: pure FSDP at BS = 2M reaches ~2400 chips; mixed FSDP + TP is ICI-bound
    below 2 * 2550^2 / 30,000 = 432 tokens per chip."""
    crit = data_parallel(v5p_parallel(2e6, 8960, 30000), "fsdp").critical_batch_per_chip
    assert 2e6 / crit == pytest.approx(2400, rel=0.02)
    assert mixed(v5p_parallel(2e6, 8960, 30000)).critical_batch_per_chip == pytest.approx(432, rel=0.01)


def test_dcn_critical_batch_per_pod_5_1_6():
    """Sec. 5.1.6: data parallel over DCN needs per-pod batch > C / W_dcn. The book gets 76,000 from
    3.8e18 / 5e13, but 8k chips x 4.5e14 is 3.7e18 and 2000 hosts hold 8000 chips: the formula,
    4 chips per 2.5e10 B/s host, gives 73,440."""
    chips = chip_numbers(lookup("tpu-v5p"))
    per_pod = chips.flops_per_s.value / chips.dcn_bytes_per_s.value
    assert per_pod == pytest.approx(73_440)
    assert per_pod == pytest.approx(76_000, rel=0.04)


def test_ten_pods_takes_two_days_only_at_full_mfu_5_1_6():
    """Sec. 5.1.6: "10 pods ... training LLaMA-3 70B in about 2 days" holds at 100% MFU (1.8 days);
    at the 50% MFU of sec. 5.1.2 it would be 3.5 days."""
    assert time_at_mfu(6.3e24, 89_600, V5P_C, 1.0) / DAY == pytest.approx(1.8, rel=0.03)
    assert time_at_mfu(6.3e24, 89_600, V5P_C, 0.5) / DAY == pytest.approx(3.5, rel=0.03)


def test_dp_max_model_is_hbm_over_10_5_1_1():
    """Sec. 5.1.1: bf16 params + f32 Adam = 10 bytes per parameter, so a v5p (96 GB) holds ~9B."""
    setup = TrainSetup(1e9, 1, 1, checkpoints_per_layer=0)
    mem = memory_totals(LLAMA3_70B, setup)
    assert (mem["params"] + mem["optimizer"]) / param_breakdown(LLAMA3_70B)["total"] == pytest.approx(10)


# ---- ch. 5.3 / 7.1.6: LLaMA-2 13B ----

def test_llama2_13b_params_7_1_6():
    """Sec. 7.1.6 (and exercise 5.1): FFW 8.5e9 + vocab 0.3e9 + attention 4.2e9 = 13e9. The book's
    attention formula says 80 layers but its 4.2e9 is for the model's 40."""
    p = param_breakdown(LLAMA2_13B)
    assert p["mlp"] == pytest.approx(8.5e9, rel=0.01)
    assert p["embeddings"] == pytest.approx(0.3e9, rel=0.1)
    assert p["attention"] == pytest.approx(4.2e9, rel=0.01)
    assert p["total"] == pytest.approx(13e9, rel=0.01)


def test_llama2_13b_kv_cache_7_1_6():
    """Sec. 7.1.6: one 8192-token bf16 KV cache is 8192 x 40 x 128 x 40 x 2 x 2 = 6.7 GB."""
    assert kv_bytes_per_token(LLAMA2_13B, "bf16") * 8192 == pytest.approx(6.7e9, rel=0.01)


@pytest.mark.parametrize("kv_heads,batch,step_ms,tokens_s", [
    (40, 1, 4.98, 200.61), (40, 8, 12.13, 659.30), (40, 16, 20.30, 787.99), (40, 64, 69.33, 923.13),
    (40, 240, 249.09, 963.53), (8, 1, 4.17, 239.94), (8, 32, 10.50, 3047.62), (8, 240, 52.99, 4529.34)])
def test_llama2_13b_latency_tables_7_1_7(kv_heads, batch, step_ms, tokens_s):
    """Sec. 7.1.7: decode on 8 x v5e at 8.2e11 B/s each; the tables label 6.7e9-byte caches "GiB"
    but the step times are computed in GB. The 1:5 GQA table has 8 KV heads and, as the book
    says, keeps the parameter count of the original model."""
    hw = v5e_at(8.2e11, "4x2")
    r = plan_serve(LLAMA2_13B, ServeSetup(batch, 8192, 8), hw)
    kv_seq = kv_bytes_per_token(dataclasses.replace(LLAMA2_13B, kv_heads=kv_heads)) * 8192
    step = decode_step_time(batch, kv_seq, r["memory_bytes"]["params"], matmul_params(LLAMA2_13B), 8,
                            1.97e14, 8.2e11)
    assert step["step_s"] * 1e3 == pytest.approx(step_ms, rel=0.01)
    assert batch / step["step_s"] == pytest.approx(tokens_s, rel=0.01)
    if kv_heads == 40:
        assert r["decode"]["step_s"] == pytest.approx(step["step_s"])


# ---- ch. 6: LLaMA-3 70B training ----

def test_llama3_70b_params_6_2():
    """Sec. 6.2: FFW 56.3e9 + vocab 2.1e9 + attention 12e9 = 70.4e9 (the parts sum to 70.55e9)."""
    p = param_breakdown(LLAMA3_70B)
    assert p["mlp"] == pytest.approx(56.3e9, rel=0.002)
    assert p["embeddings"] == pytest.approx(2.1e9, rel=0.01)
    assert p["attention"] == pytest.approx(12e9, rel=0.01)
    assert p["total"] == pytest.approx(70.4e9, rel=0.003)


def test_llama3_70b_flops_and_days_6_2():
    """Sec. 6.2: 6N = 4.2e11 FLOPs per token, ~1 ms per token on one v5p, 6.3e24 FLOPs for 15T
    tokens, 435 years on one chip, 44 days on 8960 chips at 40% MFU (attention neglected)."""
    per_token = training_flops_per_token(LLAMA3_70B, 0)
    assert per_token == pytest.approx(4.2e11, rel=0.01)
    assert per_token / V5P_C == pytest.approx(1e-3, rel=0.1)
    total = per_token * 15e12
    assert total == pytest.approx(6.3e24, rel=0.01)
    assert time_at_mfu(total, 1, V5P_C, 1.0) / YEAR == pytest.approx(435, rel=0.01)
    assert time_at_mfu(total, 8960, V5P_C, 0.4) / DAY == pytest.approx(44, rel=0.01)


def test_llama3_70b_plan_adds_attention_6_2():
    """Sec. 6.2 neglects attention; at the 4096-token sequences the plan adds 12*L*T*N*H per token."""
    r = plan_train(LLAMA3_70B, TrainSetup(15e12, 4e6, 8960, seq=4096), lookup("tpu-v5p:16x20x28"))
    attention = 12 * 80 * 4096 * 64 * 128
    assert r["flops_per_token"] == pytest.approx(6 * matmul_params(LLAMA3_70B) + attention)
    assert 1.05 < r["total_flops"] / 6.3e24 < 1.1


def test_llama3_70b_memory_6_2():
    """Sec. 6.2: bf16 params 140 GB, f32 optimizer 560 GB, 4 checkpoints per layer of a 4M batch
    20.9 TB, total 21.6 TB: 225 v5p chips (the book rounds 225.8 down; 226 hold it), 2.4 GB per
    chip on 8960, and 1752 days on 225 chips."""
    r = plan_train(LLAMA3_70B, TrainSetup(15e12, 4e6, 8960, checkpoints_per_layer=4), lookup("tpu-v5p:16x20x28"))
    m = r["memory_bytes"]
    assert m["params"] == pytest.approx(140e9, rel=0.01)
    assert m["optimizer"] == pytest.approx(560e9, rel=0.01)
    assert m["activations"] == pytest.approx(20.9e12, rel=0.01)
    assert m["total"] == pytest.approx(21.6e12, rel=0.01)
    assert r["min_chips_by_memory"] in (225, 226)
    assert min_chips_by_memory(21.6e12, 96e9) == 225
    assert r["memory_per_chip_bytes_fully_sharded"] == pytest.approx(2.4e9, rel=0.02)
    assert time_at_mfu(6.3e24, 225, V5P_C, 0.4) / DAY == pytest.approx(1752, rel=0.01)


def test_llama3_70b_sharding_on_a_pod_6_3():
    """Sec. 6.3: 4M tokens (4 x 1024 x 1024) on 8960 chips is 468 per chip: FSDP is comms-bound
    (below 850), mixed FSDP + TP is compute-bound (above 2 x 2550^2 / F = 453), with compute-bound
    FSDP degrees up to X ~ 1643 + 284 = 1927 (the book rounds B to 4.19e6).

    The book's X is a real number; LLaMA-3 70B has 8 KV heads, so TP is 1, 2, 4 or 8 and X is
    8960/4 = 2240 or 8960/8 = 1120, both outside the compute-bound range [1355, 1935]: the best
    plan the model can run is communication-bound by a few percent."""
    r = plan_train(LLAMA3_70B, TrainSetup(15e12, 4 * 1024 * 1024, 8960), lookup("tpu-v5p:16x20x28"))
    rows = {row["strategy"]: row for row in r["strategies"]}
    assert rows["fsdp"]["batch_per_chip"] == pytest.approx(468, rel=0.001)
    assert rows["fsdp"]["bound"] == "communication"
    mixed_row = rows["fsdp+tp"]
    assert mixed_row["critical_batch_per_chip"] == pytest.approx(453, rel=0.01)
    low, high = mixed_row["x_range"]
    assert high == pytest.approx(1927, rel=0.005)
    assert low < mixed_row["x_opt"] < high
    assert mixed_row["degrees"] == {"fsdp": 2240, "tp": 4, "pods": 1}
    assert not low <= 2240 <= high and not low <= 1120 <= high
    assert mixed_row["bound"] == "communication" and mixed_row["ratio"] == pytest.approx(0.965, abs=0.002)
    assert r["recommendation"]["strategy"] == "fsdp+tp"


# ---- ch. 7: inference ----

def test_critical_decode_batch_7_1_3():
    """Sec. 7.1.3 / 8.1.1: bf16 matmuls on v5e need B > 240; int8 weights with bf16 FLOPs 120;
    int8 weights with int8 FLOPs back to ~240 (the catalog's 8.1e11 B/s gives 243)."""
    def crit(param_dtype: str, compute_dtype: str) -> float:
        s = ServeSetup(1, 1, 1, param_dtype=param_dtype, compute_dtype=compute_dtype)
        return plan_serve(LLAMA3_70B, s, lookup("tpu-v5e"))["decode"]["critical_batch"]
    assert crit("bf16", "bf16") == pytest.approx(240, rel=0.02)
    assert crit("int8", "bf16") == pytest.approx(120, rel=0.02)
    assert crit("int8", "int8") == pytest.approx(240, rel=0.02)


def test_pop_quiz_30b_on_v5e_4x4_7_1_5():
    """Sec. 7.1.5 pop quiz: 30B int8 params, 100 kB/token KV at 8192 context on 16 v5e: batch 4
    takes >= 2.5 ms, batch 256 ~21 ms."""
    kv_seq = 100e3 * 8192
    small = decode_step_time(4, kv_seq, 30e9, 30e9, 16, 1.97e14, 8.1e11)
    assert small["step_s"] == pytest.approx(2.5e-3, rel=0.03)
    big = decode_step_time(256, kv_seq, 30e9, 30e9, 16, 1.97e14, 8.1e11)
    assert big["step_s"] == pytest.approx(21e-3, rel=0.02)
    assert big["flops_s"] > big["weight_load_s"]


def test_model_parallel_memory_bound_limit_7_3_2():
    """Sec. 7.3.2: decode may model-shard up to Y = F / (B beta); F = 16384, B = 32 and beta = 8 give
    64. The catalog's v5e has beta = 8.1e11 / 9e10 = 9, hence 57."""
    cfg = dataclasses.replace(LLAMA2_13B, d_ff=16384)
    mp = plan_serve(cfg, ServeSetup(32, 1024, 16), lookup("tpu-v5e:4x4"))["model_parallel"]
    assert mp["beta"] == pytest.approx(9)
    assert mp["max_degree_memory_bound"] == pytest.approx(16384 / (32 * 9))
    assert 16384 / (32 * 8) == 64


# ---- ch. 8: serving LLaMA-3 70B on v5e ----

def test_llama3_70b_kv_cache_8_1():
    """Sec. 8.1: int8 KV is 2 * 8 * 128 * 80 = 160 kB per token, 5.3 GB per 32k sequence, 1.3 TB at
    BS = 240, needing ~86 v5e chips with the params (the book rounds 1.29 TB up)."""
    per_token = kv_bytes_per_token(LLAMA3_70B, "int8")
    assert per_token == pytest.approx(160e3, rel=0.03)
    assert per_token * 32768 == pytest.approx(5.3e9, rel=0.02)
    r = plan_serve(LLAMA3_70B, ServeSetup(240, 32768, 1, "int8", "int8"), lookup("tpu-v5e"))
    assert r["memory_bytes"]["kv_cache"] == pytest.approx(1.3e12, rel=0.01)
    assert r["smallest_slice"]["min_chips_exact"] == pytest.approx(86, rel=0.02)


def test_llama3_70b_batch_32_on_4x2_and_4x4_8_1():
    """Sec. 8.1: BS 32, 8192 context, int8: 112 GB (the book uses 160e3 B/token; exactly 113.5 GB),
    smallest slice 4x2; ~17 ms per step, 1882 tokens/s, 235/s/chip (the book rounds the step to
    17 ms before dividing); 8.5 ms on a 4x4; model sharding is ICI-bound beyond 2F/alpha."""
    r = plan_serve(LLAMA3_70B, ServeSetup(32, 8192, 8, "int8", "int8"), lookup("tpu-v5e:4x2"))
    assert r["memory_bytes"]["total"] == pytest.approx(112e9, rel=0.015)
    assert r["smallest_slice"]["topology"] == "4x2"
    d = r["decode"]
    assert d["step_s"] == pytest.approx(17e-3, rel=0.04)
    assert d["tokens_per_s"] == pytest.approx(1882, rel=0.04)
    assert d["tokens_per_s_per_chip"] == pytest.approx(235, rel=0.04)
    assert d["bound_by"].startswith("memory")
    r16 = plan_serve(LLAMA3_70B, ServeSetup(32, 8192, 16, "int8", "int8"), lookup("tpu-v5e:4x4"))
    assert r16["decode"]["step_s"] == pytest.approx(8.5e-3, rel=0.04)


def test_model_parallel_ici_limit_uses_the_chips_alpha_8_1():
    """Sec. 8.1 writes Y > 2 F / 2550 = 22 for v5e, borrowing v5p's alpha; v5e's own
    1.97e14 / 9e10 = 2189 gives 26. Both follow n F / alpha."""
    r = plan_serve(LLAMA3_70B, ServeSetup(32, 8192, 8, "int8", "int8"), lookup("tpu-v5e:4x2"))
    assert r["model_parallel"]["max_degree_compute_bound"] == pytest.approx(2 * 28672 / 2189, rel=0.001)
    assert 2 * 28672 / 2550 == pytest.approx(22, rel=0.03)
    assert not r["model_parallel"]["ici_bound"]


def test_smallest_slices_by_dtype_8_1_1():
    """Sec. 8.1.1: bf16 needs 4x4, int8 4x2, int4 2x2. The book's table has slips: int4 params are
    35 GB (not 45), int8 leaves 58 GB (not 68) for KV; with each dtype's HBM and KV halving together
    all three hold the same ~43 caches of 8k (the book's 43 for bf16)."""
    batches = []
    for dtype, topo, chips in (("bf16", "4x4", 16), ("int8", "4x2", 8), ("int4", "2x2", 4)):
        r = plan_serve(LLAMA3_70B, ServeSetup(1, 8192, chips, dtype, dtype), lookup(f"tpu-v5e:{topo}"))
        assert r["smallest_slice"]["topology"] == topo
        batches.append(r["max_batch"])
    assert batches == [batches[0]] * 3
    assert batches[0] == pytest.approx(43, abs=1)


def test_full_hbm_latency_and_qps_8_1_1():
    """Sec. 8.1.1: at the largest batch a step reads a whole chip's HBM, 16 GB / 8.2e11 = 19 ms;
    int4 params alone take ~10 ms on a 2x2; bf16 gives ~0.27 queries/s/chip at 512 decode steps."""
    bf16 = plan_serve(LLAMA3_70B, ServeSetup(42, 8192, 16), lookup("tpu-v5e:4x4"))["decode"]
    assert bf16["step_s"] == pytest.approx(19e-3, rel=0.05)
    assert 42 / (bf16["step_s"] * 512 * 16) == pytest.approx(0.27, rel=0.06)
    int4 = plan_serve(LLAMA3_70B, ServeSetup(1, 8192, 4, "int4", "int4"), lookup("tpu-v5e:2x2"))
    assert int4["decode"]["weight_load_s"] == pytest.approx(10e-3, rel=0.1)


def test_per_matmul_times_on_4x8_8_1_1():
    """Sec. 8.1.1: BS 64 on a 4x8 in bf16: T_ici = 11 us, T_hbm = 18 us, T_math = 4 us (4.8 us
    unrounded): still HBM-bound, and Y = F / (8 B) = 56 ways would be the limit."""
    mp = plan_serve(LLAMA3_70B, ServeSetup(64, 8192, 32), lookup("tpu-v5e:8x4"))["model_parallel"]
    assert mp["matmul_ici_s"] == pytest.approx(11e-6, rel=0.07)
    assert mp["matmul_hbm_s"] == pytest.approx(18e-6, rel=0.02)
    assert mp["matmul_math_s"] == pytest.approx(4.8e-6, rel=0.02)
    assert not mp["ici_bound"]
    assert 28672 / (8 * 64) == 56


def test_prefill_8k_on_16_v5e_8_1_2():
    """Sec. 8.1.2: 2 * 70e9 * 8192 / (16 * 1.97e14 * 0.4) = 0.91 s; the book ignores attention, which
    the plan's total adds on top."""
    r = plan_serve(LLAMA3_70B, ServeSetup(1, 8192, 16, prefill_tokens=8192, mfu=0.4), lookup("tpu-v5e:4x4"))
    assert r["prefill"]["matmul_s"] == pytest.approx(0.91, rel=0.01)
    assert r["prefill"]["time_s"] > r["prefill"]["matmul_s"]
    assert math.isclose(r["prefill"]["tokens"], 8192)


def test_x_range_is_empty_below_critical_batch_5_4_3():
    """Sec. 5.4.3: below B/N = 4 alpha^2 / (M_X M_Y F) the quadratic has no real root."""
    assert compute_bound_x_range(v5p_parallel(300 * 8960, 8960, 28672)) is None
    assert compute_bound_x_range(v5p_parallel(500 * 8960, 8960, 28672)) is not None
