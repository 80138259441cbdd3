"""The layers of docs/architecture.md, as imports: each layer imports only the layers below it.

    errors, options        below everything: exit codes and error types; thresholds and display defaults
    timebase               below everything: the trace's time units (picoseconds, nanoseconds, seconds)
    parsers                other tools' formats read into facts: imports nothing of ours
    costmodel              HLO and hardware in, expectations out: reads no trace, judges nothing
    reports/model          the report format: Report, OpRecord, its columns, its schema and reader
    audit/optable          the op table: measured ops joined with expectations, verdicts, reasons
    reports                rendering only: the report model and the values it shows, never the analysis
    audit                  the CLI, the library, orchestration, analyses, pod: may import any layer
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP_PACKAGE = {"parsers": "audit.parsers", "costmodel": "audit.costmodel", "reports": "audit.reports",
               "workloads": "audit.workloads", "audit": "audit"}
# Module name prefix -> its layer; the longest prefix decides.
LAYERS = {"audit.errors": "errors", "audit.options": "options", "audit.timebase": "timebase", "audit.parsers": "parsers",
          "audit.costmodel": "costmodel", "audit.reports.model": "report model", "audit.optable": "op table",
          "audit.reports": "reports", "audit.workloads": "workloads", "audit": "audit"}
# Layer -> the other layers it may import. The renderers read the cost model for the values they show
# (units, a chip's Hardware, a plan); the report model's rows carry the cost model's types.
ALLOWED = {
    "errors": set(),
    "options": {"errors"},
    "parsers": {"errors"},
    "costmodel": {"parsers", "errors", "options"},
    "report model": {"costmodel", "parsers", "errors"},
    "op table": {"report model", "costmodel", "parsers", "errors", "options"},
    "reports": {"report model", "costmodel", "errors", "options"},
    "audit": {"op table", "reports", "report model", "costmodel", "parsers", "errors", "options", "workloads"},
}
for _layer in set(ALLOWED) - {"errors", "options"}:  # the layers may read the time base, which imports nothing
    ALLOWED[_layer].add("timebase")
ALLOWED["timebase"] = set()


def _absolute(path: Path, level: int, module: str | None) -> str:
    """The dotted name an import refers to, resolving relative imports against the file's package."""
    if level == 0:
        return module or ""
    rel = path.relative_to(ROOT).with_suffix("").parts
    package = [TOP_PACKAGE[rel[0]], *rel[1:-1]]
    package = ".".join(package).split(".")
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _layer_of(name: str) -> str | None:
    prefixes = [p for p in LAYERS if name == p or name.startswith(p + ".")]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


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
        layer = _layer_of(_module_name(path))
        if layer not in ALLOWED:
            continue
        imported = {_layer_of(n) for n in _imported_names(path)} - {None, layer}
        bad = sorted(str(x) for x in imported - ALLOWED[layer])
        if bad:
            out.append(f"{path.relative_to(ROOT)} ({layer}) imports {bad}")
    return out


def test_layers_import_only_downward():
    violations = layer_violations(_sources())
    assert not violations, "\n".join(violations)


def test_the_layer_check_finds_an_upward_import(tmp_path, monkeypatch):
    # A cost-model module that reads the op table, and a renderer that reaches into the analysis.
    fake = tmp_path / "costmodel" / "chips"
    fake.mkdir(parents=True)
    (fake / "judge.py").write_text("from ...optable.verdict import judge\n")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "late.py").write_text("from ..orchestration.pipeline import analyse_profile\n"
                                                 "from .model.record import OpRecord\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = layer_violations(sorted(tmp_path.rglob("*.py")))
    assert found == ["costmodel/chips/judge.py (costmodel) imports ['op table']",
                     "reports/late.py (reports) imports ['audit']"]


# What the cost model may read of parsers/: HLO (hlo_*), element types, the ranges numbers are checked
# against, replica groups, the user cache. A profile reader there would be the cost model reading a trace.
COSTMODEL_READS = ("audit.parsers.hlo_", "audit.parsers.dtypes", "audit.parsers.ranges",
                   "audit.parsers.replica_groups", "audit.parsers.user_cache")


def test_the_cost_model_reads_no_trace():
    found = [f"{p.relative_to(ROOT)}: {n}" for p in sorted((ROOT / "costmodel").rglob("*.py"))
             for n in _imported_names(p) if _layer_of(n) == "parsers" and not n.startswith(COSTMODEL_READS)]
    assert not found, found


# What the layers above parsers/ may use of the profile readers: the registry, the typed host a reader
# returns, recognising an input and reading files as inputs. A format module imported above parsers/
# would be a second place that knows a format.
FORMAT_FREE = ("audit.parsers.readers", "audit.parsers.profile_model", "audit.parsers.inputs",
               "audit.parsers.input_files", "audit.parsers.input_glance", "audit.parsers.hlo_", "audit.parsers.dtypes", "audit.parsers.ranges",
               "audit.parsers.replica_groups", "audit.parsers.user_cache", "audit.parsers.gpu_target",
               "audit.parsers.protobuild", "audit.parsers.stamping")


def format_imports(files: list[Path]) -> list[str]:
    return [f"{p.relative_to(ROOT)}: {n}" for p in files for n in _imported_names(p)
            if _layer_of(n) == "parsers" and not n.startswith(FORMAT_FREE)]


def test_nothing_above_parsers_names_a_profile_format():
    above = [p for top in ("audit", "costmodel", "reports") for p in sorted((ROOT / top).rglob("*.py"))]
    found = format_imports(above)
    assert not found, found


def test_the_format_check_finds_a_format_module(tmp_path, monkeypatch):
    (tmp_path / "audit" / "pod").mkdir(parents=True)
    (tmp_path / "audit" / "pod" / "late.py").write_text("from ..parsers.nsys_jax import read_archive_host\n"
                                                       "from ..parsers.readers import reader_of_host\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert format_imports(sorted(tmp_path.rglob("*.py"))) == [
        "audit/pod/late.py: audit.parsers.nsys_jax.read_archive_host"]


def test_every_profile_format_has_one_reader():
    from audit.parsers import readers

    names = [r.name for r in readers.READERS]
    assert names == ["nsys-sqlite", "nsys-jax", "xplane"] and readers.FALLBACK.name == "xplane"
    assert {r.source_kind for r in readers.READERS} == {"nsys", "xplane"}


def test_workloads_use_only_the_public_api():
    """The bundled workloads are plain JAX programs, written as a user would: `from audit import ...`."""
    for path in sorted((ROOT / "workloads").glob("*.py")):
        names = [n for n in _imported_names(path) if n.startswith("audit.") or n == "audit"]
        inner = [n for n in names if _layer_of(n) != "workloads" and n.rpartition(".")[0] != "audit"]
        assert not inner, f"{path.name} imports {inner}"


def test_every_layer_named_is_a_layer_the_project_has():
    """A rule naming a layer no module belongs to allows or forbids nothing, and reads as if it did."""
    named = set(ALLOWED) | set().union(*ALLOWED.values())
    assert named <= set(LAYERS.values())
    found = {_layer_of(_module_name(p)) for p in _sources()}
    assert set(LAYERS.values()) <= found, sorted(set(LAYERS.values()) - found)


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


def test_every_subpackage_is_installed():
    # A subpackage missing from pyproject's explicit list works in an editable install and is
    # absent from a real one: every folder with an __init__.py must be listed under its name.
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {ROOT / d for d in config["package-dir"].values()}
    found = set()
    for top in folders:
        for init in top.rglob("__init__.py"):
            rel = init.parent.relative_to(top)
            base = next(name for name, d in config["package-dir"].items() if ROOT / d == top)
            found.add(".".join([base, *rel.parts]))
    # Data folders (no __init__.py) are listed too, so their files ship: each must declare its data.
    assert found <= listed and listed - found <= set(config.get("package-data", {})), listed ^ found
