"""A big program's copies of one computation, as bench/make_big_hlo.py makes them from a real JAX
compile: read and priced once per distinct computation, with the same model and costs as before."""

from __future__ import annotations

import gc
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest

from audit.costmodel.ops import base, module as cost
from jaxlib import _hlo

from audit.parsers.hlo import proto as hlo_proto, schema as schema
from audit.parsers.hlo.proto import read_hlo_proto_bytes
from audit.parsers.hlo.text import parse_hlo_text

from conftest import shared_fixture, skip_without_c

ROOT = Path(__file__).parents[1]
H100_DUMPS = [f"gpu-h100-maxtext/module_0016.jit_train_step.{kind}.hlo.pb"
              for kind in ("sm_9.0_gpu_after_optimizations", "before_optimizations")]
COPIES = 3
_COPY = re.compile(r"\.u\d+$")


def _make_big_hlo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_big_hlo", ROOT / "bench" / "make_big_hlo.py")
    assert spec is not None and spec.loader is not None
    found = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(found)
    return found


@pytest.fixture(scope="module")
def block() -> str:
    """XLA:CPU's compiled HLO of two layers of a real JAX block."""
    return str(_make_big_hlo().compile_block(2))


@pytest.fixture(scope="module")
def renamed(block: str) -> str:
    """Three copies of the block, each calling its own renamed copies of the fused computations."""
    return str(_make_big_hlo().stitch(block, COPIES, own_computations=True))


def _proto(text: str) -> bytes:
    """The module proto XLA's own parser (jaxlib's) makes of the text."""
    return bytes(_hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto())


def test_renamed_copies_of_a_computation_share_one_content(renamed: str) -> None:
    module = read_hlo_proto_bytes(_proto(renamed))
    copies: dict[str, set[int | None]] = {}
    for name, comp in module.computations.items():
        if name != module.entry:
            copies.setdefault(_COPY.sub("", name), set()).add(comp.content)
    assert copies and all(len(contents) == 1 and None not in contents for contents in copies.values())
    assert {len(c.instructions) for c in module.computations.values()} != {1}


def test_computations_with_one_content_are_the_same_but_for_names(renamed: str) -> None:
    module = read_hlo_proto_bytes(_proto(renamed))
    by_content: dict[int | None, list[Any]] = {}
    for comp in module.computations.values():
        body = [(i.opcode, i.shape, i.dimensions, i.backend_config, i.metadata,
                 tuple(comp.instructions.index(comp[o]) for o in i.operands)) for i in comp.instructions]
        by_content.setdefault(comp.content, []).append(body)
    assert len(by_content) > 2
    assert all(bodies.count(bodies[0]) == len(bodies) for bodies in by_content.values())


def test_renamed_copies_are_priced_once_and_as_before(renamed: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = read_hlo_proto_bytes(_proto(renamed))
    priced: list[str] = []
    real = base.computation_flops

    def counted(comp: Any, ctx: Any) -> Any:
        priced.append(comp.name)
        return real(comp, ctx)

    monkeypatch.setattr("audit.costmodel.ops.fusion.computation_flops", counted)
    costs = cost.cost_module(module)
    fused = [c for c in module.computations.values() if c.is_fusion]
    assert len(fused) > 20 and len(set(priced)) <= len(fused) / COPIES
    # Priced by name (as the text reader's model is), each copy alone: the same costs.
    assert costs == cost.cost_module(parse_hlo_text(renamed))


def _collections_during(work: Callable[[], object]) -> list[str]:
    """The functions of ours on the stack each time the cycle collector ran during `work`, with the
    collector set to run every ten new objects."""
    runs: list[str] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        frame = sys._getframe()
        while frame is not None:  # a collection the work's allocations set off runs on its stack
            if "/parsers/" in frame.f_code.co_filename or "/costmodel/" in frame.f_code.co_filename:
                runs.append(frame.f_code.co_name)
            frame = frame.f_back

    gc.collect()
    threshold = gc.get_threshold()
    gc.set_threshold(10)
    gc.callbacks.append(watch)
    try:
        work()
    finally:
        gc.callbacks.remove(watch)
        gc.set_threshold(*threshold)
    assert gc.isenabled()
    return runs


def test_reading_and_pricing_a_big_model_pause_the_cycle_collector(renamed: str) -> None:
    data = _proto(renamed)
    module = read_hlo_proto_bytes(data)
    assert module.instruction_count > 100
    # Only as the collector resumes, when the model or its costs are built, may it run.
    runs = _collections_during(lambda: read_hlo_proto_bytes(data))
    assert runs and "_read" not in runs and "computation" not in runs
    runs = _collections_during(lambda: cost.cost_module(module))
    assert runs and "_cost_module" not in runs and "fusion" not in runs


def _read_in_python(data: bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patch:
        patch.setattr(hlo_proto, "_hloscan", None)
        patch.setattr(hlo_proto, "_STAMP", None)
        return read_hlo_proto_bytes(data)


def _contents(module: Any) -> list[list[str]]:
    groups: dict[int | None, list[str]] = {}
    for name, comp in module.computations.items():
        groups.setdefault(comp.content, []).append(name)
    return sorted(groups.values())


@skip_without_c
@pytest.mark.parametrize("fixture", H100_DUMPS)
def test_the_c_build_reads_a_real_dump_as_the_python_one(fixture: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert hlo_proto._hloscan is not None and hlo_proto._STAMP is not None, "the C extension was not built"
    data = shared_fixture(fixture).read_bytes()
    c, python = read_hlo_proto_bytes(data), _read_in_python(data, monkeypatch)
    assert c == python and c.schedule == python.schedule and _contents(c) == _contents(python)
    pairs = list(zip((i for _, i in c.instructions()), (i for _, i in python.instructions())))
    assert len(pairs) > 1000
    assert all(a == b and hash(a) == hash(b) and repr(a) == repr(b) for a, b in pairs)


def test_the_c_build_reads_renamed_copies_as_the_python_one(renamed: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _proto(renamed)
    c, python = read_hlo_proto_bytes(data), _read_in_python(data, monkeypatch)
    assert c == python and _contents(c) == _contents(python)
    assert cost.cost_module(c) == cost.cost_module(python)


def test_a_module_split_in_c_from_its_bytes_or_per_computation_or_wrapped_reads_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    wrapped = shared_fixture(H100_DUMPS[0]).read_bytes()  # an HloProto, as --xla_dump_to writes
    data = schema.HloProto.FromString(wrapped).hlo_module.SerializeToString()  # the bare module
    whole = read_hlo_proto_bytes(data)
    assert read_hlo_proto_bytes(wrapped) == whole
    with monkeypatch.context() as patch:
        patch.setattr(hlo_proto, "_splits_in_c", lambda data, wrapped: None)
        per_computation = read_hlo_proto_bytes(data)
    assert per_computation == whole and _contents(per_computation) == _contents(whole)
