"""The `slow` and `browser` markers mean something: `make test-quick` deselects every registered marker,
`make test` none, and the browser tests carry theirs."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

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


def test_deselecting_the_markers_leaves_out_the_browser_tests():
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", "not slow and not browser", "tests/test_report_browser.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert re.search(r"0 selected|no tests collected \(\d+ deselected\)", proc.stdout), proc.stdout[-2000:]
