"""Hardware files: the catalog is data in the one TOML format users write, read by one loader."""

from __future__ import annotations

import dataclasses
from importlib import resources
from pathlib import Path

import pytest

from audit.cli import main
from audit.costmodel.chips import hwfile
from audit.costmodel.chips.catalog import CATALOG
from audit.costmodel.chips.hardware import Hardware, Quantity
from audit.base.errors import ExitCode, InputError


def _quantities(obj: object, path: str = ""):
    """Every Quantity a dataclass holds, at any depth, with its dotted path."""
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        where = f"{path}.{f.name}" if path else f.name
        if isinstance(value, Quantity):
            yield where, value
        elif isinstance(value, dict):
            yield from ((f"{where}.{k}", q) for k, q in value.items() if isinstance(q, Quantity))
        elif dataclasses.is_dataclass(value):
            yield from _quantities(value, where)
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                if dataclasses.is_dataclass(item):
                    yield from _quantities(item, f"{where}[{i}]")


def test_every_catalog_entry_is_a_data_file_named_after_its_chip():
    files = {p.name for p in resources.files("audit.costmodel.chips").joinpath("data").iterdir()
             if p.name.endswith(".toml")}
    assert files == {f"{name}.toml" for name in CATALOG}
    assert {"h100", "tpu-v5e", "mi300x"} <= set(CATALOG)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_catalog_number_has_a_source_and_a_kind(name):
    found = list(_quantities(CATALOG[name]))
    assert len(found) > 8
    for where, q in found:
        assert q.source == "catalog" and q.note, (name, where)
        assert q.kind in hwfile.KINDS, (name, where, q.kind)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_written_file_reads_back_to_the_same_hardware(name):
    hw = CATALOG[name]
    text = hwfile.dumps(hw)
    assert hwfile.loads(text, "x.toml", "catalog") == hw
    as_user = hwfile.loads(text, "x.toml", "user")
    assert as_user.source == "user"
    assert all(q.source == "user" for _, q in _quantities(as_user))
    # Nothing but the provenance differs.
    assert hwfile.dumps(as_user) == text


def test_topology_is_not_part_of_a_file():
    hw = CATALOG["h100"].with_topology((2, 8))
    assert "topology" not in hwfile.dumps(hw)
    assert hwfile.loads(hwfile.dumps(hw), "x.toml", "catalog").topology == ()


def _h100_text() -> str:
    return hwfile.dumps(CATALOG["h100"])


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.mark.parametrize("edit, key, words", [
    (lambda t: t.replace('bf16 = { value = 9.894e14', 'bf16 = { value = "fast"'), "peak_flops.bf16.value",
     ["expected a number", "'fast'"]),
    (lambda t: t.replace("domain_size = 8", "domian_size = 8"), "interconnect.domian_size",
     ["unknown key", "did you mean domain_size"]),
    (lambda t: t.replace('unit = "B/s", kind = "datasheet", source = "NVIDIA H100 datasheet (SXM5)"',
                         'unit = "B/s", kind = "guess", source = "NVIDIA H100 datasheet (SXM5)"'),
     "hbm_bytes_per_s.kind", ["not one of datasheet, measured, estimate"]),
    (lambda t: t.replace("links_per_axis = 1", "links_per_axis = 1.5"), "interconnect.links_per_axis",
     ["expected an integer"]),
    (lambda t: t.replace('name = "L2"', 'name = "L2"\nsize = 3'), "caches[0].size", ["unknown key"]),
    (lambda t: t.replace("hbm_bytes_per_s = { value = 3.35e12", "hbm_bytes_per_s = { value = 0"),
     "hbm_bytes_per_s.value", ["number > 0 for a figure in B/s"]),
])
def test_bad_values_name_file_key_and_line(tmp_path, edit, key, words):
    text = edit(_h100_text())
    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        hwfile.load(path)
    message = str(info.value)
    line = hwfile.key_lines(text)[key if key in hwfile.key_lines(text) else key.rsplit(".", 1)[0]]
    assert message.startswith(f"{path}: key {key!r} (line {line})"), message
    assert all(w in message for w in words), message
    assert "\n" not in message


def test_line_numbers_are_the_lines_of_the_text():
    text = _h100_text()
    lines = hwfile.key_lines(text)
    assert lines["peak_flops.bf16"] == _line_of(text, "bf16 = {")
    assert lines["interconnect.domain_size"] == _line_of(text, "domain_size = ")
    assert lines["caches[0].bytes_per_s"] == _line_of(text, "bytes_per_s = { value = 1.01376e13")
    assert lines["detection.fingerprints"] == _line_of(text, "fingerprints = ")


def test_missing_number_and_broken_toml_are_input_errors(tmp_path):
    text = "\n".join(line for line in _h100_text().splitlines() if not line.startswith("hbm_bytes_per_s"))
    with pytest.raises(InputError, match="missing key 'hbm_bytes_per_s'"):
        hwfile.loads(text, "a.toml")
    with pytest.raises(InputError, match=r"a.toml: not a valid TOML file: .*line 3"):
        hwfile.loads('format = 1\nname = "x"\nkind = = "gpu"\n', "a.toml")
    with pytest.raises(InputError, match="a number needs 'unit'"):
        hwfile.loads(_h100_text().replace(', unit = "s", kind = "estimate"', ', kind = "estimate"', 1), "a.toml")
    with pytest.raises(InputError, match="format 2 is not one this version reads"):
        hwfile.loads(_h100_text().replace("format = 1", "format = 2"), "a.toml")


def test_a_minimal_file_fills_defaults():
    text = ('name = "lab-gpu"\nkind = "gpu"\nvendor = "Lab"\n'
            '[peak_flops]\nbf16 = { value = 1e15, unit = "FLOP/s" }\n'
            '[hbm_bytes_per_s]\nvalue = 4e12\nunit = "B/s"\nkind = "measured"\nsource = "our stream run"\n')
    hw = hwfile.loads(text, "lab.toml")
    assert isinstance(hw, Hardware) and hw.name == "lab-gpu" and hw.source == "user"
    assert hw.hbm_bytes_per_s == Quantity(4e12, "B/s", "user", "our stream run", "measured")
    assert hw.peak("bf16").value == 1e15 and hw.interconnect.kind == "none"


def test_special_characters_in_text_round_trip():
    hw = dataclasses.replace(CATALOG["a100"], notes=('quote " backslash \\ tab \t ünïcode',))
    assert hwfile.loads(hwfile.dumps(hw), "x.toml", "catalog") == hw


def test_unreadable_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read hardware file"):
        hwfile.load(tmp_path / "absent.toml")
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError):
        hwfile.load(tmp_path / "bin.toml")



def test_the_documented_example_is_a_valid_file():
    page = (Path(__file__).resolve().parents[1] / "docs" / "hardware.md").read_text()
    text = page.split("```toml\n", 1)[1].split("```", 1)[0]
    hw = hwfile.loads(text, "docs/hardware.md")
    assert hw.name == "lab-a100" and hw.interconnect.domain_size == 4 and hw.caches[0].name == "L2"
    assert hw.hbm_bytes_per_s.kind == "measured" and hw.source == "user"


@dataclasses.dataclass(frozen=True)
class _Level:
    name: str
    bytes_per_s: Quantity


@dataclasses.dataclass(frozen=True)
class _Future:
    """Field shapes a later Hardware field might take: nested tables of numbers, lists of them."""

    by_precision: dict[str, dict[str, Quantity]]
    levels: tuple[_Level, ...] = ()
    samples: tuple[Quantity, ...] = ()
    shared: Quantity | None = None
    count: int = 0


@dataclasses.dataclass(frozen=True)
class _HardwareWithMore(Hardware):
    future: _Future | None = None


def test_a_new_field_of_any_supported_shape_loads_and_writes_with_no_loader_change():
    q = lambda v, src: Quantity(v, "FLOP/s", "catalog", src, "measured")  # noqa: E731
    rate = lambda v, src: Quantity(v, "B/s", "catalog", src, "measured")  # noqa: E731 (a bytes_per_s field is in B/s)
    future = _Future(by_precision={"bf16": {"default": q(7e14, "bench a"), "highest": q(1e14, "bench b")}},
                     levels=(_Level("L2", rate(9e12, "stream")), _Level("LLC", rate(1.4e13, "stream"))),
                     samples=(q(1.0, "run 1"), q(2.0, "run 2")), shared=q(3.0, "x"), count=4)
    base = CATALOG["mi300x"]
    hw = _HardwareWithMore(**{f.name: getattr(base, f.name) for f in dataclasses.fields(Hardware)}, future=future)
    text = hwfile.dumps(hw)
    assert "[future.by_precision.bf16]" in text and "[[future.levels]]" in text
    back = hwfile.loads_as(_HardwareWithMore, text, "x.toml", "catalog")
    assert back == hw
    assert back.quantities()["future.by_precision.bf16.default"].value == 7e14  # reports list it too
    bad = text.replace('name = "LLC"', 'name = "LLC"\nsize = 2')
    with pytest.raises(InputError, match=r"key 'future.levels\[1\].size' \(line \d+\): unknown key"):
        hwfile.loads_as(_HardwareWithMore, bad, "x.toml")
    from audit.costmodel.chips.overrides import apply

    changed = apply(hw, [("future.by_precision.bf16.highest", "2e14"), ("future.samples.1", "5"),
                         ("future.levels.LLC.bytes_per_s", "1e13"), ("future.count", "8")])
    assert changed.future.by_precision["bf16"]["highest"].value == 2e14
    assert changed.future.by_precision["bf16"]["highest"].source == "user"
    assert changed.future.samples[1].value == 5 and changed.future.levels[1].bytes_per_s.value == 1e13
    assert changed.future.count == 8 and changed.future.samples[0] == hw.future.samples[0]


def _h100_file() -> str:
    return (resources.files("audit.costmodel.chips") / "data" / "h100.toml").read_text()


def _calc(path: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["calc", "matmul", "--m", "1024", "--k", "1024", "--n", "1024", "--dtype", "bf16", "--hardware",
                 str(path), "--json", "-"])
    return code, capsys.readouterr().err.strip()


def test_a_hardware_file_nested_past_what_toml_reads_exits_2(tmp_path, capsys):
    path = tmp_path / "hw.toml"
    path.write_text(_h100_file().replace("notes = []", "notes = " + "[" * 5000 + "]" * 5000))
    code, err = _calc(path, capsys)
    assert (code, err) == (ExitCode.INPUT, f"audit: error: {path}: not a hardware file: arrays or tables nested "
                                           "deeper than TOML can be read")


@pytest.mark.parametrize(("old", "new", "key", "unit"), [
    ('hbm_bytes_per_s = { value = 3.35e12, unit = "B/s"', 'hbm_bytes_per_s = { value = 3350, unit = "GB/s"',
     "hbm_bytes_per_s.unit", "B/s"),
    ('bf16 = { value = 9.894e14, unit = "FLOP/s"', 'bf16 = { value = 989.4, unit = "TFLOP/s"',
     "peak_flops.bf16.unit", "FLOP/s"),
    ('op_overhead_s = { value = 1e-6, unit = "s"', 'op_overhead_s = { value = 1, unit = "us"', "op_overhead_s.unit",
     "s"),
])
def test_a_figure_in_another_unit_than_its_field_exits_2(tmp_path, capsys, old, new, key, unit):
    """A file's unit is read, not ignored: 3350 'GB/s' priced as 3350 B/s would be a billion times off."""
    path = tmp_path / "hw.toml"
    path.write_text(_h100_file().replace(old, new, 1))
    code, err = _calc(path, capsys)
    assert code == ExitCode.INPUT
    assert f"key {key!r} (line " in err and f"but this figure is in {unit} (write the value in {unit})" in err, err


def test_every_catalog_figure_is_in_the_unit_its_field_names():
    figures = [(name, key, q.unit) for name, hw in CATALOG.items() for key, q in hw.quantities().items()]
    assert len(figures) > 500
    assert [f for f in figures if hwfile.expected_unit(f[1]) != f[2]] == []
