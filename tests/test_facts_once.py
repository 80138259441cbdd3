"""Facts kept once: opcode classes checked against XLA's parser, one dtype table, one mesh parser, one FLOP rule,
and every default of a threshold or a display option in one options object, one number formatter,
one version."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, strategies as st
from jaxlib import _hlo

from audit.costmodel.chips.catalog import lookup
from audit.costmodel.napkin import matmul
from audit.costmodel.network.mesh_layout import parse_mesh
from audit.costmodel.ops.module import HANDLERS, cost_module
from audit.base.errors import InputError, UsageError
from audit.base.options import DEFAULTS, Defaults, Thresholds
from audit.parsers.hlo.dtypes import DTYPE_BITS, canonical_dtype, element_bytes
from audit.parsers.hlo.opcodes import ARITHMETIC, COLLECTIVES, ELEMENTWISE, TRANSCENDENTAL
from audit.parsers.hlo.text import parse_hlo_text
from conftest import ROOT


def _xla_knows_opcode(opcode: str) -> bool:
    """Whether XLA's own HLO parser (jaxlib) reads `opcode` as an opcode; operand errors do not count."""
    text = f"HloModule m\nENTRY e {{ p = f32[4] parameter(0) ROOT r = f32[4] {opcode}(p) }}"
    try:
        _hlo.hlo_module_from_text(text)
    except Exception as exc:  # XLA raises RuntimeError with its status text
        return "Unknown opcode" not in str(exc) and "expects opcode" not in str(exc)
    return True


@pytest.mark.parametrize("opcode", sorted(set(ELEMENTWISE) | set(COLLECTIVES)))
def test_every_classified_opcode_is_an_xla_opcode(opcode):
    assert _xla_knows_opcode(opcode)


@pytest.mark.parametrize("misspelt", ["cos", "sin", "exp", "clz", "atan"])
def test_the_check_rejects_names_that_are_not_opcodes(misspelt):
    assert not _xla_knows_opcode(misspelt)


def test_elementwise_is_exactly_arithmetic_and_transcendental_and_each_has_a_cost_handler():
    assert not set(ARITHMETIC) & set(TRANSCENDENTAL)
    assert ELEMENTWISE == set(ARITHMETIC) | set(TRANSCENDENTAL) | {"bitcast-convert"}
    assert all(op in HANDLERS for op in ELEMENTWISE)


def test_collective_spellings_and_their_handlers_come_from_the_one_list():
    from audit.costmodel.ops import collective

    for kind in COLLECTIVES:
        for opcode in (kind, f"{kind}-start", f"{kind}-done"):
            assert opcode in HANDLERS, opcode
    assert set(collective.VOLUME) == set(COLLECTIVES)
    # The handlers' module writes no start or done spelling of its own beside the list.
    source = inspect.getsource(collective)
    relisted = [s for kind in COLLECTIVES for s in (f'"{kind}-start"', f'"{kind}-done"') if s in source]
    assert not relisted, relisted


@pytest.mark.parametrize("dtype", sorted(d for d, bits in DTYPE_BITS.items() if bits >= 8 and d != "pred"))
def test_every_sized_dtype_is_an_hlo_element_type(dtype):
    _hlo.hlo_module_from_text(f"HloModule m\nENTRY e {{ ROOT p = {dtype}[4] parameter(0) }}")


@pytest.mark.parametrize(("name", "hlo", "size"), [
    ("bfloat16", "bf16", 2), ("BF16", "bf16", 2), ("float32", "f32", 4), ("tf32", "f32", 4),
    ("int8", "s8", 1), ("fp8", "f8e4m3fn", 1), ("int4", "s4", 0.5), ("c64", "c64", 8)])
def test_names_people_type_map_to_one_hlo_type_and_size(name, hlo, size):
    assert canonical_dtype(name) == hlo
    assert element_bytes(name) == size


def test_unknown_and_sizeless_dtypes_have_no_size():
    assert canonical_dtype("f33") is None and element_bytes("token") is None


@given(st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,6}", fullmatch=True),
                       st.integers(1, 4096), min_size=1, max_size=4))
def test_mesh_text_and_mapping_parse_to_the_same_axes(mesh):
    text = ",".join(f"{k}={v}" for k, v in mesh.items())
    assert parse_mesh(text) == mesh == parse_mesh(mesh)


@pytest.mark.parametrize("bad", ["X=0", "X", "=4", "X=4,X=2", "X=four", "X=8,,Y=2"])
def test_a_bad_mesh_is_a_usage_error_on_the_command_line_and_an_input_error_in_a_workload(bad):
    with pytest.raises(UsageError, match="mesh"):
        parse_mesh(bad)
    with pytest.raises(InputError, match="mesh"):
        parse_mesh(bad, error=InputError)


def test_calc_matmul_counts_flops_with_the_auditors_dot_rule():
    module = parse_hlo_text("""HloModule m
ENTRY e {
  a = bf16[512,384]{1,0} parameter(0)
  b = bf16[384,256]{1,0} parameter(1)
  ROOT d = bf16[512,256]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
    audited = cost_module(module)["d"]
    napkin = matmul(512, 384, 256, "bf16", lookup("h100"))
    assert napkin["flops"] == audited.flops == 2 * 512 * 384 * 256
    assert napkin["bytes"] == audited.bytes_read + audited.bytes_written


OPTION_NAMES = frozenset(f.name for cls in (Thresholds, Defaults) for f in dataclasses.fields(cls)) - {"thresholds"}


def _number(node: ast.AST | None) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _option_key(name: str) -> str:
    """`--min-efficiency`, `_top`, `TOP` -> the options field each would be."""
    return name.lstrip("-_").replace("-", "_").lower()


def option_literals(source: str) -> list[str]:
    """Where `source` writes a number for an option the options object holds: a parameter's default, a
    keyword argument, an attribute, or a click option's default."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            found += [f"line {d.lineno}: {arg.arg}=" for arg, d in pairs if _option_key(arg.arg) in OPTION_NAMES
                      and _number(d)]
        elif isinstance(node, ast.Call):
            found += [f"line {k.value.lineno}: {k.arg}=" for k in node.keywords
                      if k.arg and _option_key(k.arg) in OPTION_NAMES and _number(k.value)]
            flags = [_option_key(a.value) for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                     and a.value.startswith("--")]
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            if any(f in OPTION_NAMES for f in flags) and _number(default):
                found.append(f"line {node.lineno}: {flags[0]} default")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id if isinstance(t, ast.Name) else t.attr for t in targets if isinstance(t, (ast.Name, ast.Attribute))]
            # A module constant (TOP = 10: the rows of one list) is a fact of its own, named once.
            found += [f"line {node.lineno}: {n} =" for n in names if not n.isupper()
                      and _option_key(n) in OPTION_NAMES and _number(node.value)]
    return found


def test_threshold_and_display_defaults_are_written_only_in_the_options_object():
    # The CLI's --min-efficiency, --min-share and --top, the library's keyword arguments, the op table,
    # the renderers and the planner read them from audit.base.options.DEFAULTS: a number written for one of
    # them anywhere else is a second copy that drifts.
    options = ROOT / "audit" / "base" / "options.py"
    modules = [p for top in ("audit", "costmodel", "parsers", "reports") for p in sorted((ROOT / top).rglob("*.py"))]
    copies = [f"{p.relative_to(ROOT)} {where}" for p in modules if p != options
              for where in option_literals(p.read_text())]
    assert not copies, copies
    assert option_literals(options.read_text())  # the one place they are written


# Module constants that bound the rows of a list people read: `TOP`, `MARKDOWN_TOP`, `TERMINAL_ROWS`,
# `MAX_FLAGGED`, `FLAGGED_OPEN`... The report model's bounds on what it reads (reports/model) and the
# bounds on what is read (parsers/, costmodel/, audit/base/ranges.py) are not display choices.
_ROW_LIMIT = re.compile(r"(^|_)(TOP|ROWS|OPEN)(_|$)|^MAX_")


def row_limits(source: str) -> list[str]:
    """Where `source` writes a number for a module constant named as a row limit."""
    found = []
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        found += [f"line {node.lineno}: {t.id} =" for t in targets if isinstance(t, ast.Name)
                  and _ROW_LIMIT.search(t.id) and _number(node.value)]
    return found


def test_the_rows_each_list_shows_are_written_only_in_the_options_object():
    # 17 limits in 14 modules (markdown's 15 flagged ops, the terminal's 5 collectives, the HTML's 500...)
    # were module constants the option check spared; they are fields of Defaults now.
    modules = [p for top in ("audit", "reports") for p in sorted((ROOT / top).rglob("*.py"))
               if p.parent.name != "model" and p.name not in ("options.py", "ranges.py")]
    found = [f"{p.relative_to(ROOT)} {where}" for p in modules for where in row_limits(p.read_text())]
    assert not found, found


def test_the_row_limit_check_finds_a_limit_and_spares_a_reference():
    source = "MAX_FLAGGED = 15\nTERMINAL_ROWS = 5\nTOP = DEFAULTS.top\nLEFT, TOP = 8, 18\nBEAT_S = 2.0\n"
    assert row_limits(source) == ["line 1: MAX_FLAGGED =", "line 2: TERMINAL_ROWS ="]


def test_the_option_literal_check_finds_each_kind_of_copy():
    source = """
import click
def render(report, top: int = 15): ...
def inspect(path, *, min_share=0.01): ...
judge_table(rows, min_efficiency=0.5)
click.option("--min-efficiency", default=0.5)
class Diff:
    _top = 10
TOP = 5
def fine(top: int = DEFAULTS.top, layouts: bool = True, n=3): ...
"""
    assert len(option_literals(source)) == 5


def test_the_cli_and_the_library_default_to_the_options_object():
    import audit
    from audit.commands.inspect import command as inspect_command

    params = {p.name: p.default for p in inspect_command.params}
    assert params["min_efficiency"] == DEFAULTS.thresholds.min_efficiency
    assert params["min_share"] == DEFAULTS.thresholds.min_share and params["top"] == DEFAULTS.top
    signature = inspect.signature(audit.inspect).parameters
    assert signature["min_efficiency"].default == DEFAULTS.thresholds.min_efficiency
    assert signature["min_share"].default == DEFAULTS.thresholds.min_share
    assert audit.Report._top == DEFAULTS.top and audit.Diff._top == DEFAULTS.diff_top


# Every module of audit/, parsers/, costmodel/ and reports/ writes text people read: reports, notes, reasons,
# suggestions, warnings and the one-line errors. These are spared, each for its reason; `module:function`
# spares one function of a module.
_SPARED = {
    "costmodel/units.py": "the formatter itself",
    "reports/payload.py:_number": "rounds the numbers the page's script sorts by; what it shows is formatted by units.py",
    "costmodel/chips/hwfile.py:_float": "writes a number of a TOML file, the shortest text that reads back exactly",
    "parsers/hlo/proto_fields.py:_float_text": "writes a constant as XLA's HLO text prints it",
}
# audit/base/ and parsers/ come before costmodel/ and cannot import units.py: what their errors name are whole
# limits and counts (a device ordinal, a byte count, a stat id, an element count), which `{n:,}` writes as
# they are. A precision or a number type is a hand format there too.
_BELOW_UNITS = ("audit/base/", "parsers/")
_SPEC = re.compile(r"[.,_]|[bdeEfFgGn%]$")  # a precision, a separator or a number type
_AS_IS = re.compile(r"(.?[<>=^])?[-+ ]?#?0?\d*[,_]")  # a separator alone: a whole count as it is
_PERCENT = re.compile(r"%(\(\w+\))?[-+ #0]*(\d+|\*)?(\.(\d+|\*))?[dieEfFgG]")
_BRACE = re.compile(r"\{[^{}]*:[^{}]*(?:[.,_]|[dfeEgGn%])\}")
_ATTRIBUTE = re.compile(r"=[\"'][^\"']*$")  # inside `x="...`: an SVG or HTML attribute's value


def text_modules() -> list[Path]:
    """Every module of audit/, parsers/, costmodel/ and reports/ but the ones spared whole."""
    return [p for top in ("audit", "costmodel", "parsers", "reports") for p in sorted((ROOT / top).rglob("*.py"))
            if str(p.relative_to(ROOT)) not in _SPARED]


def _in_attributes(tree: ast.AST) -> set[int]:
    """The ids of the f-string values written inside an attribute (`x="{x:.1f}"`): where a drawing places a
    shape, not a number a person reads."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            before = ""
            for part in node.values:
                if isinstance(part, ast.Constant):
                    before += str(part.value)
                elif _ATTRIBUTE.search(before):
                    found.add(id(part))
    return found


def _spared_lines(tree: ast.AST, path: str) -> set[int]:
    """The lines of the functions of `path` that `_SPARED` names."""
    names = {key.split(":")[1] for key in _SPARED if key.startswith(f"{path}:")}
    return {line for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name in names
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)}


def hand_formatted(source: str, path: str = "") -> list[str]:
    """`path:line` of each number formatted by hand: an f-string format spec with a precision, a
    separator or a number type, round() inside an f-string, %-formatting, str.format or format().
    Spared: a value inside an attribute, a separator alone below units.py's layer, a function `_SPARED` names."""
    tree = ast.parse(source)
    attributes, spared = _in_attributes(tree), _spared_lines(tree, path)
    as_is = path.startswith(_BELOW_UNITS)
    out = []
    for node in ast.walk(tree):
        found = False
        if isinstance(node, ast.FormattedValue) and id(node) not in attributes:
            spec = "".join(str(c.value) for c in getattr(node.format_spec, "values", []) if isinstance(c, ast.Constant))
            found = (bool(_SPEC.search(spec)) and not (as_is and _AS_IS.fullmatch(spec))) or any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "round"
                for n in ast.walk(node.value))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
            found = isinstance(node.left.value, str) and bool(_PERCENT.search(node.left.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            target = node.func.value
            found = isinstance(target, ast.Constant) and isinstance(target.value, str) and bool(
                _BRACE.search(target.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "format":
            found = len(node.args) == 2
        if found and node.lineno not in spared:
            out.append(f"{path}:{node.lineno}")
    return out


def test_every_number_in_text_goes_through_units():
    # The op table, the cost model's attention and shape notes, the renderers and the analyses were checked;
    # beside them 27 numbers were written by hand: the planner's notes and reasons (10), the chip
    # identification, the collective, floor and dropout notes and the hardware files' limits (11), the
    # pod's and the read limit's errors (4) and the roofline's ticks (2).
    modules = text_modules()
    assert len(modules) > 250
    found = [hit for p in modules for hit in hand_formatted(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, f"format these numbers with costmodel/units.py: {found}"


def test_what_the_check_spares_is_there_and_formats_a_number():
    # A spared function that no longer formats a number by hand is a hole left open.
    for key in _SPARED:
        path, _, function = key.partition(":")
        source = (ROOT / path).read_text()
        hits = {int(hit.rsplit(":", 1)[1]) for hit in hand_formatted(source)}
        lines = _spared_lines(ast.parse(source), path) if function else set(range(1, len(source.splitlines()) + 1))
        assert hits & lines, key


@pytest.mark.parametrize("code", ['f"{x:.2f} ms"', 'f"{x:,}"', 'f"{share:.0%}"', 'f"{n:g} steps"', 'f"{x:.3g}"',
                                  'f"{x:,.0f} tokens"', 'f"{100 * x:.1f}%"', 'f"{x / 1e9:.1f} GB"',
                                  'f"{x * 1e3:.2f} ms"', 'f"{x:>8.2f}"', 'f"{x:.{digits}e}"', 'f"{n:d} ops"',
                                  'f"{round(x, 2)} s"', '"%.1f GB" % x', '"%d ops" % n', '"%(t).2f s" % row',
                                  '"%.*g" % (4, x)', '"{:.3g}".format(x)', '"{0:,.2f} s".format(x)',
                                  'format(x, ".2f")', """f'<text x="{x:.1f}">{v:g}</text>'"""])
def test_the_check_sees_a_hand_formatted_number(code):
    assert hand_formatted(code) == [":1"]


@pytest.mark.parametrize("code", ['f"{name:<9}{units.seconds(x):>10}"', 'f"{i:>2} {label}"', '"{}".format(x)',
                                  'round(x, 2)', '"100%" % ()', 'f"{qty.count(n)} ops"', 'f"{units.human(t, unit)}"',
                                  """f'<rect x="{x:.2f}" width="{w:.1f}" points="{a:.1f},{b:.1f}"/>'"""])
def test_the_check_spares_alignment_coordinates_and_the_units_helpers(code):
    assert hand_formatted(code) == []


def test_the_check_spares_a_count_as_it_is_only_below_units():
    code = 'f"out of range (0 to {MAX_DEVICES:,})"'
    assert hand_formatted(code, "parsers/hlo/x.py") == hand_formatted(code, "audit/base/x.py") == []
    assert hand_formatted(code, "costmodel/x.py") == ["costmodel/x.py:1"]
    assert hand_formatted('f"{size / 2**20:,.0f} MiB"', "parsers/wire/x.py") == ["parsers/wire/x.py:1"]


def test_the_check_spares_only_the_function_it_names():
    code = 'def _float(v):\n    return f"{v:.3e}"\n\ndef note(v):\n    return f"{v:.3e} s"\n'
    assert hand_formatted(code, "costmodel/chips/hwfile.py") == ["costmodel/chips/hwfile.py:5"]


def test_the_version_is_written_once():
    from importlib.metadata import version

    import audit

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert version("roofline-audit") == audit.__version__


@given(st.floats(1e-11, 1e15, allow_nan=False))
def test_a_number_never_reads_1000_of_a_unit_that_has_a_larger_one(value):
    from audit.costmodel.units import seconds, si

    for text in (seconds(value / 1e3), si(value, "B")):
        mantissa, unit = text.split(" ")
        if unit not in ("s", "PB"):  # the largest of each
            assert float(mantissa) < 1000, text


@pytest.mark.parametrize(("value", "text"), [(999.95e-6, "1.00 ms"), (0.0012345, "1.23 ms"), (999.7, "1,000 s"),
                                             (4096115.3, "4,096,115 s"), (999.96e9, "1.00 TB")])
def test_a_number_rounds_to_three_digits_before_its_prefix_is_chosen(value, text):
    from audit.costmodel.units import seconds, si

    assert (si(value, "B") if text.endswith("B") else seconds(value)) == text


def control_flow_lists(source: str) -> list[int]:
    """Lines where `source` writes its own list of opcodes that run other computations: a tuple, list or
    set literal naming two of `while`, `conditional`, `call`, `async-start`, `async-update`, `async-done`
    (a mapping from such opcodes to what is said or read of each is not a list of them)."""
    named = {"while", "conditional", "call", "async-start", "async-update", "async-done"}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            strings = {n.value for n in node.elts if isinstance(n, ast.Constant) and isinstance(n.value, str)}
            if len(strings & named) >= 2:
                found.append(node.lineno)
    return found


def test_which_opcodes_run_other_computations_is_written_once():
    # judge, the command buffers, the schedule walk, the residency walk and the execution counts each
    # had their own list, with different members; they read parsers/hlo/opcodes.py now.
    from audit.parsers.hlo.opcodes import CONTAINERS, CONTROL_FLOW, RUNS_OTHERS

    lists = ROOT / "parsers" / "hlo" / "opcodes.py"
    modules = [p for top in ("audit", "costmodel", "parsers", "reports") for p in sorted((ROOT / top).rglob("*.py"))]
    copies = [f"{p.relative_to(ROOT)}:{line}" for p in modules if p != lists for line in control_flow_lists(p.read_text())]
    assert not copies, copies
    from audit.analyses import matching

    assert set(matching._CONTAINERS) <= set(CONTROL_FLOW)  # what the report says each one runs
    assert set(CONTROL_FLOW) < set(RUNS_OTHERS) and set(CONTROL_FLOW) < CONTAINERS
    assert "async-start" not in CONTAINERS  # it carries the cost of what it wraps: its time is its own
    assert all(_xla_knows_opcode(op) for op in set(RUNS_OTHERS) | CONTAINERS)


def test_the_control_flow_check_finds_a_copy():
    assert sorted(control_flow_lists('_RUNS = frozenset({"while", "call"})\nx = ("add", "while")\n'
                                     'y = ["conditional", "async-done"]\nd = {"call": 1, "while": 2}')) == [1, 3]


def test_one_walker_finds_the_computations_a_loop_a_branch_and_a_call_run():
    module = parse_hlo_text("""HloModule m
body {
  p = s32[] parameter(0)
  ROOT n = s32[] negate(p)
}
cond {
  p = s32[] parameter(0)
  ROOT c = pred[] constant(true)
}
left {
  p = f32[] parameter(0)
  ROOT n = f32[] negate(p)
}
right {
  p = f32[] parameter(0)
  ROOT a = f32[] abs(p)
}
ENTRY e {
  i = s32[] parameter(0)
  w = s32[] while(i), condition=cond, body=body
  b = s32[] parameter(1)
  x = f32[] parameter(2)
  k = f32[] conditional(b, x, x), branch_computations={left, right}
  ROOT c = f32[] call(x), to_apply=left
}""")
    entry = module.entry_computation
    runs = {i.name: [c.name for c in module.run_by(i)] for i in entry.instructions}
    assert runs["w"] == ["body", "cond"] and runs["k"] == ["left", "right"] and runs["c"] == ["left"]
    assert runs["x"] == []
    assert {c.name for c in module.running()} == {"e", "body", "cond", "left", "right"}


def test_the_time_base_is_written_once():
    # Seconds per picosecond and picoseconds per nanosecond live in audit/base/timebase.py; a module writing
    # its own `PS = 1e-12` or `timestamp_ns * 1000` is a second copy.
    base = ROOT / "audit" / "base" / "timebase.py"
    pattern = re.compile(r"\b1e-12\b|_ns \* 1000\b|\b(?:PS|NS_TO_PS|PS_PER_NS) = ")
    # units.py's table of time units and the waterfall's near-zero guard are not the time base.
    spared = {"units.py", "waterfall_svg.py"}
    found = [f"{p.relative_to(ROOT)}:{n}" for top in ("audit", "costmodel", "parsers", "reports")
             for p in sorted((ROOT / top).rglob("*.py")) if p != base and p.name not in spared
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found


@given(st.floats(0, 1e7, allow_nan=False), st.integers(0, 10**12))
def test_the_prose_formats_read_as_the_text_they_replaced(value, n):
    # The op table's verdicts, the cost model's notes and --set's messages printed these by hand; units.py
    # writes them now.
    from audit.costmodel.units import count, factor, whole, whole_percent

    assert factor(value) == f"{value:.1f}x" and whole_percent(value) == f"{value:.0%}"
    assert whole(value) == f"{value:,.0f}" and count(n) == f"{n:,}"
    from audit.costmodel.units import integral, stated

    assert stated(value) == f"{value:.4g}" and integral(value) == f"{value:.0f}"


@given(st.floats(1e-15, 1e20, allow_nan=False))
def test_figure_writes_three_significant_digits_as_the_notes_did_outside_one_to_a_thousand(value):
    # The collective notes printed the catalog's estimated latency and bandwidth with `.3g` (1e-05 s, 2.5e+10 B/s).
    from audit.costmodel.units import figure

    if not 1 <= float(f"{value:.3g}") < 1000:
        assert figure(value) == f"{value:.3g}"


@given(st.integers(-3, 20))
def test_a_decade_on_a_log_axis_reads_back_as_its_power_of_ten(exponent):
    # The roofline's intensity ticks: 0.001 to 10000 as written, 1e5 on.
    from audit.costmodel.units import decade

    text = decade(10.0 ** exponent)
    assert float(text) == pytest.approx(10.0 ** exponent)
    assert text == (f"{10.0 ** exponent:g}" if exponent < 5 else f"1e{exponent}")


def verdicts_written(source: str) -> list[int]:
    """Lines where `source` sets an op's verdict to a literal: `verdict="..."` or `verdict = "..."`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg == "verdict" and isinstance(node.value, ast.Constant):
            found.append(node.value.lineno)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) \
                and any(isinstance(t, ast.Name) and t.id == "verdict" for t in node.targets):
            found.append(node.lineno)
    return found


def test_an_ops_verdict_is_decided_only_in_verdict_py():
    # judge._record decided verdicts beside building the record, and identical.py wrote its own; the rules
    # are verdict.decide's now, and identical.py turns a judged op into verdict.INTERFERENCE.
    rules = ROOT / "audit" / "optable" / "verdict.py"
    found = [f"{p.relative_to(ROOT)}:{line}" for p in sorted((ROOT / "audit" / "optable").rglob("*.py")) if p != rules
             for line in verdicts_written(p.read_text())]
    assert not found, found
    assert sorted(verdicts_written('replace(r, verdict="interference")\nverdict = "bound only"\nverdict = decided')) == [1, 2]


def collective_pairings(source: str) -> list[int]:
    """Lines where `source` pairs a collective's name with something in a tuple or list literal:
    `("all-gather", count)`, `["all-reduce", volume, 1, "data"]` (a list of names alone is not a pairing)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List)):
            names = [n for n in node.elts if isinstance(n, ast.Constant) and n.value in COLLECTIVES]
            others = [n for n in node.elts if not (isinstance(n, ast.Constant) and isinstance(n.value, str))]
            if names and others:
                found.append(node.lineno)
    return found


def test_which_collectives_each_parallelism_runs_is_written_once():
    # workload.collectives (the plan beside a profile) and layout_step.comm_rows (the layout search) each
    # wrote the book's table of parallelism -> collectives; both read planner/parallelism.py now.
    table = ROOT / "costmodel" / "planner" / "parallelism.py"
    planner = sorted((ROOT / "costmodel" / "planner").glob("*.py"))
    copies = [f"{p.relative_to(ROOT)}:{line}" for p in planner if p != table
              for line in collective_pairings(p.read_text())]
    assert not copies, copies
    assert collective_pairings(table.read_text())  # the check sees the table itself


def test_the_collective_pairing_check_finds_a_copy():
    assert sorted(collective_pairings('a = [("all-gather", w, 2, "data")]\nb = ("all-to-all", "all-gather")\n'
                                      'c = ["reduce-scatter", m]\nd = {"all-reduce": 1}')) == [1, 3]


@given(st.integers(0, 3), st.booleans(), st.integers(1, 64), st.integers(1, 128), st.integers(2, 4096),
       st.floats(1.0, 1e12, allow_nan=False), st.sampled_from(["all-to-all", "all-gather"]))
def test_the_parallelism_table_moves_what_the_book_says(zero, train, m, layers, n, volume, dispatch):
    from audit.costmodel.network.collectives import bytes_sent
    from audit.costmodel.planner import parallelism as par

    def sent(rows):  # bytes each device sends per step, every collective moving `volume` over n devices
        return sum(count * bytes_sent(name, volume, n) for name, count in rows)

    # ZeRO 1 and 2 move what DP's all-reduce moves, ZeRO 3 half again (the backward's second gather), for
    # one microbatch; with more, ZeRO 3 repeats all of it and DP none of it
    assert sent(par.data_parallel(2)) == pytest.approx(sent(par.data_parallel(1)), rel=1e-12)
    assert sent(par.data_parallel(3)) == pytest.approx(1.5 * sent(par.data_parallel(1)), rel=1e-12)
    assert sent(par.data_parallel(3, microbatches=m)) == pytest.approx(m * sent(par.data_parallel(3)), rel=1e-12)
    assert sent(par.data_parallel(0, microbatches=m)) == sent(par.data_parallel(0))
    entries = [par.data_parallel(zero, train, m), par.across_replicas(zero), par.tensor_parallel(layers, train, m),
               par.tensor_parallel(layers, train, m, sequence_parallel=False), par.context_parallel(layers, train, m),
               par.expert_parallel(layers, dispatch, train, m), par.pipeline_parallel(m, train)]
    assert all(name in COLLECTIVES and count >= 1 for rows in entries for name, count in rows)
    # a forward pass has no gradients to reduce: no weights' or keys' and values' reduce-scatter or all-reduce
    gradients = {name for rows in (par.data_parallel(zero, False, m), par.context_parallel(layers, False, m))
                 for name, _ in rows}
    assert not gradients & {"reduce-scatter", "all-reduce"}
    # the backward pass runs the forward's activation collectives again
    for entry, args in ((par.tensor_parallel, (layers,)), (par.expert_parallel, (layers, dispatch)),
                        (par.context_parallel, (layers,))):
        forward, both = entry(*args, train=False, microbatches=m), entry(*args, train=True, microbatches=m)
        assert [(name, 2 * count) for name, count in forward] == both[:len(forward)]
    assert par.pipeline_parallel(m, train=True) == [(name, 2 * n) for name, n in par.pipeline_parallel(m, False)]
    # an all-reduce is a reduce-scatter and an all-gather: TP moves as many bytes with sequence parallelism
    # as without
    assert sent(par.tensor_parallel(layers, train, m)) == pytest.approx(
        sent(par.tensor_parallel(layers, train, m, sequence_parallel=False)), rel=1e-12)


def op_row_types() -> dict[str, str]:
    """Every dataclass in audit/, reports/ and costmodel/ with the fields `name`, `module` and `opcode`
    (an op's row), as "path:Class" -> its docstring."""
    found = {}
    for top in ("audit", "reports", "costmodel"):
        for p in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(p.read_text())):
                if not isinstance(node, ast.ClassDef):
                    continue
                marks = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
                if not any((isinstance(d, ast.Name) and d.id == "dataclass")
                           or (isinstance(d, ast.Attribute) and d.attr == "dataclass") for d in marks):
                    continue
                fields = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
                if {"name", "module", "opcode"} <= fields:
                    found[f"{p.relative_to(ROOT)}:{node.name}"] = ast.get_docstring(node) or ""
    return found


def test_the_op_row_is_declared_once_and_each_other_type_says_why_it_is_its_own():
    # Issue 42 found the op row declared four times; OpRecord is the row, and each other type with an op's
    # name, module and opcode is a stage before it or an entry of the diff's format, and says so.
    found = op_row_types()
    assert set(found) == {"audit/optable/record.py:OpRecord", "audit/optable/join.py:Joined",
                          "audit/analyses/diff_pairing.py:ProgramOp", "reports/model/diff.py:OpBrief",
                          "reports/model/diff.py:ChangedOp"}, sorted(found)
    for where, doc in found.items():
        if not where.endswith(":OpRecord"):
            assert "not an `OpRecord`" in doc and len(doc.split("\n\n")) >= 2, where
