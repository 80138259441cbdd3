"""HLO text read by template (each distinct instruction line parsed once, its copies stamped): the same
module as the line reader makes of every real text, the same costs as XLA's own parser (jaxlib's, the
oracle) and the proto reader make of it, renamed copies of a computation numbered as the proto reader
numbers them, and the line reader's errors and model wherever a line or a text does not fit a template."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from jaxlib import _hlo

from audit.costmodel.ops.module import cost_module
from audit.base.errors import InputError
from audit.parsers.hlo import text as hlo_text, text_templates as hlo_text_templates
from audit.parsers.hlo.files import load_hlo_file
from audit.parsers.hlo.proto import read_hlo_proto_bytes
from audit.parsers.hlo.text import parse_hlo_text
from audit.parsers.hlo.text_templates import read_hlo_text

from conftest import shared_fixture

ROOT = Path(__file__).parents[1]
DATA = ROOT / "tests" / "data"
TPU_DUMP = shared_fixture("tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt")
# Every real text the project holds: compiler dumps (JAX 0.11 on H100 and H200, libtpu AOT, XLA:CPU),
# Transformer Engine attention, and the hand-checked texts.
REAL_TEXTS = sorted({p for pattern in ("*.txt", "*.hlo") for p in [*DATA.rglob(pattern), *shared_fixture("").rglob(pattern)]
                     if p.read_bytes()[:4096].lstrip().startswith(b"HloModule")})


def _same(a: Any, b: Any) -> None:
    assert a == b and a.schedule == b.schedule and a.aliased_outputs == b.aliased_outputs
    pairs = list(zip((i for _, i in a.instructions()), (i for _, i in b.instructions())))
    assert len(pairs) == a.instruction_count == b.instruction_count
    assert all(x == y and repr(x) == repr(y) for x, y in pairs)


def test_every_real_text_is_read_as_the_line_reader_reads_it() -> None:
    assert len(REAL_TEXTS) > 40 and TPU_DUMP in REAL_TEXTS
    for path in REAL_TEXTS:
        text = path.read_text()
        try:
            lines = parse_hlo_text(text, str(path))
        except InputError as exc:
            with pytest.raises(InputError) as caught:
                read_hlo_text(text, str(path))
            assert str(caught.value) == str(exc)
            continue
        _same(read_hlo_text(text, str(path)), lines)


_INSTRUCTION = re.compile(r"^(\s*(?:ROOT )?%([\w.\-]+) = .*?metadata=\{)", re.MULTILINE)


def _named_in_metadata(text: str) -> str:
    """The text as XLA 0.11 prints it: each instruction's name also in its metadata (`scheduling_name`)."""
    return _INSTRUCTION.sub(lambda m: f'{m.group(1)}scheduling_name="{m.group(2)}" ', text)


@pytest.mark.parametrize("newer_xla", [False, True], ids=["names", "names-in-metadata"])
def test_each_distinct_line_is_parsed_once(newer_xla: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_hlo_copies import _make_big_hlo

    make = _make_big_hlo()
    block = str(make.compile_block(2))
    parsed: list[str] = []
    real = hlo_text.LineReader.instruction
    monkeypatch.setattr(hlo_text.LineReader, "instruction", lambda self, no, line: parsed.append(line) or
                        real(self, no, line))
    counts, modules = {}, {}
    for copies in (3, 30):  # copies of the block in one computation, as an unrolled loop has them
        text = str(make.stitch(block, copies, own_computations=False))
        if newer_xla:
            text = _named_in_metadata(text)
            assert text.count("scheduling_name=") > 10 * copies
        parsed.clear()
        modules[copies] = (text, read_hlo_text(text))
        counts[copies] = (modules[copies][1].instruction_count, len(parsed))
    assert counts[30][0] > 3 * counts[3][0]
    assert counts[30][1] == counts[3][1] < counts[3][0]
    monkeypatch.undo()
    for text, module in modules.values():
        _same(module, parse_hlo_text(text))


def _xla(text: str) -> Any:
    """What XLA's own parser (jaxlib's) and the proto reader make of the text."""
    return read_hlo_proto_bytes(_hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto())


@pytest.mark.parametrize("path", [TPU_DUMP, *(p for p in REAL_TEXTS if "te_attention" in p.parts)],
                         ids=lambda p: p.name)
def test_xlas_parser_gives_the_same_costs(path: Path) -> None:
    text = path.read_text()
    ours, xla = read_hlo_text(text, str(path)), _xla(text)
    assert xla.entry == ours.entry and set(xla.computations) == set(ours.computations)
    assert cost_module(xla) == cost_module(ours)


def _contents(module: Any) -> list[list[str]]:
    groups: dict[int | None, list[str]] = {}
    for name, comp in module.computations.items():
        groups.setdefault(comp.content, []).append(name)
    return sorted(groups.values())


def test_renamed_copies_are_numbered_as_the_proto_reader_numbers_them() -> None:
    from test_hlo_copies import COPIES, _make_big_hlo

    make = _make_big_hlo()  # copies of a real JAX block, each calling its own renamed fused computations
    text = str(make.stitch(make.compile_block(2), COPIES, own_computations=True))
    ours, xla = read_hlo_text(text), _xla(text)
    assert _contents(ours) == _contents(xla) and len(_contents(ours)) < len(ours.computations) / 2
    assert cost_module(ours) == cost_module(xla) == cost_module(parse_hlo_text(text))


def test_without_the_c_build_the_same_module(monkeypatch: pytest.MonkeyPatch) -> None:
    text = TPU_DUMP.read_text()
    with_c = read_hlo_text(text)
    monkeypatch.setattr(hlo_text_templates, "_STAMP", None)
    _same(read_hlo_text(text), with_c)


_MODULE = """HloModule m, entry_computation_layout={{(f32[8]{{0}})->f32[8]{{0}}}}

%add.r (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}}

ENTRY %main (p: f32[8]) -> f32[8] {{
  %p = f32[8]{{0}} parameter(0)
{body}
}}
"""


@pytest.mark.parametrize("body", [
    # a name inside a string: the line reader reads that line (the template cannot place it)
    '  %n.1 = f32[8]{0} negate(%p), metadata={op_name="jit(f)/%scaled"}\n'
    '  ROOT %n.2 = f32[8]{0} negate(%n.1), metadata={op_name="jit(f)/%scaled"}',
    # an attribute over several lines: the line reader reads the whole text
    '  ROOT %c = f32[8]{0} custom-call(%p), custom_call_target="x", backend_config={\n  "k": 1\n}',
    # a control predecessor: a name in an attribute, put back per copy
    '  %n.1 = f32[8]{0} negate(%p)\n  ROOT %n.2 = f32[8]{0} negate(%p), control-predecessors={%n.1}',
    # a called computation, each copy its own
    '  %r.1 = f32[] reduce(%p, %p), dimensions={0}, to_apply=%add.r\n'
    '  ROOT %n = f32[8]{0} broadcast(%r.1), dimensions={}',
    # `, metadata={` inside a string: not the op's metadata (it was taken for it)
    '  %c.1 = f32[8]{0} custom-call(%p), custom_call_target="x, metadata={op_name=\\"evil\\"}", '
    'metadata={op_name="jit(f)/a"}\n'
    '  ROOT %c.2 = f32[8]{0} custom-call(%c.1), custom_call_target="x, metadata={op_name=\\"evil\\"}", '
    'metadata={op_name="jit(f)/b"}',
    '  %c.1 = f32[8]{0} custom-call(%p), custom_call_target="x, metadata={op_name=1}"\n'
    '  ROOT %c.2 = f32[8]{0} custom-call(%c.1), custom_call_target="x, metadata={op_name=1}"',
    # the bytes that stand in for names, in the text itself: never taken for names (it crashed on them)
    '  %c.1 = f32[8]{0} custom-call(%p), custom_call_target="a\x010\x02b"\n'
    '  ROOT %c.2 = f32[8]{0} custom-call(%c.1), custom_call_target="a\x010\x02b"',
    '  %c.1 = f32[8]{0} custom-call(%p), custom_call_target="x", backend_config="\x019\x02"\n'
    '  ROOT %c.2 = f32[8]{0} custom-call(%c.1), custom_call_target="x", backend_config="\x01"',
    '  %c.1 = f32[8]{0} custom-call(%p), custom_call_target="x", frontend_attributes={a="\x010\x02"}\n'
    '  ROOT %c.2 = f32[8]{0} custom-call(%c.1), custom_call_target="x", frontend_attributes={a="\x010\x02"}',
    '  %c.1 = f32[8]{0} custom-call(%p), custom_call_target="x", frontend_attributes={a="\x01x\x029"}\n'
    '  ROOT %c.2 = f32[8]{0} custom-call(%c.1), custom_call_target="x", frontend_attributes={a="\x01x\x029"}',
])
def test_lines_a_template_cannot_place_read_as_the_line_reader_reads_them(body: str) -> None:
    text = _MODULE.format(body=body)
    _same(read_hlo_text(text), parse_hlo_text(text))


def test_text_without_percent_names_is_read_line_by_line() -> None:
    text = _MODULE.format(body="  ROOT %n = f32[8]{0} negate(%p)").replace("%", "")
    _same(read_hlo_text(text), parse_hlo_text(text))


@pytest.mark.parametrize("name", ["mutual-recursion.hlo.txt", "self-fusion.hlo.txt", "rank-huge.hlo.txt",
                                  "trip-count-text.hlo.txt", "backend-config-deep.hlo.txt",
                                  "layout-out-of-range.hlo.txt", "parameter-named.hlo.txt"])
def test_bad_text_gives_the_line_readers_error(name: str) -> None:
    path = DATA / "hostile" / name
    text = path.read_text()
    with pytest.raises(InputError) as lines:
        cost_module(parse_hlo_text(text, str(path)))
    with pytest.raises(InputError) as templates:
        cost_module(load_hlo_file(path))
    assert str(templates.value) == str(lines.value)


def test_a_line_that_is_no_instruction_is_refused_with_its_number() -> None:
    text = _MODULE.format(body="  ROOT %n = f32[8]{0} negate(%p)\n  this is not HLO")
    with pytest.raises(InputError) as caught:
        read_hlo_text(text)
    assert str(caught.value).startswith("line 12:")
