"""The Architecture page's table of layers says what tests/test_layering.py enforces, no more and no less."""

from __future__ import annotations

import re

from conftest import ROOT
from test_layering import ALLOWED, LAYERS

PAGE = ROOT / "docs" / "architecture.md"
# How the page names each layer.
NAMED = {"`parsers/`": "parsers", "`costmodel/`": "costmodel", "`reports/model/`": "report model",
         "`audit/optable/`": "op table", "`reports/`": "reports", "`audit/`": "audit",
         "`audit/options.py`": "options", "`audit/errors.py`": "errors", "`audit/timebase.py`": "timebase"}
BELOW_EVERY_LAYER = {"errors", "timebase"}


def page_rules(text: str) -> dict[str, set[str]]:
    """Layer -> the layers the page's table says it may import (what sits below every layer added)."""
    rules: dict[str, set[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        layer = NAMED[re.match(r"`[^`]+`", cells[0]).group(0)]
        if cells[1] == "any layer":
            rules[layer] = set(LAYERS.values()) - {layer}
        else:
            rules[layer] = {NAMED[n] for n in re.findall(r"`[^`]+/`|`[^`]+\.py`", cells[1]) if n in NAMED}
        rules[layer] |= BELOW_EVERY_LAYER
    return rules


def test_the_table_of_layers_is_the_layering_tests_rules():
    text = PAGE.read_text()
    assert page_rules(text) == {layer: ALLOWED[layer] for layer in page_rules(text)}
    assert set(page_rules(text)) == set(ALLOWED) - {"errors", "options", "timebase"}


def test_what_sits_below_every_layer_is_named_and_imports_nothing_of_ours():
    text = PAGE.read_text()
    below = text[text.index("Below every layer:"):].split("\n\n")[0]
    assert all(name in below for name, layer in NAMED.items() if layer in BELOW_EVERY_LAYER)
    assert all(BELOW_EVERY_LAYER <= allowed for layer, allowed in ALLOWED.items()
               if layer not in BELOW_EVERY_LAYER | {"options"})
    assert ALLOWED["errors"] == set() and ALLOWED["timebase"] == set() and ALLOWED["options"] == {"errors"}


def test_the_check_reads_a_wrong_row_as_wrong():
    wrong = "| `parsers/` | nothing of ours |\n| `costmodel/` | `parsers/` |\n"
    rules = page_rules(wrong)
    assert rules["parsers"] == ALLOWED["parsers"]
    assert rules["costmodel"] != ALLOWED["costmodel"]  # the page would leave out audit/options.py


def test_the_page_makes_none_of_the_claims_the_code_contradicts():
    # Parsers import audit.errors; audit run builds its --repeat and --target reports itself; the drawings
    # place their numbers without units.py.
    text = PAGE.read_text()
    for claim in ("| `parsers/` | nothing of ours |", "the one place a command's work is put together",
                  "its HLO side only", "the one number formatter"):
        assert claim not in text, claim


_NAMED_MODULE = re.compile(r"`((?:audit\.)?(?:costmodel|parsers|reports|optable|analyses|orchestration|pod|commands|"
                           r"child|library)(?:\.[a-z_0-9]+)+)`")


def _exists(name: str) -> bool:
    """Whether a dotted name (`costmodel.ops.module`, `audit.parsers.readers.READERS`) is a module of ours
    or something in one."""
    import importlib

    parts = (name if name.startswith("audit.") else f"audit.{name}").split(".")
    for cut in range(len(parts), 1, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_every_module_the_code_names_in_backticks_exists():
    # costmodel/ops/base.py said its handlers register when `costmodel.opcost` imports them: no such module.
    found = [f"{p.relative_to(ROOT)}: {m}" for top in ("audit", "costmodel", "parsers", "reports")
             for p in sorted((ROOT / top).rglob("*.py")) for m in _NAMED_MODULE.findall(p.read_text())
             if not _exists(m)]
    assert not found, found
    assert not _exists("costmodel.opcost") and _exists("costmodel.ops.module.HANDLERS")
