"""`audit plan model|train|serve` through the real CLI entry point."""

from __future__ import annotations

import json

import pytest

from audit.cli import main


def run_json(capsys, *args: str) -> dict:
    code = main(["plan", *args, "--json", "-"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_model_json_keys_and_values(capsys):
    r = run_json(capsys, "model", "--model", "llama3-70b", "--dtype", "int8", "--seq", "8192")
    assert set(r["params"]) == {"attention", "mlp", "embeddings", "norms", "total", "active"}
    assert r["params"]["total"] == pytest.approx(70.55e9, rel=0.001)
    assert r["kv_bytes_per_token"] == 2 * 8 * 128 * 80
    assert r["training_flops_per_token"] > r["six_n_flops_per_token"]
    assert {"no_remat", "remat", "checkpoints_per_layer"} <= set(r["activation_bytes_per_token"])


def test_model_from_explicit_flags(capsys):
    r = run_json(capsys, "model", "--layers", "2", "--d-model", "64", "--d-ff", "256", "--heads", "4",
                 "--kv-heads", "1", "--head-dim", "16", "--vocab", "100", "--no-gated-mlp", "--tied-embeddings")
    p = r["params"]
    assert p["mlp"] == 2 * 2 * 64 * 256
    assert p["embeddings"] == 100 * 64
    assert p["attention"] == 2 * (2 * 64 * 4 * 16 + 2 * 64 * 1 * 16)


def test_flags_override_a_named_model(capsys):
    r = run_json(capsys, "model", "--model", "llama2-13b", "--kv-heads", "8")
    assert r["config"]["kv_heads"] == 8 and r["config"]["layers"] == 40
    assert "modified" in r["config"]["name"]


def test_model_text_output_has_units(capsys):
    assert main(["plan", "model", "--model", "llama2-7b"]) == 0
    out = capsys.readouterr().out
    assert "parameters" in out and "FLOP" in out and "kB per token" in out


def test_train_json_and_recommendation(capsys):
    r = run_json(capsys, "train", "--model", "llama3-70b", "--tokens", "15e12", "--batch-tokens", "4194304",
                 "--hardware", "tpu-v5p:16x20x28")
    assert r["setup"]["chips"] == 8960
    assert r["time_s"] / 86400 == pytest.approx(47.4, rel=0.01)
    assert [s["strategy"] for s in r["strategies"]] == ["dp", "fsdp", "fsdp+tp", "tp"]
    assert {"bound", "ratio", "critical_batch_per_chip", "degrees", "memory_per_chip_bytes", "fits"} \
        <= set(r["strategies"][0])
    assert r["recommendation"]["strategy"] == "fsdp+tp"
    assert r["hardware"]["flops_per_s"]["source"] == "catalog"


def test_train_over_pods_uses_dcn(capsys):
    r = run_json(capsys, "train", "--model", "llama3-70b", "--tokens", "15e12", "--batch-tokens", "40e6",
                 "--hardware", "tpu-v5p:16x20x28", "--chips", str(4 * 8960))
    rows = {s["strategy"]: s for s in r["strategies"]}
    assert rows["fsdp"]["degrees"]["pods"] == 4
    assert rows["fsdp"]["dcn_ratio"] == pytest.approx(10e6 / 73_440)


def test_train_text_output(capsys):
    code = main(["plan", "train", "--model", "llama2-7b", "--tokens", "2e12", "--batch-tokens", "4e6",
                 "--hardware", "tpu-v5e:16x16"])
    out = capsys.readouterr().out
    assert code == 0
    assert "days" in out and "recommendation:" in out and "fsdp+tp" in out


def test_serve_json_and_table(capsys, tmp_path):
    path = tmp_path / "serve.json"
    code = main(["plan", "serve", "--model", "llama3-70b", "--batch", "32", "--context", "8192",
                 "--param-dtype", "int8", "--kv-dtype", "int8", "--hardware", "tpu-v5e:4x2",
                 "--prefill-tokens", "8192", "--json", str(path)])
    assert code == 0
    r = json.loads(path.read_text())
    assert r["fits"] and r["smallest_slice"]["topology"] == "4x2"
    assert r["decode"]["step_s"] == pytest.approx(0.0175, rel=0.01)
    batches = [row["batch"] for row in r["latency_table"]]
    assert batches == sorted(batches) and 32 in batches
    assert r["prefill"]["tokens"] == 8192
    assert "Wrote" in capsys.readouterr().err


def test_serve_text_says_when_it_does_not_fit(capsys):
    assert main(["plan", "serve", "--model", "llama3-70b", "--batch", "1", "--context", "8192",
                 "--hardware", "tpu-v5e:2x2"]) == 0
    out = capsys.readouterr().out
    assert "does NOT fit" in out and "smallest slice 4x4" in out


@pytest.mark.parametrize("args", [
    ["model"],                                                        # neither --model nor shape flags
    ["model", "--model", "gpt-5"],                                    # unknown model
    ["model", "--model", "llama3-8b", "--heads", "30"],               # heads not a multiple of kv_heads
    ["model", "--model", "llama3-8b", "--layers", "0"],               # out of range
    ["train", "--model", "llama3-8b", "--tokens", "1e12", "--batch-tokens", "1e6", "--hardware", "tpu-v5e"],
    ["train", "--model", "llama3-8b", "--tokens", "1e12", "--batch-tokens", "1e6", "--hardware", "tpu-v9:4x4"],
    ["train", "--model", "llama3-8b", "--tokens", "1e12", "--batch-tokens", "1e6", "--hardware", "tpu-v5e:4x4",
     "--mfu", "1.5"],
    ["train", "--model", "llama3-8b", "--tokens", "1e12", "--batch-tokens", "1e6", "--hardware", "tpu-v5e:4x4",
     "--chips", "40"],
    ["serve", "--model", "llama3-8b", "--batch", "0", "--context", "10", "--hardware", "tpu-v5e:4x4"],
    ["serve", "--model", "llama3-8b", "--batch", "1", "--context", "10", "--hardware", "tpu-v5e:4x4",
     "--kv-dtype", "int3"],
])
def test_bad_input_exits_2_with_one_line(capsys, args):
    assert main(["plan", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err and "Traceback" not in err


def test_small_model_big_batch_recommends_plain_data_parallel(capsys):
    """Sec. 5.1.1: a model that fits on one chip with a big batch per chip wants simple DP."""
    r = run_json(capsys, "train", "--layers", "12", "--d-model", "768", "--d-ff", "3072", "--heads", "12",
                 "--kv-heads", "12", "--head-dim", "64", "--vocab", "50257", "--tokens", "1e10",
                 "--batch-tokens", "2e6", "--hardware", "tpu-v5p:4x4x4", "--checkpoints-per-layer", "1")
    assert r["recommendation"]["strategy"] == "dp"
    assert r["recommendation"]["degrees"]["dp"] == 64


def test_nothing_fits_says_how_many_chips(capsys):
    r = run_json(capsys, "train", "--model", "llama3-405b", "--tokens", "15e12", "--batch-tokens", "16e6",
                 "--hardware", "tpu-v5e:4x4")
    assert r["recommendation"]["strategy"] is None
    assert str(r["min_chips_by_memory"]) in r["recommendation"]["reason"]


def test_the_two_recommendations_say_whose_each_is(capsys):
    """The README's llama3-70b example: the closed forms pick fsdp+tp, the layout search a pipeline.
    One output never gives two bare recommendations; the line names the closed forms and the search."""
    code = main(["plan", "train", "--model", "llama3-70b", "--tokens", "15e12", "--batch-tokens", "4e6",
                 "--hardware", "tpu-v5p", "--chips", "8960"])
    out = capsys.readouterr().out
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("recommendation:"))
    best = next(x for x in out.splitlines() if x.startswith("best layout "))
    assert "the book's closed forms" in line and "fsdp+tp" in line
    assert f"the layout search, which weighs those too, finds {best.split()[2].rstrip(':')}" in line


def test_serving_on_gpus_names_nvlink_and_says_when_the_group_leaves_the_node(capsys):
    """16-way model parallelism on H100s: the book's closed form is about NVLink, not ICI, and its
    16 chips span two 8-GPU domains, which the closed form prices at NVLink bandwidth throughout."""
    code = main(["plan", "serve", "--model", "llama3-405b", "--hardware", "h100", "--chips", "16", "--batch", "32",
                 "--context", "8192"])
    out = capsys.readouterr().out
    assert code == 0
    assert "NVLink-bound beyond" in out and "ICI" not in out
    assert "spans 2 NVLink domains of 8" in out
    mp = run_json(capsys, "serve", "--model", "llama3-405b", "--hardware", "h100", "--chips", "8", "--batch", "32",
                  "--context", "8192")["model_parallel"]
    assert mp["link"] == "NVLink" and "spans" not in mp["degree_note"]


def test_train_help_names_every_layout_key_the_readme_gives(capsys):
    """The planning page's `--layout ...[,schedule=,v=,flushes=]`: the help lists the same keys, and says what --mfu and
    --checkpoints-per-layer are for."""
    assert main(["plan", "train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "schedule=,v=,flushes=]" in text and "interleaved chunks per chip" in text
    assert "MFU assumed for the total training time" in text and "recomputed" in text


def test_serve_help_says_what_mfu_prices(capsys):
    assert main(["plan", "serve", "--help"]) == 0
    assert "MFU of prefill" in " ".join(capsys.readouterr().out.split())
