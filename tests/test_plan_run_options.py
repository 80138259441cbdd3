"""What real runs do, said to `plan train`: FP8 matmuls, sliding windows, MoE shapes off the presets, racks
of 64, the A100 40 GB, and rates calibrated from the user's own profile."""

from __future__ import annotations

import json

import pytest

from audit.cli import main
from audit.costmodel.planner.calibrate import from_report
from audit.base.errors import InputError
from conftest import ROOT

BASE = ["plan", "train", "--tokens", "1e12", "--batch-tokens", "4e6", "--top", "1", "--json", "-"]
REPORT = ROOT / "tests" / "data" / "reports" / "gemm-10daea0.json"


def _plan(capsys, *args: str) -> dict:
    assert main([*BASE, *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_fp8_matmuls_are_faster_and_pay_for_their_quantization(capsys):
    args = ("--model", "llama3-70b", "--hardware", "h100", "--chips", "512", "--layout", "tp=8,pp=4")
    bf16 = _plan(capsys, *args)["layout"]
    fp8 = _plan(capsys, *args, "--compute-dtype", "fp8")["layout"]
    assert fp8["ops_per_step"]["by_class_s"]["matmul"] < bf16["ops_per_step"]["by_class_s"]["matmul"]
    assert fp8["ops_per_step"]["by_class_s"]["quantize"] > 0 and "quantize" not in bf16["ops_per_step"]["by_class_s"]
    assert fp8["step_time_s"]["total"] <= fp8["step_time_achievable_s"]["total"]


def test_a_chip_without_fp8_refuses_it_in_one_line(capsys):
    assert main(["plan", "train", "--model", "llama3-8b", "--tokens", "1e12", "--batch-tokens", "1e6",
                 "--hardware", "a100", "--chips", "64", "--compute-dtype", "fp8"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no fp8" in err and len(err.splitlines()) == 1


def test_a_sliding_window_on_half_the_layers_cuts_the_attention(capsys):
    args = ("--model", "llama3-8b", "--hardware", "h100", "--chips", "64", "--seq", "32768", "--layout", "tp=8")
    full = _plan(capsys, *args)["layout"]
    half = _plan(capsys, *args, "--sliding-window", "128", "--sliding-window-share", "0.5")["layout"]
    a_full, a_half = full["ops_per_step"]["by_class_s"]["attention"], half["ops_per_step"]["by_class_s"]["attention"]
    assert 0.45 * a_full < a_half < 0.6 * a_full
    assert half["executed_flops_per_step"] < full["executed_flops_per_step"]


def test_moe_shapes_off_the_presets(capsys):
    """Shared experts, expert width and dense first layers as flags: routing and grouped GEMMs are priced."""
    r = _plan(capsys, "--layers", "24", "--d-model", "2048", "--d-ff", "8192", "--heads", "16", "--kv-heads", "4",
              "--head-dim", "128", "--vocab", "50000", "--experts", "64", "--experts-per-token", "4",
              "--shared-experts", "1", "--moe-d-ff", "1024", "--first-dense-layers", "2",
              "--hardware", "h100", "--chips", "64", "--layout", "dp=64,ep=8")
    assert r["model"]["shared_experts"] == 1 and r["model"]["first_dense_layers"] == 2
    by_op = r["layout"]["ops_per_step"]["by_op_s"]
    assert by_op["router"] > 0 and by_op["permute tokens"] > 0
    assert by_op["expert up projection (grouped)"] > 0 and by_op["shared expert up projection"] > 0
    assert by_op["MLP up projection"] > 0  # the two dense first layers


def test_racks_of_64_are_planned(capsys):
    r = _plan(capsys, "--model", "llama3-70b", "--hardware", "gb200-nvl72:4x64")
    assert r["setup"]["chips"] == 256 and r["layout_search"]["best"]["levels"]["domain_chips"] == 64


def test_the_a100_40gb_is_in_the_catalog(capsys):
    r = _plan(capsys, "--model", "llama2-7b", "--hardware", "a100-40gb", "--chips", "64")
    assert r["hardware"]["name"] == "a100-40gb"
    assert r["layout_search"]["best"]["hbm_bytes"] == 40e9


def test_calibration_takes_the_profiles_factors_and_says_so(capsys):
    cal = from_report(json.loads(REPORT.read_text()), "report.json")
    assert cal.factors["compute"] >= 1.0 and cal.ops["compute"] >= 1
    args = ("--model", "llama3-8b", "--hardware", "mi300x", "--chips", "64", "--layout", "tp=4,pp=2")
    plain = _plan(capsys, *args)["layout"]
    mine = _plan(capsys, *args, "--calibrate", str(REPORT))["layout"]
    assert mine["calibration"]["factors"] == pytest.approx(cal.factors)
    assert any("calibration:" in s for s in mine["ops_per_step"]["sources"])
    assert mine["step_time_s"]["total"] == pytest.approx(plain["step_time_s"]["total"])  # the bound is the bound
    assert mine["step_time_achievable_s"]["total"] >= mine["step_time_s"]["total"]


def test_calibration_from_something_else_exits_2(capsys, tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"ops": "none"}')
    assert main(["plan", "train", "--model", "llama3-8b", "--tokens", "1e12", "--batch-tokens", "1e6",
                 "--hardware", "h100", "--chips", "8", "--calibrate", str(bad)]) == 2
    assert "not an audit inspect JSON report" in capsys.readouterr().err
    with pytest.raises(InputError):
        from_report({"ops": [{"bound_by": "compute", "measured_s": 0}]}, "empty")


def test_gpt_oss_brings_its_own_sliding_window(capsys):
    """The preset's window (128 keys on every other layer) prices its attention, as the flags would."""
    args = ("--hardware", "h100", "--chips", "64", "--seq", "8192", "--layout", "dp=64,ep=8", "--remat", "full")
    preset = _plan(capsys, "--model", "gpt-oss-120b", *args)["layout"]
    flags = _plan(capsys, "--model", "gpt-oss-120b", "--sliding-window", "128", "--sliding-window-share", "0.5",
                  *args)["layout"]
    assert preset["ops_per_step"]["by_class_s"]["attention"] == pytest.approx(flags["ops_per_step"]["by_class_s"]["attention"])
    assert preset["executed_flops_per_step"] == pytest.approx(flags["executed_flops_per_step"])


def test_expert_parallelism_may_span_the_tp_ranks(capsys):
    """A TP2 PP8 EP32 layout on 256 GPUs (dp = 16): EP takes both TP ranks and 16 DP ranks, as Megatron-Core
    lays out experts; its all-to-all is priced over those chips, and each chip holds 256 / 32 experts."""
    r = _plan(capsys, "--model", "deepseek-v3-like", "--hardware", "h100", "--chips", "256", "--batch-tokens", "8388608",
              "--layout", "tp=2,pp=8,ep=32", "--remat", "full")["layout"]
    assert r["valid"] and r["layout"]["dp"] == 16 and r["experts_per_chip"] == 8
    ep = [c for c in r["collectives"] if c["axis"] == "ep"]
    assert ep and set(ep[0]["levels_s"]) == {"NVLink", "inter-node network"}
    assert main([*BASE, "--model", "deepseek-v3-like", "--hardware", "h100", "--chips", "256",
                 "--layout", "tp=2,pp=8,ep=24"]) == 2


def test_gradient_accumulation_around_a_pipeline_pays_one_bubble_per_flush(capsys):
    args = ("--model", "llama3-70b", "--hardware", "h100", "--chips", "512")
    one = _plan(capsys, *args, "--layout", "tp=8,pp=4,m=16")["layout"]
    four = _plan(capsys, *args, "--layout", "tp=8,pp=4,m=16,flushes=4")["layout"]
    assert four["schedule"]["flushes"] == 4 and four["layout"]["label"].endswith("flushes=4")
    # 1F1B's bubble is (p - 1) / m per flush: 3/16 in one flush, 3/4 in four flushes of 4
    assert one["schedule"]["bubble_fraction"] == pytest.approx(3 / 16)
    assert four["schedule"]["bubble_fraction"] == pytest.approx(3 / 4)
    assert four["step_time_s"]["bubble"] == pytest.approx(4 * one["step_time_s"]["bubble"], rel=0.05)
    assert main([*BASE, *args, "--layout", "tp=8,pp=4,m=6,flushes=4"]) == 2


def test_optimizer_and_weight_offload_free_hbm_and_price_the_host_link(capsys):
    args = ("--model", "llama3-70b", "--hardware", "h100", "--chips", "64", "--layout", "tp=8,fsdp=8")
    on_chip = _plan(capsys, *args)["layout"]
    opt = _plan(capsys, *args, "--offload-optimizer")["layout"]
    both = _plan(capsys, *args, "--offload-optimizer", "--offload-params")["layout"]
    assert opt["memory_per_chip_bytes"]["optimizer"] == 0 < on_chip["memory_per_chip_bytes"]["optimizer"]
    assert both["memory_per_chip_bytes"]["params"] < opt["memory_per_chip_bytes"]["params"]
    update = opt["remat"]["state_offload_s"]["optimizer_update"]
    assert update > 0 and opt["step_time_s"]["exposed_comm_by_axis"]["host"] == pytest.approx(update)
    assert opt["step_time_s"]["total"] == pytest.approx(on_chip["step_time_s"]["total"] + update)
    assert both["remat"]["state_offload_s"]["weights"] > 0


def test_an_imbalanced_router_makes_the_expert_gemms_wait_for_the_busiest_expert(capsys):
    args = ("--model", "deepseek-v3-like", "--hardware", "h800", "--chips", "64", "--batch-tokens", "2097152",
            "--layout", "dp=64,ep=64", "--remat", "full")
    even = _plan(capsys, *args)["layout"]
    skewed = _plan(capsys, *args, "--expert-imbalance", "1.5")["layout"]
    grouped = [k for k in even["ops_per_step"]["by_op_s"] if "(grouped)" in k]
    assert grouped and all(skewed["ops_per_step"]["by_op_s"][k] > even["ops_per_step"]["by_op_s"][k] for k in grouped)
    assert skewed["step_time_achievable_s"]["total"] > even["step_time_achievable_s"]["total"]
    assert main([*BASE, *args, "--expert-imbalance", "0.5"]) == 2


def test_serving_plans_at_the_profiles_rates_too(capsys):
    base = ["plan", "serve", "--model", "llama3-8b", "--batch", "32", "--context", "8192", "--hardware", "mi300x",
            "--chips", "8", "--prefill-tokens", "4096", "--json", "-"]
    assert main([*base, "--calibrate", str(REPORT)]) == 0
    r = json.loads(capsys.readouterr().out)
    cal, decode = r["calibrated"], r["decode"]
    assert cal["source"].startswith("calibration:") and cal["decode_step_s"] >= decode["step_s"]
    assert cal["prefill_s"] > 0 and cal["tokens_per_s"] == pytest.approx(32 / cal["decode_step_s"])


def test_dualpipe_hides_the_all_to_all_only_in_its_steady_state():
    """The bound lets DualPipe hide all of EP's all-to-all behind compute; the estimate only the share of
    microbatches past the pipe's fill and drain, so two stages of four microbatches expose a quarter of it."""
    from audit.costmodel.chips.catalog import lookup
    from audit.costmodel.planner.layout_memory import TrainBytes
    from audit.costmodel.planner.layout_step import RunSpec, evaluate_layout
    from audit.costmodel.planner.layout import parse_layout
    from audit.costmodel.planner.transformer import MODELS
    run = RunSpec(64 * 4096 * 8, 4096, 256, TrainBytes(remat="full"))
    r = evaluate_layout(MODELS["deepseek-v3-like"], run, lookup("h800"),
                        parse_layout("dp=128,pp=2,ep=64,schedule=dualpipe,m=4", 256))
    assert r["valid"]
    ep_total = sum(c["time_s"] for c in r["collectives"] if c["axis"] == "ep")
    bound_ep = r["step_time_s"]["exposed_comm_by_axis"].get("ep", 0.0)
    assert bound_ep == pytest.approx(max(0.0, ep_total - r["step_time_s"]["compute"]))
    est_net = sum(r["step_time_achievable_s"]["exposed_comm_by_level"].values())
    assert est_net >= 0.25 * ep_total * 0.99  # (pp - 1) of m = 4 microbatches fill and drain, exposed
    assert "steady state" in r["overlap"]["estimate"]


def test_moe_dispatch_by_all_gather_moves_the_whole_groups_tokens(capsys):
    args = ("--model", "gpt-oss-120b", "--hardware", "h100", "--chips", "64", "--layout", "dp=64,ep=8",
            "--remat", "full")
    a2a = _plan(capsys, *args)["layout"]
    ag = _plan(capsys, *args, "--moe-dispatch", "all-gather")["layout"]
    assert {c["collective"] for c in a2a["collectives"] if c["axis"] == "ep"} == {"all-to-all"}
    assert {c["collective"] for c in ag["collectives"] if c["axis"] == "ep"} == {"all-gather", "reduce-scatter"}


def test_chunked_attention_runs_independent_causal_blocks(capsys):
    """Chunks of 8192 tokens on three of four layers at 131072 (Llama 4's layout): a sixteenth of the pairs
    there; the bound and the attention kernels both see fewer."""
    args = ("--model", "llama3-8b", "--hardware", "h100", "--chips", "64", "--seq", "131072",
            "--batch-tokens", str(64 * 131072), "--layout", "tp=8,cp=8", "--remat", "full")
    full = _plan(capsys, *args)["layout"]
    chunked = _plan(capsys, *args, "--attention-chunk", "8192", "--sliding-window-share", "0.75")["layout"]
    a, b = full["ops_per_step"]["by_class_s"]["attention"], chunked["ops_per_step"]["by_class_s"]["attention"]
    assert 0.2 * a < b < 0.35 * a
    assert chunked["executed_flops_per_step"] < full["executed_flops_per_step"]
    assert main([*BASE, *args, "--attention-chunk", "8192", "--sliding-window", "128"]) == 2
