"""Memory per program from the buffer assignment: against XProf's memory viewer on every real capture
that carries one, the heap replay's rules, the report's part, section and headline line, and HLO
dumps with the proto, with only XLA's text, and with neither."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, render
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.parsers.hlo.buffer_assignment import (ALLOC, FREE, SHARE_WITH, Allocation, BufferAssignment, HeapEvent,
                                             LogicalBuffer, hlo_proto_buffer_assignment, memory_usage,
                                             read_buffer_assignment)
from audit.parsers.hlo.buffer_assignment_text import read_buffer_assignment_text

sys.path.insert(0, str(ROOT / "bench"))
from memory_vs_xprof import ARCHIVES, CAPTURES, DUMPS, compare, compare_archive, compare_dump  # noqa: E402

H200 = ROOT / "tests/data/captures/h200-jax0.11/train-step.xplane.pb"
MIB = 2 ** 20


@pytest.mark.parametrize("capture", CAPTURES, ids=[Path(c).parent.name + "/" + Path(c).name for c in CAPTURES])
def test_peak_and_parameters_agree_with_xprof_memory_viewer(capture: str, tmp_path: Path) -> None:
    # GIVEN XProf's memory viewer run on a copy of a real capture, on each program's HloProto XProf wrote
    rows, missing = compare(ROOT / capture, tmp_path)
    # THEN audit reads the same programs out of the capture, each peak heap and entry parameters within 2%
    assert rows and not missing
    for r in rows:
        assert r.peak_gap <= 0.02, (r.module, r.program_id, r.audit_peak_mib, r.xprof_peak_mib)
        assert r.params_gap <= 0.02, (r.module, r.program_id, r.audit_params_mib, r.xprof_params_mib)
    # and in fact to the byte: the same replay of the same trace
    assert all(abs(r.audit_peak_mib - r.xprof_peak_mib) * MIB < 1 for r in rows)


@pytest.mark.parametrize("dump", DUMPS, ids=[Path(d).name for d in DUMPS])
def test_a_dumped_proto_agrees_with_xprof_memory_viewer(dump: str, tmp_path: Path) -> None:
    row = compare_dump(ROOT / dump, tmp_path)
    assert row.peak_gap <= 0.02 and row.params_gap <= 0.02
    assert abs(row.audit_peak_mib - row.xprof_peak_mib) * MIB < 1


def test_an_nsys_jax_archives_programs_agree_with_xprof_memory_viewer(tmp_path: Path) -> None:
    # one process of the four: they ran the same programs (bench/memory_vs_xprof.py compares all four)
    rows = compare_archive(ROOT / ARCHIVES[0], tmp_path)
    assert len(rows) == 17 and len({r.xprof_peak_mib for r in rows}) > 5  # distinct programs, not one kept
    assert all(r.peak_gap <= 0.02 and r.params_gap <= 0.02 for r in rows)
    assert all(abs(r.audit_peak_mib - r.xprof_peak_mib) * MIB < 1 for r in rows)


def test_h200_train_step_figures_and_the_buffers_at_the_peak() -> None:
    from audit.parsers.xplane.reader import read_host

    _, protos = read_host(H200, decode_hlo=False)
    usage = memory_usage(read_buffer_assignment(protos[0]))  # type: ignore[arg-type]
    # XProf's memory viewer on this capture: peak heap 17,941 MiB, parameters 3,120 MiB, live-out 3,120 MiB
    assert round(usage.peak_bytes / MIB) == 17941
    assert round(usage.parameter_bytes / MIB) == 3120 and round(usage.live_out_bytes / MIB) == 3120
    assert usage.peak_instruction == "input_transpose_fusion.22"
    # what is live at the peak adds up to the peak: the held allocations plus the heap's temporaries
    assert sum(b.size for b, _ in usage.live_at_peak) <= usage.peak_bytes
    assert usage.live_at_peak[0][0].size == 2 * 1024 * MIB and usage.live_at_peak[0][1] == "temporary"


def test_a_bare_module_or_a_proto_without_assignment_has_none() -> None:
    module = (ROOT / "tests/data/fixtures/gpu-h100-maxtext/module_0016.jit_train_step.before_optimizations.hlo.pb")
    assert hlo_proto_buffer_assignment(module.read_bytes()) is None
    assert read_buffer_assignment(b"") is None and read_buffer_assignment(b"\x0a\x80") is None


# The replay, on hand-made traces: sizes by buffer id, one temporary allocation holding them all.
def _assignment(sizes: dict[int, int], events: list[HeapEvent], held: int = 0) -> BufferAssignment:
    buffers = {i: LogicalBuffer(i, s, f"op.{i}", i, (), 0) for i, s in sizes.items()}
    allocations = [Allocation(0, sum(sizes.values()), 0, False, False, False, False, False, tuple(sizes))]
    if held:
        buffers[999] = LogicalBuffer(999, held, "param", 999, (), 0)
        allocations.append(Allocation(1, held, 0, True, False, False, False, False, (999,)))
    return BufferAssignment(buffers, tuple(allocations), (tuple(events),))


def test_a_buffer_shared_after_its_free_counts_again_and_sharers_free_it_once() -> None:
    events = [HeapEvent(ALLOC, 1, "a"), HeapEvent(FREE, 1, "b"), HeapEvent(SHARE_WITH, 2, "c", 1),
              HeapEvent(ALLOC, 3, "d"), HeapEvent(FREE, 2, "e"), HeapEvent(FREE, 3, "f")]
    usage = memory_usage(_assignment({1: 100, 2: 100, 3: 50}, events, held=7))
    # buffer 2 reuses buffer 1's memory after 1 was freed: 100 live again, then 50 more at event 3
    assert usage.temporary_bytes == 150 and usage.peak_event == 3 and usage.peak_instruction == "d"
    assert usage.peak_bytes == 157 and usage.parameter_bytes == 7
    assert [b.id for b, _ in usage.live_at_peak] == [1, 3, 999]


def test_a_trace_that_frees_twice_is_refused() -> None:
    events = [HeapEvent(ALLOC, 1, "a"), HeapEvent(FREE, 1, "b"), HeapEvent(FREE, 1, "c")]
    with pytest.raises(ValueError, match="freed more often"):
        memory_usage(_assignment({1: 10}, events))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 1 << 30), min_size=1, max_size=12), st.data())
def test_the_peak_is_the_largest_sum_of_live_buffers(sizes: list[int], data: st.DataObject) -> None:
    # GIVEN every buffer allocated once and freed once, in a random order (a free drawn before its
    # buffer's allocation is moved to the end)
    order = data.draw(st.permutations([(ALLOC, i) for i in range(len(sizes))] + [(FREE, i) for i in range(len(sizes))]))
    seen: set[int] = set()
    events, late = [], []
    for kind, i in order:
        if kind == FREE and i not in seen:
            late.append(i)
            continue
        seen.add(i)
        events.append(HeapEvent(kind, i, f"op.{i}"))
    events += [HeapEvent(FREE, i, "end") for i in late]
    # THEN the replay's peak is the largest total of live buffers after any event (an independent walk)
    live: set[int] = set()
    best = 0
    for e in events:
        if e.kind == ALLOC:
            live.add(e.buffer)
        else:
            live.discard(e.buffer)
        best = max(best, sum(sizes[i] for i in live))
    usage = memory_usage(_assignment(dict(enumerate(sizes)), events))
    assert usage.peak_bytes == best <= sum(sizes)
    assert sum(b.size for b, _ in usage.live_at_peak) == best


@pytest.mark.slow
def test_inspect_puts_memory_in_the_headline_json_and_every_format(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "audit", "inspect", str(H200), "--json", str(out)],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "AUDIT_CACHE": ""})
    assert done.returncode == 0, done.stderr
    head = done.stdout.splitlines()[:20] if done.stdout.strip() else done.stderr.splitlines()[:20]
    line = next(x for x in head if x.startswith("memory: peak"))
    # 17,941 MiB = 18.8 GB against the device's memory as the trace states it (memory_size)
    assert "18.8 GB of 150 GB device memory (12.5%) in jit_train_step [buffer assignment, trace]" in line
    report = json.loads(out.read_text())
    row = report["program_memory"][0]
    assert row["module"] == "jit_train_step" and row["device_memory_source"] == "trace"
    assert row["peak_at"]["instruction"] == "input_transpose_fusion.22"
    assert row["largest"][0]["source_line"].endswith("transformer.py:105")
    assert row["headroom_bytes"] == pytest.approx(row["device_memory_bytes"] - row["peak_bytes"])
    for fmt, title in (("markdown", "### Memory"), ("html", 'id="program-memory"')):
        text = render(report, fmt)
        assert title in text and "18.8 GB" in text and "transformer.py:105" in text


def test_planner_breakdown_stands_beside_the_measured_one() -> None:
    # The H200 train step's own command line: 4 layers, d_model 2048, d_ff 8192, 16 heads, seq 2048, batch 8,
    # f32 parameters with Adam's two f32 moments: 12 bytes a parameter held across steps
    from audit.analyses.program_memory import planned_memory

    config = {"layers": 4, "d_model": 2048, "d_ff": 8192, "heads": 16, "kv_heads": 16, "head_dim": 128,
              "vocab": 1024, "batch": 8, "seq": 2048, "dtype": "bfloat16", "param_dtype": "float32",
              "sharding": "dp", "mesh": {"data": 1}, "mode": "train", "optimizer": "adam"}
    plan = planned_memory(config)
    assert plan is not None and plan["source"] == "plan"
    held = plan["parameter_bytes"] + plan["optimizer_bytes"]
    assert held == pytest.approx(12 * plan["params"])
    # the program's entry parameters are the parameters, both moments and the batch (two int32 [8,2048]): within 1%
    assert held == pytest.approx(3120.3 * MIB, rel=0.01)


JAX_PROGRAM = """
import jax, jax.numpy as jnp
def loss(w, x):
    for i in range(3):
        x = jnp.tanh(x @ w[i])
    return (x ** 2).sum()
print(jax.jit(jax.grad(loss))(jnp.ones((3, 256, 256)), jnp.ones((512, 256))).shape)
"""


@pytest.fixture(scope="module")
def cpu_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real XLA:CPU dump of a small training step, with the proto and XLA's buffer-assignment text."""
    folder = tmp_path_factory.mktemp("dump")
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_dump_to={folder} --xla_dump_hlo_as_proto --xla_dump_hlo_as_text"}
    subprocess.run([sys.executable, "-c", JAX_PROGRAM], check=True, env=env, timeout=300, capture_output=True)
    return folder


def _module_files(folder: Path) -> tuple[Path, Path, Path]:
    text = next(folder.glob("*jit_loss*after_optimizations.txt"))
    return text, text.with_name(text.name.replace(".txt", ".hlo.pb")), \
        text.with_name(text.name.replace(".txt", "-buffer-assignment.txt"))


@pytest.mark.slow
def test_dump_text_agrees_with_its_proto_and_bounds_its_peak(cpu_dump: Path) -> None:
    _, proto, text = _module_files(cpu_dump)
    traced = memory_usage(read_buffer_assignment(proto.read_bytes()))  # type: ignore[arg-type]
    untraced = memory_usage(read_buffer_assignment_text(text))  # type: ignore[arg-type]
    assert (untraced.parameter_bytes, untraced.live_out_bytes) == (traced.parameter_bytes, traced.live_out_bytes)
    assert untraced.allocated_bytes == traced.allocated_bytes
    assert traced.peak_bytes <= untraced.peak_bytes  # reserved temporaries bound the traced heap's peak


@pytest.mark.slow
def test_inspect_of_a_dump_reads_the_proto_beside_it_else_the_text_else_says_so(cpu_dump: Path,
                                                                              tmp_path: Path) -> None:
    from audit import inspect

    module, proto, text = _module_files(cpu_dump)
    only_text = tmp_path / "text"
    only_text.mkdir()
    for f in (module, text):
        (only_text / f.name).write_bytes(f.read_bytes())
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / module.name).write_bytes(module.read_bytes())
    with_proto = inspect(str(module)).model.part("program_memory")
    from_text = inspect(str(only_text / module.name)).model.part("program_memory")
    nothing = inspect(str(bare / module.name)).model
    assert with_proto and with_proto[0]["source"] == "buffer assignment"
    assert from_text and from_text[0]["source"] == "buffer assignment text"
    assert from_text[0]["parameter_bytes"] == with_proto[0]["parameter_bytes"]
    assert nothing.part("program_memory") is None
    assert sum("no buffer assignment beside" in w for w in nothing.warnings) == 1


@pytest.mark.slow
def test_a_run_of_a_stated_transformer_puts_the_plan_beside_its_measured_memory(tmp_path: Path) -> None:
    # GIVEN `audit run` of the reference transformer on this CPU: its config states the model's size
    from audit.cli import main

    small = ["--layers", "2", "--d-model", "64", "--heads", "4", "--seq", "32", "--batch", "4", "--vocab", "128",
             "--d-ff", "128", "--sharding", "dp"]
    out = tmp_path / "run.json"
    assert main(["run", str(ROOT / "workloads" / "transformer.py"), "--devices", "1", "--steps", "2", "--warmup", "1",
                 "--quiet", "--json", str(out), "--", *small]) == 0
    row = json.loads(out.read_text())["program_memory"][0]
    # THEN the planner's parameters and Adam moments (f32, 12 bytes a parameter) are what the step
    # holds across steps, within the batch's tokens and the step counter
    plan = row["plan"]
    held = plan["parameter_bytes"] + plan["optimizer_bytes"]
    assert plan["params"] * 12 == pytest.approx(held)
    assert held <= row["parameter_bytes"] <= held + 2 * 4 * 32 * 4 + 64
    assert "planner beside the buffer assignment" in render(json.loads(out.read_text()), "markdown").lower()


def test_a_hostile_trace_neither_hangs_nor_breaks_the_report() -> None:
    # buffers shared with each other in a cycle, an id no allocation holds, and a buffer freed twice
    from audit.analyses.program_memory import program_memory
    from audit.costmodel.chips.catalog import lookup

    cycle = [HeapEvent(ALLOC, 1, "a"), HeapEvent(SHARE_WITH, 2, "b", 1), HeapEvent(SHARE_WITH, 1, "c", 2),
             HeapEvent(ALLOC, 77, "x"), HeapEvent(FREE, 2, "d"), HeapEvent(FREE, 1, "e")]
    usage = memory_usage(_assignment({1: 10, 2: 10}, cycle))
    assert usage.peak_bytes == 10
    twice = _assignment({1: 10}, [HeapEvent(ALLOC, 1, "a"), HeapEvent(FREE, 1, "b"), HeapEvent(FREE, 1, "c")])
    notes: list[str] = []
    rows = program_memory({5: twice, 6: _assignment({1: 10}, cycle[:1])}, {}, {}, lookup("h100"), None, notes)
    assert [r["program_id"] for r in rows] == [6] and len(notes) == 1 and "program 5" in notes[0]


def test_a_peak_beyond_the_device_memory_says_the_program_cannot_run_there() -> None:
    from audit import inspect

    fits = inspect(str(H200)).model
    small = inspect(str(H200), overrides={"hbm_bytes": 1.6e10}).model  # the user's 16 GB device
    from audit.reports.sections.memory import headline

    assert "cannot run" not in (headline(fits) or "")
    line = headline(small) or ""
    assert "18.8 GB of 16.0 GB device memory (117.6%)" in line and "[buffer assignment, user]" in line
    assert "2.81 GB more than the device holds, it cannot run there" in line


def test_a_program_with_nothing_on_the_heap_has_no_peak_event_and_no_negative_figure():
    # The MI300X GEMM benchmark's broadcast programs put nothing on the heap: their peak is reached at no
    # heap event, written null (the hostile campaign caught the reader's -1 in the JSON).
    from audit.orchestration.pipeline import analyse_profile

    rows = analyse_profile(ROOT / "tests/data/fixtures/gpu-mi300x/gemm.xplane.pb").to_json()["program_memory"]
    events = [r["peak_at"]["event"] for r in rows]
    assert None in events and any(e is not None for e in events)
    assert all(e is None or e >= 0 for e in events)
    assert all(r[k] >= 0 for r in rows for k in ("peak_bytes", "parameter_bytes", "live_out_bytes", "temporary_bytes"))
