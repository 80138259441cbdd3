"""Big HLO text read by XLA's own parser and the proto reader: the same costs as our text parser,
and our parser's own errors for text XLA refuses or we refuse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from audit.costmodel.ops.module import cost_module
from audit.errors import InputError
from audit.parsers import hlo_xla
from audit.parsers.hlo_files import load_hlo_file
from audit.parsers.hlo_proto import read_hlo_proto_bytes
from audit.parsers.hlo_text import parse_hlo_text

from conftest import shared_fixture

DATA = Path(__file__).parent / "data"
TPU_DUMP = "tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"
# Compiler dumps (JAX 0.11 on an H100; Transformer Engine attention) and the hand-checked texts
# whose instruction names are unique, as XLA prints them.
REAL_TEXTS = [*sorted((DATA / "captures").rglob("*after_optimizations.txt")),
              *sorted((DATA / "te_attention").glob("*.hlo.txt")),
              *(DATA / "hlo" / f"{name}.hlo" for name in ("diff_base", "diff_head", "dot_precision", "fft",
                                                           "host_offload", "topk"))]


@pytest.fixture
def xla_for_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hlo_xla, "MIN_BYTES", 0)


def test_the_installed_jax_is_one_the_xla_path_was_checked_on() -> None:
    # A jax outside CHECKED_JAX reads every text with our parser (slow, correct); this fails on an
    # upgrade so that the equivalence below is checked again and the range widened.
    assert hlo_xla.jax_checked()


@pytest.mark.parametrize("path", [shared_fixture(TPU_DUMP), *REAL_TEXTS], ids=lambda p: p.name)
def test_xla_parser_and_ours_give_the_same_costs(path: Path) -> None:
    text = path.read_text()
    ours = parse_hlo_text(text, origin=str(path))
    data = hlo_xla.text_to_proto([text])
    if data is None:  # syntax newer than the installed XLA's parser: ours reads it, as load_hlo_file does
        assert "captures" in path.parts
        return
    xla = read_hlo_proto_bytes(data, origin=str(path))
    assert xla.entry == ours.entry and set(xla.computations) == set(ours.computations)
    assert cost_module(xla) == cost_module(ours)


def test_a_big_text_is_read_by_xla(xla_for_any_size: None) -> None:
    path = shared_fixture(TPU_DUMP)
    # Only the proto carries instruction ids; our text parser leaves them 0.
    assert any(i.id for _, i in load_hlo_file(path).instructions())
    assert all(i.id == 0 for _, i in parse_hlo_text(path.read_text()).instructions())


def test_text_with_repeated_names_is_read_by_ours(xla_for_any_size: None) -> None:
    # Each loop computation names its parameter `p`: XLA's parser would rename one `p.1`.
    module = load_hlo_file(DATA / "hlo" / "caveats.hlo")
    assert all(i.id == 0 for _, i in module.instructions())
    assert module.computations["cond"].instructions[0].name == "p"


def _error(path: Path) -> str:
    with pytest.raises(InputError) as caught:
        cost_module(load_hlo_file(path))
    return str(caught.value)


@pytest.mark.parametrize("name", ["mutual-recursion.hlo.txt", "self-fusion.hlo.txt", "rank-huge.hlo.txt",
                                  "trip-count-text.hlo.txt"])
def test_bad_text_gives_the_same_error(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = DATA / "hostile" / name
    ours = _error(path)
    monkeypatch.setattr(hlo_xla, "MIN_BYTES", 0)
    assert _error(path) == ours


def test_without_the_private_api_our_parser_reads_it(xla_for_any_size: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from jax._src.lib import xla_client

    monkeypatch.delattr(xla_client.hlo, "hlo_module_from_text")
    assert all(i.id == 0 for _, i in load_hlo_file(shared_fixture(TPU_DUMP)).instructions())


def _big_values(size: int) -> list[str]:
    """The names of every caller's locals that hold the text (or its bytes), or a list holding it."""
    found: list[str] = []
    frame = sys._getframe(2)
    while frame is not None:
        found += [name for name, value in frame.f_locals.items()
                  if (isinstance(value, (str, bytes)) and len(value) >= size) or
                  (isinstance(value, list) and any(isinstance(v, str) and len(v) >= size for v in value))]
        frame = frame.f_back
    return found


def test_the_text_is_not_held_beside_xla_s_module_and_proto(
        xla_for_any_size: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from jaxlib import xla_client

    path = shared_fixture(TPU_DUMP)
    size = path.stat().st_size
    held: list[str] = []
    parse = xla_client.hlo.hlo_module_from_text

    class Watched:  # XLA's module, seen when it serializes itself
        def __init__(self, text: str):
            self.module = parse(text)

        def as_serialized_hlo_module_proto(self) -> bytes:
            held.extend(_big_values(size))
            return bytes(self.module.as_serialized_hlo_module_proto())

    real = hlo_xla.read_hlo_proto_bytes

    def building(data: bytes, origin: str = "") -> Any:
        held.extend(_big_values(size))
        return real(data, origin)

    monkeypatch.setattr(xla_client.hlo, "hlo_module_from_text", Watched)
    monkeypatch.setattr(hlo_xla, "read_hlo_proto_bytes", building)
    assert any(i.id for _, i in load_hlo_file(path).instructions())  # read through XLA's proto
    assert held == []


def test_names_repeated_only_inside_fused_computations_leave_the_text_to_xla(
        xla_for_any_size: None, tmp_path: Path) -> None:
    from test_hlo_copies import COPIES, _make_big_hlo

    make = _make_big_hlo()  # copies of a real JAX block, each calling its own renamed fused computations
    text = str(make.stitch(make.compile_block(2), COPIES, own_computations=True))
    assert len(set(names := hlo_xla._INSTRUCTION_NAME.findall(text))) < len(names)  # fused params repeat
    path = tmp_path / "copies.hlo"
    path.write_text(text)
    module = load_hlo_file(path)
    ours = parse_hlo_text(text)
    assert any(i.id for _, i in module.instructions())  # read through XLA's proto
    # The ops keep the text's names (the fused parameters XLA renamed are no ops), and cost the same.
    assert {i.name for i in module.entry_computation.instructions} == \
        {i.name for i in ours.entry_computation.instructions}
    assert cost_module(module) == cost_module(ours)


def test_xla_parses_a_big_text_without_importing_jax(tmp_path: Path) -> None:
    code = ("import sys; from audit.parsers import hlo_files, hlo_xla; hlo_xla.MIN_BYTES = 0; "
            "m = hlo_files.load_hlo_file(sys.argv[1]); "
            "print(any(i.id for _, i in m.instructions()), 'jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(shared_fixture(TPU_DUMP))],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False"]  # read through XLA's proto, and jaxlib alone imported
