"""HLO text (TPU dump, CPU `compiled.as_text()`) reads into the module model, exactly and robustly."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from conftest import shared_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.base.errors import InputError
from audit.parsers.hlo.files import load_hlo_file, read_hlo_if_module
from audit.parsers.hlo.model import Module
from audit.parsers.hlo.text import parse_hlo_text

TPU_DUMP = "tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"


@lru_cache(maxsize=1)
def _tpu() -> tuple[str, Module]:
    text = shared_fixture(TPU_DUMP).read_text()
    return text, parse_hlo_text(text, origin=TPU_DUMP)


def test_tpu_dump_counts_match_an_independent_line_count():
    text, module = _tpu()
    instructions = re.findall(r"^\s+(?:ROOT )?%[^\s=]+ = ", text, re.M)
    headers = re.findall(r"^(?:ENTRY )?%(\S+) .*\{$", text, re.M)
    assert module.instruction_count == len(instructions) == 3344
    assert set(module.computations) == set(headers) and len(headers) == 307
    entry = re.search(r"^ENTRY %(\S+) ", text, re.M).group(1)
    assert module.entry == entry and module.name == "jit_train_step" and module.source == "text"


def test_tpu_dump_graph_is_closed():
    # Every operand names an instruction of the same computation; every callee exists.
    _, module = _tpu()
    for comp in module.computations.values():
        names = {i.name for i in comp.instructions}
        assert comp.root in names
        for instr in comp.instructions:
            assert set(instr.operands) <= names, instr.name
            assert all(c in module.computations for c in instr.called), instr.name


def test_tpu_layouts_tiles_and_memory_spaces():
    _, module = _tpu()
    param = module.find("param_1.7")[1]  # s32[32768]{0:T(1024)S(1)}
    assert (param.shape.dtype, param.shape.dims, param.shape.layout) == ("s32", (32768,), (0,))
    assert param.shape.tiles == ((1024,),) and param.shape.memory_space == 1
    weights = module.find("param_0.2")[1]  # bf16[128256,4096]{1,0:T(8,128)(2,1)}
    assert weights.shape.tiles == ((8, 128), (2, 1)) and weights.shape.memory_space == 0
    assert weights.shape.byte_size == 128256 * 4096 * 2
    scalar = module.find("psum.6")[1]  # f32[]{:T(128)}
    assert scalar.shape.dims == () and scalar.shape.layout == () and scalar.shape.tiles == ((128,),)


def test_tpu_collectives_fusions_and_sources():
    _, module = _tpu()
    gathers = [i for _, i in module.instructions() if i.opcode == "all-gather"]
    assert gathers and all(i.replica_groups == (tuple(range(8)),) for i in gathers)
    assert all(i.use_global_device_ids and i.channel_id for i in gathers)
    gather = module.find("all-gather.136")[1]
    assert gather.dimensions == (1,)
    # stack_frame_id=66 -> file location 38 -> modeling_llama3.py line 808.
    assert gather.metadata.source == "/app/trainer/model/modeling_llama3.py:808"
    kinds = {i.fusion_kind for _, i in module.instructions() if i.opcode == "fusion"}
    assert kinds <= {"kLoop", "kInput", "kOutput", "kCustom"} and "kLoop" in kinds
    fused = [c for c in module.computations.values() if c.is_fusion]
    assert fused and all(c.name for c in fused)


def test_tpu_multiline_custom_call_and_stack_frames():
    text, module = _tpu()
    splash = module.find("splash_mha_fwd_residuals.2")[1]
    assert splash.opcode == "custom-call" and splash.custom_call_target
    assert splash.metadata.op_name.endswith("pallas_call")
    # stack_frame_id=40 -> FileLocations -> FileNames, resolved like XLA's own printer does.
    frame = splash.attr("stack_frame_id")
    location = re.search(rf"^{frame} {{file_location_id=(\d+) ", text.split("StackFrames", 1)[1], re.M).group(1)
    file_id, line = re.search(rf"^{location} {{file_name_id=(\d+) function_name_id=\d+ line=(\d+)",
                              text.split("FileLocations", 1)[1], re.M).groups()
    file_name = re.search(rf'^{file_id} "([^"]*)"', text, re.M).group(1)
    assert splash.metadata.source == f"{file_name}:{line}"


def test_tpu_attributes_keep_raw_text():
    _, module = _tpu()
    gte = module.find("get-tuple-element.2800")[1]
    assert gte.attr("index") == "2" and gte.operands == ("add_convert_fusion.6",)
    iota = module.find("iota.79")[1]
    assert iota.dimensions == (0,)
    call = next(i for _, i in module.instructions() if i.opcode == "while")
    assert call.attr("body") and call.attr("condition") and call.called == (call.attr("body"), call.attr("condition"))


def _compiled_text() -> str:
    def f(x, w, img):
        h = jax.lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h @ w) + i, x)
        k = jnp.ones((4, 3, 3, 3), img.dtype)
        y = jax.lax.conv_general_dilated(img, k, (2, 2), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return h.sum(axis=0), y, jnp.pad(x, ((1, 0), (0, 2)))[1:, :5]

    args = (jnp.ones((8, 16)), jnp.ones((16, 16)), jnp.ones((2, 3, 8, 8)))
    return jax.jit(f).lower(*args).compile().as_text()


def test_cpu_compiled_program():
    module = parse_hlo_text(_compiled_text(), origin="compiled.as_text()")
    by_opcode: dict[str, list] = {}
    for _, instr in module.instructions():
        by_opcode.setdefault(instr.opcode, []).append(instr)
    loop = by_opcode["while"][0]
    assert loop.attr("known_trip_count") == "4"
    body = module.computations[loop.attr("body")]
    assert any(i.opcode in ("dot", "fusion") for i in body.instructions)
    dot = by_opcode["dot"][0]
    assert dot.dot.lhs_contracting == (1,) and dot.dot.rhs_contracting == (0,)
    conv = by_opcode["convolution"][0].conv
    assert conv.window_size == (3, 3) and conv.window_stride == (2, 2)
    assert len(conv.input_spatial) == 2 and conv.feature_group_count == 1
    reduce = next(i for i in by_opcode["reduce"] if i.shape.dims == (16,))
    assert reduce.dimensions == (0,) and reduce.called == (reduce.attr("to_apply"),)
    slices = by_opcode.get("slice", [])
    assert any(s.slice and all(stride == 1 for _, _, stride in s.slice) for s in slices)


@pytest.mark.parametrize("text,message", [
    ("", "not an HLO module"),
    ("hello world\n", "not an HLO module"),
    ('module @jit_f attributes {mhlo.num_partitions = 1 : i32} {\n}\n', "StableHLO"),
    ("HloModule m\n\nENTRY %main () -> f32[] {\n  ROOT %c = f32[] constant(1)\n", "not closed"),
    ("HloModule m\n\nENTRY %main () -> f32[] {\n  ROOT %c = f32[ constant(1)\n}\n", "line 4"),
    ("HloModule m\n\nENTRY %main () -> f32[] {\n  ROOT %c = f32[] add(%a, %b), replica_groups=[3]<=[3]\n}\n",
     "line 4"),
    ("HloModule m\n", "no computations"),
])
def test_bad_text_is_one_input_error(text, message):
    with pytest.raises(InputError, match=message) as info:
        parse_hlo_text(text, origin="dump.txt")
    assert "\n" not in str(info.value) and "dump.txt" in str(info.value)


def test_text_files_are_routed_by_content(tmp_path):
    path = shared_fixture(TPU_DUMP)
    assert read_hlo_if_module(path) is not None
    assert load_hlo_file(path).instruction_count == 3344
    odd_name = tmp_path / "module.dump"
    odd_name.write_text("HloModule m\n\nENTRY %main () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n")
    assert read_hlo_if_module(odd_name) is not None and load_hlo_file(odd_name).entry == "main"
    notes = tmp_path / "notes.txt"
    notes.write_text("not hlo\n")
    assert read_hlo_if_module(notes) is None
    with pytest.raises(InputError, match="not an HLO module"):
        load_hlo_file(notes)
    assert read_hlo_if_module(tmp_path / "missing.txt") is None
    with pytest.raises(InputError, match="no such file"):
        load_hlo_file(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="not a file"):
        load_hlo_file(tmp_path)


_DTYPES = ["pred", "s8", "s32", "u32", "bf16", "f16", "f32", "f64", "f8e4m3fn", "f4e2m1fn", "c64"]


@st.composite
def array_shapes(draw):
    dtype = draw(st.sampled_from(_DTYPES))
    dims = draw(st.lists(st.integers(0, 4096), max_size=4))
    layout = draw(st.permutations(range(len(dims))))
    tiles = draw(st.lists(st.lists(st.integers(1, 1024), min_size=1, max_size=2), max_size=3))
    space = draw(st.integers(0, 3))
    text = f"{dtype}[{','.join(map(str, dims))}]"
    suffix = "".join("(" + ",".join(map(str, t)) + ")" for t in tiles)
    annotations = (f"T{suffix}" if tiles else "") + (f"S({space})" if space else "")
    text += "{" + ",".join(map(str, layout)) + (":" + annotations if annotations else "") + "}"
    return text, dtype, tuple(dims), tuple(layout), tuple(tuple(t) for t in tiles), space


@settings(max_examples=150, deadline=None)
@given(st.lists(array_shapes(), min_size=1, max_size=6))
def test_shapes_read_back_exactly(shapes):
    # As an instruction's result: one array, or a tuple with XLA's /*index=N*/ comments.
    texts = [s[0] for s in shapes]
    if len(shapes) == 1:
        shape_text = texts[0]
    else:
        shape_text = "(" + ", ".join(f"/*index={i}*/{t}" if i % 5 == 0 and i else t for i, t in enumerate(texts)) + ")"
    module = parse_hlo_text(f"HloModule m\n\nENTRY %e () -> f32[] {{\n  ROOT %x = {shape_text} custom-call(), "
                            f'custom_call_target="t"\n}}\n')
    shape = module.find("x")[1].shape
    leaves = [shape] if len(shapes) == 1 else list(shape.tuple_shapes)
    assert len(leaves) == len(shapes)
    for leaf, (_, dtype, dims, layout, tiles, space) in zip(leaves, shapes):
        assert (leaf.dtype, leaf.dims, leaf.tiles, leaf.memory_space) == (dtype, dims, tiles, space)
        assert leaf.layout == (None if not dims and not tiles and not space else layout)


def test_xla_0_11_tuple_element_operands_are_the_elements_they_name():
    # XLA 0.11 prints `fusion(%loop_add_subtract_fusion.40#1)` where earlier versions printed a
    # get-tuple-element of their own: the operand is element 1 of that fusion's tuple result.
    from conftest import ROOT

    from audit.orchestration.pipeline import analyse_hlo, analyse_profile

    captures = ROOT / "tests" / "data" / "captures" / "h100-jax0.11"
    path = captures / "dump" / "module_0000.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"
    module = load_hlo_file(path)
    found = module.find("loop_add_subtract_fusion.40#1")
    assert found is not None and found[1].opcode == "get-tuple-element" and str(found[1].shape) == "s32[]"
    assert module.find("loop_add_subtract_fusion.40#2") is None and module.find("loop_subtract_fusion#0") is None
    dump = analyse_hlo(path, hardware="h100").to_json()
    assert not [o["name"] for o in dump["ops"] if o["expected_s"] is None]
    # The same program embedded in the capture (a proto, whose get-tuple-elements are instructions)
    # prices alike: the dump predicts one step.
    traced = analyse_profile(captures / "train-step.xplane.pb").to_json()
    per_step = traced["summary"]["expected_s"] / traced["summary"]["steps"]
    assert dump["summary"]["expected_s"] == pytest.approx(per_step, rel=0.01)


@pytest.mark.parametrize("path", [*(Path(__file__).parent / "data" / "hlo" / name for name in ("caveats.hlo", "host_offload.hlo")),
                                  shared_fixture(TPU_DUMP), shared_fixture(
                                      "gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb")],
                         ids=lambda p: p.name)
def test_the_computations_running_as_ops_are_those_the_cost_model_plans(path: Path) -> None:
    from audit.costmodel.ops.module import execution_plan

    module = load_hlo_file(path)
    running = [c.name for c in module.running()]
    assert len(running) == len(set(running)) and set(running) == set(execution_plan(module))
    assert not any(module.computations[name].is_fusion for name in running)
