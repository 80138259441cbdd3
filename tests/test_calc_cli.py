"""`audit calc` through the real CLI entry point: JSON contract, terminal output, exit codes."""

from __future__ import annotations

import json

import pytest

from audit.cli import main

MATMUL_KEYS = {"flops", "bytes", "intensity", "ridge_intensity", "compute_s", "memory_s", "time_s", "bound_by"}
COLLECTIVE_KEYS = {"bytes", "group_size", "axes", "hops", "wraparound", "bandwidth_s", "latency_s",
                   "time_s", "bound_by"}
BOOK_GATHER = ["calc", "collective", "--op", "all-gather", "--shape", "bf16[2048,8192]",
               "--mesh", "X=8,Y=4", "--axes", "Y", "--hardware", "tpu-v5e:8x4"]


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv + ["--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def test_matmul_json_contract_and_book_number(capsys):
    # Ch. 9.2.4: the TPU v2 per-core up-projection is predicted at 95.6 ms.
    out = _json(capsys, ["calc", "matmul", "--m", "8192", "--k", "8192", "--n", "16384",
                         "--dtype", "bf16", "--hardware", "tpu-v2"])
    assert MATMUL_KEYS <= out.keys()
    assert out["flops"] == 2 * 8192 * 8192 * 16384
    assert out["bytes"] == 2 * (8192 * 8192 + 8192 * 16384 + 8192 * 16384)
    assert out["time_s"] == pytest.approx(95.6e-3, rel=0.002)
    assert out["bound_by"] == "compute"


def test_collective_json_contract_and_book_number(capsys):
    # Ch. 3, Pop Quiz 2: between 377 us (theory, with a wraparound) and 680 us (measured),
    # and it states it assumed no wraparound (a 4-long v5e axis has none).
    out = _json(capsys, BOOK_GATHER)
    assert COLLECTIVE_KEYS <= out.keys()
    assert out["bytes"] == 2048 * 8192 * 2 and out["group_size"] == 4 and out["axes"] == ["Y"]
    assert out["wraparound"] is False and out["hops"] == 3
    assert 377e-6 <= out["time_s"] <= 680e-6
    assert out["bound_by"] == "collective"


def test_collective_wraparound_option(capsys):
    out = _json(capsys, BOOK_GATHER + ["--wraparound", "yes"])
    assert out["wraparound"] is True
    assert out["time_s"] == pytest.approx(377e-6, rel=0.015)


def test_terminal_output_labels_units(capsys):
    assert main(BOOK_GATHER) == 0
    text = capsys.readouterr().out
    assert "expected time    559 µs (collective-bound)" in text
    assert "45.0 GB/s (without a wraparound)" in text
    assert main(["calc", "matmul", "--m", "128", "--k", "8192", "--n", "8192"]) == 0
    text = capsys.readouterr().out
    assert "FLOP/B" in text and "memory-bound" in text and "TFLOP/s" in text


def test_json_to_a_file(tmp_path, capsys):
    target = tmp_path / "calc.json"
    assert main(BOOK_GATHER + ["--json", str(target)]) == 0
    assert json.loads(target.read_text())["hops"] == 3


@pytest.mark.parametrize("argv, message", [
    (["--shape", "bf16[2048,8192"], "cannot read shape"),
    (["--shape", "q3[4]"], "unknown dtype"),
    (["--mesh", "X8,Y=4"], "cannot read mesh"),
    (["--axes", "Z"], "must name mesh axes"),
    (["--mesh", "X=4,Y=4"], "has 16 devices"),
    (["--hardware", "tpu-v9"], "unknown hardware"),
    (["--op", "all-scatter"], "unknown collective"),
    (["--wraparound", "maybe"], "maybe"),
])
def test_bad_collective_input_exits_2_with_one_line(argv, message, capsys):
    option, value = argv
    args = list(BOOK_GATHER)
    if option in args:
        args[args.index(option) + 1] = value
    else:
        args += [option, value]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and sum(message in line for line in err.splitlines()) == 1


def test_bad_matmul_input_exits_2(capsys):
    assert main(["calc", "matmul", "--m", "0", "--k", "8", "--n", "8"]) == 2
    assert main(["calc", "matmul", "--m", "8", "--k", "8", "--n", "8", "--dtype", "q7"]) == 2
    assert "unknown dtype" in capsys.readouterr().err


@pytest.mark.parametrize("precision, peak_key", [("default", "tf32"), ("highest", "f32")])
def test_matmul_ridge_is_the_ridge_of_the_roof_it_is_priced_on(capsys, precision, peak_key):
    # An f32 matmul JAX runs on TF32 turns compute-bound at the TF32 ridge (148 FLOP/B on H100),
    # not at true f32's (20 FLOP/B): the printed ridge and the bound must tell the same story.
    out = _json(capsys, ["calc", "matmul", "--m", "4096", "--k", "4096", "--n", "4096", "--dtype", "f32",
                         "--hardware", "h100", "--precision", precision])
    hw = _json(capsys, ["hardware", "show", "h100"])["quantities"]
    peak = hw[f"peak_flops_per_s.{peak_key}"]["value"]
    assert out["peak_flops_per_s"] == pytest.approx(peak)
    assert out["ridge_intensity"] == pytest.approx(peak / hw["hbm_bytes_per_s"]["value"])
    assert out["ridge_intensity"] == pytest.approx(out["peak_flops_per_s"] / out["hbm_bytes_per_s"])
