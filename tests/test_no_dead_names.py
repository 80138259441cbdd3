"""Every name a module defines at its top level is used somewhere: dead code misleads the next reader.

A name counts as used when it appears as a word anywhere else in the project's code, tests, benchmarks
or scripts; a private name (`_x`) only within its own module, since nothing else may use it. A
decorated function is used by its decorator (an opcode handler registered by `@handles`, a command).
"""

from __future__ import annotations

import ast
import re
from collections import Counter

from conftest import ROOT

PACKAGES = ("audit", "parsers", "costmodel", "reports", "workloads")
ELSEWHERE = ("tests", "bench", "scripts")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _defined(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.decorator_list:
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in names if not n.startswith("__")]


def unused_names(modules: dict[str, str], elsewhere: list[str]) -> list[str]:
    """`module: name` for each top-level name of `modules` (path -> source) used nowhere else."""
    everywhere = Counter(w for text in [*modules.values(), *elsewhere] for w in WORD.findall(text))
    out = []
    for path, text in sorted(modules.items()):
        own = Counter(WORD.findall(text))
        for name in _defined(ast.parse(text, filename=path)):
            if (own if name.startswith("_") else everywhere)[name] <= 1:
                out.append(f"{path}: {name}")
    return out


def test_every_top_level_name_is_used():
    modules = {str(p.relative_to(ROOT)): p.read_text() for top in PACKAGES for p in sorted((ROOT / top).rglob("*.py"))}
    elsewhere = [p.read_text() for top in ELSEWHERE for p in sorted((ROOT / top).rglob("*.py"))]
    assert unused_names(modules, elsewhere) == []


def test_the_check_sees_a_dead_helper_and_a_dead_constant_and_spares_registered_ones():
    module = ("SUFFIXES = ('.json',)\n\ndef _scaled(v):\n    return v\n\n@handles('dot')\ndef dot(op):\n"
              "    return _used(op)\n\ndef _used(op):\n    return op\n")
    other = "from m import dot\n_scaled = 1\n"
    assert unused_names({"m.py": module}, [other]) == ["m.py: SUFFIXES", "m.py: _scaled"]
