"""Hardware detection from a trace's device plane stats: real MI300X captures, TPU stats, CPU."""

from __future__ import annotations

import json
import math

import pytest
from conftest import shared_fixture
from hypothesis import given
from hypothesis import strategies as st

from audit.orchestration import calibrate
from audit.costmodel.chips.catalog import CATALOG
from audit.costmodel.chips.detect import hardware_from_trace
from audit.parsers.profile.events import PlaneStats
from conftest import read_hosts
from audit.parsers.xplane.space import read_xspace

MI300X_CAPTURES = ("gemm", "attention", "elementwise", "conv3d-8gpu")


@pytest.mark.parametrize("capture", MI300X_CAPTURES)
def test_mi300x_captures_are_detected_with_trace_provenance(capture):
    (host,) = read_hosts(shared_fixture(f"gpu-mi300x/{capture}.xplane.pb"))
    hw = hardware_from_trace(host.platform, host.device_stats)
    assert (hw.name, hw.vendor, hw.kind, hw.source) == ("mi300x", "AMD", "gpu", "trace")
    # The planes state memory_size 206141652992 B, which wins over the catalog, and
    # memory_bandwidth 2662400000000 B/s, half the datasheet's 5.3e12, which real kernels in
    # these captures exceed: a roof is an upper bound on speed, so the datasheet's is kept.
    assert hw.hbm_bytes.value == 206141652992 and hw.hbm_bytes.source == "trace"
    assert hw.hbm_bytes_per_s.value == 5.3e12 and hw.hbm_bytes_per_s.source == "catalog"
    assert "memory_bandwidth 2.66 TB/s" in hw.hbm_bytes_per_s.note
    # Peak FLOP/s stays the datasheet's; the trace's 2.1 GHz x 304 CUs agrees with it.
    assert hw.peak("bf16").value == CATALOG["mi300x"].peak("bf16").value
    assert hw.peak("bf16").source == "catalog"
    notes = " ".join(hw.notes)
    assert "304 CUs" in notes and "agrees with the datasheet" in notes
    assert "2.66 TB/s is 0.50x the datasheet" in notes and "higher datasheet figure" in notes
    json.dumps(hw.to_json(), allow_nan=False)


def test_unlisted_gpu_peak_is_derived_from_clock_and_cores():
    # A TensorFlow profile from V100-class GPUs: 80 SMs at 1.53 GHz, capability 7.0. It is no
    # JAX profile (the reader refuses it), so its device plane stats are read directly.
    space = read_xspace(shared_fixture("not-jax/tensorflow-gpu-multiworker.xplane.pb"))
    device_stats = {}
    for plane in space.planes:
        if plane.name.startswith("/device:GPU"):
            names = PlaneStats(plane)
            device_stats[plane.name] = {names.names[s.metadata_id]: names.value(s) for s in plane.stats}
    hw = hardware_from_trace("gpu", device_stats)
    assert hw.name == "gpu-nvidia-cc7.0" and hw.source == "trace"
    assert hw.peak("bf16").value == pytest.approx(125e12, rel=0.01)  # V100 datasheet: 125 TFLOP/s
    assert "derived" in hw.peak("bf16").note
    assert hw.hbm_bytes_per_s.value == 898048000000
    assert any("not in the catalog" in n for n in hw.notes)


@pytest.mark.parametrize("type_string, name", [
    ("TPU v6 lite", "tpu-v6e"), ("TPU v5 lite", "tpu-v5e"), ("TPU v5e", "tpu-v5e"),
    ("TPU v5", "tpu-v5p"), ("TPU v5p", "tpu-v5p"), ("TPU v4", "tpu-v4"), ("TPU v3", "tpu-v3"),
])
def test_tpu_type_strings(type_string, name):
    hw = hardware_from_trace("tpu", {"/device:TPU:0": {"device_type_string": type_string}})
    assert hw.name == name


def test_tpu_plane_peaks_override_the_catalog():
    stats = {
        "/device:TPU:0": {"device_type_string": "TPU v6 lite", "peak_teraflops_per_second": 918.0,
                          "peak_hbm_bw_gigabytes_per_second": 1640.0},
        "/device:TPU:0 SparseCore 0": {"device_type_string": "SparseCore"},
        "/device:TPU:1": {"device_type_string": "TPU v6 lite", "peak_teraflops_per_second": 918.0,
                          "peak_hbm_bw_gigabytes_per_second": 1640.0},
    }
    hw = hardware_from_trace("tpu", stats)
    assert (hw.name, hw.source) == ("tpu-v6e", "trace")
    assert hw.peak("bf16").value == pytest.approx(9.18e14) and hw.peak("bf16").source == "trace"
    assert hw.hbm_bytes_per_s.value == pytest.approx(1.64e12) and hw.hbm_bytes_per_s.source == "trace"
    assert hw.peak("s8").value == CATALOG["tpu-v6e"].peak("int8").value  # not stated: catalog
    assert hw.interconnect == CATALOG["tpu-v6e"].interconnect
    assert not any("differ" in n for n in hw.notes)


def test_megacore_trace_peaks_are_converted_to_the_device_the_hlo_runs_on():
    """A v5p device is two TensorCores one program drives (megacore); XProf's plane states one
    TensorCore's peaks. Taken as they are, they halved the roofline's speed: a 4096^3 bf16
    matmul's roofline read 599 us instead of 299 us, and its achievable time fell below it."""
    from audit.costmodel.achievable import achievable_time
    from audit.costmodel.costs import OpCost
    from audit.costmodel.roofline import expect

    plane = {"device_type_string": "TPU v5", "peak_teraflops_per_second": 229.5,
             "peak_hbm_bw_gigabytes_per_second": 1382.5}
    hw = hardware_from_trace("tpu", {"/device:TPU:0": {**plane, "has_megacore": 1}})
    assert (hw.name, hw.source) == ("tpu-v5p", "trace")
    assert hw.peak("bf16").value == pytest.approx(CATALOG["tpu-v5p"].peak("bf16").value)
    assert hw.hbm_bytes_per_s.value == pytest.approx(2.765e12)
    assert "229.5 x 2 TensorCores" in hw.peak("bf16").note and any("has_megacore" in n for n in hw.notes)
    n = 4096
    cost = OpCost(flops=2.0 * n ** 3, bytes_read=4.0 * n * n, bytes_written=2.0 * n * n, dtype="bf16",
                  precision="default", gemm=(1, n, n, n))
    exp = expect(cost, hw)
    assert exp.expected_s == pytest.approx(expect(cost, CATALOG["tpu-v5p"]).expected_s, rel=1e-3)
    reach = achievable_time(cost, exp, hw)
    assert reach.seconds is not None and exp.expected_s is not None and reach.seconds >= exp.expected_s
    # A plane that is not megacore (v6e: one TensorCore per device) is taken as it is.
    single = hardware_from_trace("tpu", {"/device:TPU:0": {"device_type_string": "TPU v6 lite",
                                                           "peak_teraflops_per_second": 918.0, "has_megacore": 0}})
    assert single.peak("bf16").value == pytest.approx(9.18e14)


def test_tpu_v3_planes_are_cores_with_half_a_chip():
    hw = hardware_from_trace("tpu", {"/device:TPU:0": {"device_type_string": "TPU v3"}})
    assert hw.peak("bf16").value == pytest.approx(CATALOG["tpu-v3"].peak("bf16").value / 2)
    assert hw.hbm_bytes.value == pytest.approx(16e9)


def test_unknown_tpu_keeps_what_the_trace_states():
    hw = hardware_from_trace("tpu", {"/device:TPU:0": {"device_type_string": "TPU v9x",
                                                       "peak_teraflops_per_second": 2307}})
    assert hw.name == "unknown-tpu" and hw.source == "trace"
    assert hw.peak("bf16").value == pytest.approx(2.307e15)
    assert math.isnan(hw.hbm_bytes_per_s.value)
    out = hw.to_json()
    assert out["hbm_bytes_per_s"] is None
    assert any("'TPU v9x' is not in the catalog" in n for n in hw.notes)
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize("stats, name", [
    ({"gpu_device_name": "NVIDIA H100 80GB HBM3"}, "h100"),
    ({"gpu_device_name": "NVIDIA H100 PCIe"}, "h100-pcie"),
    ({"device_name": "NVIDIA A100-SXM4-80GB"}, "a100"),
    ({"compute_cap_major": 9, "compute_cap_minor": 0, "core_count": 132, "memory_size": 150e9}, "h200"),
    ({"compute_cap_major": 9, "compute_cap_minor": 0, "core_count": 132, "memory_size": 85e9}, "h100"),
    ({"device_vendor": "AMD", "compute_cap_major": 9, "compute_cap_minor": 5, "core_count": 256}, "mi355x"),
])
def test_gpu_by_name_or_fingerprint(stats, name):
    assert hardware_from_trace("gpu", {"/device:GPU:0": stats}).name == name


def test_trace_bandwidth_within_a_plausible_range_wins():
    # An A100 40GB states 1.555e12 B/s and 42.5 GB: the fingerprint it shares with the 80GB part, and its memory
    # size, name the 40GB entry, whose datasheet agrees with the trace.
    stats = {"compute_cap_major": 8, "compute_cap_minor": 0, "core_count": 108,
             "memory_bandwidth": 1555200000000, "memory_size": 42505273344}
    hw = hardware_from_trace("gpu", {"/device:GPU:0": stats})
    assert hw.name == "a100-40gb" and hw.hbm_bytes_per_s.value == 1.5552e12 and hw.hbm_bytes_per_s.source == "trace"


def test_mixed_planes_are_noted():
    a = {"device_vendor": "AMD", "compute_cap_major": 9, "compute_cap_minor": 4, "core_count": 304}
    b = dict(a, core_count=228)
    hw = hardware_from_trace("gpu", {"/device:GPU:0": a, "/device:GPU:1": b})
    assert hw.name == "mi300x" and any("/device:GPU:1" in n and "differ" in n for n in hw.notes)


_STAT_VALUES = st.one_of(st.none(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                         st.text(max_size=20), st.binary(max_size=4))
_STAT_KEYS = st.sampled_from(["device_type_string", "peak_teraflops_per_second", "gpu_device_name",
                              "peak_hbm_bw_gigabytes_per_second", "clock_rate", "core_count",
                              "memory_bandwidth", "memory_size", "compute_cap_major",
                              "compute_cap_minor", "device_vendor"])


@given(st.sampled_from(["tpu", "gpu", "", "npu"]),
       st.dictionaries(st.sampled_from(["/device:GPU:0", "/device:TPU:0", "/host:CPU"]),
                       st.dictionaries(_STAT_KEYS, _STAT_VALUES, max_size=6), max_size=3))
def test_detection_never_crashes_on_odd_stats(platform, device_stats):
    hw = hardware_from_trace(platform, device_stats)
    json.dumps(hw.to_json(), allow_nan=False)
    assert all(q.value > 0 or math.isnan(q.value) for q in hw.quantities().values())


def test_cpu_uses_the_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path))
    assert hardware_from_trace("cpu", {}).name == "unknown-cpu"  # the catalog reads records, never measures
    record = {"matmul_flops_per_s": 2e11, "matmul_bf16_flops_per_s": 1e11, "copy_bytes_per_s": 1.5e10,
              "op_overhead_s": 4e-7, "cache_levels": [],
              "methods": {"matmul": "m", "matmul_bf16": "b", "copy": "c", "op_overhead": "o"},
              "cpu_model": "test CPU", "cores": 4, "jax_version": "x", "measured_at": "2026-01-01T00:00:00Z"}
    monkeypatch.setattr(calibrate, "measure", lambda: dict(record))
    hw = hardware_from_trace("cpu", {}, cpu=calibrate.cpu_hardware)
    assert (hw.name, hw.source) == ("cpu", "calibrated")
    assert hw.peak("f32").value == 2e11 and hw.hbm_bytes_per_s.value == 1.5e10
    assert hardware_from_trace("cpu", {}).peak("f32").value == 2e11  # now recorded


def test_a_chip_added_to_the_catalog_alone_is_detected_and_compiled_for(monkeypatch):
    from dataclasses import replace

    from audit.child.aot import topology_name
    from audit.costmodel.chips.catalog import CATALOG
    from audit.costmodel.chips.hardware import Detection

    tpu = replace(CATALOG["tpu-v6e"], name="tpu-v9x", aliases=(),
                  detection=Detection(trace_names=(r"v9x",), libtpu_prefix="v9x"))
    gpu = replace(CATALOG["h100"], name="z900", aliases=(),
                  detection=Detection(trace_names=("z900",), fingerprints=(("nvidia", 12, 0, 200),)))
    monkeypatch.setitem(CATALOG, "tpu-v9x", tpu)
    monkeypatch.setitem(CATALOG, "z900", gpu)
    assert hardware_from_trace("tpu", {"/device:TPU:0": {"device_type_string": "TPU v9x"}}).name == "tpu-v9x"
    named = {"/device:GPU:0": {"gpu_device_name": "Zeta Z900 SXM"}}
    unnamed = {"/device:GPU:0": {"compute_cap_major": 12, "compute_cap_minor": 0, "core_count": 200}}
    assert hardware_from_trace("gpu", named).name == hardware_from_trace("gpu", unnamed).name == "z900"
    assert topology_name("tpu-v9x:4x4") == ("tpu-v9x", "v9x:4x4")


@pytest.mark.parametrize(("memory", "chip"), [(80e9, "h100"), (141e9, "h200")])
def test_chips_sharing_a_fingerprint_are_told_apart_by_their_memory(memory, chip):
    stats = {"/device:GPU:0": {"compute_cap_major": 9, "compute_cap_minor": 0, "core_count": 132,
                               "memory_size": memory}}
    hw = hardware_from_trace("gpu", stats)
    assert hw.name == chip and any("GB of memory" in n for n in hw.notes)
