"""Honest reports: loops counted once, a topology too small for the program, unknown custom calls,
vendor-correct link names and the peaks that priced the ops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import render
from jaxlib import _hlo

from audit.cli import main
from audit.costmodel.chips.catalog import lookup
from audit.costmodel.network.collectives import collective_time
from audit.costmodel.network.topology import place_group
from audit.orchestration.pipeline import analyse_hlo

HLO = Path(__file__).resolve().parent / "data" / "hlo"
CAVEATS = HLO / "caveats.hlo"  # 8 partitions; a while with a data-dependent exit; three opaque custom calls

BF16_DOT = """HloModule dot

ENTRY main {
  a = bf16[4096,4096]{1,0} parameter(0)
  b = bf16[4096,4096]{1,0} parameter(1)
  ROOT d = bf16[4096,4096]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_the_module_parses_with_xlas_own_parser():
    assert _hlo.hlo_module_from_text(CAVEATS.read_text()) is not None
    assert _hlo.hlo_module_from_text(BF16_DOT) is not None


@pytest.fixture(scope="module")
def report():
    return analyse_hlo(CAVEATS, hardware="h100:8").to_json()


def test_a_loop_without_a_trip_count_is_named_with_the_ops_it_holds(report):
    # body: 7 instructions, condition: 4; both counted once.
    assert report["summary"]["unknown_trip_count_loops"] == [{"program_id": 0, "name": "loop", "ops": 11}]
    assert report["summary"]["unknown_trip_count_ops"] == 11
    (line,) = [w for w in report["warnings"] if "no known trip count" in w]
    assert "1 while loop(s)" in line and "11 op(s)" in line and "loop (11 ops)" in line and "lower bound" in line


def test_unknown_custom_calls_are_grouped_by_target(report):
    (line,) = [w for w in report["warnings"] if "no cost model" in w]
    assert "custom-call my_vendor_kernel x2" in line and "custom-call another_kernel x1" in line
    assert report["summary"]["unmodeled_ops"] == 3


def test_every_format_carries_the_warnings(report):
    for text in (render(report, "terminal"), render(report, "markdown").replace("\\", ""), render(report, "html")):
        assert "no known trip count" in text
        assert "my_vendor_kernel x2" in text


def test_a_topology_smaller_than_the_program_exits_2_with_one_line(capsys):
    assert main(["inspect", str(CAVEATS), "--hardware", "h100:4", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "spans 8 devices" in err and "--allow-smaller" in err


def test_allow_smaller_prices_it_with_an_explicit_note(capsys):
    assert main(["inspect", str(CAVEATS), "--hardware", "h100:4", "--allow-smaller", "--json", "-", "--quiet"]) == 0
    r = json.loads(capsys.readouterr().out)
    (note,) = [w for w in r["warnings"] if w.startswith("--allow-smaller")]
    assert "8 devices" in note and "2 h100:4 nodes over the inter-node network" in note
    (ar,) = r["collectives"]
    assert ar["link"] == "dcn" and "inter-node network" in ar["note"]


@pytest.mark.parametrize(("chip", "name", "wrong"), [("h100:8", "NVLink", "Infinity Fabric"),
                                                     ("mi355x:8", "Infinity Fabric (xGMI)", "NVLink"),
                                                     ("mi300x:8", "Infinity Fabric (xGMI)", "NVLink")])
def test_gpu_collectives_name_their_vendors_link(chip, name, wrong):
    hw = lookup(chip)
    inside = collective_time("all-gather", 1e8, place_group(range(8), hw), hw)
    assert any(name in n for n in inside.notes) and not any(wrong in n for n in inside.notes)
    across = collective_time("all-gather", 1e8, place_group(range(16), lookup(chip.split(":")[0] + ":2x8")),
                             lookup(chip.split(":")[0] + ":2x8"))
    assert across.link == "dcn" and any("inter-node network" in n and name in n for n in across.notes)
    assert not any("DCN" in n for n in across.notes)


def test_tpu_slices_are_joined_over_dcn():
    hw = lookup("tpu-v5e")
    t = collective_time("all-gather", 1e8, place_group(range(512), hw), hw)
    assert t.link == "dcn" and any("DCN" in n and "ICI slices" in n for n in t.notes)


@pytest.mark.parametrize("chip", ["mi355x", "b200", "h100", "tpu-v5e"])
def test_the_hardware_line_shows_the_peak_that_priced_the_dot(tmp_path, chip):
    path = tmp_path / "dot.hlo"
    path.write_text(BF16_DOT)
    r = analyse_hlo(path, hardware=chip).to_json()
    hw = lookup(chip)
    (used,) = r["hardware"]["peaks_used"]
    assert used["peak"] == "bf16" and used["flops_per_s"] == hw.peak_flops["bf16"].value and used["ops"] == 1
    md = render(r, "markdown")
    line = next(ln for ln in md.splitlines() if ln.startswith("**Hardware:**"))
    assert "bf16" in line and "1 ops" in line
    assert "bf16" in next(ln for ln in render(r, "terminal").splitlines() if ln.startswith("hardware:"))
    assert "priced 1 ops" in render(r, "html")


def test_the_summary_counts_unmodeled_ops_by_target(report):
    assert report["summary"]["unmodeled_by_target"] == {"custom-call my_vendor_kernel": 2,
                                                        "custom-call another_kernel": 1}


def test_run_checks_the_topology_before_running_anything(capsys, tmp_path):
    # The bundled workload runs on 8 simulated devices: h100:4 is too small, and nothing may run.
    assert main(["run", "--hardware", "h100:4", "--out", str(tmp_path / "never"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "spans 8 devices" in err
    assert not (tmp_path / "never").exists()
