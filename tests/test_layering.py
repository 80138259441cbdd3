"""Imports point one way: parsers <- costmodel <- {reports, audit}; audit -> reports.

`audit.errors` (exit codes and error types) sits below every layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# For each layer, the project subpackages it must never import.
FORBIDDEN = {
    "parsers": {"costmodel", "reports", "workloads", "audit"},
    "costmodel": {"reports", "workloads", "audit"},
    "reports": {"workloads", "audit", "parsers_readers"},
}
LAYER_OF_SUBPACKAGE = {"parsers": "parsers", "costmodel": "costmodel", "reports": "reports",
                       "workloads": "workloads", "commands": "audit",
                       "errors": "errors"}


def _imported_layers(path: Path, layer: str) -> set[str]:
    """Project layers a module imports, resolving relative imports against the layer's package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                mod = node.module or ""
                parts = mod.split(".")
                if parts[0] == "audit":
                    found.add(LAYER_OF_SUBPACKAGE.get(parts[1], "audit") if len(parts) > 1 else "audit")
            elif node.level >= 2 or (node.level == 1 and layer == "audit"):
                first = (node.module or "").split(".")[0]
                if node.level >= 2:
                    found.add(LAYER_OF_SUBPACKAGE.get(first, "audit") if first else "audit")
                elif first in LAYER_OF_SUBPACKAGE:
                    found.add(LAYER_OF_SUBPACKAGE[first])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "audit":
                    found.add(LAYER_OF_SUBPACKAGE.get(parts[1], "audit") if len(parts) > 1 else "audit")
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


def test_errors_module_imports_nothing_of_the_project():
    assert _imported_layers(ROOT / "audit" / "errors.py", "errors") == set()


def test_no_top_level_parsers_or_reports_module_is_importable():
    import importlib.util

    # Installed as audit.parsers / audit.reports only, never as top-level packages.
    import audit.parsers  # noqa: F401

    for name in ("parsers", "reports", "costmodel", "workloads"):
        spec = importlib.util.find_spec(name)
        assert spec is None or str(ROOT) in str(spec.origin or spec.submodule_search_locations), name
