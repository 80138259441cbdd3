"""Binary HLO protos read into the same model as HLO text, cross-checked against jaxlib."""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import shared_fixture
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from jaxlib import _hlo

from audit.parsers.hlo import schema as hlo_schema
from audit.base.errors import InputError
from audit.parsers.hlo.files import load_hlo_file, read_hlo_if_module
from audit.parsers.hlo.model import Instruction, Module
from audit.parsers.hlo.proto import read_hlo_proto_bytes
from audit.parsers.hlo.text import parse_hlo_text

MAXTEXT = "gpu-h100-maxtext/module_0016.jit_train_step.{}.hlo.pb"
STAGES = ["sm_9.0_gpu_after_optimizations", "before_optimizations"]


@lru_cache(maxsize=2)
def _jaxlib_module(stage: str):
    """jaxlib's own reading of the fixture (the dump is an HloProto; field 1 is the module)."""
    data = shared_fixture(MAXTEXT.format(stage)).read_bytes()
    inner = hlo_schema.HloProto.FromString(data).hlo_module.SerializeToString()
    return _hlo.HloModule.from_serialized_hlo_module_proto(inner)


@pytest.mark.parametrize("stage", STAGES)
def test_maxtext_counts_match_jaxlib(stage):
    path = shared_fixture(MAXTEXT.format(stage))
    module = load_hlo_file(path)
    reference = _jaxlib_module(stage)
    computations = reference.computations()
    assert module.source == "proto" and module.name == reference.name
    assert {c.name: len(c.instructions()) for c in computations} == {
        name: len(c.instructions) for name, c in module.computations.items()}
    assert module.id == 16  # the dump's file name carries the module id: module_0016
    ids = [i.id for _, i in module.instructions()]
    assert len(set(ids)) == len(ids)
    if stage == STAGES[0]:
        assert len(computations) == 564 and module.instruction_count == 7757


def test_maxtext_gemms_collectives_and_graph():
    module = load_hlo_file(shared_fixture(MAXTEXT.format(STAGES[0])))
    reference = _jaxlib_module(STAGES[0])
    gemms = sum('custom_call_target="__cublas$gemm"' in i.to_string()
                for c in reference.computations() for i in c.instructions())
    ours = [i for _, i in module.instructions() if i.custom_call_target == "__cublas$gemm"]
    assert len(ours) == gemms == 159
    assert all('"gemm_backend_config"' in i.backend_config for i in ours)
    constants = [i for _, i in module.instructions() if i.opcode == "constant"]
    assert constants and all(i.attr("literal") for i in constants)  # compared with jaxlib's text below
    gathers = [i for _, i in module.instructions() if i.opcode == "all-gather-start"]
    assert gathers and all(i.replica_groups == ((0, 1, 2, 3),) for i in gathers)
    for comp in module.computations.values():
        names = {i.name for i in comp.instructions}
        assert comp.root in names
        for instr in comp.instructions:
            assert set(instr.operands) <= names and all(c in module.computations for c in instr.called)


def _comparable(instr: Instruction) -> dict:
    """Every model field, with the fields only one format can carry set aside."""
    fields = dataclasses.asdict(instr)
    fields.pop("id")  # text does not print ids
    attrs = dict(instr.attributes)
    attrs.pop("stack_frame_id", None)  # printers renumber frames; the resolved source is compared
    fields["attributes"] = attrs
    fields["backend_config"] = _config(fields.pop("backend_config"))
    return fields


def _config(text: str) -> dict | str | None:
    """JSON configs compare as data (key order differs); FFI attribute dicts stay text."""
    if not text.startswith("{"):
        return text or None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _assert_same_model(text: Module, proto: Module, skip=frozenset(), reprinted=False) -> int:
    """Compare instruction by instruction; `reprinted` text dropped empty backend_config fields."""
    assert (text.name, text.entry) == (proto.name, proto.entry)
    compared = 0
    for comp, instr in text.instructions():
        if instr.name in skip:
            continue
        proto_comp, other = proto.find(instr.name)
        assert (proto_comp.name, proto_comp.root, proto_comp.is_fusion) == (comp.name, comp.root, comp.is_fusion)
        a, b = _comparable(instr), _comparable(other)
        text_only = set(a["attributes"]) - set(b["attributes"])
        for key in text_only:  # attributes the proto reader does not render
            a["attributes"].pop(key)
        if reprinted and isinstance(a["backend_config"], dict):
            config = b.pop("backend_config")
            assert a.pop("backend_config").items() <= config.items(), instr.name
        assert a == b, instr.name
        compared += 1
    return compared


def _sharded_program():
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))

    @partial(jax.shard_map, mesh=mesh, in_specs=(P("data", "model"), P("model", None), P()),
             out_specs=(P("data"), P("data", "model"), P("data", "model")))
    def step(x, w, img):
        h = jax.lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ w[:8, :8]) + i, x[:, :8])
        total = jax.lax.psum(h.sum(axis=0), "model")
        gathered = jax.lax.all_gather(x, "model", axis=1, tiled=True)
        rotated = jax.lax.ppermute(x, "model", perm=[(i, (i + 1) % 4) for i in range(4)])
        kernel = jnp.ones((4, 3, 3, 3), img.dtype)
        conv = jax.lax.conv_general_dilated(img, kernel, (2, 2), "SAME",
                                            dimension_numbers=("NCHW", "OIHW", "NCHW"))
        pooled = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (2, 2), (1, 1), "VALID")
        scalar = jnp.max(gathered) + conv.sum() + pooled.sum()
        return total, scalar.reshape(1, 1), rotated

    args = (jnp.ones((16, 32)), jnp.ones((32, 32)), jnp.ones((2, 3, 8, 8)))
    return jax.jit(step).lower(*args).compile()


def _mesh_program():
    # Automatic partitioning: XLA spells the collectives' groups as mesh axes.
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    shard = jax.sharding.NamedSharding

    def f(x, w):
        h = jax.lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ w) + i, x)
        return h.sum(axis=0), jnp.max(h)

    in_shardings = (shard(mesh, P("data", "model")), shard(mesh, P("model", None)))
    return jax.jit(f, in_shardings=in_shardings).lower(jnp.ones((16, 32)), jnp.ones((32, 32))).compile()


@pytest.mark.parametrize("program", [_sharded_program, _mesh_program])
def test_same_program_through_text_and_proto_gives_the_same_model(program):
    compiled = program()
    text = parse_hlo_text(compiled.as_text(), origin="as_text")
    serialized = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
    proto = read_hlo_proto_bytes(serialized, origin="hlo_modules()[0]")
    assert text.source == "text" and proto.source == "proto"
    assert text.instruction_count == proto.instruction_count
    assert set(text.computations) == set(proto.computations)
    assert _assert_same_model(text, proto) == text.instruction_count
    opcodes = {i.opcode for _, i in proto.instructions()}
    assert {"while", "all-reduce", "fusion", "reduce"} <= opcodes
    loop = next(i for _, i in proto.instructions() if i.opcode == "while")
    assert loop.attr("known_trip_count") == "3" and loop.called == (loop.attr("body"), loop.attr("condition"))
    groups = [i.replica_groups for _, i in proto.instructions() if i.opcode.startswith("all-")]
    assert groups and all(sorted(d for g in gs for d in g) == list(range(8)) for gs in groups)


def _many_opcodes_program():
    def f(x, i, key):
        parts = [
            jnp.linalg.eigh(x @ x.T)[0],  # a LAPACK FFI custom-call
            jnp.sort(x, axis=1), jax.lax.top_k(x[0], 3)[0], x.at[i].add(1.0), x[i],
            jax.lax.cond(i[0] > 2, lambda v: v * 2, lambda v: v - 1, x),
            jax.lax.switch(i[1] % 3, [lambda v: v, lambda v: v + 1, lambda v: v * 3], x),
            jnp.cumsum(x, axis=0), jnp.fft.rfft(x[0]).real, jax.random.normal(key, (4,)),
            (x.astype(jnp.bfloat16) * jnp.bfloat16(0.1)).astype(jnp.float32),
            jax.lax.rev(x, (0,)), jnp.where(x > 0, x, 0.5),
        ]
        return sum(p.sum() for p in parts)

    return jax.jit(f).lower(jnp.ones((8, 8)), jnp.array([1, 2]), jax.random.key(0)).compile()


def test_many_opcodes_read_the_same_through_text_and_proto():
    compiled = _many_opcodes_program()
    text = parse_hlo_text(compiled.as_text())
    proto = read_hlo_proto_bytes(compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto())
    assert _assert_same_model(text, proto) == text.instruction_count == proto.instruction_count
    opcodes = {i.opcode for _, i in proto.instructions()}
    assert {"conditional", "call", "sort", "scatter", "gather", "custom-call", "fft", "reverse",
            "iota", "reduce-window"} <= opcodes
    branches = [i for _, i in proto.instructions() if i.opcode == "conditional"]
    assert {len(b.called) for b in branches} == {2, 3}
    assert all(b.attr("branch_computations") == "{" + ", ".join(b.called) + "}" for b in branches)
    ffi = [i for _, i in proto.instructions() if i.opcode == "custom-call"]
    assert ffi and all(i.custom_call_target for i in ffi)


def test_jaxlib_printed_maxtext_agrees_with_the_proto():
    # jaxlib prints async collectives as `reduce-scatter-start(...)` sugar without their wrapped
    # computation; everything else must read the same from its text as from the proto.
    reference = _jaxlib_module(STAGES[0])
    text = parse_hlo_text(reference.to_string(), origin="jaxlib to_string")
    proto = load_hlo_file(shared_fixture(MAXTEXT.format(STAGES[0])))
    sugared = {i.name for _, i in text.instructions()
               if i.opcode.endswith(("-start", "-done")) and proto.find(i.name)[1].opcode.startswith("async-")}
    assert sugared
    compared = _assert_same_model(text, proto, skip=sugared, reprinted=True)
    assert compared == text.instruction_count - len(sugared)


def test_hlo_proto_wrapper_and_bare_module_are_both_detected():
    compiled = _mesh_program()
    bare = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
    module_message = hlo_schema.HloModuleProto.FromString(bare)
    wrapped = hlo_schema.HloProto(hlo_module=module_message, buffer_assignment=b"\x08\x01").SerializeToString()
    a, b = read_hlo_proto_bytes(bare), read_hlo_proto_bytes(wrapped)
    assert a.instruction_count == b.instruction_count > 0
    assert [_comparable(i) for _, i in a.instructions()] == [_comparable(i) for _, i in b.instructions()]


@pytest.mark.parametrize("data", [b"", b"\x00\x01\x02garbage", b"HloModule m"])
def test_bad_bytes_are_one_input_error(data):
    with pytest.raises(InputError, match="not an HLO module") as info:
        read_hlo_proto_bytes(data, origin="x.hlo.pb")
    assert "\n" not in str(info.value) and "x.hlo.pb" in str(info.value)


def test_binary_files_are_routed_by_name_and_content(tmp_path):
    assert read_hlo_if_module(shared_fixture(MAXTEXT.format(STAGES[1]))) is not None
    xplane = shared_fixture("gpu-mi300x/gemm.xplane.pb")
    assert read_hlo_if_module(xplane) is None
    with pytest.raises(InputError, match="not an HLO module"):
        load_hlo_file(xplane)
    bare = tmp_path / "module.pb"  # a bare HloModuleProto under a generic name
    bare.write_bytes(_jaxlib_module(STAGES[1]).as_serialized_hlo_module_proto())
    assert read_hlo_if_module(bare) is not None and load_hlo_file(bare).instruction_count == 1977
    stats = shared_fixture("gpu-mi300x/ALL_HOSTS.op_stats_v2.pb")
    assert read_hlo_if_module(stats) is None
    other = tmp_path / "model.onnx"
    other.write_bytes(b"\x08\x07")
    assert read_hlo_if_module(other) is None
    with pytest.raises(InputError, match="not an HLO dump"):
        load_hlo_file(other)
