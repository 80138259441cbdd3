"""Imports point one way: parsers <- costmodel <- {reports, audit}; audit -> reports.

`audit.errors` (exit codes and error types) and `audit.options` (thresholds and display defaults) sit
below every layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# For each layer, the project subpackages it must never import.
FORBIDDEN = {
    "parsers": {"costmodel", "reports", "workloads", "audit"},
    "costmodel": {"reports", "workloads", "audit"},
    "reports": {"workloads", "audit"},
}
LAYER_OF_SUBPACKAGE = {"parsers": "parsers", "costmodel": "costmodel", "reports": "reports",
                       "workloads": "workloads", "commands": "audit", "analyses": "audit",
                       "child": "audit", "orchestration": "audit",
                       "errors": "errors", "options": "options"}


TOP_PACKAGE = {"parsers": "audit.parsers", "costmodel": "audit.costmodel", "reports": "audit.reports",
               "workloads": "audit.workloads", "audit": "audit"}


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
    parts = name.split(".")
    if parts[0] != "audit":
        return None
    return LAYER_OF_SUBPACKAGE.get(parts[1], "audit") if len(parts) > 1 else "audit"


def _imported_layers(path: Path, layer: str) -> set[str]:
    """Project layers a module imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.append(_absolute(path, node.level, node.module))
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    found = {layer_ for layer_ in map(_layer_of, names) if layer_}
    found.discard(layer)
    return found


def test_layers_import_only_downward():
    violations = []
    for layer, forbidden in FORBIDDEN.items():
        for path in sorted((ROOT / layer).rglob("*.py")):
            bad = _imported_layers(path, layer) & forbidden
            if bad:
                violations.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not violations, "\n".join(violations)


def test_every_forbidden_layer_is_a_layer_the_project_has():
    """A rule naming a layer no module belongs to forbids nothing and reads as if it did."""
    layers = set(LAYER_OF_SUBPACKAGE.values()) | {"audit"}
    named = set().union(*FORBIDDEN.values()) | set(FORBIDDEN)
    assert named <= layers, f"not layers: {sorted(named - layers)}"
    assert all((ROOT / layer).is_dir() for layer in FORBIDDEN)


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


def test_errors_module_imports_nothing_of_the_project():
    assert _imported_layers(ROOT / "audit" / "errors.py", "errors") == set()


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
    assert found == listed
