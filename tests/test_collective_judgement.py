"""Collectives judged on what the trace measured: a collective the schedule hides is not waste
unless its overlap was measured; the estimate that prices a cross-node collective is named in
every format; the JSON carries no negative zero or rounding-error negative."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import render, shared_fixture
from audit.cli import main
from audit.reports.json_report import render_json

HLO = Path(__file__).resolve().parent / "data" / "hlo"


@pytest.fixture(scope="module")
def pax() -> dict:
    # 4 A100s over 4 processes (nsys-jax), FSDP: async collectives whose -done the thunk ranges do not show.
    from audit.orchestration.pipeline import analyse_profile
    return analyse_profile(str(shared_fixture("gpu-a100-pax-nsys-jax"))).to_json()


def test_a_collective_the_schedule_hides_is_not_waste_when_its_overlap_is_unmeasured(pax):
    ops = {o["name"]: o for o in pax["ops"]}
    rs = ops["reduce-scatter-start"]
    # It took ~4.3 ms per run against ~1.1 ms achievable, but the schedule hides it behind compute and
    # the trace cannot say whether it overlapped: no flag, no wasted time, and the reason says why.
    assert rs["overlapped"] is None and rs["exposed_s"] == 0 and rs["hidden_s"] > 0
    assert rs["verdict"] == "not judged" and not rs["flagged"] and rs["wasted_s"] is None
    assert rs["reasons"][0].startswith("hidden by the schedule, overlap not measured")
    assert not any(o["flagged"] for o in pax["ops"] if o.get("collective"))
    # A collective the schedule leaves exposed is still judged (or not judged for another reason).
    exposed = [o for o in pax["ops"] if o["comm_bytes"] and o.get("window_compute_s") is not None
               and o["exposed_s"] > o["hidden_s"]]
    assert exposed and all(not o["reasons"][0].startswith("hidden by the schedule") for o in exposed)


def _numbers(value, path=""):
    if isinstance(value, float):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")


def test_no_negative_zero_or_rounding_negative_in_the_json(pax):
    text = render_json(pax)
    doc = json.loads(text)
    for path, x in _numbers(doc):
        if path.endswith(("hidden_s", "exposed_s", "hidden_comm_s", "exposed_comm_s", "wasted_s")):
            assert x >= 0 and math.copysign(1.0, x) > 0, (path, x)
    assert render_json({"x": -0.0, "y": [0.0, -0.0]}) == '{"x":0.0,"y":[0.0,0.0]}\n'


def test_the_inter_node_rate_that_prices_a_collective_is_named_an_estimate_in_every_format(capsys):
    # 8 partitions on h100:4 nodes: the all-reduce crosses the inter-node network, whose per-device
    # rate is the catalog's estimate; the terminal and markdown say so, not only the JSON.
    assert main(["inspect", str(HLO / "caveats.hlo"), "--hardware", "h100:4", "--allow-smaller",
                 "--json", "-", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert any(c["link"] == "dcn" for c in report["collectives"])
    assert "interconnect.dcn_bytes_per_s" in report["hardware"]["estimates"]
    for fmt in ("terminal", "markdown", "html"):
        text = render(report, fmt)
        assert "inter-node network" in text and "50.0 GB/s" in text
        line = next(x for x in text.splitlines() if "50.0 GB/s" in x)
        assert "estimate" in line, (fmt, line)
    # Within one node nothing crosses: the terminal does not list the scale-out rate.
    assert main(["inspect", str(HLO / "caveats.hlo"), "--hardware", "h100:8", "--json", "-", "--quiet"]) == 0
    inside = json.loads(capsys.readouterr().out)
    assert "inter-node network" not in render(inside, "terminal").splitlines()[1]
