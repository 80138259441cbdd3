"""Opaque kernels (Pallas/Mosaic, Triton, vendor calls) get a lower bound, never a silent 0.

The TPU profile is built with the protobuf builders of test_events_tpu, as libtpu writes one:
a Pallas matmul f32[2048,1024] x f32[1024,2048] as a `tpu_custom_call` with no cost
estimate, launched 3 times at 75.75 us, its FLOPs stated by the trace, its HLO embedded.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from jaxlib import _hlo

from audit.costmodel.chips.catalog import CATALOG
from audit.orchestration.pipeline import analyse_hlo, analyse_profile
from audit.parsers.xplane.schema import XSpace
from conftest import shared_fixture
from test_events_tpu import LINE_NS, PROGRAM, PROGRAM_AS_INT64, _Plane

M, K, N = 2048, 1024, 2048
LAUNCH_PS = 75_750_000  # 75.75 us
MATMUL_FLOPS = 2 * M * K * N
PALLAS_HLO = f"""HloModule jit_matmul, entry_computation_layout={{(f32[{M},{K}]{{1,0}}, f32[{K},{N}]{{1,0}})->f32[{M},{N}]{{1,0}}}}

ENTRY main {{
  x = f32[{M},{K}]{{1,0}} parameter(0)
  y = f32[{K},{N}]{{1,0}} parameter(1)
  ROOT matmul = f32[{M},{N}]{{1,0}} custom-call(x, y), custom_call_target="tpu_custom_call", backend_config={{"custom_call_config": {{"body": "TUzvUgFNTElS"}}}}
}}
"""


def _pallas_profile(tmp_path: Path, *, stated_flops: bool = True, stated_bytes: int | None = None) -> Path:
    space = XSpace(hostnames=["t1v"])
    meta = _Plane(space.planes.add(name="/host:metadata"))
    entry = meta.plane.event_metadata[PROGRAM_AS_INT64]
    entry.id, entry.name = PROGRAM_AS_INT64, f"jit_matmul({PROGRAM})"
    meta.add_stat(entry.stats, "Hlo Proto", _hlo.hlo_module_from_text(PALLAS_HLO).as_serialized_hlo_module_proto())
    plane = _Plane(space.planes.add(name="/device:TPU:0", id=0))
    for key, value in {"device_type_string": "TPU v6 Lite", "peak_teraflops_per_second": 918.0,
                       "peak_hbm_bw_gigabytes_per_second": 1640.0}.items():
        plane.add_stat(plane.plane.stats, key, value)
    stats = {"flops": MATMUL_FLOPS} if stated_flops else {}
    if stated_bytes is not None:
        stats["bytes_accessed"] = stated_bytes
    plane.metadata(1, "%matmul = f32[2048,2048]{1,0} custom-call(...)", "matmul", symbol_id=1,
                   program_id=PROGRAM, **stats)
    plane.metadata(9, f"jit_matmul({PROGRAM})")
    modules = plane.plane.lines.add(id=2, name="XLA Modules", timestamp_ns=LINE_NS)
    ops = plane.plane.lines.add(id=3, name="XLA Ops", timestamp_ns=LINE_NS)
    for launch in range(3):
        t0 = LINE_NS * 1000 + launch * 200_000_000
        plane.event(modules, 9, t0, 100_000_000, run_id=launch + 1)
        plane.event(ops, 1, t0 + 1_000_000, LAUNCH_PS)
    path = tmp_path / "t1v.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


def _only_op(report: dict) -> dict:
    ops = [o for o in report["ops"] if not o["container"]]
    assert [o["name"] for o in ops] == ["matmul"]
    return ops[0]


def test_pallas_matmul_without_a_cost_estimate_is_judged_on_a_lower_bound(tmp_path):
    report = analyse_profile(_pallas_profile(tmp_path)).to_json()
    assert report["hardware"]["name"] == "tpu-v6e"
    op = _only_op(report)
    assert op["occurrences"] == 3 and op["measured_s"] == pytest.approx(3 * 75.75e-6)
    # It must read both operands and write the result: 33.5 MB at the HBM roof, and do the FLOPs
    # the trace states at the peak: the expected time is the larger, per launch.
    moved = 4 * (M * K + K * N + M * N)
    assert op["bytes"] == pytest.approx(3 * moved)
    assert op["flops"] == pytest.approx(3 * MATMUL_FLOPS) and op["provenance"]["flops"] == "trace"
    memory_s, compute_s = op["memory_s"] / 3, op["compute_s"] / 3
    assert compute_s == pytest.approx(MATMUL_FLOPS / op["peak_flops_per_s"])
    hbm = report["hardware"]["hbm_bytes_per_s"]
    assert hbm >= CATALOG["tpu-v6e"].hbm_bytes_per_s.value  # the trace's 1640 GB/s, the higher roof
    assert memory_s == pytest.approx(moved / hbm)
    assert op["expected_s"] / 3 == pytest.approx(max(memory_s, compute_s))
    assert 10e-6 < op["expected_s"] / 3 < 75.75e-6
    assert op["lower_bound"].startswith("opaque Mosaic kernel")
    assert any(r.startswith("lower bound:") for r in op["reasons"])
    assert any("FLOPs stated by the trace" in r for r in op["reasons"])
    # It takes the whole step at under half its bound, but its bytes bind that bound (the trace's
    # FLOPs do not): a lower bound cannot show it slow, so it is "bound only", not flagged (the real
    # v6e capture's Pallas kernel was flagged "memory-bound: reached 443 GB/s ... 3.7x").
    assert op["efficiency"] < 0.5 and op["memory_s"] > op["compute_s"]
    assert not op["flagged"] and op["verdict"] == "bound only"
    # What bounds the kernel itself is unknown: the summary does not call the step memory-bound.
    assert op["bound_by"] == "unknown"
    assert report["summary"]["time_by_bound_s"]["memory"] == 0
    assert op["reasons"][0].startswith("bound only: opaque Mosaic kernel with FLOPs that do not bound it")
    summary = report["summary"]
    assert summary["expected_s"] == pytest.approx(op["expected_s"]) and summary["expected_s"] > 0
    assert summary["unmodeled_ops"] == 1 and summary["lower_bound_ops"] == 1
    assert summary["flagged_ops"] == 0
    assert any("1 priced on a lower bound only" in w for w in report["warnings"])


def test_without_stated_flops_the_bytes_alone_bound_it(tmp_path):
    report = analyse_profile(_pallas_profile(tmp_path, stated_flops=False)).to_json()
    op = _only_op(report)
    assert op["flops"] is None and op["provenance"]["flops"] == "unknown"
    assert op["compute_s"] is None and op["expected_s"] == pytest.approx(op["memory_s"]) and op["expected_s"] > 0
    assert op["bound_by"] == "unknown" and op["lower_bound"]
    assert report["summary"]["expected_s"] == pytest.approx(op["expected_s"])
    assert report["summary"]["unmodeled_ops"] == 1
    # A bytes-only lower bound cannot show a kernel slow: it runs at under half of it and takes the
    # whole step, yet it is not flagged and wastes nothing; its verdict says what is missing.
    assert op["efficiency"] < 0.5
    assert not op["flagged"] and op["verdict"] == "bound only" and op["wasted_s"] is None
    assert op["reasons"][0].startswith("bound only: opaque Mosaic kernel with no stated FLOPs")
    assert report["summary"]["flagged_ops"] == 0


def test_the_bytes_shown_are_the_bytes_its_bound_uses(tmp_path):
    # A trace that states 0 bytes accessed for the kernel (as for a custom call XLA cannot cost):
    # the JSON said bytes 0 beside a bound on the 33.5 MB the kernel must move.
    report = analyse_profile(_pallas_profile(tmp_path, stated_bytes=0)).to_json()
    op = _only_op(report)
    moved = 4 * (M * K + K * N + M * N)
    assert op["bytes"] == pytest.approx(3 * moved) and op["provenance"]["bytes"] == "model"
    assert op["memory_s"] == pytest.approx(op["bytes"] / report["hardware"]["hbm_bytes_per_s"])
    assert op["achieved_bytes_per_s"] == pytest.approx(op["bytes"] / op["measured_s"])
    # More than its operands and results (a kernel that re-reads them): the trace's figure bounds it.
    more = analyse_profile(_pallas_profile(tmp_path, stated_bytes=2 * moved)).to_json()
    op = _only_op(more)
    assert op["bytes"] == pytest.approx(3 * 2 * moved) and op["provenance"]["bytes"] == "trace"
    assert op["memory_s"] == pytest.approx(op["bytes"] / more["hardware"]["hbm_bytes_per_s"])


def test_an_op_the_hlo_prices_shows_the_hlos_bytes_not_the_traces(tmp_path, monkeypatch):
    import test_opaque_kernels as this

    monkeypatch.setattr(this, "PALLAS_HLO", _pallas_with_estimate(MATMUL_FLOPS))
    op = _only_op(analyse_profile(this._pallas_profile(tmp_path, stated_bytes=1000)).to_json())
    moved = 4 * (M * K + K * N + M * N)  # the kernel's cost estimate: bytes_accessed
    assert op["bytes"] == pytest.approx(3 * moved) and op["provenance"]["bytes"] == "xla"


def _pallas_with_estimate(flops: int) -> str:
    estimate = f'"cost_estimate": {{"flops": {flops}, "bytes_accessed": {4 * (M * K + K * N + M * N)}}}'
    return PALLAS_HLO.replace('"custom_call_config": {', '"custom_call_config": {' + estimate + ", ")


def test_trace_flops_that_disagree_with_the_hlo_are_a_warning_and_the_hlo_wins(tmp_path, monkeypatch):
    # The v6e case: the trace states 1/8 of the matmul's FLOPs for a Pallas kernel whose cost
    # estimate (in its HLO) states them all.
    import test_opaque_kernels as this

    monkeypatch.setattr(this, "PALLAS_HLO", _pallas_with_estimate(MATMUL_FLOPS))
    monkeypatch.setattr(this, "MATMUL_FLOPS", MATMUL_FLOPS // 8)
    report = analyse_profile(this._pallas_profile(tmp_path)).to_json()
    op = _only_op(report)
    assert op["flops"] == pytest.approx(3 * 8 * this.MATMUL_FLOPS) and op["provenance"]["flops"] == "xla"
    (line,) = [w for w in report["warnings"] if "FLOPs the trace states differently" in w]
    assert line.startswith("1 op(s)") and "the HLO count is used" in line and "matmul" in line
    assert "(0.12x)" in line  # trace / HLO = 1/8


_LLAMA = "tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"
_SPLASH = ["splash_mha_dkv_no_residuals.1", "splash_mha_fwd_residuals.2", "splash_mha_fwd_residuals.3"]


def _splash(report: dict) -> list[dict]:
    ops = [o for o in report["ops"] if o["custom_call_target"] == "tpu_custom_call"]
    assert sorted(o["name"] for o in ops) == _SPLASH
    return ops


def test_mosaic_kernels_of_a_real_v6e_llama_step_with_their_cost_estimates():
    report = analyse_hlo(shared_fixture(_LLAMA), hardware="tpu-v6e").to_json()
    hw = CATALOG["tpu-v6e"]
    for o in _splash(report):
        assert o["provenance"]["flops"] == "xla" and o["lower_bound"] is None
        assert o["expected_s"] >= max(o["bytes"] / hw.hbm_bytes_per_s.value,
                                      o["flops"] / hw.peak("bf16").value) * 0.999 > 0


def test_splash_attention_without_estimates_is_priced_from_its_operand_shapes(tmp_path):
    # The same real step as if the kernel authors had attached no pl.CostEstimate: the kernel names
    # say splash attention, the operands say Q [4, 32, 8192, 128] and K, V [4, 8, 8192, 128].
    text = re.sub(r'"cost_estimate":\{[^}]*\},?', "", shared_fixture(_LLAMA).read_text())
    stripped = tmp_path / "module_0262.jit_train_step.after_optimizations.txt"
    stripped.write_text(text)
    report = analyse_hlo(stripped, hardware="tpu-v6e").to_json()
    causal_pairs = 8192 * 8193 / 2  # no mask is stated: counted as causal, the least work
    forward = 2 * 4 * 32 * causal_pairs * (128 + 128)
    for o in _splash(report):
        assert o["lower_bound"] is None and o["provenance"]["flops"] == "model" and o["verdict"] != "bound only"
        per_run = o["flops"] / o["occurrences"]
        # The forward kernels; the backward is one fused kernel (dQ beside dK and dV): 2.5x.
        assert per_run == pytest.approx(forward * (2.5 if "dkv" in o["name"] else 1.0))
        assert any("counted as causal" in r for r in o["reasons"])
    assert report["summary"]["lower_bound_ops"] == 0


def test_a_program_whose_only_op_is_unknown_expects_null_not_zero(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text('HloModule m\nENTRY e {\n  ROOT c = token[] custom-call(), custom_call_target="vendor_kernel"\n}\n')
    report = analyse_hlo(hlo, hardware="tpu-v6e").to_json()
    (op,) = report["ops"]
    assert op["expected_s"] is None and op["verdict"] == "unknown"
    s = report["summary"]
    assert s["expected_s"] is None and s["unmodeled_ops"] == 1 and s["lower_bound_ops"] == 0
    assert any("1 op(s) have no cost model, listed as unknown" in w for w in report["warnings"])
