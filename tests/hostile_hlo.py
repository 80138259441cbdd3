"""Crafted HLO structure: shared subcomputations, deep nesting, loops whose trip counts multiply, and
crafted fields of a real HloModuleProto.

Used by tests/hostile_inputs.py (`craft_hlo`), the corpus script and the campaign. Text modules
are small and valid in XLA's grammar except where a craft says otherwise; every function is
deterministic given its `random.Random`.
"""

from __future__ import annotations

import random
from typing import Any, Callable

_LEAF = ["%c0 (p: f32[8]) -> f32[8] {", "  %p = f32[8]{0} parameter(0)", "  ROOT %e = f32[8]{0} exponential(%p)", "}",
         ""]


def shared_dag(kind: str, depth: int) -> str:
    """Each level calls the level below twice (`fusion` or `call`): 2^depth paths to the leaf."""
    lines = ["HloModule dag", "", *_LEAF]
    for i in range(1, depth + 1):
        op = (f"fusion(%p), kind=kLoop, calls=%c{i - 1}", f"fusion(%a), kind=kLoop, calls=%c{i - 1}") \
            if kind == "fusion" else (f"call(%p), to_apply=%c{i - 1}", f"call(%a), to_apply=%c{i - 1}")
        lines += [f"%c{i} (p: f32[8]) -> f32[8] {{", "  %p = f32[8]{0} parameter(0)", f"  %a = f32[8]{{0}} {op[0]}",
                  f"  %b = f32[8]{{0}} {op[1]}", "  ROOT %s = f32[8]{0} add(%a, %b)", "}", ""]
    call = f"fusion(%x), kind=kLoop, calls=%c{depth}" if kind == "fusion" else f"call(%x), to_apply=%c{depth}"
    lines += ["ENTRY %main (x: f32[8]) -> f32[8] {", "  %x = f32[8]{0} parameter(0)", f"  ROOT %r = f32[8]{{0}} {call}",
              "}"]
    return "\n".join(lines) + "\n"


def _nested_level(kind: str, i: int) -> list[str]:
    head = [f"%c{i} (p: f32[8]) -> f32[8] {{", "  %p = f32[8]{0} parameter(0)"]
    if kind == "fusion":
        return head + [f"  ROOT %a = f32[8]{{0}} fusion(%p), kind=kLoop, calls=%c{i - 1}", "}", ""]
    if kind == "call":
        return head + [f"  ROOT %a = f32[8]{{0}} call(%p), to_apply=%c{i - 1}", "}", ""]
    return head + ["  %k = pred[] constant(true)", f"  ROOT %a = f32[8]{{0}} conditional(%k, %p, %p), "
                   f"true_computation=%c{i - 1}, false_computation=%c0", "}", ""]


def _loop_level(i: int, trips: int) -> list[str]:
    """Condition `w{i}` (i < trips) and body `c{i}`, whose body runs the loop of level i-1."""
    inner = (f"  %in = (s32[], f32[8]{{0}}) while(%it), condition=%w{i - 1}, body=%c{i - 1}" if i > 1
             else "  %in = (s32[], f32[8]{0}) tuple(%z, %v)")
    return [f"%w{i} (t: (s32[], f32[8])) -> pred[] {{", "  %t = (s32[], f32[8]{0}) parameter(0)",
            "  %i = s32[] get-tuple-element(%t), index=0", f"  %n = s32[] constant({trips})",
            "  ROOT %lt = pred[] compare(%i, %n), direction=LT", "}", "",
            f"%c{i} (t: (s32[], f32[8])) -> (s32[], f32[8]) {{", "  %t = (s32[], f32[8]{0}) parameter(0)",
            "  %i = s32[] get-tuple-element(%t), index=0", "  %one = s32[] constant(1)", "  %j = s32[] add(%i, %one)",
            "  %v = f32[8]{0} get-tuple-element(%t), index=1", "  %z = s32[] constant(0)",
            "  %it = (s32[], f32[8]{0}) tuple(%z, %v)", inner, "  %u = f32[8]{0} get-tuple-element(%in), index=1",
            "  %e = f32[8]{0} exponential(%u)", "  ROOT %r = (s32[], f32[8]{0}) tuple(%j, %e)", "}", ""]


def nested(kind: str, depth: int, trips: int = 2) -> str:
    """`depth` levels of `fusion`, `call`, `conditional` or `while` inside each other (loops of `trips`)."""
    lines = ["HloModule nest", ""]
    if kind == "while":
        for i in range(1, depth + 1):
            lines += _loop_level(i, trips)
        return "\n".join(lines + [
            "ENTRY %main (x: f32[8]) -> f32[8] {", "  %x = f32[8]{0} parameter(0)", "  %z = s32[] constant(0)",
            "  %it = (s32[], f32[8]{0}) tuple(%z, %x)",
            f"  %w = (s32[], f32[8]{{0}}) while(%it), condition=%w{depth}, body=%c{depth}",
            "  ROOT %r = f32[8]{0} get-tuple-element(%w), index=1", "}"]) + "\n"
    lines += _LEAF
    for i in range(1, depth + 1):
        lines += _nested_level(kind, i)
    root = {"fusion": f"fusion(%x), kind=kLoop, calls=%c{depth}", "call": f"call(%x), to_apply=%c{depth}",
            "conditional": f"conditional(%k, %x, %x), true_computation=%c{depth}, false_computation=%c0"}[kind]
    return "\n".join(lines + ["ENTRY %main (x: f32[8]) -> f32[8] {", "  %x = f32[8]{0} parameter(0)",
                              "  %k = pred[] constant(true)", f"  ROOT %r = f32[8]{{0}} {root}", "}"]) + "\n"


STRUCTURE_CRAFTS: dict[str, Callable[[], str]] = {
    "fusion-dag-20": lambda: shared_dag("fusion", 20),
    "call-dag-30": lambda: shared_dag("call", 30),
    "call-dag-60": lambda: shared_dag("call", 60),
    "nested-fusion-400": lambda: nested("fusion", 400),
    "nested-call-1200": lambda: nested("call", 1200),
    "nested-conditional-1200": lambda: nested("conditional", 1200),
    "nested-while-200": lambda: nested("while", 200),
    "trip-product": lambda: nested("while", 8, trips=1_000_000_000_000),
}


# ---- fields of a real HloModuleProto ----------------------------------------------------------

def _instructions(module: Any) -> list[tuple[Any, Any]]:
    return [(c, i) for c in module.computations for i in c.instructions]


def _pick(module: Any, rng: random.Random, opcode: str | None = None) -> tuple[Any, Any]:
    found = [(c, i) for c, i in _instructions(module) if opcode is None or i.opcode == opcode]
    return rng.choice(found or _instructions(module))


def _deep_config(module: Any, rng: random.Random) -> None:
    depth = rng.choice([200, 5000])
    _pick(module, rng)[1].backend_config = ('{"a":' * depth + "1" + "}" * depth).encode()


def _layout(module: Any, rng: random.Random) -> None:
    instr = _pick(module, rng)[1]
    instr.shape.layout.minor_to_major[:] = [rng.choice([7, -1, 63, 2**40])] + list(instr.shape.dimensions)[1:]


def _dims(module: Any, rng: random.Random) -> None:
    instr = _pick(module, rng)[1]
    instr.shape.dimensions[:] = [rng.choice([-7, 2**40, 2**62, 0])] * rng.randint(1, 3)


def _parameter_number(module: Any, rng: random.Random) -> None:
    _pick(module, rng, "parameter")[1].parameter_number = rng.choice([-1, -(2**62)])


def _called_ids(module: Any, rng: random.Random) -> None:
    comp, instr = _pick(module, rng, rng.choice(["fusion", "while", "call", "reduce"]))
    instr.called_computation_ids[:] = [rng.choice([comp.id, 2**62, -1, module.entry_computation_id])]


def _operand_ids(module: Any, rng: random.Random) -> None:
    instr = _pick(module, rng)[1]
    instr.operand_ids[:] = [rng.choice([instr.id, 2**62, -5])] * rng.randint(1, 3)


def _root_id(module: Any, rng: random.Random) -> None:
    rng.choice(list(module.computations)).root_id = rng.choice([2**62, -1, 0])


def _duplicate_names(module: Any, rng: random.Random) -> None:
    comps = list(module.computations)
    a, b = rng.choice(comps), rng.choice(comps)
    b.name = a.name


def _stack_frames(module: Any, rng: random.Random) -> None:
    index = module.stack_frame_index
    for frame in index.stack_frames:
        frame.file_location_id = rng.choice([0, 2**30, -4])
    for location in index.file_locations:
        location.file_name_id = rng.choice([0, 2**30, -4])
    for _, instr in _instructions(module)[:50]:
        instr.metadata.stack_frame_id = rng.choice([1, 2**30, -2])


def _mesh_groups(module: Any, rng: random.Random) -> None:
    instr = _pick(module, rng, rng.choice(["all-gather-start", "all-reduce-start", "reduce-scatter", "all-reduce"]))[1]
    mesh = instr.mesh_axes_replica_group_list
    mesh.mesh.axes.add(name="x", size=rng.choice([0, 4]))
    mesh.mesh.axes.add(name="y", size=rng.choice([0, -3, 2]))
    mesh.axes.add(mesh_axis_index=rng.choice([0, 1, 7]))


def _iota_groups(module: Any, rng: random.Random) -> None:
    instr = _pick(module, rng, rng.choice(["all-gather-start", "all-reduce-start", "reduce-scatter"]))[1]
    iota = instr.collective_device_list.iota_replica_group_list
    iota.num_replica_groups = rng.choice([0, 4, 2**40])
    iota.num_devices_per_group = rng.choice([0, 2, -1])
    iota.iota_reshape_dims[:] = rng.choice([[0], [8], [4, 2], [2**31, 2**31]])
    iota.iota_transpose_perm[:] = rng.choice([[], [1, 0], [0, 0], [5]])


def _opcode(module: Any, rng: random.Random) -> None:
    _pick(module, rng)[1].opcode = rng.choice(["", "no-such-op", "fusion", "while", "parameter", "\x00"])


def _schedule(module: Any, rng: random.Random) -> None:
    for seq in module.schedule.sequences.values():
        seq.instruction_ids[:] = [rng.choice([2**62, -1, 0])] + list(seq.instruction_ids)[::-1]


def _element_type(module: Any, rng: random.Random) -> None:
    _pick(module, rng)[1].shape.element_type = rng.choice([0, 99, 2**20])


def _tuple_deep(module: Any, rng: random.Random) -> None:
    shape = _pick(module, rng)[1].shape
    for _ in range(rng.choice([40, 3000])):
        shape.element_type = 13  # TUPLE
        shape = shape.tuple_shapes.add()
    shape.element_type = 11


PROTO_CRAFTS: dict[str, Callable[[Any, random.Random], None]] = {
    "backend-config-deep": _deep_config, "layout": _layout, "dims": _dims, "parameter-number": _parameter_number,
    "called-ids": _called_ids, "operand-ids": _operand_ids, "root-id": _root_id, "duplicate-names": _duplicate_names,
    "stack-frames": _stack_frames, "mesh-groups": _mesh_groups, "iota-groups": _iota_groups, "opcode": _opcode,
    "schedule": _schedule, "element-type": _element_type, "tuple-deep": _tuple_deep,
}


def craft_hlo_proto(data: bytes, craft: str, rng: random.Random) -> bytes:
    """A serialized HloModuleProto (or HloProto) with one kind of field set as no XLA writes it."""
    from audit.parsers.hlo import schema as schema

    wrapper = schema.HloProto.FromString(data)
    module = wrapper.hlo_module if wrapper.hlo_module.computations else schema.HloModuleProto.FromString(data)
    PROTO_CRAFTS[craft](module, rng)
    return bytes(module.SerializeToString())


# ---- real HLO text as the template reader takes it (hlo_text_templates) -------------------------
# Each craft edits a few instruction lines of a real text; the line reader is the reference.

_QUOTED = r'"(?:[^"\\]|\\.)*"'


def _edit_lines(text: str, rng: random.Random, edit: Callable[[str], str]) -> str:
    lines = text.split("\n")
    instructions = [i for i, line in enumerate(lines) if " = " in line and line.startswith("  ")]
    for i in rng.sample(instructions, min(len(instructions), rng.randint(1, 4))):
        lines[i] = edit(lines[i])
    return "\n".join(lines)


def _into_string(line: str, rng: random.Random, inserted: str) -> str:
    """`inserted` inside one of the line's quoted strings, else a string attribute of its own."""
    import re

    strings = list(re.finditer(_QUOTED, line))
    if strings:
        m = rng.choice(strings)
        at = rng.randint(m.start() + 1, m.end() - 1)
        return line[:at] + inserted.replace('"', '\\"') + line[at:]
    return line + f', frontend_attributes={{x="{inserted}"}}'


def _stand_in(rng: random.Random) -> str:
    return rng.choice(["\x010\x02", "\x01", "\x02", "\x019\x02", "\x01x\x02", "\x01999999999\x02", "%\x011\x02"])


TEMPLATE_CRAFTS: dict[str, Callable[[str, random.Random], str]] = {
    # the bytes that stand in for names, in strings and attribute values
    "stand-in-in-string": lambda t, rng: _edit_lines(t, rng, lambda line: _into_string(line, rng, _stand_in(rng))),
    "stand-in-in-attribute": lambda t, rng: _edit_lines(
        t, rng, lambda line: line + f", frontend_attributes={{a={_stand_in(rng)}}}"),
    # `, metadata={` where it is not the op's metadata
    "metadata-in-string": lambda t, rng: _edit_lines(
        t, rng, lambda line: _into_string(line, rng, ', metadata={op_name="jit(f)/evil" source_line=7}')),
    "metadata-twice": lambda t, rng: _edit_lines(t, rng, lambda line: line + ', metadata={op_name="again"}'),
    # a name inside a string (the template cannot place it), and a line broken inside an attribute
    "name-in-string": lambda t, rng: _edit_lines(t, rng, lambda line: _into_string(line, rng, "%p.0")),
    "line-break": lambda t, rng: _edit_lines(t, rng, lambda line: line.replace("={", "={\n", 1)),
}


def craft_template_text(text: str, craft: str, rng: random.Random) -> str:
    """A real HLO text with one kind of line the template reader must leave to the line reader."""
    return TEMPLATE_CRAFTS[craft](text, rng)


# ---- attention configs: the numbers a fused attention call states ---------------------------------

ATTENTION_NUMBERS = ["-1", "0", "-9223372036854775808", "9223372036854775807", "134217728", "99999999999999999999",
                     "1.5", "nan", "inf", '"x"']
_CUDNN_DIMS = ('{"lhs_contracting_dimensions":["3"],"rhs_contracting_dimensions":["3"],'
               '"lhs_batch_dimensions":["0","2"],"rhs_batch_dimensions":["0","2"]}')


def cudnn_attention_text(config: str, q_len: int = 2048) -> str:
    """A cuDNN fused attention call as XLA prints it, its config given (the dimension numbers are `%s`)."""
    return ("HloModule m\nENTRY %main {\n" + "".join(
        f"  %{n} = bf16[4,{q_len},16,128]{{3,2,1,0}} parameter({i})\n" for i, n in enumerate("qkv")) +
        f'  ROOT %a = (bf16[4,{q_len},16,128]{{3,2,1,0}}, u8[0]{{0}}) custom-call(%q, %k, %v), '
        f'custom_call_target="__cudnn$fmhaSoftmax", backend_config={{"cudnn_fmha_backend_config":'
        f'{config.replace("%s", _CUDNN_DIMS)}}}\n}}\n')


def craft_attention(te_text: str, rng: random.Random) -> str:
    """A real TransformerEngine call with its attributes' numbers crafted, or a cuDNN call with a crafted config,
    or a Pallas flash kernel stating a huge sequence (2^27 queries sized arrays of 4-5 GB)."""
    import re

    kind = rng.choice(["te", "te", "cudnn", "pallas"])
    if kind == "te":
        numbers = list(re.finditer(r"(\w+) = (-?\d+) : i64", te_text))
        for m in rng.sample(numbers, min(len(numbers), rng.randint(1, 3))):
            te_text = te_text.replace(m.group(0), f"{m.group(1)} = {rng.choice(ATTENTION_NUMBERS)} : i64", 1)
        return te_text
    if kind == "cudnn":
        key = rng.choice(["sliding_window_length", "max_seg_per_batch", "dropout_rate", "mask_type"])
        value = rng.choice(ATTENTION_NUMBERS + ['"CAUSAL"', "[1]", "{}"])
        return cudnn_attention_text('{"mask_type":"CAUSAL","%s":%s,"bmm1_dot_dimension_numbers":%%s}' % (key, value))
    q_len = rng.choice([1 << 27, 1 << 30, 1 << 40, 0])
    return ("HloModule m\n\nENTRY e {\n" + "".join(
        f"  {n} = bf16[1,1,{q_len},64] parameter({i})\n" for i, n in enumerate("qkv")) +
        f"  ROOT o = bf16[1,1,{q_len},64] custom-call(q, k, v), custom_call_target=\"tpu_custom_call\", "
        'metadata={op_name="jit(f)/flash_attention"}\n}\n')
