"""`--set` moves what derives from the figure it changes: what good kernels reach is a share of a
ceiling, so an achievable rate follows its ceiling (or says it cannot), and no achievable time
falls below the roofline (a lower bound no kernel beats) because a ceiling was lowered."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings, strategies as st

from audit.cli import main
from audit.base.errors import ExitCode
from audit.hardware_options import resolve_hardware
from audit.costmodel.napkin import matmul
from conftest import shared_fixture

CEILINGS = ("peak_flops.bf16", "peak_flops.f32", "hbm_bytes_per_s", "caches.L2.bytes_per_s",
            "interconnect.link_bytes_per_s", "interconnect.dcn_bytes_per_s")


def test_a_lower_peak_moves_the_achievable_matmul_rate_and_says_so(capsys):
    assert main(["calc", "matmul", "--m", "4096", "--k", "8192", "--n", "8192", "--hardware", "h100",
                 "--set", "peak_flops.bf16=5e14", "--json", "-"]) == ExitCode.OK
    result = json.loads(capsys.readouterr().out)
    assert result["achievable_s"] >= result["time_s"]
    hw = resolve_hardware("h100", (("peak_flops.bf16", "5e14"),))
    catalog = resolve_hardware("h100")
    assert hw.achievable is not None and catalog.achievable is not None
    moved = hw.achievable.matmul_flops_per_s["bf16"]
    was = catalog.achievable.matmul_flops_per_s["bf16"]
    assert moved.source == "user" and math.isclose(moved.value / 5e14, was.value / catalog.peak_flops["bf16"].value)
    assert any(n.startswith("achievable.matmul_flops_per_s.bf16 = ") and "follows --set peak_flops.bf16" in n
               for n in hw.notes)


def test_an_achievable_figure_the_user_sets_too_is_left_as_set():
    hw = resolve_hardware("h100", (("peak_flops.bf16", "5e14"), ("achievable.matmul_flops_per_s.bf16", "4.5e14")))
    assert hw.achievable is not None and hw.achievable.matmul_flops_per_s["bf16"].value == 4.5e14


@settings(max_examples=40, deadline=None)
@given(chip=st.sampled_from(["h100", "a100", "mi300x", "tpu-v5e"]), key=st.sampled_from(CEILINGS),
       factor=st.floats(0.05, 20.0), size=st.sampled_from([256, 2048, 8192]),
       dtype=st.sampled_from(["bf16", "f32"]))
def test_no_ceiling_set_lower_or_higher_puts_a_matmul_below_its_roofline(chip, key, factor, size, dtype):
    base = resolve_hardware(chip)
    parts = key.split(".")
    old: object = base
    for part in parts:
        old = old.get(part) if isinstance(old, dict) else (
            next((c for c in old if c.name == part), None) if isinstance(old, tuple) else getattr(old, part, None))
        if old is None:
            return  # the chip states no such figure
    hw = resolve_hardware(chip, ((key, f"{old.value * factor:.6g}"),))
    result = matmul(size, size, size, dtype, hw)
    assert result["achievable_s"] >= result["time_s"] * (1 - 1e-9)


def test_the_hardware_pages_two_node_example_leaves_no_collective_below_its_roofline(tmp_path, capsys):
    job = tmp_path / "job"
    job.mkdir()
    for i in range(4):
        (job / f"proc{i}.zip").symlink_to(shared_fixture(f"gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc{i}.zip"))
    out = tmp_path / "two.json"
    assert main(["inspect", str(job), "--set", "scale_out_bytes_per_s=12.5e9", "--set", "node_gpus=2",
                 "--json", str(out), "--markdown", str(tmp_path / "two.md")]) == ExitCode.OK
    said = capsys.readouterr().out  # the summary names what the user changed and what moved with it
    for text in (said, (tmp_path / "two.md").read_text().replace("\\_", "_")):
        assert "interconnect.dcn_bytes_per_s = 12.5e9 from --set" in text
        assert "achievable.collective_bytes_per_s.scale_out = " in text and "follows --set" in text
    report = json.loads(out.read_text())
    below = [o["name"] for o in report["ops"] if o.get("expected_s") and o.get("achievable_s") is not None
             and o["achievable_s"] < o["expected_s"] * (1 - 1e-9)]
    assert not below
    notes = report["hardware"]["notes"]
    assert any("achievable.collective_bytes_per_s.scale_out" in n and "follows --set" in n for n in notes)
    assert any(n.startswith("interconnect.dcn_bytes_per_s = 12.5e9 from --set") for n in notes)
