"""`audit inspect` end to end: real captures in, schema-v1 JSON and a readable table out, exit codes."""

from __future__ import annotations

import gzip
import json
import math

import pytest

from audit.cli import main
from conftest import shared_fixture

REQUIRED_OP_FIELDS = {
    "program_id", "module", "name", "opcode", "category", "framework_op", "source", "devices",
    "occurrences", "measured_s", "measured_s_max", "self_s", "flops", "transcendentals", "bytes",
    "comm_bytes", "dtype", "compute_s", "memory_s", "comm_s", "expected_s", "bound_by", "efficiency",
    "flagged", "reasons", "provenance",
}


def _inspect_json(capsys, *args: str) -> dict:
    code = main(["inspect", *args, "--json", "-"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


@pytest.fixture(scope="module")
def gemm_report():
    from audit.orchestration.pipeline import analyse_profile

    return analyse_profile(shared_fixture("gpu-mi300x/gemm.xplane.pb")).to_json()


def test_json_report_follows_schema_v1(capsys):
    report = _inspect_json(capsys, str(shared_fixture("gpu-mi300x/gemm.xplane.pb")))
    assert report["schema"] == "audit.report/v1"
    assert set(report) >= {"schema", "tool", "source", "hardware", "summary", "steps", "ops",
                           "collectives", "warnings"}
    assert report["source"]["kind"] == "xplane"
    assert set(report["summary"]["time_by_bound_s"]) == {"compute", "memory", "collective", "latency", "unknown"}
    for op in report["ops"]:
        assert REQUIRED_OP_FIELDS <= set(op), op["name"]
        assert op["bound_by"] in {"compute", "memory", "collective", "latency", "unknown"}
        assert op["provenance"]["time"] == "measured"
        # Unknown is null with a reason, never a silent zero.
        if op["expected_s"] is None:
            assert op["reasons"], op["name"]


def test_hardware_detected_from_trace_with_provenance(gemm_report):
    hw = gemm_report["hardware"]
    assert hw["name"] == "mi300x"
    assert hw["source"] == "trace"
    # The plane's memory_bandwidth stat is half the datasheet, below what real kernels reach:
    # the higher datasheet figure is the roof, and the notes say so.
    assert hw["hbm_bytes_per_s_source"] == "catalog" and hw["hbm_bytes_per_s"] == 5.3e12
    assert any("higher datasheet figure" in n for n in hw["notes"])
    assert hw["peak_flops_per_s"]["bf16"] > 1e14


def test_per_op_times_sum_to_attributed_kernel_time(gemm_report):
    from conftest import read_hosts

    events = read_hosts(shared_fixture("gpu-mi300x/gemm.xplane.pb"))[0].events
    total_s = events["dur_ps"].sum() * 1e-12
    assert math.isclose(sum(o["measured_s"] for o in gemm_report["ops"]), total_s, rel_tol=1e-9)


def test_gemms_are_costed_and_judged(gemm_report):
    gemms = [o for o in gemm_report["ops"] if o["opcode"] == "custom-call"]
    assert gemms
    for op in gemms:
        assert op["flops"] and op["flops"] > 0
        assert op["provenance"]["flops"] == "model"
        assert op["efficiency"] is not None and 0 < op["efficiency"] < 10


def test_eight_gpu_capture_keeps_per_device_rows(capsys):
    report = _inspect_json(capsys, str(shared_fixture("gpu-mi300x/conv3d-8gpu.xplane.pb")))
    assert report["summary"]["devices"] == 8
    conv = [o for o in report["ops"] if o["devices"] == 8]
    assert conv
    for op in conv:
        devices = sorted(d["device"] for d in op["per_device"])
        assert devices == list(range(8))
        slowest = max(d["measured_s"] for d in op["per_device"])
        assert math.isclose(op["measured_s_max"], slowest, rel_tol=1e-9)
        mean = sum(d["measured_s"] for d in op["per_device"]) / 8
        assert math.isclose(op["measured_s"], mean, rel_tol=1e-9)


def test_terminal_summary_shows_top_ops_with_units(capsys):
    code = main(["inspect", str(shared_fixture("gpu-mi300x/gemm.xplane.pb")), "--top", "5"])
    out = capsys.readouterr().out
    assert code == 0
    assert "mi300x" in out and "16 different programs" in out  # a benchmark of 16 programs, one per step
    assert "[trace]" in out and "[model]" in out
    body = out.split("top 5 ops", 1)[1]
    assert "custom-call.1" in body and "%" in body


def test_csv_has_one_row_per_op(tmp_path, capsys):
    out = tmp_path / "ops.csv"
    assert main(["inspect", str(shared_fixture("gpu-mi300x/elementwise.xplane.pb")), "--csv", str(out),
                 "--json", str(tmp_path / "r.json"), "--quiet"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    lines = out.read_text().strip().splitlines()
    assert lines[0].startswith("program_id,module,name,opcode")
    assert len(lines) == 1 + len(report["ops"])


def test_tensorflow_profile_is_refused_with_a_clear_message(capsys):
    code = main(["inspect", str(shared_fixture("not-jax/tensorflow-gpu-multiworker.xplane.pb"))])
    err = capsys.readouterr().err
    assert code == 2
    assert "no XLA programs" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("content", [
    b"",
    b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4,
    gzip.compress(b'{"traceEvents": []}'),
    b"just some text, not a profile\n",
    bytes((i * 7919) % 251 for i in range(4096)),
])
def test_bad_files_exit_2_with_one_line(tmp_path, capsys, content):
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(content)
    code = main(["inspect", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    # A handled input error names the file; a crash would read "internal error" and exit 4.
    assert err.startswith(f"audit: error: {bad}: ") and "profile" in err


def test_truncated_capture_exits_2(tmp_path, capsys):
    data = shared_fixture("gpu-mi300x/gemm.xplane.pb").read_bytes()
    bad = tmp_path / "truncated.xplane.pb"
    bad.write_bytes(data[: len(data) // 2])
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"audit: error: {bad}: truncated or corrupt")


def test_missing_path_exits_2(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nope.xplane.pb")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_existing_output_survives_a_failed_run(tmp_path, capsys):
    out = tmp_path / "report.json"
    out.write_text("previous report")
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"not a profile")
    assert main(["inspect", str(bad), "--json", str(out)]) == 2
    assert out.read_text() == "previous report"
    assert {p.name for p in tmp_path.iterdir()} == {"report.json", "bad.xplane.pb"}  # no temp file left


def test_fail_on_flagged_ops_gates_with_exit_1(capsys):
    path = str(shared_fixture("gpu-mi300x/attention.xplane.pb"))
    report = _inspect_json(capsys, path)
    flagged = report["summary"]["flagged_ops"]
    assert flagged == len(report["flagged"]) >= 1
    assert main(["inspect", path, "--quiet", "--fail-on", str(flagged - 1)]) == 1
    assert main(["inspect", path, "--quiet", "--fail-on", str(flagged)]) == 0


def test_cudnn_convolution_is_costed_from_its_dimension_numbers(capsys):
    report = _inspect_json(capsys, str(shared_fixture("gpu-mi300x/conv3d-8gpu.xplane.pb")))
    conv = next(o for o in report["ops"] if o["name"] == "cudnn-conv.1")
    # bf16[1,16,32,60,104] * bf16[5120,16,1,2,2] -> [1,5120,34,31,53]: 2 * outputs * 16 features * 4 taps,
    # less the taps that fall on the zero padding.
    naive = 2 * (1 * 5120 * 34 * 31 * 53) * 16 * (1 * 2 * 2) * conv["occurrences"]
    assert 0.8 * naive < conv["flops"] <= naive
    assert conv["provenance"]["flops"] == "model"
    assert conv["expected_s"] is not None and conv["bound_by"] != "unknown"
