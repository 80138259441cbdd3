"""HLO whose call graph is hostile: computations shared by many paths are walked once, nesting and
executions are bounded, and impossible fields are refused naming the instruction."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hostile_hlo import nested, shared_dag
from hostile_inputs import craft_hlo

from audit.cli import main
from audit.costmodel import residency, schedule
from audit.costmodel.ops import base, control, module as module_costs
from audit.costmodel.chips.catalog import lookup
from audit.costmodel.ops.module import cost_module
from audit.base.errors import ExitCode, InputError
from audit.parsers.hlo.text import parse_hlo_text

DEPTH = 12  # 2^12 paths to the leaf: a walk per path is thousands of visits, a walk per computation 13


def _counting(monkeypatch, owner, name: str, key=lambda args: id(args[0])) -> Counter[object]:
    """Count calls of `owner.name`, by `key` of their arguments (by default the first argument itself)."""
    calls: Counter[object] = Counter()
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        calls[key(args)] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_a_fusion_dag_is_costed_once_per_instruction_with_every_path_counted(monkeypatch):
    module = parse_hlo_text(shared_dag("fusion", DEPTH), "dag.hlo")
    calls = _counting(monkeypatch, base, "cost_instruction")
    root = cost_module(module)["r"]
    assert max(calls.values()) == 1 and sum(calls.values()) <= module.instruction_count
    # Level i runs level i-1 twice and adds: 8 exponentials at the leaf, 2^DEPTH leaves.
    assert root.transcendentals == 8 * 2**DEPTH
    assert root.flops == 8 * (2**DEPTH - 1)


def test_a_call_dag_is_walked_once_per_computation_in_the_schedule(monkeypatch):
    module = parse_hlo_text(shared_dag("call", DEPTH), "dag.hlo")
    walks = _counting(monkeypatch, schedule._Walker, "_walk", key=lambda args: args[1])
    leaf, add = 3e-6, 1e-6
    expected = {"e": leaf, "s": add}
    walk = schedule.walk_schedule(module, expected)
    assert walks == Counter({f"c{i}": 1 for i in range(DEPTH + 1)} | {"main": 1})
    # T(0) = leaf, T(i) = 2 T(i-1) + add: the step runs every path.
    assert walk.step_s == pytest.approx(2**DEPTH * leaf + (2**DEPTH - 1) * add)
    assert walk.no_overlap_s == pytest.approx(walk.step_s)


def test_an_async_start_wrapping_a_call_dag_carries_every_path_costed_once(monkeypatch):
    text = shared_dag("call", DEPTH).replace(
        f"  ROOT %r = f32[8]{{0}} call(%x), to_apply=%c{DEPTH}",
        f"  %st = ((f32[8]{{0}}), f32[8]{{0}}) async-start(%x), calls=%c{DEPTH}\n"
        "  ROOT %r = f32[8]{0} async-done(%st)")
    module = parse_hlo_text(text, "dag.hlo")
    calls = _counting(monkeypatch, control, "cost_instruction")
    start = cost_module(module)["st"]
    assert max(calls.values()) == 1
    assert start.transcendentals == 8 * 2**DEPTH


def test_cache_footprints_visit_each_computation_once(monkeypatch):
    module = parse_hlo_text(shared_dag("call", DEPTH), "dag.hlo")
    sized = _counting(monkeypatch, residency, "nbytes")
    footprint = residency._footprint(module)
    # Each computation's ops are sized once; a walk per call would size the levels below each call again.
    assert sum(sized.values()) <= module.instruction_count
    # The entry's call touches every computation's buffers once: 4 f32[8] buffers a level, 2 at the leaf.
    assert footprint["r"] == 32.0 * (4 * DEPTH + 2)


def test_the_report_of_a_fusion_dag_20_deep_counts_every_path(tmp_path):
    path, out = tmp_path / "dag.hlo", tmp_path / "r.json"
    path.write_text(shared_dag("fusion", 20))
    assert main(["inspect", str(path), "--hardware", "h100", "-q", "--json", str(out)]) == 0
    root = next(op for op in json.loads(out.read_text())["ops"] if op["name"] == "r")
    assert root["flops"] == 8 * (2**20 - 1)


@pytest.mark.parametrize(("kind", "depth"), [("fusion", 400), ("call", 1200), ("conditional", 1200),
                                             ("while", 200)])
def test_nesting_past_the_limit_is_refused_naming_the_instruction(kind, depth):
    with pytest.raises(InputError) as caught:
        parse_hlo_text(nested(kind, depth), "nest.hlo")
    text = str(caught.value)
    deepest = 64 if kind != "while" else 65  # a loop's condition is one computation below its caller too
    assert text.startswith(f"nest.hlo: HLO instruction '{'in' if kind == 'while' else 'a'}' in computation "
                           f"'c{deepest}' calls 'c{deepest - 1}': computations nested more than 64 deep"), text


@pytest.mark.parametrize("kind", ["fusion", "call", "conditional", "while"])
def test_nesting_within_the_limit_is_costed(kind):
    module = parse_hlo_text(nested(kind, 60, trips=1), "nest.hlo")
    costs = cost_module(module)
    assert costs and all(c.modeled for c in costs.values())


def test_nested_trip_counts_multiply_up_to_the_limit_and_are_refused_past_it(capsys, tmp_path):
    module = parse_hlo_text(nested("while", 3, trips=1000), "loops.hlo")
    plan = module_costs.execution_plan(module)
    # A body runs its loop's trip count times per run of its caller; a condition once more.
    assert [plan[f"c{i}"][0] for i in (3, 2, 1)] == [1000, 1000**2, 1000**3]
    assert [plan[f"w{i}"][0] for i in (3, 2, 1)] == [1001, 1000 * 1001, 1000**2 * 1001]
    path = tmp_path / "loops.hlo"
    path.write_text(nested("while", 8, trips=1_000_000_000_000))
    assert main(["inspect", str(path), "--hardware", "h100", "-q"]) == ExitCode.INPUT
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "HLO instruction 'in' in computation 'c8' runs 'c7' more than 1,125,899,906,842,624 " \
                                "times per run of the program" in err, err


@pytest.mark.parametrize(("craft", "words"), [
    ("layout-out-of-range", "HLO instruction 'd' in computation 'main' has a layout {7,0} that is not a permutation "
                            "of the 2 dimensions of f32[8,8]"),
    ("parameter-named", "HLO instruction 'a' in computation 'main' is parameter(%a): a parameter's operand is its "
                        "number"),
    ("mesh-axis-zero", "line 37: mesh replica groups: a mesh of [4, 0]: a size of 0"),
    ("iota-groups-zero", "line 37: iota replica groups [0,4]<=[0]: a size of 0"),
    ("dynamic-dim", "HLO instruction 'd' in computation 'main' has an unbounded dynamic dimension in f32[8,?]"),
    ("dynamic-dim-parameter", "HLO instruction 'a' in computation 'main' has an unbounded dynamic dimension in "
                              "f32[?,16]"),
    ("groups-empty-group", "line 37: replica groups: group 0 holds no device"),
    ("tile-zero", "HLO instruction 'd' in computation 'main' has a layout tile T(0, 128) in f32[8, 8]: a tile's side "
                  "is 1 to 65,536 elements"),
    ("tile-huge", "HLO instruction 'd' in computation 'main' has a layout tile T(9223372036854775807, "
                  "9223372036854775807) in f32[8, 8]"),
    ("backend-config-deep", "HLO instruction 'loop' in computation 'main' has a backend_config nested more than 64 "
                            "deep"),
])
def test_impossible_fields_exit_2_in_one_line_naming_where(tmp_path, capsys, craft, words):
    path = tmp_path / "m.hlo"
    path.write_text(craft_hlo("", craft, random.Random(0)))
    assert main(["inspect", str(path), "--hardware", "h100", "-q"]) == ExitCode.INPUT
    err = capsys.readouterr().err.strip()
    assert err == f"audit: error: {path}: {words}" or (err.startswith(f"audit: error: {path}: ") and words in err
                                                       and "\n" not in err), err


def test_a_stack_frame_without_a_location_gives_no_source_and_the_report_goes_on():
    module = parse_hlo_text(craft_hlo("", "stack-frame-no-location", random.Random(0)), "m.hlo")
    out = module.find("out")[1]
    assert out.attr("stack_frame_id") == "1" and out.metadata.source_file == ""


def test_a_stack_frame_id_that_is_not_a_number_names_the_line():
    text = craft_hlo("", "stack-frame-no-location", random.Random(0)).replace("stack_frame_id=1", "stack_frame_id=x")
    with pytest.raises(InputError, match=r"m.hlo: line \d+: cannot read instruction: metadata stack_frame_id 'x' is "
                                         "not a frame number"):
        parse_hlo_text(text, "m.hlo")


def test_real_layouts_parameters_and_configs_pass_the_checks(fixture_path):
    """The checks refuse only what no compiler writes: every real dump here reads."""
    from audit.parsers.hlo.files import load_hlo_file

    for name in ("gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb",
                 "tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"):
        module = load_hlo_file(fixture_path(name))
        costs = cost_module(module)
        assert len(costs) > 1000
        assert residency.with_residency(module, costs, lookup("h100"))
