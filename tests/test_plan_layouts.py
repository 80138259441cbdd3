"""Parallel layouts: parsing, memory per chip, step-time breakdowns, the network hierarchy, the search."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings, strategies as st

from audit.cli import main
from audit.costmodel.chips.catalog import CATALOG, lookup
from audit.costmodel.chips.hardware import Quantity
from audit.costmodel.planner.layout import SCHEDULES, Layout, parse_layout
from audit.costmodel.planner.layout_memory import TrainBytes, memory_per_chip
from audit.costmodel.planner.layout_step import RunSpec, evaluate_layout, network_for
from audit.costmodel.planner.pipeline import schedule_of
from audit.costmodel.planner.search import search
from audit.costmodel.planner.transformer import MODELS, ModelConfig, matmul_params
from audit.base.errors import UsageError

LLAMA_405B = MODELS["llama3-405b"]
LLAMA_RUN = RunSpec(2**24, 8192, 16384)  # 2048 sequences of 8192 tokens


def test_parse_layout_fills_dp_and_reads_every_axis():
    lay = parse_layout("tp=8,pp=16", 16384)
    assert (lay.dp, lay.tp, lay.pp, lay.chips) == (128, 8, 16, 16384)
    full = parse_layout("dp=64,tp=1,pp=16,ep=64,zero=1,microbatches=32,schedule=dualpipe")
    assert (full.ep, full.zero, full.microbatches, full.schedule) == (64, 1, 32, "dualpipe")
    assert parse_layout("tp=8,pp=4,v=2", 64).schedule == "interleaved"
    assert (parse_layout("fsdp=256,tp=4", 1024).dp, parse_layout("fsdp=256,tp=4", 1024).zero) == (256, 3)
    assert parse_layout("fsdp=512,tp=12,replicas=2", 6144).label() == "dp=512,tp=12,zero=3,replicas=2"


@pytest.mark.parametrize("text", ["dp=128,tp=8", "tp=8,pp=3", "tp=8,nope=2", "tp=8,schedule=magic", "tp=x",
                                  "zero=4", "tp=8,tp=4", "pp", "tp=" + "9" * 5000])
def test_bad_layouts_are_usage_errors(text):
    with pytest.raises(UsageError):
        parse_layout(text, 16384)


def test_llama3_405b_published_layout_fits_with_a_full_breakdown():
    """Meta's layout (TP 8, PP 16, DP 128, 16M-token batches of 8k sequences) fits on 80 GB H100s."""
    r = evaluate_layout(LLAMA_405B, LLAMA_RUN, lookup("h100"), parse_layout("dp=128,tp=8,pp=16", 16384))
    assert r["valid"] and r["fits"]
    mem, step = r["memory_per_chip_bytes"], r["step_time_s"]
    assert set(mem) >= {"params", "grads", "optimizer", "activations", "working", "total"}
    assert mem["total"] == pytest.approx(sum(mem[k] for k in ("params", "grads", "optimizer", "activations", "working")))
    # 405B parameters over 128 TP x PP ranks, 2 bytes each, plus one embedding matrix on the stage.
    assert 6e9 < mem["params"] < 8e9
    assert r["microbatches"] == 16 and step["bubble"] > 0
    assert set(step["exposed_comm_by_level"]) == {"NVLink", "inter-node network"}
    parts = step["compute"] + sum(step["exposed_comm_by_axis"].values()) + step["bubble"]
    assert step["total"] == pytest.approx(parts)
    assert sum(step["exposed_comm_by_level"].values()) == pytest.approx(sum(step["exposed_comm_by_axis"].values()))


def test_the_search_finds_a_fitting_layout_where_the_closed_forms_find_none(capsys):
    code = main(["plan", "train", "--model", "llama3-405b", "--tokens", "15.6e12", "--batch-tokens", str(2**24),
                 "--seq", "8192", "--hardware", "h100", "--chips", "16384", "--json", "-"])
    r = json.loads(capsys.readouterr().out)
    assert code == 0
    assert r["recommendation"]["strategy"] is None  # the book's forms: one slice, no pipeline
    best = r["layout_search"]["best"]
    assert best["fits"] and best["layout"]["pp"] > 1 and best["layout"]["tp"] == 8
    assert r["recommendation"]["layout"] == best["layout"]
    assert "layout search finds" in r["recommendation"]["reason"]
    # ranked by the step at achievable rates (the bound hides what no schedule may hide)
    times = [lay["step_time_achievable_s"]["total"] for lay in r["layout_search"]["layouts"][1:]]
    assert times == sorted(times)


def test_layout_text_prints_memory_and_step_breakdowns(capsys):
    assert main(["plan", "train", "--model", "llama3-405b", "--tokens", "15.6e12", "--batch-tokens", str(2**24),
                 "--seq", "8192", "--hardware", "h100", "--chips", "16384",
                 "--layout", "dp=128,tp=8,pp=16,schedule=interleaved,v=4"]) == 0
    out = capsys.readouterr().out
    mine = out[out.index("your layout"):]
    for word in ("memory per chip", "params", "optimizer", "activations", "compute", "NVLink",
                 "inter-node network", "bubble", "interleaved"):
        assert word in mine
    assert "best layout" in out and "why:" in out


def test_a_layout_that_cannot_run_says_why(capsys):
    """A layout the user gave that cannot run is bad input: exit 2 and one line saying why, so a script
    that checks the exit code does not take it for a plan."""
    assert main(["plan", "train", "--model", "llama3-405b", "--tokens", "1e12", "--batch-tokens", str(2**24),
                 "--seq", "8192", "--hardware", "h100", "--chips", "16384", "--layout", "dp=64,tp=16,pp=16",
                 "--json", "-"]) == 2
    captured = capsys.readouterr()
    assert not captured.out and len(captured.err.strip().splitlines()) == 1
    assert "NVLink domain" in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize("layout, why", [
    ("tp=4,pp=2,v=1,schedule=interleaved", "interleaved needs 2 <= v"),
    ("dp=8,tp=4,pp=2,microbatches=7", "7 microbatches do not split"),
])
def test_unrunnable_schedules_exit_2_with_one_line(capsys, layout, why):
    assert main(["plan", "train", "--model", "llama3-8b", "--tokens", "1e12", "--batch-tokens", "1e6",
                 "--hardware", "h100", "--chips", "64", "--layout", layout]) == 2
    err = capsys.readouterr().err.strip()
    assert why in err and len(err.splitlines()) == 1


def test_expert_parallelism_that_divides_nothing_exits_2(capsys):
    assert main(["plan", "train", "--model", "deepseek-v3-like", "--tokens", "1e12", "--batch-tokens", "62914560",
                 "--hardware", "h800", "--chips", "2048", "--layout", "dp=128,pp=16,ep=48"]) == 2
    assert "ep=48" in capsys.readouterr().err
    assert main(["plan", "train", "--model", "llama3-8b", "--tokens", "1e12", "--batch-tokens", "1e6",
                 "--hardware", "h100", "--chips", "64", "--layout", "dp=4,tp=4"]) == 2
    assert "uses 16 chips" in capsys.readouterr().err


def test_multi_query_attention_may_use_tp_12_with_one_kv_head():
    """PaLM 540B: 48 query heads, one KV head, TP 12 in each 3072-chip TPU v4 pod."""
    palm = ModelConfig(118, 18432, 73728, 48, 1, 256, 256000, tied_embeddings=True, name="mqa")
    run = RunSpec(2048 * 2048, 2048, 6144)
    r = evaluate_layout(palm, run, lookup("tpu-v4:12x16x16"), parse_layout("dp=512,tp=12,zero=3", 6144))
    assert r["valid"], r.get("problems")
    assert set(r["step_time_s"]["exposed_comm_by_level"]) <= {"ICI", "DCN"}


def test_each_axis_is_priced_on_the_level_it_spans():
    """TP inside one 8-GPU node rides NVLink; DP across nodes the per-GPU network; on an
    NVL72-class domain the same DP group keeps 9x as many members on NVLink."""
    h100 = lookup("h100")
    lay = parse_layout("dp=128,tp=8", 1024)
    net = network_for(h100, lay)
    assert set(net.price("all-gather", 1e8, ("tp",)).seconds) == {"NVLink"}
    assert set(net.price("all-reduce", 1e9, ("cp", "ep", "dp")).seconds) == {"inter-node network"}
    nvl72 = dataclasses.replace(h100, interconnect=dataclasses.replace(h100.interconnect, domain_size=72))
    wide = network_for(nvl72, parse_layout("dp=128,tp=8", 1024))
    assert wide.split(("cp", "ep", "dp")) == (9, 15)  # 128 ranks, 9 to a 72-GPU domain
    assert wide.price("all-reduce", 1e9, ("cp", "ep", "dp")).seconds["NVLink"] > 0


def test_a_faster_scale_out_network_never_slows_a_step():
    slow = lookup("h100")
    fast = dataclasses.replace(slow, interconnect=dataclasses.replace(
        slow.interconnect, dcn_bytes_per_s=Quantity(4e11, "B/s", "user")))
    lay = parse_layout("dp=128,tp=8,pp=16", 16384)
    a = evaluate_layout(LLAMA_405B, LLAMA_RUN, slow, lay)["step_time_s"]
    b = evaluate_layout(LLAMA_405B, LLAMA_RUN, fast, lay)["step_time_s"]
    assert b["total"] <= a["total"] and b["compute"] == a["compute"]


def test_gradient_accumulation_is_reached_for_before_nothing_fits():
    """Llama 3 8B on 8 H100s, 4M-token batches: whole batches never fit, microbatches do."""
    cfg = MODELS["llama3-8b"]
    run = RunSpec(512 * 8192, 8192, 8)
    r = evaluate_layout(cfg, run, lookup("h100"), parse_layout("dp=8,zero=3", 8))
    assert r["fits"] and r["microbatches"] > 1
    whole = evaluate_layout(cfg, run, lookup("h100"), parse_layout("dp=8,zero=3,microbatches=1", 8))
    assert not whole["fits"]


def test_search_on_16384_chips_ranks_by_step_time_and_explains():
    found = search(LLAMA_405B, LLAMA_RUN, lookup("h100"))
    assert found["fitting"] > 0 and found["candidates"] > 100
    best = found["best"]
    assert all(best["step_time_achievable_s"]["total"] <= r["step_time_achievable_s"]["total"] * 1.011
               for r in found["layouts"])
    assert best["layout"]["label"] in found["why"]


def test_nothing_fits_names_the_smallest_footprint():
    found = search(LLAMA_405B, RunSpec(2**24, 8192, 64), lookup("h100"))
    assert found["best"] is None and "nothing fits" in found["why"] and found["smallest_footprint"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([s for s in SCHEDULES if s != "interleaved"]), st.sampled_from([2, 4, 8, 16]),
       st.integers(1, 8))
def test_more_microbatches_shrink_the_bubble(schedule, pp, k):
    lay = Layout(dp=1, pp=pp, schedule=schedule)
    m = 2 * pp * k
    assert schedule_of(lay, 2 * m).bubble_fraction(2 * m) <= schedule_of(lay, m).bubble_fraction(m)


@pytest.mark.parametrize("pp", [2, 4, 8, 16])
def test_schedule_bubbles_order_as_published(pp):
    """GPipe = 1F1B > interleaved(v=2) and zero bubble > DualPipe, at equal microbatches."""
    m = 4 * pp

    def bubble(schedule: str, v: int = 1) -> float:
        return schedule_of(Layout(pp=pp, schedule=schedule, virtual_stages=v), m).bubble_fraction(m)
    assert bubble("gpipe") == bubble("1f1b") == pytest.approx((pp - 1) / m)
    assert bubble("interleaved", 2) == pytest.approx(bubble("1f1b") / 2)
    assert bubble("zero-bubble") == pytest.approx(bubble("1f1b") / 3)
    assert bubble("dualpipe") < bubble("zero-bubble") or pp == 2
    assert schedule_of(Layout(pp=pp, schedule="gpipe"), m).in_flight == m
    assert schedule_of(Layout(pp=pp, schedule="dualpipe"), m).weight_copies == 2


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([8, 64, 512]))
def test_higher_zero_stages_and_more_sharding_never_need_more_memory(tp, pp, dp):
    sizes = TrainBytes()
    mems = [memory_per_chip(LLAMA_405B, Layout(dp=dp, tp=tp, pp=pp, zero=z), 2 * pp, 8192, sizes)["total"]
            for z in (0, 1, 2)]
    assert mems == sorted(mems, reverse=True)
    wider = memory_per_chip(LLAMA_405B, Layout(dp=dp, tp=tp, pp=2 * pp, zero=1), 2 * pp, 8192, sizes)
    assert wider["params"] <= memory_per_chip(LLAMA_405B, Layout(dp=dp, tp=tp, pp=pp, zero=1), 2 * pp, 8192,
                                              sizes)["params"]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["dp=2048,tp=8", "dp=128,tp=8,pp=16", "dp=256,tp=4,pp=16", "dp=512,tp=8,pp=4,zero=3"]),
       st.sampled_from(["h100", "a100", "mi300x", "b200"]))
def test_step_time_is_at_least_the_compute_roofline(text, chip):
    hw = lookup(chip)
    r = evaluate_layout(LLAMA_405B, LLAMA_RUN, hw, parse_layout(text, 16384))
    assert r["valid"]
    # the executed FLOPs: the model's, less the half of the T x T score matrix a causal kernel skips
    floor = r["executed_flops_per_step"] / LLAMA_RUN.chips / hw.peak("bf16").value
    assert r["executed_flops_per_step"] >= 6 * matmul_params(LLAMA_405B) * r["batch_tokens"]
    assert r["step_time_s"]["total"] >= floor
    assert 0 < r["mfu_upper_bound"] <= 1


def test_the_issue_command_places_llama3_405b_on_16384_h100s(capsys):
    """As a new user asks it: 16e6-token batches (1953 sequences of 8k) on 16,384 H100s. Meta's layout
    rounds the batch to 15 sequences per replica and fits; the search finds a layout too."""
    args = ["plan", "train", "--model", "llama3-405b", "--tokens", "15.6e12", "--batch-tokens", "16e6", "--seq",
            "8192", "--hardware", "h100", "--chips", "16384", "--layout", "tp=8,pp=16", "--json", "-"]
    assert main(args) == 0
    r = json.loads(capsys.readouterr().out)
    lay = r["layout"]
    assert lay["valid"] and lay["fits"] and lay["layout"]["dp"] == 128
    assert lay["sequences_per_replica"] == 15 and "batch rounded" in lay["notes"][0]
    assert r["layout_search"]["best"]["fits"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([8, 16, 32, 64, 128]), st.integers(1, 16), st.sampled_from(["h100", "a100", "mi300x"]))
def test_a_hierarchical_dispatch_never_sends_more_over_the_network_than_every_copy(ep, k, chip):
    """Each token crosses the scale-out network at most once per remote domain (then fans out on
    the fast links), so its network time never exceeds an all-to-all of all k copies; inside one
    domain it is exactly that all-to-all."""
    hw = lookup(chip)
    net = network_for(hw, Layout(dp=ep, ep=ep))
    per_copy = 4096 * 7168 * 2.0
    dispatch = net.price_dispatch(per_copy, k, ("ep",))
    naive = net.price("all-to-all", per_copy * k, ("ep",))
    slow = hw.interconnect.scale_out_name
    assert dispatch.seconds.get(slow, 0.0) <= naive.seconds.get(slow, 0.0) * (1 + 1e-9)
    if ep <= net.domain:
        assert dispatch.total_s == pytest.approx(naive.total_s)


def test_an_nvl72_domain_keeps_more_of_data_parallelism_on_nvlink(capsys):
    """The same layout on 8-GPU nodes and on 72-GPU NVLink domains (a figure of the hardware, not a
    chip name): a 72-wide domain holds 9 of the DP ranks, so less is left on the inter-node network."""
    args = ["plan", "train", "--model", "llama3-405b", "--tokens", "15e12", "--batch-tokens", "16e6", "--seq", "8192",
            "--hardware", "b200", "--chips", "4608", "--layout", "tp=8,pp=8", "--top", "1", "--json", "-"]
    results = []
    for extra in ([], ["--set", "interconnect.domain_size=72"]):
        assert main([*args, *extra]) == 0
        results.append(json.loads(capsys.readouterr().out)["layout"])
    eight, seventy_two = results
    assert (eight["levels"]["domain_chips"], seventy_two["levels"]["domain_chips"]) == (8, 72)
    slow = "inter-node network"
    assert seventy_two["step_time_s"]["exposed_comm_by_level"][slow] < eight["step_time_s"]["exposed_comm_by_level"][slow]
    assert seventy_two["step_time_s"]["total"] < eight["step_time_s"]["total"]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4, 8, 16]),
       st.sampled_from([1, 2, 8, 64, 128]), st.sampled_from([4, 8, 72]),
       st.sampled_from([("tp",), ("cp",), ("pp",), ("cp", "ep", "dp"), ("cp", "dp")]))
def test_a_group_splits_into_members_per_domain_and_domains(tp, cp, pp, dp, domain, names):
    h100 = lookup("h100")
    hw = dataclasses.replace(h100, interconnect=dataclasses.replace(h100.interconnect, domain_size=domain))
    net = network_for(hw, Layout(dp=dp, tp=tp, pp=pp, cp=cp))
    n_in, n_out = net.split(names)
    group = net.size(names)
    assert 1 <= n_in <= min(group, net.domain) and n_in * n_out >= group
    priced = net.price("all-gather", 1e8, names)
    assert set(priced.seconds) <= {"NVLink", "inter-node network"}
    assert ("inter-node network" in priced.seconds) == (n_out > 1)


@pytest.mark.parametrize("name", sorted(n for n, hw in CATALOG.items() if hw.kind != "cpu"))
def test_every_catalog_chip_plans_from_its_interconnect_fields(name):
    """No chip names in the planner: every accelerator of the catalog (NVL72 racks, TPU v7, ...) is
    placed from its Interconnect figures, and Llama 3 70B finds a layout on 1,024 of them."""
    hw = lookup(name)
    found = search(MODELS["llama3-70b"], RunSpec(2**22, 8192, 1024), hw)
    best = found["best"]
    assert best is not None and best["fits"]
    assert best["levels"]["fast"] == hw.interconnect.link_name
    assert best["levels"]["slow"] == hw.interconnect.scale_out_name
    if hw.kind == "gpu":
        assert best["levels"]["domain_chips"] == hw.interconnect.domain_size


def test_hybrid_sharding_keeps_weight_gathers_inside_each_replica():
    """ZeRO 3 within each 8-GPU node, replicated across nodes: weights are gathered on NVLink only,
    memory holds the node's shard, and the network carries one gradient all-reduce per step."""
    cfg = MODELS["llama3-8b"]
    run = RunSpec(256 * 8192, 8192, 64)
    full = evaluate_layout(cfg, run, lookup("h100"), parse_layout("dp=64,zero=3", 64))
    hybrid = evaluate_layout(cfg, run, lookup("h100"), parse_layout("dp=64,zero=3,replicas=8", 64))
    assert full["valid"] and hybrid["valid"]
    gathers = [c for c in hybrid["collectives"] if c["collective"] == "all-gather"]
    assert gathers and all(set(c["levels_s"]) == {"NVLink"} for c in gathers)
    assert [c["collective"] for c in hybrid["collectives"] if "inter-node network" in c["levels_s"]] == ["all-reduce"]
    assert hybrid["memory_per_chip_bytes"]["params"] > full["memory_per_chip_bytes"]["params"]
    bad = evaluate_layout(cfg, run, lookup("h100"), parse_layout("dp=64,zero=3,replicas=5", 64))
    assert not bad["valid"] and "replicas=5" in bad["problems"][0]


def test_the_readme_interleaved_llama_layout_rounds_the_batch_to_what_the_schedule_splits(capsys):
    """The planning page's example: Meta's layout with interleaved 1F1B on 16e6-token batches. The nearest
    split is 15 sequences per replica, which no multiple of pp=16 divides; 16 each (16.8e6 tokens,
    +4.9%, within the 5% a layout may round) runs, and the note says so."""
    args = ["plan", "train", "--model", "llama3-405b", "--tokens", "15.6e12", "--batch-tokens", "16e6", "--seq",
            "8192", "--hardware", "h100", "--chips", "16384", "--layout", "tp=8,pp=16,schedule=interleaved,v=2",
            "--json", "-"]
    assert main(args) == 0
    lay = json.loads(capsys.readouterr().out)["layout"]
    assert lay["valid"] and lay["fits"], lay.get("problems")
    assert lay["sequences_per_replica"] == 16 and lay["microbatches"] % 16 == 0
    assert lay["batch_tokens"] == 2048 * 8192 and "batch rounded to 16 x dp=128" in lay["notes"][0]


def test_a_stated_microbatch_count_moves_the_rounding_too():
    """`m=16` on a batch whose nearest split is 15 per replica takes 16 (within the slack), not an error;
    a count no split within the slack allows stays an error naming it."""
    run = RunSpec(batch_tokens=16e6, seq=8192, chips=16384)
    ok = evaluate_layout(LLAMA_405B, run, lookup("h100"), parse_layout("tp=8,pp=16,m=16", 16384))
    assert ok["valid"] and ok["sequences_per_replica"] == 16
    bad = evaluate_layout(LLAMA_405B, run, lookup("h100"), parse_layout("tp=8,pp=16,m=7", 16384))
    assert not bad["valid"] and "7 microbatches do not split the 15 sequences" in bad["problems"][0]


def test_a_layout_on_the_wrong_number_of_chips_is_named_as_written():
    """`dp=1` on 16,384 chips: the error quotes the layout the user gave (its label drops axes of one)."""
    with pytest.raises(UsageError, match=r"layout 'dp=1' uses 1 chip but the run has 16384"):
        parse_layout("dp=1", 16384)
