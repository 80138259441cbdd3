"""Users' hardware: `show --toml` files, `--hardware FILE.toml`, AUDIT_HARDWARE_PATH, `--set`, estimates marked."""

from __future__ import annotations

import json
import re

import pytest

from audit.cli import main
from audit.costmodel.chips import hwfile
from audit.costmodel.chips.catalog import CATALOG, lookup
from audit.costmodel.chips.overrides import apply, settable
from audit.base.errors import UsageError

from conftest import ROOT, render, shared_fixture

H100_HLO = "gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb"


@pytest.fixture(autouse=True)
def no_site_files(monkeypatch, tmp_path):
    monkeypatch.delenv("AUDIT_HARDWARE_PATH", raising=False)
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))


def _inspect(capsys, *args: str) -> dict:
    assert main(["inspect", str(shared_fixture(H100_HLO)), "--json", "-", "-q", *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_show_toml_reads_back_to_the_same_entry(tmp_path, capsys, name):
    path = tmp_path / f"{name}.toml"
    assert main(["hardware", "show", name, "--toml", str(path)]) == 0
    assert hwfile.load(path, "catalog") == CATALOG[name]
    assert main(["hardware", "show", name, "--toml"]) == 0
    assert capsys.readouterr().out == path.read_text()


def test_an_edited_file_is_used_and_its_figures_are_user(tmp_path, capsys):
    path = tmp_path / "my.toml"
    assert main(["hardware", "show", "h100", "--toml", str(path)]) == 0
    path.write_text(path.read_text().replace("value = 3.35e12", "value = 2.9e12"))
    report = _inspect(capsys, "--hardware", f"{path}:4")
    hw = report["hardware"]
    assert hw["name"] == "h100" and hw["source"] == "user" and hw["topology"] == [4]
    assert hw["hbm_bytes_per_s"] == pytest.approx(2.9e12) and hw["hbm_bytes_per_s_source"] == "user"
    assert set(hw["peak_flops_source"].values()) == {"user"}
    catalog = _inspect(capsys, "--hardware", "h100:4")
    memory = [o["name"] for o in report["ops"] if o["bound_by"] == "memory" and o["memory_s"]]
    assert memory, "the MaxText step has memory-bound ops"
    ours = {o["name"]: o["memory_s"] for o in report["ops"]}
    theirs = {o["name"]: o["memory_s"] for o in catalog["ops"]}
    # Slower HBM, slower memory-bound ops: by the ratio of the bandwidths where HBM is the roof.
    assert any(ours[n] == pytest.approx(theirs[n] * 3.35 / 2.9, rel=1e-6) for n in memory)
    assert all(ours[n] >= theirs[n] * (1 - 1e-9) for n in memory)


def test_a_file_keeps_its_estimates_marked_after_one_figure_is_edited(tmp_path, capsys):
    path = tmp_path / "my.toml"
    assert main(["hardware", "show", "h100", "--toml", str(path)]) == 0
    path.write_text(path.read_text().replace("value = 3.35e12", "value = 2.9e12"))
    report = _inspect(capsys, "--hardware", f"{path}:2x2")
    hw = report["hardware"]
    # The starting file says which figures are guesses; editing the HBM rate does not make them facts.
    assert "interconnect.dcn_bytes_per_s" in hw["estimates"] and "caches.L2.bytes_per_s" in hw["estimates"]
    assert "hbm_bytes_per_s" not in hw["estimates"]
    for fmt in ("terminal", "markdown", "html"):
        assert "user, estimate" in render(report, fmt), fmt
    cross = [c for c in report["collectives"] if c["link"] == "dcn" and c["bound_by"] == "collective"]
    assert cross and all("--set scale_out_bytes_per_s=" in c["note"] for c in cross)


def test_set_changes_one_figure_for_one_run_and_marks_it_user(capsys):
    report = _inspect(capsys, "--hardware", "h100:2x2", "--set", "scale_out_bytes_per_s=12.5e9",
                      "--set", "peak_flops_per_s.bf16=8e14")
    hw = report["hardware"]
    assert hw["peak_flops_per_s"]["bf16"] == 8e14 and hw["peak_flops_source"]["bf16"] == "user"
    assert hw["peak_flops_source"]["f32"] == "catalog"
    assert hw["interconnect"]["dcn_bytes_per_s"]["source"] == "user"
    assert "interconnect.dcn_bytes_per_s" not in hw["estimates"]
    assert any("--set" in n and "12.5e9" in n for n in hw["notes"])
    cross = [c for c in report["collectives"] if c["link"] == "dcn"]
    assert cross and all(c["peak_bytes_per_s"] == 12.5e9 for c in cross)
    terminal, markdown, html = (render(report, f) for f in ("terminal", "markdown", "html"))
    assert "bf16 800 TFLOP/s [user" in terminal
    assert "bf16 800 TFLOP/s (user" in markdown
    assert "inter-node network 12.5 GB/s per device [user]" in terminal
    assert "inter-node network 12.5 GB/s per device \\[user\\]" in markdown
    assert re.search(r"12\.5 GB/s per device <span class=\"src\">user</span>", html)
    assert lookup("h100").peak("bf16").value == pytest.approx(9.894e14)  # the catalog is untouched


def test_the_hardware_line_gives_the_links_bandwidth_and_source(capsys):
    """The terminal and markdown head named the link ('..., NVLink') with no figure unless the user
    stated one; the HTML head gave it. Every format now says which bandwidth prices the collectives."""
    report = _inspect(capsys, "--hardware", "h100:4")
    terminal, markdown = render(report, "terminal"), render(report, "markdown")
    assert "NVLink 450 GB/s per device [catalog]" in terminal
    assert "NVLink 450 GB/s per device \\[catalog\\]" in markdown
    assert "inter-node network" not in terminal.splitlines()[1]  # the estimate is named where it prices an op


def test_cross_node_collectives_priced_on_an_estimate_say_so(capsys):
    report = _inspect(capsys, "--hardware", "h100:2x2")
    assert "interconnect.dcn_bytes_per_s" in report["hardware"]["estimates"]
    cross = [c for c in report["collectives"] if c["link"] == "dcn" and c["bound_by"] == "collective"]
    assert cross
    for c in cross:
        assert "priced on an estimate" in c["note"] and "--set scale_out_bytes_per_s=" in c["note"]
    op = next(o for o in report["ops"] if o["name"] == cross[0]["name"])
    assert any("--set scale_out_bytes_per_s=" in r for r in op["reasons"])
    # Within one NVLink domain the datasheet bandwidth decides: no such warning.
    inside = _inspect(capsys, "--hardware", "h100:4")
    assert not any("scale_out_bytes_per_s" in c["note"] for c in inside["collectives"])


def test_estimates_are_marked_in_every_format(capsys):
    report = _inspect(capsys, "--hardware", "h100:4")
    assert "caches.L2.bytes_per_s" in report["hardware"]["estimates"]
    for fmt in ("terminal", "markdown", "html"):
        text = render(report, fmt)
        assert "catalog, estimate" in text, fmt
    assert "[catalog, estimate]" in _show(capsys, "h100")


def _show(capsys, *args: str) -> str:
    assert main(["hardware", "show", *args]) == 0
    return capsys.readouterr().out


def test_site_directory_adds_a_chip_with_no_python(tmp_path, capsys, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    text = hwfile.dumps(CATALOG["h100"]).replace('name = "h100"', 'name = "lab-h100"').replace(
        'aliases = ["h100-sxm", "h100-sxm5"]', 'aliases = ["labgpu"]').replace(
        'trace_names = ["h100"]', 'trace_names = ["labgpu"]').replace("value = 3.35e12", "value = 3.0e12")
    (site / "lab.toml").write_text(text)
    monkeypatch.setenv("AUDIT_HARDWARE_PATH", f"{tmp_path / 'absent'}:{site}")
    assert main(["hardware", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("lab-h100 "))
    assert row.endswith(str(site / "lab.toml")) and "3,000" in row
    assert str(site / "lab.toml") in _show(capsys, "labgpu:4")
    report = _inspect(capsys, "--hardware", "lab-h100:4")
    hw = report["hardware"]
    assert hw["name"] == "lab-h100" and hw["hbm_bytes_per_s"] == 3e12 and hw["hbm_bytes_per_s_source"] == "user"
    assert report["summary"]["expected_s"] > 0 and len(report["ops"]) > 100
    # Traces that name it are detected as it too.
    from audit.costmodel.chips.detect import hardware_from_trace

    assert hardware_from_trace("gpu", {"/device:GPU:0": {"device_name": "LabGPU 80GB"}}).name == "lab-h100"


def test_a_bad_site_file_names_file_key_and_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "bad.toml").write_text(hwfile.dumps(CATALOG["a100"]).replace("domain_size = 8", "domain_size = -8.5"))
    monkeypatch.setenv("AUDIT_HARDWARE_PATH", str(tmp_path))
    assert main(["hardware", "list"]) == 2
    err = capsys.readouterr().err.strip()
    line = hwfile.key_lines((tmp_path / "bad.toml").read_text())["interconnect.domain_size"]
    assert err == (f"audit: error: {tmp_path / 'bad.toml'}: key 'interconnect.domain_size' (line {line}): "
                   "expected an integer, got a number (-8.5)")


@pytest.mark.parametrize(("key", "line_text", "words"), [
    ("compute_units", 'compute_units = { value = 0.5, unit = "units", kind = "datasheet", source = "x" }',
     "key 'achievable.compute_units.value' (line {line}): expected a whole number from 1 to 1,048,576"),
    ("compute_units", 'compute_units = { value = inf, unit = "units", kind = "datasheet", source = "x" }',
     "key 'achievable.compute_units.value' (line {line}): expected a finite number >= 0, got inf"),
    ("hbm_bytes_per_s", 'hbm_bytes_per_s = { value = inf, unit = "B/s", kind = "datasheet", source = "x" }',
     "key 'hbm_bytes_per_s.value' (line {line}): expected a finite number >= 0, got inf"),
    ("devices_per_chip", "devices_per_chip = -4",
     "key 'devices_per_chip' (line {line}): expected an integer from 1 to 1,048,576, got -4"),
    ("links_per_axis", "links_per_axis = -1",
     "key 'interconnect.links_per_axis' (line {line}): expected an integer from 0 to 1,048,576, got -1"),
])
def test_a_hardware_file_number_out_of_range_is_refused_naming_its_key(tmp_path, capsys, key, line_text, words):
    # GIVEN the catalog's H100 file with one number no chip has (half an SM, an infinite bandwidth, a negative count)
    lines = (ROOT / "costmodel" / "chips" / "data" / "h100.toml").read_text().splitlines()
    at = next(i for i, text in enumerate(lines) if text.startswith(f"{key} = "))
    lines[at] = line_text
    path = tmp_path / "h100.toml"
    path.write_text("\n".join(lines) + "\n")
    # WHEN a command reads it THEN one line names the key, its line and the range (exit 4, or a figure, before)
    assert main(["inspect", str(ROOT / "tests" / "data" / "hlo" / "diff_base.hlo"), "-q", "--hardware", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: {words.format(line=at + 1)}" in err, err


def test_more_cache_levels_than_a_chip_has_are_refused(tmp_path, capsys):
    # 63 levels passed the file reader and only the C residency walk refused them (exit 4); the Python walk took them
    text = (ROOT / "costmodel" / "chips" / "data" / "h100.toml").read_text()
    start = text.index("[[caches]]")
    end = text.index("\n\n", start)
    path = tmp_path / "deep.toml"
    path.write_text(text[:start] + "\n".join([text[start:end]] * 63) + text[end:])
    assert main(["inspect", str(ROOT / "tests" / "data" / "hlo" / "diff_base.hlo"), "-q", "--hardware", str(path)]) == 2
    assert "key 'caches': 63 cache levels" in capsys.readouterr().err


def test_bad_hardware_file_on_the_command_line_exits_2(tmp_path, capsys):
    path = tmp_path / "typo.toml"
    path.write_text(hwfile.dumps(CATALOG["h100"]).replace("hbm_bytes_per_s =", "hbm_byte_per_s ="))
    assert main(["calc", "matmul", "--m", "8", "--k", "8", "--n", "8", "--hardware", str(path)]) == 2
    err = capsys.readouterr().err
    line = 1 + path.read_text().splitlines().index(
        next(t for t in path.read_text().splitlines() if t.startswith("hbm_byte_per_s =")))
    assert f"{path}: key 'hbm_byte_per_s' (line {line}): unknown key (did you mean hbm_bytes_per_s" in err
    assert err.count("\n") == 1
    assert main(["calc", "matmul", "--m", "8", "--k", "8", "--n", "8", "--hardware", str(tmp_path / "no.toml")]) == 2
    assert "no hardware file" in capsys.readouterr().err


@pytest.mark.parametrize("args, words", [
    (["--set", "scale_out_byte_per_s=1e9"], ["no such hardware figure", "close keys: scale_out_bytes_per_s"]),
    (["--set", "peak_flops.bf16=fast"], ["not a number"]),
    (["--set", "node_gpus=2.5"], ["whole number"]),
    (["--set", "hbm_bytes_per_s"], ["is not KEY=VALUE"]),
    (["--set", "hbm_bytes_per_s=-1"], ["finite number >= 0"]),
    # A rate of zero would divide every op's time by zero: refused, not an internal error.
    (["--set", "peak_flops.bf16=0"], ["number > 0 for a figure in FLOP/s"]),
    (["--set", "caches.L2.bytes_per_s=0"], ["number > 0 for a figure in B/s"]),
    (["--set", "achievable.compute_units=0"], ["whole number from 1"]),
    # Half a compute unit, or millions of devices per chip, priced waves of a fraction (exit 4) or nonsense
    (["--set", "achievable.compute_units=0.5"], ["whole number from 1"]),
    (["--set", "devices_per_chip=5000000"], ["whole number from 1 to 1,048,576"]),
])
def test_bad_set_is_one_line_and_exit_2(capsys, args, words):
    assert main(["calc", "matmul", "--m", "8", "--k", "8", "--n", "8", "--hardware", "h100", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(w in err for w in words), err


def test_set_on_calc_plan_and_show(capsys):
    assert main(["calc", "matmul", "--m", "4096", "--k", "4096", "--n", "4096", "--hardware", "h100",
                 "--set", "peak_flops.bf16=4.947e14", "--json", "-"]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert main(["calc", "matmul", "--m", "4096", "--k", "4096", "--n", "4096", "--hardware", "h100", "--json", "-"]) == 0
    fast = json.loads(capsys.readouterr().out)
    assert slow["compute_s"] == pytest.approx(2 * fast["compute_s"])
    assert main(["plan", "train", "--model", "llama3-8b", "--tokens", "1e12", "--batch-tokens", "4e6",
                 "--hardware", "h100:8", "--set", "hbm_bytes=40e9", "--json", "-"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["hardware"]["hbm_bytes"]["value"] == 40e9 and plan["hardware"]["hbm_bytes"]["source"] == "user"
    assert main(["plan", "train", "--model", "llama3-8b", "--tokens", "1e12", "--batch-tokens", "4e6",
                 "--hardware", "h100:8", "--json", "-"]) == 0
    catalog = json.loads(capsys.readouterr().out)
    # half the memory per chip: about twice the chips to hold the model
    assert plan["min_chips_by_memory"] >= 2 * catalog["min_chips_by_memory"] - 1
    out = _show(capsys, "h100", "--set", "node_gpus=4")
    assert "NVLink x4" in out and "from --set" in out


def test_node_gpus_and_nics_set_the_scale_out_figures():
    hw = apply(lookup("a100"), [("nics_per_node", "4"), ("nic_bytes_per_s", "2.5e10"), ("node_gpus", "4")])
    net = hw.interconnect
    assert (net.domain_size, net.node_size, net.nics_per_node) == (4, 4, 4)
    assert net.dcn_bytes_per_s.value == pytest.approx(2.5e10) and net.dcn_bytes_per_s.source == "user"
    stated = apply(lookup("a100"), {"nics_per_node": 1, "scale_out_bytes_per_s": 1e10})
    assert stated.interconnect.dcn_bytes_per_s.value == 1e10  # a stated figure wins over the derived one


def test_every_listed_key_can_be_set():
    hw = lookup("mi300x")
    keys = sorted(settable(hw))
    assert {"peak_flops.bf16", "interconnect.dcn_bytes_per_s", "caches.Infinity Cache.bytes_per_s",
            "interconnect.domain_size", "detection.boost_clock_hz"} <= set(keys)
    for key in keys:
        changed = apply(hw, [(key, "7")])
        assert changed != hw, key
    with pytest.raises(UsageError, match="no such hardware figure"):
        apply(hw, [("caches.L9.bytes_per_s", "1")])


def test_the_issues_cross_node_all_to_all_names_the_estimate_and_the_fix(capsys):
    args = ["calc", "collective", "--op", "all-to-all", "--shape", "c64[4096,4096]", "--mesh", "X=16", "--axes", "X",
            "--hardware", "a100:2x8", "--json", "-"]
    assert main(args) == 0
    guessed = json.loads(capsys.readouterr().out)
    assert guessed["link"] == "dcn" and guessed["bound_by"] == "collective"
    assert any("priced on an estimate" in n and "--set scale_out_bytes_per_s=" in n for n in guessed["notes"])
    assert main(args + ["--set", "scale_out_bytes_per_s=12.5e9"]) == 0
    stated = json.loads(capsys.readouterr().out)
    assert not any("estimate" in n for n in stated["notes"])
    assert stated["bandwidth_s"] == pytest.approx(guessed["bandwidth_s"] * 2.5e10 / 12.5e9)


def test_diff_takes_a_hardware_file_and_set_for_its_dump_sides(tmp_path, capsys):
    from audit.library.calls import side_reports

    path = tmp_path / "mine.toml"
    assert main(["hardware", "show", "h100", "--toml", str(path)]) == 0
    dump = str(shared_fixture(H100_HLO))
    assert main(["diff", dump, dump, "--hardware", f"{path}:4", "--set", "peak_flops.bf16=5e14", "--json", "-",
                 "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["base"]["hardware"] == "h100"
    (side,) = side_reports(dump, f"{path}:4", {"peak_flops.bf16": 5e14})
    assert side["hardware"]["peak_flops_per_s"]["bf16"] == 5e14 and side["hardware"]["source"] == "user"
    assert side["hardware"]["peak_flops_source"]["bf16"] == "user"
