"""One entry point for inputs: each kind recognised once, read once, and refused clearly where it does not belong."""

from __future__ import annotations

import json

import pytest

import audit
from audit.base.errors import InputError
from audit.parsers.hlo import proto as hlo_proto
from audit.parsers.inputs import open_input
from audit.reports.model.read import read_report

from conftest import shared_fixture

MAXTEXT = "gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb"
V6E = "tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"
GEMM = "gpu-mi300x/gemm.xplane.pb"


def test_a_binary_hlo_module_under_a_plain_pb_name_is_parsed_exactly_once(tmp_path, monkeypatch):
    bare = tmp_path / "module.pb"
    bare.write_bytes(shared_fixture(MAXTEXT).read_bytes())
    calls = []
    real = hlo_proto.read_hlo_proto_bytes
    monkeypatch.setattr("audit.parsers.hlo.files.read_hlo_proto_bytes",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    opened = open_input(bare)
    assert opened.kind == "hlo" and opened.module is not None and len(calls) == 1
    assert opened.module.instruction_count > 7000


def test_kinds_are_recognised_by_content_and_name(tmp_path):
    assert open_input(shared_fixture(V6E)).module.instruction_count == 3344
    assert open_input(shared_fixture(GEMM)).kind == "profile"
    assert open_input(tmp_path).kind == "profile"
    report = tmp_path / "r.json"
    minimal = {"schema": "audit.report/v1", "hardware": {"name": "cpu"}, "summary": {"steps": 0}, "steps": [],
               "ops": [], "collectives": []}
    report.write_text(json.dumps(minimal))
    opened = open_input(report)
    assert opened.kind == "report" and read_report(opened.path) == minimal


@pytest.mark.parametrize(("content", "message"), [
    ("{\"schema\": \"something/else\"}", "not an audit JSON report"),
    ("{not json", "not a JSON report"),
])
def test_a_json_that_is_not_a_report_says_so(tmp_path, content, message):
    bad = tmp_path / "r.json"
    bad.write_text(content)
    with pytest.raises(InputError, match=message):
        audit.load(bad)


def test_a_report_where_a_profile_is_expected_is_refused_by_name(tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"schema": "audit.report/v1"}))
    with pytest.raises(InputError, match=r"this is an audit JSON report \(\.json\); expected a profile"):
        open_input(report, accept=("profile", "hlo"))


def test_missing_and_unknown_files_are_input_errors_naming_the_path(tmp_path):
    with pytest.raises(InputError, match="no such file or directory") as missing:
        open_input(tmp_path / "nope.xplane.pb")
    assert "nope.xplane.pb" in str(missing.value)
    notes = tmp_path / "notes.md"
    notes.write_text("# not a profile\n")
    with pytest.raises(InputError, match="not a profile, an HLO dump or a report"):
        open_input(notes)


def test_text_that_claims_to_be_hlo_and_is_broken_is_reported_as_hlo(tmp_path):
    broken = tmp_path / "m.txt"
    broken.write_text("HloModule m\nENTRY e { ROOT x = f32[4] frobnicate( }\n")
    with pytest.raises(InputError) as err:
        open_input(broken)
    assert "m.txt" in str(err.value)



def test_a_profile_over_the_read_limit_names_its_exact_size_and_the_limit():
    """A size rounded to MiB could read as the limit it exceeds; the error gives the file's bytes as they are."""
    from audit.parsers.wire.input_files import read_input

    with pytest.raises(InputError) as caught:
        read_input(shared_fixture(GEMM), 100_000, "profile")
    assert str(caught.value).endswith(": 110,057 bytes is more than any profile this tool reads (at most 100,000 bytes)")


def test_a_limit_of_whole_mebibytes_is_named_in_them(tmp_path):
    from audit.parsers.wire.input_files import read_input

    big = tmp_path / "big.xplane.pb"
    big.write_bytes(b"\0" * ((3 << 20) + 1))
    with pytest.raises(InputError) as caught:
        read_input(big, 3 << 20, "profile")
    assert str(caught.value).endswith(": 3,145,729 bytes is more than any profile this tool reads (at most 3 MiB)")
