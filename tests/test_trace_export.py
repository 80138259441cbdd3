"""`--trace FILE.json[.gz]`: the measured ops per device beside their expected times, as a
Chrome trace-event file (the JSON object format Perfetto and chrome://tracing read).

Perfetto's trace processor cannot run here (its Python package downloads the shell binary on
first use, and this machine reaches only package registries), so the files are checked
against the trace-event format itself: required keys per phase, microsecond times, slices of
one thread properly nested, metadata naming every process and thread."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, shared_fixture

import audit
from audit.cli import main

PHASE_KEYS = {"X": {"name", "ph", "ts", "dur", "pid", "tid"}, "i": {"name", "ph", "ts", "pid", "tid", "s"},
              "M": {"name", "ph", "pid", "args"}}
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def check_trace_format(doc: dict[str, Any]) -> None:
    """The trace-event format's rules that a viewer relies on."""
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    assert doc.get("displayTimeUnit") in (None, "ms", "ns")
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for ev in doc["traceEvents"]:
        assert ev["ph"] in PHASE_KEYS, ev
        assert PHASE_KEYS[ev["ph"]] <= set(ev), ev
        assert isinstance(ev["pid"], int) and isinstance(ev.get("tid", 0), int)
        if ev["ph"] == "M":
            assert ev["name"] in METADATA
            continue
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
        if ev["ph"] == "i":
            assert ev["s"] in ("g", "p", "t")
        else:
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0
            by_thread[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"]))
    # Slices of one thread nest or follow each other; none partly overlaps another (1 ns slack for rounding).
    for spans in by_thread.values():
        stack: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start + 1e-3:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, (start, end, stack[-1])
            stack.append(end)


def threads(doc: dict[str, Any]) -> dict[int, dict[int, str]]:
    out: dict[int, dict[int, str]] = defaultdict(dict)
    for ev in doc["traceEvents"]:
        if ev["ph"] == "M" and ev["name"] == "thread_name":
            out[ev["pid"]][ev["tid"]] = ev["args"]["name"]
    return out


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The default run (the bundled training step on 8 devices), strict thresholds so some ops are flagged."""
    out = tmp_path_factory.mktemp("trace")
    code = main(["run", "--steps", "2", "--warmup", "1", "--quiet", "--json", str(out / "r.json"),
                 "--trace", str(out / "t.json.gz"), "--min-efficiency", "0.9", "--min-share", "0.001"])
    assert code == 0
    return json.loads((out / "r.json").read_text()), json.loads(gzip.decompress((out / "t.json.gz").read_bytes()))


@pytest.mark.slow
def test_default_run_trace_is_valid_with_one_expected_track_per_device(default_run):
    report, doc = default_run
    check_trace_format(doc)
    per_process = threads(doc)
    assert len(per_process) == report["summary"]["devices"] == 8
    for names in per_process.values():
        assert list(names.values()).count("expected (roofline)") == 1
        assert list(names.values()).count("achievable") == 1
        assert "measured" in names.values() and "step" in names.values()
    expected = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "expected"]
    measured = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] in ("ok", "flagged", "not judged")]
    assert expected and measured
    # The expected slice of an op is its roofline time for that occurrence, from the model.
    ops = {o["name"]: o for o in report["ops"]}
    for e in expected[:200]:
        op = ops[e["name"]]
        per_occurrence = op["expected_s"] / op["occurrences"]
        assert e["dur"] == pytest.approx(per_occurrence * 1e6, rel=1e-3, abs=1e-3)
    # The achievable track: each op at what good kernels take, never below its roofline time.
    achievable = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "achievable"]
    assert achievable
    for e in achievable[:200]:
        op = ops[e["name"]]
        assert e["dur"] == pytest.approx(op["achievable_s"] / op["occurrences"] * 1e6, rel=1e-3, abs=1e-3)
        assert op["achievable_s"] >= op["expected_s"] * (1 - 1e-9)


@pytest.mark.slow
def test_flagged_ops_are_marked_with_their_reasons(default_run):
    report, doc = default_run
    flagged = {o["name"] for o in report["ops"] if o["flagged"]}
    assert flagged
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "flagged"]
    assert {e["name"] for e in slices} <= flagged and slices
    assert all(e["args"]["flagged"] is True and e["args"]["reasons"] for e in slices)
    marks = [e for e in doc["traceEvents"] if e["ph"] == "i" and e["cat"] == "flagged"]
    assert len(marks) == len(slices) and all(m["args"]["reasons"] for m in marks)
    ok = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "ok"]
    assert not {e["name"] for e in ok} & flagged


@pytest.mark.slow
def test_collectives_carry_exposed_and_hidden_time(default_run):
    report, doc = default_run
    collectives = {o["name"] for o in report["ops"] if o["comm_bytes"] and o.get("exposed_s") is not None}
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] in collectives]
    assert slices and all("exposed_s" in e["args"] and "hidden_s" in e["args"] for e in slices)


def test_inspect_writes_plain_json_and_a_loaded_report_still_exports(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    assert main(["inspect", str(shared_fixture("gpu-mi300x/conv3d-8gpu.xplane.pb")), "--quiet",
                 "--trace", str(path), "--json", str(tmp_path / "r.json")]) == 0
    doc = json.loads(path.read_text())
    check_trace_format(doc)
    assert len(threads(doc)) == 8
    # A report read back from JSON keeps one strip per device class: still a valid trace.
    loaded = audit.load(tmp_path / "r.json").to_trace()
    check_trace_format(loaded)
    assert len(threads(loaded)) >= 1


def test_trace_option_mistakes_exit_2_and_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    xplane = str(shared_fixture("gpu-mi300x/gemm.xplane.pb"))
    assert main(["inspect", xplane, "--quiet", "--trace", str(tmp_path / "t.txt")]) == 2
    assert "--trace" in capsys.readouterr().err
    hlo = tmp_path / "m.txt"
    shutil.copy(shared_fixture("tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"), hlo)
    code = main(["inspect", str(hlo), "--hardware", "tpu-v6e:2x4", "--quiet", "--allow-smaller",
                 "--trace", str(tmp_path / "t.json"), "--json", str(tmp_path / "r.json")])
    assert code == 2
    assert "measured timeline" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists() and not (tmp_path / "r.json").exists()


def _measured(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] >= 10 and e["tid"] < 100]


def test_a_many_program_capture_exports_its_window_not_one_op(tmp_path: Path, capsys) -> None:
    """The MI300X attention benchmark: 81 steps that are one module launch each, of 22 programs. Its
    representative step is one op; the export holds every op of the capture, and says so."""
    path = tmp_path / "t.json"
    assert main(["inspect", str(shared_fixture("gpu-mi300x/attention.xplane.pb")), "--trace", str(path),
                 "--json", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    doc, report = json.loads(path.read_text()), json.loads((tmp_path / "r.json").read_text())
    check_trace_format(doc)
    measured = _measured(doc)
    runs = sum(o["occurrences"] * o["devices"] for o in report["ops"] if o["measured_s"] is not None)
    assert len(measured) == runs == 87
    # Every op of every program is drawn, each matched to its own program's record.
    assert {(e["args"]["module"], e["name"]) for e in measured} == {(o["module"], o["name"]) for o in report["ops"]}
    steps = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "step"]
    assert len(steps) == report["summary"]["steps"] == 81
    assert doc["otherData"]["cap_events_per_device"] == 20000 and doc["otherData"]["events_left_out"] == {}
    assert "capture window" in doc["otherData"]["window"]
    assert "warning: the trace file holds the capture window" in err and "20000 events" in err


def test_the_capture_window_is_capped_and_says_what_it_left_out(tmp_path: Path, capsys, monkeypatch) -> None:
    from audit.pod import trace_window

    capture = str(shared_fixture("gpu-mi300x/attention.xplane.pb"))
    assert main(["inspect", capture, "--quiet", "--trace", str(tmp_path / "all.json")]) == 0
    everything = sorted((e["ts"], e["name"]) for e in _measured(json.loads((tmp_path / "all.json").read_text())))
    monkeypatch.setattr(trace_window, "TRACE_EVENTS", 30)
    path = tmp_path / "t.json.gz"
    assert main(["inspect", capture, "--trace", str(path)]) == 0
    doc = json.loads(gzip.decompress(path.read_bytes()))
    check_trace_format(doc)
    # The first 30 events of the capture, on the same clock.
    assert sorted((e["ts"], e["name"]) for e in _measured(doc)) == everything[:30]
    assert doc["otherData"]["cap_events_per_device"] == 30
    assert list(doc["otherData"]["events_left_out"].values()) == [87 - 30]
    assert "57 later event(s) left out (on 1 device(s))" in capsys.readouterr().err


def test_one_repeated_program_keeps_one_step_and_says_so(tmp_path: Path, capsys) -> None:
    """The H100 training step: three steps of one program; the export is one of them."""
    path = tmp_path / "t.json"
    assert main(["inspect", str(ROOT / "tests/data/captures/h100-jax0.11/train-step.xplane.pb"), "--trace",
                 str(path), "--json", str(tmp_path / "r.json")]) == 0
    assert "capture window" not in capsys.readouterr().err
    doc, report = json.loads(path.read_text()), json.loads((tmp_path / "r.json").read_text())
    check_trace_format(doc)
    assert doc["otherData"]["window"].startswith("one representative step")
    steps = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "step"]
    assert len(steps) == 1 and report["summary"]["steps"] == 3
    runs = sum(o["occurrences"] * o["devices"] for o in report["ops"] if o["measured_s"] is not None)
    assert len(_measured(doc)) == pytest.approx(runs / 3, rel=0.02)


def test_repeated_programs_are_told_from_a_run_of_many() -> None:
    """On the real captures: every step of a training run holds the same program; a microbenchmark's
    module launches do not."""
    from audit.parsers.xplane.reader import read_host
    from audit.pod.trace_window import repeats_one_program

    def repeats(path: Path) -> bool:
        host, _ = read_host(str(path), data=path.read_bytes(), decode_hlo=False)
        return repeats_one_program(host.steps, host.events, int(host.steps["device"].min()))

    captures = ROOT / "tests/data/captures/h100-jax0.11"
    assert repeats(captures / "train-step.xplane.pb")
    assert repeats(shared_fixture("gpu-mi300x/conv3d-8gpu.xplane.pb"))
    assert not repeats(captures / "microbench.xplane.pb")
    assert not repeats(shared_fixture("gpu-mi300x/gemm.xplane.pb"))
