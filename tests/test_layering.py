"""The layers of docs/architecture.md, as imports: the folders in layer order, each importing only
the folders before it.

A file belongs to the deepest folder of `LAYERS` that holds it (`audit/` holds its subfolders that
are not listed: the CLI, the library, orchestration, analyses, pod, the MCP server). Folders on one
row are peers: neither imports the other.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP_PACKAGE = {"parsers": "audit.parsers", "costmodel": "audit.costmodel", "reports": "audit.reports",
               "workloads": "audit.workloads", "audit": "audit"}
LAYERS: tuple[tuple[str, ...], ...] = (
    ("audit/base",),                     # below everything: errors, options, time base, ranges, user cache, stamping
    ("parsers/wire",),                   # bytes: protobuf wire, message classes, compressed members, capped reads
    ("parsers/hlo",),                    # HLO text and proto into one module model
    ("parsers/profile",),                # what every profile reader hands on: the typed host, its files, op events
    ("parsers/xplane", "parsers/nsys"),  # one folder per profile format
    ("parsers",),                        # the registry of profile formats, and what an input is
    ("costmodel",),                      # HLO and hardware in, expectations out
    ("audit/optable",),                  # the op table: OpRecord, measured joined with expected, verdicts
    ("reports/model",),                  # the report format: ReportModel, DiffModel, columns, schema, reader
    ("reports",),                        # rendering only
    ("audit",),                          # the CLI, the library, orchestration, analyses, pod, the MCP server
    ("workloads",),                      # plain JAX programs on the public API
)
FOLDERS = [folder for row in LAYERS for folder in row]
RANK = {folder: rank for rank, row in enumerate(LAYERS) for folder in row}
FORMATS = {"parsers/xplane", "parsers/nsys"}
# Folders a layer may not import although they come before it: nothing above parsers/ names a profile
# format (the registry does), and the cost model reads HLO, never a trace.
NOT_READ = {folder: (FORMATS if RANK[folder] > RANK["parsers"] else set()) for folder in FOLDERS}
NOT_READ["costmodel"] = FORMATS | {"parsers/profile", "parsers"}


def _absolute(path: Path, level: int, module: str | None) -> str:
    """The dotted name an import refers to, resolving relative imports against the file's package."""
    if level == 0:
        return module or ""
    rel = path.relative_to(ROOT).with_suffix("").parts
    package = [TOP_PACKAGE[rel[0]], *rel[1:-1]]
    package = ".".join(package).split(".")
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _folder_of(name: str) -> str | None:
    """The folder of `LAYERS` a dotted module name belongs to: the deepest listed folder holding it."""
    for top, package in TOP_PACKAGE.items():
        if name == package or name.startswith(package + "."):
            rest = name[len(package):].lstrip(".").split(".") if name != package else []
            if top == "audit" and rest and rest[0] in TOP_PACKAGE and rest[0] != "audit":
                continue  # audit.parsers... is parsers/, not audit/
            break
    else:
        return None
    path = [top, *rest]
    for cut in range(len(path), 0, -1):
        folder = "/".join(path[:cut])
        if folder in RANK:
            return folder
    return None


def _imported_names(path: Path) -> list[str]:
    """Every module name a file imports, anywhere in it (a call-time import too); `from pkg import mod`
    names `pkg.mod`."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(path, node.level, node.module)
            names += [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def _sources() -> list[Path]:
    return [p for top in TOP_PACKAGE for p in sorted((ROOT / top).rglob("*.py"))]


def layer_violations(files: list[Path]) -> list[str]:
    out = []
    for path in files:
        folder = _folder_of(_module_name(path))
        if folder is None:
            continue
        imported = {_folder_of(n) for n in _imported_names(path)} - {None, folder}
        bad = sorted(str(f) for f in imported if RANK[f] >= RANK[folder] or f in NOT_READ[folder])
        if bad:
            out.append(f"{path.relative_to(ROOT)} ({folder}) imports {bad}")
    return out


def test_layers_import_only_downward():
    violations = layer_violations(_sources())
    assert not violations, "\n".join(violations)


def test_the_layer_check_finds_an_upward_import(tmp_path, monkeypatch):
    # A cost-model module that reads the op table, a renderer that reaches into the analysis, a peer
    # format reading another, the cost model reading a trace and an analysis naming a format.
    fake = tmp_path / "costmodel" / "chips"
    fake.mkdir(parents=True)
    (fake / "judge.py").write_text("from ...optable.verdict import judge\n"
                                   "from ...parsers.profile.events import Columns\n"
                                   "from ...parsers.hlo.model import Module\n")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "late.py").write_text("from ..orchestration.pipeline import analyse_profile\n"
                                                 "from .model.report import ReportModel\n")
    (tmp_path / "parsers" / "nsys").mkdir(parents=True)
    (tmp_path / "parsers" / "nsys" / "peer.py").write_text("from ..xplane.reader import READER\n"
                                                          "from ..profile.model import HostProfile\n")
    (tmp_path / "audit" / "pod").mkdir(parents=True)
    (tmp_path / "audit" / "pod" / "late.py").write_text("from ..parsers.nsys.archive import read_archive_host\n"
                                                       "from ..parsers.readers import reader_of_host\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = layer_violations(sorted(tmp_path.rglob("*.py")))
    assert found == ["audit/pod/late.py (audit) imports ['parsers/nsys']",
                     "costmodel/chips/judge.py (costmodel) imports ['audit/optable', 'parsers/profile']",
                     "parsers/nsys/peer.py (parsers/nsys) imports ['parsers/xplane']",
                     "reports/late.py (reports) imports ['audit']"]


def test_every_layer_is_a_folder_and_every_reader_folder_a_layer():
    """A listed folder that does not exist allows or forbids nothing; a folder of parsers/ missing from
    LAYERS would fall into the registry's layer unseen."""
    packages = {str(init.parent.relative_to(ROOT)) for top in TOP_PACKAGE for init in (ROOT / top).rglob("__init__.py")}
    assert set(FOLDERS) <= packages, set(FOLDERS) - packages
    assert {p for p in packages if p.startswith("parsers/")} <= set(FOLDERS)


def test_every_profile_format_has_one_reader_and_only_the_registry_names_them():
    from audit.parsers import readers

    names = [r.name for r in readers.READERS]
    assert names == ["nsys-sqlite", "nsys-jax", "xplane"] and readers.FALLBACK.name == "xplane"
    assert {r.source_kind for r in readers.READERS} == {"nsys", "xplane"}
    assert {_folder_of(n) for n in _imported_names(ROOT / "parsers" / "readers.py")} >= FORMATS


def test_workloads_use_only_the_public_api():
    """The bundled workloads are plain JAX programs, written as a user would: `from audit import ...`."""
    for path in sorted((ROOT / "workloads").glob("*.py")):
        names = [n for n in _imported_names(path) if n.startswith("audit.") or n == "audit"]
        inner = [n for n in names if _folder_of(n) != "workloads" and n.rpartition(".")[0] != "audit"]
        assert not inner, f"{path.name} imports {inner}"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("").parts
    parts = [TOP_PACKAGE[rel[0]], *rel[1:]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Which project modules each project module imports, anywhere in it (a call-time import too).

    A package's `__init__` loading its own submodules (the lazy public API of `audit`) is a facade,
    not a dependency of the package on itself, and is left out."""
    paths = [p for top in TOP_PACKAGE for p in sorted((ROOT / top).rglob("*.py"))]
    modules = {_module_name(p): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(path, node.level, node.module)
                found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        graph[name] = {m for m in found if m in modules and m != name
                       and not (is_package and m.startswith(name + "."))}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return out


def test_no_modules_import_each_other():
    """An import circle makes each module half-initialised while the other loads, and says the two are
    one unit split in two files."""
    assert _cycles(_import_graph()) == []


def test_the_circle_check_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_top_level_parsers_or_reports_module_is_importable():
    import importlib.util

    # Installed as audit.parsers / audit.reports only, never as top-level packages.
    import audit.parsers  # noqa: F401

    for name in ("parsers", "reports", "costmodel", "workloads"):
        spec = importlib.util.find_spec(name)
        assert spec is None or str(ROOT) in str(spec.origin or spec.submodule_search_locations), name
