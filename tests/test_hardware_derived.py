"""Figures that are a ratio of another are stated once, as the ratio, and computed when the file is read."""

from __future__ import annotations

import re
import tomllib
from importlib import resources

import pytest

from audit.costmodel.chips import hwfile
from audit.costmodel.chips.catalog import CATALOG
from audit.base.errors import InputError

DATA = resources.files("audit.costmodel.chips").joinpath("data")


def _text(name: str) -> str:
    return DATA.joinpath(f"{name}.toml").read_text(encoding="utf-8")


def _set_value(text: str, section: str, key: str, value: float) -> str:
    """`text` with the `value` of `key` in `[section]` replaced (the line's other fields kept)."""
    lines, current = text.splitlines(), ""
    for i, line in enumerate(lines):
        header = re.match(r"^\[(.+)\]$", line)
        current = header.group(1) if header else current
        if current == section and line.startswith(f"{key} = "):
            lines[i] = re.sub(r"value = [^,]+,", f"value = {value!r},", line)
            return "\n".join(lines) + "\n"
    raise AssertionError(f"no {section}.{key}")


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_no_catalog_figure_restates_a_ratio_as_a_literal(name):
    raw = tomllib.loads(_text(name))
    found: list[str] = []

    def walk(node: object, key: str) -> None:
        if isinstance(node, dict):
            if "source" in node and re.search(r"\d% of the catalog", str(node["source"])):
                found.append(key)
            for k, v in node.items():
                walk(v, f"{key}.{k}")
        elif isinstance(node, list):
            for item in node:
                walk(item, key)

    walk(raw, name)
    assert found == []


def test_a_derived_figure_follows_its_base_when_the_base_changes():
    # GIVEN the H100 file, whose TF32 achievable rate is its measured bf16 efficiency times the TF32 peak
    base = hwfile.loads(_text("h100"), "h100.toml", "catalog")
    ach = base.achievable
    assert ach is not None
    efficiency = ach.matmul_flops_per_s["bf16"].value / base.peak_flops["bf16"].value
    assert ach.matmul_flops_per_s["tf32"].value == pytest.approx(efficiency * base.peak_flops["tf32"].value)
    # WHEN the measured bf16 rate is replaced by a new measurement
    edited = hwfile.loads(_set_value(_text("h100"), "achievable.matmul_flops_per_s", "bf16", 7.0e14), "h100.toml")
    # THEN the rates derived from it move with it, and nothing else does
    new = edited.achievable
    assert new is not None
    assert new.matmul_flops_per_s["tf32"].value == pytest.approx(7.0e14 / 9.894e14 * 4.947e14)
    assert new.matmul_flops_per_s["f16"].value == 7.0e14  # "the bf16 rate"
    assert new.matmul_flops_per_s["fp8"].value == ach.matmul_flops_per_s["fp8"].value


def test_the_note_says_how_a_derived_figure_was_computed():
    q = CATALOG["h100"].achievable.cache_bytes_per_s["L2"]  # type: ignore[union-attr]
    assert q.kind == "estimate" and q.note.startswith("estimate: the fraction of HBM's peak")
    assert "(achievable.memory_bytes_per_s / hbm_bytes_per_s) of caches.L2.bytes_per_s" in q.note
    ratio = CATALOG["h100"].achievable.memory_bytes_per_s.value / CATALOG["h100"].hbm_bytes_per_s.value
    assert q.value == pytest.approx(ratio * CATALOG["h100"].caches[0].bytes_per_s.value)
    v5p = CATALOG["tpu-v5p"]
    assert v5p.achievable.memory_bytes_per_s.value == pytest.approx(0.9 * v5p.hbm_bytes_per_s.value)  # type: ignore[union-attr]


def test_a_derived_figure_survives_a_write_and_read():
    hw = CATALOG["b300"]
    assert hwfile.loads(hwfile.dumps(hw), "x.toml", "catalog") == hw


_MINIMAL = """format = 1
name = "x"
kind = "gpu"
vendor = "NVIDIA"
hbm_bytes_per_s = {{ value = 1e12, unit = "B/s", kind = "datasheet", source = "s" }}

[peak_flops]
bf16 = {{ value = 1e15, unit = "FLOP/s", kind = "datasheet", source = "s" }}

[achievable]
memory_bytes_per_s = {figure}
matmul_flops_per_s = {{}}
"""


@pytest.mark.parametrize("figure, words", [
    ('{ ratio = 0.9, of = "hbm_bytes", unit = "B/s" }', ["memory_bytes_per_s", "line 11", "'hbm_bytes'"]),
    ('{ ratio = 0.9, of = "peak_flops.bf16", unit = "B/s" }', ["in 'B/s'", "'FLOP/s'"]),
    ('{ ratio = 0.9, of = "achievable.memory_bytes_per_s", unit = "B/s" }', ["refers back to itself"]),
    ('{ ratio = 0.9, value = 1e12, of = "hbm_bytes_per_s", unit = "B/s" }', ["both a value and a ratio"]),
    ('{ ratio = "fast", of = "hbm_bytes_per_s", unit = "B/s" }', ["ratio must be a number"]),
    ('{ ratio = -1, of = "hbm_bytes_per_s", unit = "B/s" }', ["ratio must be a number >= 0"]),
    ('{ ratio = 0.5, unit = "B/s" }', ["needs both ratio and of"]),
])
def test_a_bad_derived_figure_is_an_input_error_naming_key_and_line(figure, words):
    with pytest.raises(InputError) as info:
        hwfile.loads(_MINIMAL.format(figure=figure), "mine.toml")
    text = str(info.value)
    assert all(w in text for w in words), text
    assert "mine.toml" in text and "\n" not in text


def test_a_users_file_may_state_a_figure_as_a_ratio():
    hw = hwfile.loads(_MINIMAL.format(figure='{ ratio = 0.85, of = "hbm_bytes_per_s", unit = "B/s", '
                                             'kind = "estimate", source = "estimate: my stream test" }'), "mine.toml")
    q = hw.achievable.memory_bytes_per_s  # type: ignore[union-attr]
    assert (q.value, q.source, q.kind) == (pytest.approx(0.85e12), "user", "estimate")
    assert q.note == "estimate: my stream test; computed: 85.0% of hbm_bytes_per_s (1e+12 B/s)"


def test_onchip_memory_is_stated_once():
    # The GPU files state their last-level cache once, in [[caches]]; the report's onchip_bytes reads it.
    for name, hw in CATALOG.items():
        if hw.caches:
            assert hw.onchip_bytes is None, name
            assert hw.to_json()["onchip_bytes"] == hw.caches[-1].capacity_bytes.value
    assert CATALOG["h100"].to_json()["onchip_bytes"] == 50e6
    assert CATALOG["tpu-v5e"].to_json()["onchip_bytes"] == 128 * 2 ** 20  # VMEM: not a cache
