"""The Architecture page's table of layers says what tests/test_layering.py enforces, no more and no less."""

from __future__ import annotations

import re

from conftest import ROOT, WITHOUT_C
from test_layering import LAYERS, NOT_READ

PAGE = ROOT / "docs" / "architecture.md"


def page_layers(text: str) -> tuple[list[tuple[str, ...]], dict[str, set[str]]]:
    """The page's table: the folders of each row in order, and what each folder may not import."""
    rows: list[tuple[str, ...]] = []
    not_read: dict[str, set[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].isdigit():
            continue
        folders = tuple(f.rstrip("/") for f in re.findall(r"`([^`]+/)`", cells[1]))
        rows.append(folders)
        for folder in folders:
            not_read[folder] = {f.rstrip("/") for f in re.findall(r"`([^`]+/)`", cells[3])}
    return rows, not_read


def test_the_table_of_layers_is_the_layering_tests_order():
    rows, not_read = page_layers(PAGE.read_text())
    assert rows == list(LAYERS)
    assert not_read == NOT_READ


def test_the_check_reads_a_wrong_table_as_wrong():
    swapped = "| 1 | `parsers/hlo/` | x | |\n| 2 | `parsers/wire/` | x | |\n"
    assert page_layers(swapped)[0] == [("parsers/hlo",), ("parsers/wire",)] != list(LAYERS[1:3])
    loose = "| 7 | `costmodel/` | x | `parsers/xplane/` |\n"
    assert page_layers(loose)[1]["costmodel"] != NOT_READ["costmodel"]  # the page would let it read a host


def test_the_page_makes_none_of_the_claims_the_code_contradicts():
    # Parsers import audit.base; audit run builds its --repeat and --target reports itself; the drawings
    # place their numbers without units.py; OpRecord is the op table's.
    text = PAGE.read_text()
    for claim in ("| `parsers/` | nothing of ours |", "the one place a command's work is put together",
                  "its HLO side only", "the one number formatter", "reports/model/record.py"):
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
            if WITHOUT_C and f'Extension("{".".join(parts[:cut])}"' in (ROOT / "setup.py").read_text():
                return True  # a C extension this run refuses (AUDIT_TEST_WITHOUT_C=1) that setup.py builds
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


def test_every_source_file_the_pages_name_exists():
    """A page naming `hlo_text.py` after the file moved to parsers/hlo/text.py sends a reader nowhere; a
    file a page writes itself (`<!-- file: NAME -->`) is its own."""
    sources = {p.relative_to(ROOT).as_posix() for top in ("audit", "parsers", "costmodel", "reports", "workloads",
                                                        "scripts", "bench", "tests")
               for p in (ROOT / top).rglob("*") if p.suffix in (".py", ".c", ".h") and "data" not in p.parts}
    names = {s.rsplit("/", 1)[-1] for s in sources}
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        written = set(re.findall(r"<!-- file: (\S+) -->", text))
        for named in re.findall(r"`([\w/.-]+\.(?:py|c|h))`", text):
            if named in written or (named in sources if "/" in named else named in names):
                continue
            missing.append(f"{page.name}: {named}")
    assert not missing, missing
