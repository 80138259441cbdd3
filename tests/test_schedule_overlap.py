"""The predicted step with async collectives hidden behind the compute scheduled in their window."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxlib import _hlo

from audit.costmodel.schedule import walk_schedule
from audit.orchestration.pipeline import analyse_hlo
from audit.parsers.hlo.files import load_hlo_file
from audit.parsers.hlo.text import parse_hlo_text
from conftest import render, shared_fixture

# 4-way all-gather of 64 MiB (about 115 us over H100 NVLink) beside an 8192^3 bf16 dot (1.1 ms):
# the dot is scheduled between the start and the done, so the gather hides behind it.
HIDDEN = """HloModule overlap, is_scheduled=true, num_partitions=4

ENTRY main {
  w = bf16[1024,8192]{1,0} parameter(0)
  x = bf16[8192,8192]{1,0} parameter(1)
  y = bf16[8192,8192]{1,0} parameter(2)
  ags = (bf16[1024,8192]{1,0}, bf16[4096,8192]{1,0}) all-gather-start(w), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  d = bf16[8192,8192]{1,0} dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  agd = bf16[4096,8192]{1,0} all-gather-done(ags)
  ROOT out = (bf16[8192,8192]{1,0}, bf16[4096,8192]{1,0}) tuple(d, agd)
}
"""

# The same program with the dot scheduled after the done: nothing to hide behind.
EXPOSED = HIDDEN.replace(
    "  d = bf16[8192,8192]{1,0} dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  agd = bf16[4096,8192]{1,0} all-gather-done(ags)\n",
    "  agd = bf16[4096,8192]{1,0} all-gather-done(ags)\n"
    "  d = bf16[8192,8192]{1,0} dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n")

# A small dot in the window hides only part of the gather.
PARTIAL = HIDDEN.replace("x = bf16[8192,8192]{1,0} parameter(1)", "x = bf16[512,8192]{1,0} parameter(1)") \
    .replace("d = bf16[8192,8192]{1,0} dot", "d = bf16[512,8192]{1,0} dot") \
    .replace("ROOT out = (bf16[8192,8192]{1,0}", "ROOT out = (bf16[512,8192]{1,0}")


def report_for(tmp_path, text: str, name: str = "m.hlo") -> dict:
    path = tmp_path / name
    path.write_text(text)
    return analyse_hlo(path, hardware="h100:4").to_json()


@pytest.mark.parametrize("text", [HIDDEN, EXPOSED, PARTIAL])
def test_the_modules_parse_with_xlas_own_parser(text):
    assert _hlo.hlo_module_from_text(text) is not None
    assert parse_hlo_text(text).is_scheduled


def test_a_gather_hidden_behind_the_dot_is_not_exposed(tmp_path):
    r = report_for(tmp_path, HIDDEN)
    s = r["summary"]
    ag = next(c for c in r["collectives"] if c["kind"] == "all-gather")
    assert ag["expected_s"] == pytest.approx(115e-6, rel=0.05)
    assert s["exposed_comm_s"] == pytest.approx(0.0, abs=1e-9)
    assert ag["exposed_s"] == pytest.approx(0.0, abs=1e-9)
    assert ag["window_compute_s"] == pytest.approx(2 * 8192 ** 3 / 989e12, rel=0.01)
    assert s["expected_step_s"] == pytest.approx(s["expected_s"] - ag["expected_s"], rel=1e-6)
    assert s["expected_step_s"] < s["expected_s"]
    assert s["step_time_s"]["median"] == s["expected_step_s"]


def test_a_gather_waited_for_at_once_is_all_exposed(tmp_path):
    r = report_for(tmp_path, EXPOSED)
    s = r["summary"]
    ag = next(c for c in r["collectives"] if c["kind"] == "all-gather")
    assert s["expected_step_s"] == pytest.approx(s["expected_s"], rel=1e-9)
    assert s["exposed_comm_s"] == pytest.approx(ag["expected_s"], rel=1e-9)
    assert ag["window_compute_s"] == 0.0


def test_a_short_window_hides_only_its_compute(tmp_path):
    r = report_for(tmp_path, PARTIAL)
    s = r["summary"]
    ag = next(c for c in r["collectives"] if c["kind"] == "all-gather")
    dot = next(o for o in r["ops"] if o["opcode"] == "dot")
    assert ag["exposed_s"] == pytest.approx(ag["expected_s"] - dot["expected_s"], rel=1e-6)
    assert ag["hidden_s"] == pytest.approx(dot["expected_s"], rel=1e-6)
    assert s["expected_step_s"] == pytest.approx(ag["expected_s"], rel=1e-6)


def test_every_report_format_shows_both_steps(tmp_path):
    r = report_for(tmp_path, HIDDEN)
    step, total = r["summary"]["expected_step_s"], r["summary"]["expected_s"]
    terminal = render(r, "terminal")
    assert "with async overlap" in terminal and "1.11 ms" in terminal and "1.23 ms with none" in terminal
    md = render(r, "markdown")
    # A prediction: the predicted step is the overlapped one, beside the no-overlap sum.
    assert "| Predicted step | Expected step (no overlap) |" in md and "Exposed comm" in md and "| 1.11 ms | 1.23 ms |" in md
    html = render(r, "html")
    assert "Expected step with overlap" in html and "exposed communication 0 s" in html
    rows = list(csv.DictReader(io.StringIO(render(r, "csv"))))
    ags = next(row for row in rows if row["name"] == "ags")
    assert float(ags["exposed_s"]) == 0.0 and float(ags["hidden_s"]) > 0
    assert step < total


def test_maxtext_h100_step_hides_part_of_its_gathers():
    path = shared_fixture("gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb")
    module = load_hlo_file(path)
    # The proto lists instructions in post order; the schedule is a different order of the same ops.
    order = [i.name for i in module.sequence(module.entry)]
    assert module.is_scheduled and sorted(order) == sorted(i.name for i in module.entry_computation.instructions)
    assert order != [i.name for i in module.entry_computation.instructions]
    r = analyse_hlo(path, hardware="h100:4").to_json()
    s = r["summary"]
    gathers = [c for c in r["collectives"] if c["kind"] == "all-gather" and c["exposed_s"] is not None]
    assert gathers and all(c["window_compute_s"] >= 0 and c["exposed_s"] >= 0 for c in gathers)
    assert any(c["hidden_s"] > 0 for c in gathers)
    hidden = sum(o.get("hidden_s", 0.0) for o in r["ops"] if not o["container"])
    assert s["expected_step_s"] == pytest.approx(s["expected_s"] - hidden, rel=1e-9)
    assert 0 < s["expected_step_s"] < s["expected_s"]
    assert s["exposed_comm_s"] >= 0


# ---- the walk on its own: a property test over random schedules ----

def _module(items: list[tuple[str, int]]) -> tuple[str, dict[str, float]]:
    """HLO text of a scheduled module from (kind, size) items, and each op's expected seconds."""
    lines, seconds, open_starts = ["  p = f32[8]{0} parameter(0)"], {}, []
    for n, (kind, size) in enumerate(items):
        if kind == "compute":
            lines.append(f"  c{n} = f32[8]{{0}} add(p, p)")
            seconds[f"c{n}"] = size * 1e-6
        elif kind == "start":
            lines.append(f"  s{n} = f32[32]{{0}} all-gather-start(p), channel_id={n + 1}, "
                         "replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true")
            seconds[f"s{n}"] = size * 1e-6
            open_starts.append(f"s{n}")
        elif open_starts:
            lines.append(f"  d{n} = f32[32]{{0}} all-gather-done({open_starts.pop(0)})")
    for n, name in enumerate(open_starts):
        lines.append(f"  e{n} = f32[32]{{0}} all-gather-done({name})")
    lines.append("  ROOT r = f32[8]{0} add(p, p)")
    return "HloModule m, is_scheduled=true\n\nENTRY main {\n" + "\n".join(lines) + "\n}\n", seconds


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["compute", "start", "done"]), st.integers(0, 50)), max_size=12))
def test_the_overlapped_step_lies_between_the_compute_and_the_no_overlap_sum(items):
    text, seconds = _module(items)
    walk = walk_schedule(parse_hlo_text(text), seconds)
    compute = sum(v for k, v in seconds.items() if k.startswith("c"))
    assert walk.no_overlap_s == pytest.approx(sum(seconds.values()), abs=1e-15)
    assert compute - 1e-15 <= walk.step_s <= walk.no_overlap_s + 1e-15
    # The step is compute plus the stalls at each done.
    assert walk.step_s == pytest.approx(compute + walk.exposed_comm_s, abs=1e-15)
    assert walk.no_overlap_s - walk.step_s == pytest.approx(walk.hidden_s, abs=1e-15)


TWO_KINDS = """HloModule two, is_scheduled=true, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[1024]{0} parameter(0)
  ag = (f32[1024]{0}, f32[4096]{0}) all-gather-start(p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  ar = f32[1024]{0} all-reduce-start(p), channel_id=2, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add
  c = f32[1024]{0} add(p, p)
  agd = f32[4096]{0} all-gather-done(ag)
  ard = f32[1024]{0} all-reduce-done(ar)
  ROOT out = (f32[4096]{0}, f32[1024]{0}, f32[1024]{0}) tuple(agd, ard, c)
}
"""


def test_gpu_collectives_share_one_stream_tpu_kinds_overlap():
    """100 us all-gather and 100 us all-reduce launched together beside 150 us of compute: on TPU
    (a resource per kind) both hide; on GPU (one collective stream) the all-reduce waits for the
    gather and 50 us is exposed."""
    assert _hlo.hlo_module_from_text(TWO_KINDS) is not None
    module = parse_hlo_text(TWO_KINDS)
    seconds = {"ag": 100e-6, "ar": 100e-6, "c": 150e-6}
    tpu = walk_schedule(module, seconds)
    gpu = walk_schedule(module, seconds, shared_stream=True)
    assert tpu.step_s == pytest.approx(150e-6) and tpu.exposed_comm_s == pytest.approx(0.0)
    assert gpu.step_s == pytest.approx(200e-6) and gpu.exposed_comm_s == pytest.approx(50e-6)
    assert {w.start: w.exposed_s for w in gpu.windows} == pytest.approx({"ag": 0.0, "ar": 50e-6})


LOOP = """HloModule loop, is_scheduled=true, num_partitions=4

body {
  p = (s32[], f32[1024]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[1024]{0} get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ag = (f32[1024]{0}, f32[4096]{0}) all-gather-start(x), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  y = f32[1024]{0} multiply(x, x)
  agd = f32[4096]{0} all-gather-done(ag)
  s = f32[1024]{0} slice(agd), slice={[0:1024]}
  z = f32[1024]{0} add(y, s)
  ROOT t = (s32[], f32[1024]{0}) tuple(j, z)
}

cond {
  p = (s32[], f32[1024]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT c = pred[] compare(i, n), direction=LT
}

ENTRY main {
  x0 = f32[1024]{0} parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[1024]{0}) tuple(zero, x0)
  w = (s32[], f32[1024]{0}) while(init), condition=cond, body=body, backend_config={"known_trip_count":{"n":"5"}}
  ROOT r = f32[1024]{0} get-tuple-element(w), index=1
}
"""


def test_a_loop_body_is_walked_once_per_trip():
    """5 trips of: 30 us gather started, 20 us multiply in its window, 10 us stall, 5 us slice and add."""
    assert _hlo.hlo_module_from_text(LOOP) is not None
    seconds = {"ag": 30e-6, "y": 20e-6, "s": 2e-6, "z": 3e-6}
    walk = walk_schedule(parse_hlo_text(LOOP), seconds)
    assert walk.step_s == pytest.approx(5 * (20e-6 + 10e-6 + 5e-6))
    assert walk.no_overlap_s == pytest.approx(5 * 55e-6)
    (window,) = walk.windows
    assert window.executions == 5 and window.exposed_s == pytest.approx(10e-6)
    assert walk.exposed_comm_s == pytest.approx(5 * 10e-6) and walk.hidden_s == pytest.approx(5 * 20e-6)


@pytest.mark.parametrize(("duration", "exposed"), [(1e-3, 1e-3 + 1.7e-18), (1e-3, 2e-3), (0.0, 0.0)])
def test_hidden_time_is_never_negative(duration, exposed):
    # A window exposed a rounding beyond its duration gave hidden_s -1.7e-18 in the JSON: none is hidden
    from audit.costmodel.schedule import Window

    hidden = Window(start="ag-start", done="ag-done", kind="all-gather", computation="main", duration_s=duration,
                    exposed_s=exposed).hidden_s
    assert hidden == 0.0 and str(hidden) == "0.0"
