"""The package builds without a word from setuptools: `pip install` prints no deprecation."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib

import pytest
from packaging.licenses import canonicalize_license_expression
from packaging.requirements import Requirement

from conftest import ROOT

CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_licence_is_an_spdx_expression_and_the_build_needs_a_setuptools_that_reads_one():
    licence = CONFIG["project"]["license"]
    assert isinstance(licence, str) and canonicalize_license_expression(licence) == licence
    setuptools = next(Requirement(r) for r in CONFIG["build-system"]["requires"] if r.startswith("setuptools"))
    assert not setuptools.specifier.contains("76.9") and setuptools.specifier.contains("77.0")


def _copy_sources(tmp_path):
    """What a source distribution holds, as pip sees it: the project files, the README and the packages."""
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in set(CONFIG["tool"]["setuptools"]["package-dir"].values()):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__", "*.so"),
                        dirs_exist_ok=True)


@pytest.mark.slow
def test_building_the_metadata_warns_of_nothing(tmp_path):
    """What pip runs first on `pip install .`, in a copy of the sources, with every warning shown."""
    _copy_sources(tmp_path)
    (tmp_path / "meta").mkdir()
    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))")
    proc = subprocess.run([sys.executable, "-W", "always", "-c", code, str(tmp_path / "meta")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert "deprecat" not in said.lower(), said[-3000:]
    metadata = (tmp_path / "meta" / proc.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata


@pytest.mark.slow
def test_building_the_wheel_warns_of_nothing_and_ships_the_data(tmp_path):
    """`pip install .` builds a wheel: every folder it ships is a declared package (setuptools warns of
    each one it would only guess at), and the report's assets and the chip files are in it."""
    import zipfile

    _copy_sources(tmp_path)
    (tmp_path / "dist").mkdir()
    code = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-W", "always", "-c", code, str(tmp_path / "dist")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert "absent from the `packages` configuration" not in said and "deprecat" not in said.lower(), said[-3000:]
    names = zipfile.ZipFile(tmp_path / "dist" / proc.stdout.strip().splitlines()[-1]).namelist()
    chips = [n for n in names if n.startswith("audit/costmodel/chips/data/") and n.endswith(".toml")]
    assert len(chips) == len(list((ROOT / "costmodel" / "chips" / "data").glob("*.toml")))
    assert {"audit/reports/assets/report.css", "audit/reports/assets/report.js",
            "audit/reports/model/report.schema.json"} <= set(names)
    # Every package folder ships: setup.py finds them, no list says which.
    inits = [i.relative_to(ROOT) for folder in set(CONFIG["tool"]["setuptools"]["package-dir"].values())
             for i in (ROOT / folder).rglob("__init__.py")]
    packages = {str(i) if i.parts[0] == "audit" else f"audit/{i}" for i in inits}
    assert packages <= set(names), sorted(packages - set(names))
