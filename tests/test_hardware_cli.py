"""`audit hardware list | show`: readable tables, every number with unit and source, exit codes."""

from __future__ import annotations

import json

import pytest

from audit.cli import main
from audit.orchestration import calibrate
from audit.costmodel.chips.catalog import CATALOG

_RECORD = {"matmul_flops_per_s": 2e11, "matmul_bf16_flops_per_s": 1e11, "copy_bytes_per_s": 1.5e10,
           "op_overhead_s": 4e-7,
           "cache_levels": [{"name": "L2", "capacity_bytes": 1048576.0, "bytes_per_s": 2e11,
                             "capacity_source": "OS: /sys/devices/system/cpu/cpu0/cache/index2/size",
                             "method": "best of 7: y = a*y + b loop"}],
           "methods": {"matmul": "best of 3: jitted f32 matmul", "matmul_bf16": "best of 3: jitted bf16 matmul",
                       "copy": "best of 3: x + 1", "op_overhead": "dot chain"},
           "cpu_model": "test CPU", "cores": 4, "jax_version": "x", "measured_at": "2026-01-01T00:00:00Z"}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_list_shows_every_entry_as_a_table(capsys):
    assert main(["hardware", "list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["name", "kind"] and "bf16 TFLOP/s" in lines[0]
    listed = {line.split()[0] for line in lines[2:]}
    assert set(CATALOG) | {"cpu"} == listed
    v5e = next(line for line in lines if line.startswith("tpu-v5e "))
    assert "197" in v5e and "810" in v5e and "16" in v5e and "ICI 2D torus" in v5e
    mi300x = next(line for line in lines if line.startswith("mi300x "))
    assert "1,307" in mi300x and "5,300" in mi300x and "192" in mi300x
    assert "measured on first use" in next(line for line in lines if line.startswith("cpu "))


def test_list_shows_a_cached_cpu_calibration(capsys, monkeypatch):
    monkeypatch.setattr(calibrate, "measure", lambda: dict(_RECORD))
    calibrate.cpu_hardware()
    assert main(["hardware", "list"]) == 0
    cpu = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("cpu "))
    assert "0.2" in cpu and "15" in cpu and "host memory" in cpu


def test_show_prints_each_number_with_unit_and_source(capsys):
    assert main(["hardware", "show", "tpu-v5e:8x16"]) == 0
    out = capsys.readouterr().out
    assert "197 TFLOP/s  [catalog] How to Scale Your Model" in out
    assert "810 GB/s" in out and "45.0 GB/s" in out and "1.00 µs" in out
    assert "8x16" in out and "wraparound per axis: no, yes" in out


def test_show_json_to_stdout_and_file(capsys, tmp_path):
    assert main(["hardware", "show", "h100:2x8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "h100" and data["topology"] == [2, 8]
    assert data["peak_flops_per_s"]["bf16"] == pytest.approx(9.894e14)
    assert data["interconnect"]["kind"] == "nvlink"
    for q in data["quantities"].values():
        assert q["unit"] and q["source"] == "catalog" and q["note"]
    target = tmp_path / "h.json"
    assert main(["hardware", "show", "mi300x", "--json", str(target)]) == 0
    assert json.loads(target.read_text())["hbm_bytes_per_s"] == pytest.approx(5.3e12)


def test_show_cpu_reports_the_calibration_method(capsys, monkeypatch):
    monkeypatch.setattr(calibrate, "measure", lambda: dict(_RECORD))
    assert main(["hardware", "show", "cpu", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "calibrated"
    assert data["quantities"]["peak_flops_per_s.f32"]["note"].startswith("best of 3: jitted f32 matmul")
    calls = []
    monkeypatch.setattr(calibrate, "measure", lambda: calls.append(1) or dict(_RECORD, op_overhead_s=1e-6))
    assert main(["hardware", "show", "cpu", "--recalibrate"]) == 0
    assert calls == [1] and "1.00 µs  [calibrated]" in capsys.readouterr().out


@pytest.mark.parametrize("args, words", [
    (["hardware", "show", "tpu-v9"], ["unknown hardware 'tpu-v9'", "tpu-v5e", "mi300x", "cpu"]),
    (["hardware", "show", "tpu-v5e:32x32"], ["does not fit"]),
    (["hardware", "show", "h100:8y"], ["malformed topology"]),
    (["hardware", "show", "h100", "--recalibrate"], ["cpu only"]),
])
def test_bad_names_exit_2_with_one_line(capsys, args, words):
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("audit: error:")
    assert all(w in err for w in words), err


def test_show_lists_each_cache_level_with_its_source(capsys, monkeypatch):
    assert main(["hardware", "show", "mi300x", "--json"]) == 0
    quantities = json.loads(capsys.readouterr().out)["quantities"]
    assert quantities["caches.Infinity Cache.capacity_bytes"]["value"] == 256e6
    assert "CDNA 3" in quantities["caches.Infinity Cache.bytes_per_s"]["note"]
    monkeypatch.setattr(calibrate, "measure", lambda: dict(_RECORD))
    assert main(["hardware", "show", "cpu", "--json"]) == 0
    quantities = json.loads(capsys.readouterr().out)["quantities"]
    assert quantities["caches.L2.bytes_per_s"]["source"] == "calibrated"
    assert "/sys/devices/system/cpu" in quantities["caches.L2.capacity_bytes"]["note"]
