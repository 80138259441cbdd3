"""CPU calibration: measured once with JAX, plausible, cached, and reused without re-measuring."""

from __future__ import annotations

import json

import pytest

from audit.child import calibrate as child
from audit.costmodel.chips import calibration
from audit.costmodel.chips.catalog import lookup
from audit.orchestration import calibrate


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One real measurement for the module (a few seconds), in a private cache directory."""
    cache = tmp_path_factory.mktemp("audit-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUDIT_CACHE_DIR", str(cache))
        hw = calibrate.cpu_hardware()
    return cache, hw


@pytest.fixture
def cache_dir(measured, monkeypatch):
    cache, _ = measured
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(cache))
    return cache


@pytest.mark.slow
def test_measured_values_are_plausible(measured):
    _, hw = measured
    assert hw.name == "cpu" and hw.kind == "cpu" and hw.source == "calibrated"
    flops = hw.peak("f32")
    assert 1e9 < flops.value < 1e14  # a few GFLOP/s per core up to a large many-core server
    assert 1e8 < hw.hbm_bytes_per_s.value < 2e12
    assert 0 <= hw.op_overhead_s.value < 1e-3
    for q in (flops, hw.hbm_bytes_per_s):
        assert q.source == "calibrated"
        assert "best of" in q.note and "measured" in q.note
    # The overhead is the minimum over many independent launches (robust to a busy machine).
    overhead = hw.op_overhead_s
    assert overhead.source == "calibrated" and "measured" in overhead.note
    assert f"minimum over {child._LAUNCHES} independent launches" in overhead.note
    assert "f32[" in flops.note and "per process" in flops.note
    assert any("calibrated" in n for n in hw.notes)
    json.dumps(hw.to_json(), allow_nan=False)


@pytest.mark.slow
def test_cache_hit_returns_identical_numbers_without_measuring(measured, cache_dir, monkeypatch):
    _, first = measured
    monkeypatch.setattr(calibrate, "measure", _must_not_measure)
    again = calibrate.cpu_hardware()
    assert again.quantities() == first.quantities()
    stored = json.loads((cache_dir / calibration.CACHE_FILE).read_text())
    assert stored["schema"] == calibration.CACHE_SCHEMA
    record = stored["entries"][calibration.machine_key()]
    assert record["matmul_flops_per_s"] == again.peak("f32").value
    assert set(record["methods"]) == {"matmul", "matmul_bf16", "copy", "op_overhead"}
    assert [c["name"] for c in record["cache_levels"]] == [c.name for c in again.caches]


@pytest.mark.slow
def test_cache_levels_come_from_the_os_and_are_measured_no_slower_than_dram(measured):
    _, hw = measured
    stated = child.cache_levels()
    assert [c.name for c in hw.caches] == [level["name"] for level in stated]
    sizes = [c.capacity_bytes.value for c in hw.caches]
    assert sizes == sorted(sizes)  # smallest first
    rates = [c.bytes_per_s.value for c in hw.caches]
    assert all(a >= b for a, b in zip(rates, rates[1:]))  # a smaller level is never slower
    for level in hw.caches:
        assert level.capacity_bytes.source == "calibrated" and "/sys/devices/system/cpu" in level.capacity_bytes.note
        assert level.bytes_per_s.source == "calibrated" and "best of" in level.bytes_per_s.note
        assert level.bytes_per_s.value >= hw.hbm_bytes_per_s.value
        assert 1e9 < level.bytes_per_s.value < 1e14
    if hw.caches:  # a working set that fits the smallest cache is judged there, a huge one in DRAM
        assert hw.memory_level(hw.caches[0].capacity_bytes.value)[0] == hw.caches[0].name
        assert hw.memory_level(1e12) == ("DRAM", hw.hbm_bytes_per_s)
    assert hw.peak("bf16").value >= hw.peak("f32").value  # the faster of the two measured rates


@pytest.mark.slow
def test_a_cache_written_before_cache_levels_is_measured_again(tmp_path, monkeypatch, measured):
    _, real = measured
    old = _record_like(real, flops=1e11)
    for key in ("cache_levels", "matmul_bf16_flops_per_s"):
        del old[key]
    (tmp_path / calibration.CACHE_FILE).write_text(json.dumps(
        {"schema": calibration.CACHE_SCHEMA, "entries": {calibration.machine_key(): old}}))
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path))
    calls = []
    monkeypatch.setattr(calibrate, "measure", lambda: calls.append(1) or _record_like(real, flops=2e11))
    assert calibrate.cpu_hardware().peak("f32").value == 2e11 and calls == [1]


def test_cache_key_names_cpu_cores_and_jax_version():
    import jax

    key = calibration.machine_key()
    assert calibration.cpu_model() in key and f"jax={jax.__version__}" in key and "cores=" in key


@pytest.mark.slow
def test_lookup_cpu_uses_the_cache_and_takes_a_device_count(cache_dir, monkeypatch):
    monkeypatch.setattr(calibrate, "measure", _must_not_measure)
    hw = lookup("cpu:8")
    assert hw.topology == (8,) and hw.source == "calibrated"


@pytest.mark.slow
def test_the_catalog_reads_the_record_and_never_measures(tmp_path, monkeypatch, measured):
    # Measuring is the caller's: the catalog and detection only read this machine's record, and a
    # command passes the function that measures when there is none.
    from audit.costmodel.chips.detect import hardware_from_trace
    from audit.base.errors import UsageError

    _, real = measured
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(calibrate, "measure", _must_not_measure)
    with pytest.raises(UsageError, match="not calibrated yet") as info:
        lookup("cpu")
    assert "audit hardware show cpu" in info.value.hint
    assert hardware_from_trace("cpu", {}).name == "unknown-cpu"
    monkeypatch.setattr(calibrate, "measure", lambda: _record_like(real, flops=1.5e11))
    assert lookup("cpu:4", cpu=calibrate.cpu_hardware).peak("f32").value == 1.5e11
    monkeypatch.setattr(calibrate, "measure", _must_not_measure)
    assert lookup("cpu").peak("f32").value == 1.5e11  # the record it wrote


@pytest.mark.slow
def test_refresh_and_corrupt_cache_measure_again(tmp_path, monkeypatch, measured):
    _, real = measured
    record = _record_like(real, flops=1.25e11)
    calls = []
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(calibrate, "measure", lambda: calls.append(1) or dict(record))
    (tmp_path / calibration.CACHE_FILE).write_text("{not json")
    assert calibrate.cpu_hardware().peak("f32").value == 1.25e11
    assert calibrate.cpu_hardware().peak("f32").value == 1.25e11
    assert len(calls) == 1  # the rewritten cache served the second call
    calibrate.cpu_hardware(refresh=True)
    assert len(calls) == 2


def test_cached_cpu_hardware_does_not_measure(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(calibrate, "measure", _must_not_measure)
    assert calibration.cached_cpu_hardware() is None


def _must_not_measure():
    raise AssertionError("measured again despite a cached calibration")


def _record_like(hw, *, flops: float) -> dict:
    return {
        "matmul_flops_per_s": flops, "matmul_bf16_flops_per_s": flops, "copy_bytes_per_s": hw.hbm_bytes_per_s.value,
        "op_overhead_s": hw.op_overhead_s.value,
        "methods": {"matmul": "m", "matmul_bf16": "b", "copy": "c", "op_overhead": "o"},
        "cache_levels": [],
        "cpu_model": calibration.cpu_model(), "cores": 1, "jax_version": "x",
        "memory_bytes": None, "last_level_cache_bytes": None, "measured_at": "2026-01-01T00:00:00Z",
    }


@pytest.mark.slow
def test_a_failed_measurement_is_one_clear_error(tmp_path, monkeypatch):
    from audit.base.errors import AuditError

    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("XLA_FLAGS", "--xla_no_such_flag_for_audit=1")  # XLA refuses to start
    with pytest.raises(AuditError) as info:
        calibrate.cpu_hardware()
    assert str(info.value).startswith("CPU calibration failed:") and "--hardware" in str(info.value)
    assert not (tmp_path / calibration.CACHE_FILE).exists()


@pytest.mark.slow
def test_a_probe_started_ahead_compiles_then_times_only_when_asked(tmp_path, monkeypatch):
    # GIVEN nothing cached: an analysis starts the probes ahead of needing them
    import subprocess
    import sys

    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(calibrate, "_waiting", None)
    assert calibrate.start_ahead()
    waiting = calibrate._waiting
    assert waiting is not None and not calibrate.start_ahead()  # one at a time
    # THEN it prepares its kernels and says so, and times nothing until asked
    assert waiting.stdout is not None and waiting.stdout.readline().strip() == "ready"
    assert waiting.poll() is None
    # WHEN the analysis needs the figures THEN that process measures (no second one starts)
    monkeypatch.setattr(calibrate, "_probe_process", lambda wait: pytest.fail("started a second probe"))
    hw = calibrate.cpu_hardware()
    assert hw.source == "calibrated" and hw.peak("f32").value > 1e9 and calibrate._waiting is None
    assert waiting.wait(60) == 0  # the record is taken as printed; the probe then exits on its own
    # AND a probe nobody asks exits untimed when its input ends (the analysis found another chip)
    untimed = subprocess.run([sys.executable, "-m", "audit.child.calibrate", "--wait"], input="",
                             capture_output=True, text=True, timeout=600, env={**__import__("os").environ,
                                                                               "JAX_PLATFORMS": "cpu"})
    assert untimed.returncode == 0 and untimed.stdout.split() == ["ready"]


@pytest.mark.slow
def test_a_cached_calibration_starts_no_probe(cache_dir, monkeypatch):
    monkeypatch.setattr(calibrate, "_waiting", None)
    monkeypatch.setattr(calibrate, "_probe_process", lambda wait: pytest.fail("started a probe despite the cache"))
    assert not calibrate.start_ahead()


def test_only_an_input_judged_on_this_cpu_starts_the_probe_ahead(tmp_path, monkeypatch, fixture_path):
    from audit.orchestration import ahead
    from audit.parsers.xplane.schema import XSpace

    started: list[int] = []
    monkeypatch.setattr(calibrate, "start_ahead", lambda: started.append(1) or True)
    cpu = XSpace(hostnames=["h"])
    for name in ("/host:metadata", "/host:CPU", "Task Environment"):
        plane = cpu.planes.add(name=name)
        plane.lines.add(name="t").events.add(metadata_id=1, duration_ps=5)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "h.xplane.pb").write_bytes(cpu.SerializeToString())
    assert ahead.calibrate_ahead(tmp_path / "run") and started == [1]  # a CPU profile's run directory
    assert ahead.calibrate_ahead(tmp_path / "run" / "h.xplane.pb") and len(started) == 2
    # A GPU profile, an nsys archive and a missing path start nothing; an HLO dump does.
    assert not ahead.calibrate_ahead(fixture_path("gpu-mi300x/gemm.xplane.pb"))
    assert not ahead.calibrate_ahead(fixture_path("gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc0.zip"))
    assert not ahead.calibrate_ahead(tmp_path / "missing.xplane.pb")
    assert ahead.calibrate_ahead(fixture_path("tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"))
    assert len(started) == 3


@pytest.mark.slow
def test_deciding_to_start_ahead_loads_no_heavy_library(fixture_path):
    # The probe is started before the analysis loads pandas, numpy and protobuf (half a second on a
    # bare install): the glance at the input must not load them itself.
    import subprocess
    import sys

    code = ("import sys; from audit.parsers.input_glance import priced_on_this_cpu; "
            f"print(priced_on_this_cpu({str(fixture_path('gpu-mi300x/gemm.xplane.pb'))!r}), "
            "sorted(m for m in ('pandas', 'numpy', 'google.protobuf', 'jax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "[]"]
