"""The achievable ceiling: catalog figures with sources, the time per op, shape effects, `audit calc`."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from audit.cli import main
from audit.costmodel.achievable import achievable_time, shape_factor
from audit.costmodel.chips.catalog import CATALOG, lookup
from audit.costmodel.chips.hardware import Hardware, Quantity
from audit.costmodel.costs import CollectiveInfo, OpCost
from audit.costmodel.roofline import expect

CHIPS = sorted(CATALOG)
DTYPES = ("bf16", "f16", "f32", "f8e4m3fn", "s8")
PRECISIONS = ("", "default", "high", "highest", "dot_bf16_bf16_f32_x3", "dot_tf32_tf32_f32")


def test_every_catalog_chip_states_achievable_figures_with_sources():
    for name in CHIPS:
        hw = CATALOG[name]
        assert hw.achievable is not None, name
        for key, q in hw.achievable.quantities().items():
            assert q.value > 0 and math.isfinite(q.value), (name, key)
            assert q.source == "catalog" and q.note, (name, key)
        json.dumps(hw.to_json()["achievable"], allow_nan=False)


def _ceilings(hw: Hardware) -> list[tuple[str, Quantity, Quantity | None]]:
    """(key, achievable rate, the datasheet ceiling it derates) for every rate a chip states."""
    ach = hw.achievable
    assert ach is not None
    caches = {c.name: c.bytes_per_s for c in hw.caches}
    links = {"scale_up": hw.interconnect.link_bytes_per_s, "scale_out": hw.interconnect.dcn_bytes_per_s}
    return ([(f"matmul_flops_per_s.{k}", q, hw.peak_flops.get(k)) for k, q in ach.matmul_flops_per_s.items()]
            + [("memory_bytes_per_s", ach.memory_bytes_per_s, hw.hbm_bytes_per_s)]
            + [(f"cache_bytes_per_s.{k}", q, caches.get(k)) for k, q in ach.cache_bytes_per_s.items()]
            + [(f"collective_bytes_per_s.{k}", q, links.get(k)) for k, q in ach.collective_bytes_per_s.items()])


@pytest.mark.parametrize("name", CHIPS)
def test_no_achievable_figure_is_above_the_datasheet_ceiling_it_derates(name):
    """What good kernels reach is at or below the roof it derates, and a fixed time at or above
    the roofline's: a measurement above its ceiling is a data error (an NVLS all-reduce's bus
    bandwidth, 479 GB/s, stood as H100's for every collective over its 450 GB/s links)."""
    hw = CATALOG[name]
    for key, reach, ceiling in _ceilings(hw):
        assert ceiling is not None, (name, key, "derates no ceiling the chip states")
        assert reach.value <= ceiling.value, (name, key, reach.value, ceiling.value, reach.note)
    ach, net = hw.achievable, hw.interconnect
    assert ach is not None
    if ach.launch_s is not None and hw.op_overhead_s is not None:
        assert ach.launch_s.value >= hw.op_overhead_s.value, name
    if ach.collective_latency_s is not None and net.collective_latency_s is not None:
        assert ach.collective_latency_s.value >= net.collective_latency_s.value, name


def test_the_ceiling_test_catches_a_measurement_above_its_ceiling():
    from dataclasses import replace

    hw = CATALOG["h100"]
    ach = hw.achievable
    assert ach is not None
    nvls = Quantity(4.7887e11, "B/s", "catalog", "NCCL all-reduce (NVLS) bus bandwidth at 8 GB", "measured")
    broken = replace(hw, achievable=replace(ach, collective_bytes_per_s={**ach.collective_bytes_per_s,
                                                                         "scale_up": nvls}))
    over = [key for key, reach, ceiling in _ceilings(broken) if ceiling is not None and reach.value > ceiling.value]
    assert over == ["collective_bytes_per_s.scale_up"]


def test_figures_without_a_measurement_say_they_are_estimates():
    measured = ("MAMF table", "Azure AI-benchmarking-guide", "AMD ROCm blog", "book ch. 3", "datasheet", "device properties",
                "nccl-tests", "tests/data/captures", "accelerator-microbenchmarks", "AMD-AGI/TraceLens")
    for name in CHIPS:
        ach = CATALOG[name].achievable
        assert ach is not None
        for key, q in ach.quantities().items():
            assert q.note.startswith(("estimate", "derived")) or any(m in q.note for m in measured), (name, key)


def test_vendor_figures_are_the_published_ones():
    # The fastest real hipBLASLt GEMM of the TraceLens MI300X capture (AMD's MAF blog: 708, a sustained-clock figure).
    assert CATALOG["mi300x"].achievable.matmul_flops_per_s["bf16"].value == 918e12
    assert CATALOG["h100"].achievable.matmul_flops_per_s["bf16"].value == 794.5e12  # MAMF table
    assert CATALOG["h100"].achievable.memory_bytes_per_s.value == 3.03e12  # this project's H100 capture, 1 GiB stream
    assert CATALOG["h100"].achievable.collective_bytes_per_s["scale_up"].value == 350e9  # nccl-tests all-gather
    assert CATALOG["tpu-v7"].achievable.matmul_flops_per_s["bf16"].value == 2 * 956.38e12  # Ironwood GEMM table
    assert CATALOG["mi300x"].achievable.collective_bytes_per_s["scale_up"].value == 316.82e9  # RCCL 8 GB


@st.composite
def _costs(draw: st.DrawFn) -> OpCost:
    dims = draw(st.tuples(st.integers(1, 4), st.integers(1, 20000), st.integers(1, 20000), st.integers(1, 20000)))
    batch, m, n, k = dims
    matmul = draw(st.booleans())
    dtype = draw(st.sampled_from(DTYPES))
    size = {"bf16": 2, "f16": 2, "f32": 4}.get(dtype, 1)
    collective = None
    if draw(st.booleans()):
        collective = CollectiveInfo(draw(st.sampled_from(("all-reduce", "all-gather", "reduce-scatter"))),
                                    float(draw(st.integers(1, 1 << 30))), draw(st.sampled_from((2, 4, 8))))
    flops = 2.0 * batch * m * n * k if matmul else float(draw(st.integers(0, 1 << 34)))
    read = float(size * batch * (m * k + k * n)) if matmul else float(draw(st.integers(0, 1 << 34)))
    written = float(size * batch * m * n) if matmul else float(draw(st.integers(0, 1 << 32)))
    resident = draw(st.one_of(st.none(), st.tuples(st.tuples(
        st.sampled_from(("L2", "Infinity Cache")), st.floats(0, 1).map(lambda f: f * (read + written))))))
    return OpCost(flops=flops, bytes_read=read, bytes_written=written, dtype=dtype,
                  precision=draw(st.sampled_from(PRECISIONS)) if matmul else "",
                  gemm=dims if matmul else None, collective=collective,
                  comm_bytes=collective.bytes if collective else 0.0, resident=resident)


@settings(max_examples=300, deadline=None)
@given(cost=_costs(), chip=st.sampled_from(CHIPS))
def test_achievable_time_is_never_below_the_roofline(cost: OpCost, chip: str):
    hw = lookup(f"{chip}:8") if CATALOG[chip].kind == "gpu" else CATALOG[chip]
    exp = expect(cost, hw)
    reach = achievable_time(cost, exp, hw)
    if exp.expected_s is None:
        assert reach.seconds is None
        return
    assert reach.seconds is not None and reach.seconds >= exp.expected_s
    assert reach.source  # it says which figures set it


@settings(max_examples=300, deadline=None)
@given(gemm=st.tuples(st.integers(1, 8), st.integers(1, 50000), st.integers(1, 50000), st.integers(1, 50000)),
       chip=st.sampled_from(CHIPS))
def test_shape_effects_only_ever_add_work(gemm: tuple[int, int, int, int], chip: str):
    hw = CATALOG[chip]
    assert hw.achievable is not None
    factor, _ = shape_factor(gemm, hw, hw.achievable)
    assert factor >= 1.0


def test_a_gemm_too_small_to_fill_the_gpu_pays_for_its_idle_units():
    hw = CATALOG["mi300x"]
    factor, why = shape_factor((1, 256, 256, 256), hw, hw.achievable)
    # 256x256 output: at most 16 tiles x 4 K steps = 64 pieces of work for 304 compute units.
    assert factor > 4 and "304 compute units" in why
    big, _ = shape_factor((1, 8192, 8192, 8192), hw, hw.achievable)
    assert big < 1.05


def test_tpu_pads_matmuls_to_the_mxu():
    hw = CATALOG["tpu-v6e"]
    factor, why = shape_factor((1, 100, 100, 100), hw, hw.achievable)
    assert factor == pytest.approx(104 * 256 * 256 / 100 ** 3)
    assert "256x256 MXU" in why
    assert shape_factor((1, 1024, 1024, 1024), hw, hw.achievable) == (1.0, "")


def test_small_kernels_take_at_least_the_launch_latency():
    hw = CATALOG["h100"]
    cost = OpCost(flops=1.0, bytes_read=8.0, bytes_written=8.0, dtype="f32")
    reach = achievable_time(cost, expect(cost, hw), hw)
    assert hw.achievable is not None and hw.achievable.launch_s is not None
    assert reach.seconds == pytest.approx(hw.achievable.launch_s.value, rel=0.01)
    assert "shortest kernel" in reach.source


def test_a_collective_pays_the_per_message_latency():
    hw = lookup("h100:8")
    info = CollectiveInfo("all-reduce", 1024.0, 8)
    cost = OpCost(flops=0.0, bytes_read=1024.0, bytes_written=1024.0, dtype="bf16", collective=info,
                  comm_bytes=1024.0)
    reach = achievable_time(cost, expect(cost, hw), hw)
    assert hw.achievable is not None and hw.achievable.collective_latency_s is not None
    assert reach.seconds is not None and reach.seconds >= hw.achievable.collective_latency_s.value
    assert "per-message latency" in reach.source


def test_a_chip_without_figures_is_judged_on_its_roofline():
    from dataclasses import replace

    hw: Hardware = replace(CATALOG["h100"], achievable=None)
    cost = OpCost(flops=1e12, bytes_read=1e9, bytes_written=1e9, dtype="bf16", precision="default")
    exp = expect(cost, hw)
    reach = achievable_time(cost, exp, hw)
    assert reach.seconds == exp.expected_s and "states no achievable figures" in reach.source


def _calc(capsys, *args: str) -> dict:
    assert main(["calc", "matmul", "--m", "4096", "--k", "4096", "--n", "4096", *args, "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def test_calc_prices_an_f32_matmul_as_jax_runs_it(capsys):
    tf32 = _calc(capsys, "--dtype", "f32", "--hardware", "h100")
    true_f32 = _calc(capsys, "--dtype", "f32", "--hardware", "h100", "--precision", "highest")
    # JAX runs an f32 dot on TF32 tensor cores by default: 2*4096^3 / 494.7 TFLOP/s, not 66.9.
    assert tf32["precision"] == "default" and tf32["compute_s"] == pytest.approx(2 * 4096 ** 3 / 4.947e14)
    assert true_f32["compute_s"] == pytest.approx(2 * 4096 ** 3 / 6.69e13)
    tpu_high = _calc(capsys, "--dtype", "f32", "--hardware", "tpu-v5e", "--precision", "high")
    assert tpu_high["compute_s"] == pytest.approx(3 * 2 * 4096 ** 3 / 1.97e14)  # three bf16 passes


def test_calc_shows_both_ceilings(capsys):
    out = _calc(capsys, "--hardware", "mi300x")
    assert out["achievable_s"] >= out["time_s"] > 0 and "bf16 matmul" in out["achievable_source"]
    assert main(["calc", "matmul", "--m", "4096", "--k", "4096", "--n", "4096", "--hardware", "mi300x"]) == 0
    text = capsys.readouterr().out
    assert "expected time" in text and "achievable time" in text and "roofline" in text


def test_calc_refuses_an_unknown_precision(capsys):
    assert main(["calc", "matmul", "--m", "8", "--k", "8", "--n", "8", "--precision", "fastest"]) == 2
    assert "unknown precision" in capsys.readouterr().err


def test_calc_collective_shows_the_achievable_time(capsys):
    argv = ["calc", "collective", "--op", "all-gather", "--shape", "bf16[2048,8192]", "--mesh", "X=8,Y=4",
            "--axes", "Y", "--hardware", "tpu-v5e:8x4", "--json", "-"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["achievable_s"] >= out["time_s"] and "scale_up bus" in out["achievable_source"]
    assert "per-message latency" in out["achievable_source"] and "(catalog, measured)" in out["achievable_source"]


def test_a_convolution_is_quantized_as_the_implicit_gemm_it_runs_as():
    from audit.costmodel.achievable import implicit_gemm

    # bf16[1,16,32,60,104] * [5120,16,1,2,2] -> [1,5120,34,31,53] (the MI300X conv3d capture's shape)
    assert implicit_gemm((1, (34, 31, 53), 16, 5120, (1, 2, 2))) == (1, 34 * 31 * 53, 5120, 64)
    assert implicit_gemm(None) is None
    hw = CATALOG["mi300x"]
    small, why = shape_factor(implicit_gemm((1, (7, 7), 64, 64, (3, 3))), hw, hw.achievable)
    assert small > 2 and "compute units" in why  # 49 output positions cannot fill 304 CUs


def test_the_achievable_reason_says_its_times_are_one_run():
    """The flagged line's wasted and achievable times are summed over the analysed steps; the reason
    beside them is one run's, and says so (304 µs measured against a 1.10 ms waste read as a contradiction)."""
    from audit.costmodel.achievable import AchievableTime
    from audit.optable.verdict import achievable_reasons

    reach = AchievableTime(seconds=1e-4, compute_s=1e-4, memory_s=None, comm_s=None, launch_s=0.0,
                           source="f32 matmul 202 GFLOP/s (calibrated, measured)")
    assert achievable_reasons(reach, 3e-4)[0] == ("took 3.0x its achievable time per run (300 µs measured, "
                                                  "100 µs achievable from f32 matmul 202 GFLOP/s (calibrated, measured))")


@pytest.mark.parametrize("hardware, mesh, reach, latency", [
    # A v5e all-gather around a wrapped 16-long axis uses both directions of its links: each link at
    # the book's 82% of its rate (it read 2.44x its roofline, the link's share taken of both at once).
    ("tpu-v5e:16x16", "X=16,Y=16", 0.82, 8e-6),
    # 8 H100s: ring collectives reach 350 of NVLink 4's 450 GB/s (nccl-tests), plus one message's 25.6 us.
    ("h100:8", "X=8", 350 / 450, 2.56e-5),
])
def test_collective_bus_bandwidth_is_a_share_of_each_links_rate(capsys, hardware, mesh, reach, latency):
    argv = ["calc", "collective", "--op", "all-gather", "--shape", "bf16[8192,8192]", "--mesh", mesh,
            "--axes", "X", "--hardware", hardware, "--json", "-"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bound_by"] == "collective"
    assert out["achievable_s"] == pytest.approx(out["bandwidth_s"] / reach + latency, rel=1e-3)
