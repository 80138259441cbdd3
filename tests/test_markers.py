"""The `slow` and `browser` markers mean something: `make test-quick` deselects every registered marker,
`make test` none, and the browser tests carry theirs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib

import pytest

from conftest import ROOT


def _markers() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return {m.split(":", 1)[0].strip() for m in config["markers"]}


def _recipe(target: str) -> str:
    text = (ROOT / "Makefile").read_text()
    return re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.M).group(1)  # type: ignore[union-attr]


def test_the_quick_target_deselects_every_marker_and_the_full_one_none():
    quick = re.search(r'pytest .*-m "([^"]+)"', _recipe("test-quick")).group(1)  # type: ignore[union-attr]
    assert {m for m in _markers() if f"not {m}" in quick} == _markers()
    assert " -m " not in _recipe("test")


@pytest.mark.slow
def test_deselecting_the_markers_leaves_out_the_browser_tests():
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", "not slow and not browser", "tests/test_report_browser.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert re.search(r"0 selected|no tests collected \(\d+ deselected\)", proc.stdout), proc.stdout[-2000:]


# What a test does that takes seconds: spawn a process (a workload, the CLI, pytest, a build) or profile JAX.
_SPAWNS = {("subprocess", "run"), ("subprocess", "Popen"), ("subprocess", "check_output"), ("subprocess", "check_call"),
           ("os", "fork"), ("multiprocessing", "Process")}
_RUNS_WORKLOADS = {"run_workload", "capture", "analyse_capture", "Popen", "check_output"}


def _spawns(fn: ast.FunctionDef) -> bool:
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in _SPAWNS:
            return True
        if isinstance(f, ast.Attribute) and f.attr == "trace" and isinstance(f.value, ast.Attribute) \
                and f.value.attr == "profiler":
            return True
        if isinstance(f, ast.Name) and f.id in _RUNS_WORKLOADS:
            return True
        if isinstance(f, ast.Attribute) and f.attr == "invoke" and len(node.args) > 1:  # CliRunner: `audit run`
            argv = node.args[1]
            if isinstance(argv, (ast.List, ast.Tuple)) and argv.elts and isinstance(argv.elts[0], ast.Constant) \
                    and argv.elts[0].value == "run":
                return True
    return False


def _marks(decorators: list[ast.expr]) -> set[str]:
    return {n.attr for d in decorators for n in ast.walk(d)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"}


def unmarked_spawning_tests(source: str) -> list[str]:
    """Tests that spawn a process or profile a workload, themselves or through a function or fixture of
    their module, and carry neither `slow` nor `browser`."""
    tree = ast.parse(source)
    module = set().union(*(_marks([node.value]) for node in tree.body if isinstance(node, ast.Assign)
                           and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)))
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    slow = {name for name, fn in functions.items() if _spawns(fn)}
    grew = True
    while grew:  # a test that takes a spawning fixture, or calls a spawning function, spawns too
        used = {name: {a.arg for a in fn.args.args} | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
                for name, fn in functions.items() if name not in slow}
        more = {name for name, names in used.items() if names & slow}
        grew, slow = bool(more), slow | more
    return [name for name, fn in functions.items() if name.startswith("test_") and name in slow
            and not {"slow", "browser"} & (module | _marks(fn.decorator_list))]


def test_every_test_that_spawns_a_process_or_runs_a_workload_is_marked():
    # 73 were not, and `make test-quick` ran them all.
    found = [f"{p.name}::{name}" for p in sorted((ROOT / "tests").glob("test_*.py"))
             for name in unmarked_spawning_tests(p.read_text())]
    assert not found, found


def test_the_marker_check_finds_a_spawning_test_and_spares_a_marked_one():
    source = '''
import subprocess, pytest
@pytest.fixture
def report(tmp_path):
    subprocess.run(["audit", "inspect"])
def test_reads(report): ...
@pytest.mark.slow
def test_marked(report): ...
def test_profiles():
    with jax.profiler.trace("out"): ...
def test_runs(runner):
    runner.invoke(cli, ["run", "w.py"])
def test_pure(): assert 1
'''
    assert unmarked_spawning_tests(source) == ["test_reads", "test_profiles", "test_runs"]


@pytest.mark.slow
def test_a_test_that_spawns_without_the_slow_marker_fails(tmp_path):
    """tests/conftest.py watches each unmarked test: one that starts a process fails, naming it, whether
    the test or a session fixture it uses started it; the same test marked slow passes."""
    import shutil

    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_spawns.py").write_text(
        "import subprocess, sys, pytest\n"
        "@pytest.fixture(scope='session')\n"
        "def once():\n"
        "    return subprocess.run([sys.executable, '-c', 'print(1)'], capture_output=True).stdout\n"
        "def test_unmarked():\n"
        "    subprocess.run([sys.executable, '-c', 'pass'])\n"
        "def test_through_a_session_fixture(once):\n"
        "    assert once\n"
        "@pytest.mark.slow\n"
        "def test_marked():\n"
        "    subprocess.run([sys.executable, '-c', 'pass'])\n"
        "def test_spawns_nothing():\n"
        "    assert sum(range(3)) == 3\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--strict-markers",
                           "-o", "markers=slow", "-rf", str(tmp_path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    failed = sorted(re.findall(r"FAILED \S+::(\w+)", proc.stdout))
    assert failed == ["test_through_a_session_fixture", "test_unmarked"], proc.stdout[-3000:]
    assert "2 failed, 2 passed" in proc.stdout and "is not marked slow" in proc.stdout
