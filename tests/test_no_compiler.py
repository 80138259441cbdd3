"""The install without a C compiler: pip builds no C extension, and the product falls back to numba for
the trace decoder (where installed), then to Python (the HLO scan, the record copier, the residency walk).
A real `audit inspect` runs in a child process in which the C extensions cannot be imported, and in one
run from the source distribution pip installed with a compiler that fails; its JSON report is the C
build's."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, skip_without_c

pytestmark = pytest.mark.slow

C_EXTENSIONS = ("audit.parsers.xplane._xline", "audit.parsers.hlo._hloscan", "audit.base._stamp",
                "audit.costmodel._recency")
# Runs `audit ARGS...` with the C extensions absent when NO_C is set; prints which builds ran.
CHILD = textwrap.dedent(f"""
    import json, os, sys

    class NoCompiler:
        def find_spec(self, name, path=None, target=None):
            if name in {C_EXTENSIONS!r}:
                raise ImportError(f"No module named {{name!r}}")  # as on an install without a compiler
            return None

    if os.environ.get("NO_C"):
        sys.meta_path.insert(0, NoCompiler())
    from audit.cli import main
    sys.argv = ["audit", *sys.argv[1:]]
    code = 0
    try:
        main()
    except SystemExit as exit:
        code = exit.code
    from audit.costmodel import residency, residency_walk
    from audit.base import stamping
    from audit.parsers.hlo import proto as hlo_proto
    from audit.parsers.xplane import xline as xline_decode
    from audit.parsers.hlo.model import Instruction
    print(json.dumps({{"decoder": xline_decode.build(), "hloscan": hlo_proto._hloscan is not None,
                      "walk": residency._walker() is not residency_walk.walk,
                      "stamp": stamping.stamper(Instruction, hlo_proto.STAMPED) is not None,
                      "code": code}}))
""")


def _inspect(capture: str, out: Path, no_c: bool, decoder: str = "",
             options: tuple[str, ...] = ()) -> tuple[dict, dict]:
    env = {**os.environ, "AUDIT_DECODER": decoder}
    env.pop("NO_C", None)
    if no_c:
        env["NO_C"] = "1"
    proc = subprocess.run([sys.executable, "-c", CHILD, "inspect", str(ROOT / capture), *options, "--cache", "",
                           "--json", str(out), "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    builds = json.loads(proc.stdout.strip().splitlines()[-1])
    assert builds.pop("code") in (0, None), proc.stderr[-2000:]  # the report is written: no gate tripped
    report = json.loads(out.read_text())
    for key in ("command", "created"):
        report["source"].pop(key, None)
    return report, builds


@skip_without_c
@pytest.mark.parametrize(("capture", "decoder", "falls_back_to"), [
    ("tests/data/captures/h100-jax0.11/train-step.xplane.pb", "", "numba"),
    ("tests/data/fixtures/gpu-mi300x/gemm.xplane.pb", "python", ""),
])
def test_without_the_c_extensions_inspect_writes_the_c_builds_report(tmp_path, capture, decoder, falls_back_to):
    built, with_c = _inspect(capture, tmp_path / "c.json", no_c=False)
    fallback, without_c = _inspect(capture, tmp_path / "fallback.json", no_c=True, decoder=decoder)
    assert with_c == {"decoder": "c", "hloscan": True, "walk": True, "stamp": True}, "the C build is not installed"
    assert without_c == {"decoder": falls_back_to, "hloscan": False, "walk": False, "stamp": False}
    assert fallback == built


# `audit inspect` from the install at sys.argv[1]: prints the files audit's modules were loaded from and
# the C parts found. Run with -S and PYTHONPATH the install, then this environment's packages: no .pth
# file is read, so the editable install of the repository (a finder that would supply the C parts the
# install lacks, from the repository's build) is not there.
FROM_INSTALL = textwrap.dedent("""
    import importlib.util, json, sys
    from audit.cli import main
    target = sys.argv.pop(1)
    sys.argv = ["audit", *sys.argv[1:]]
    code = main()
    files = sorted({m.__file__ for name, m in list(sys.modules.items())
                    if name.split(".")[0] == "audit" and getattr(m, "__file__", None)})
    print(json.dumps({"code": code, "outside": [f for f in files if not f.startswith(target)],
                      "c": [n for n in {C_EXTENSIONS!r} if importlib.util.find_spec(n) is not None]}))
""").replace("{C_EXTENSIONS!r}", repr(C_EXTENSIONS))


def test_the_source_distribution_installs_without_a_compiler_and_reports_as_the_c_build(tmp_path):
    from test_packaging import _copy_sources

    # GIVEN the source distribution of the repository
    source, dist, target = tmp_path / "source", tmp_path / "dist", tmp_path / "site"
    source.mkdir(), dist.mkdir()
    _copy_sources(source)
    code = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    built = subprocess.run([sys.executable, "-c", code, str(dist)], cwd=source, capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    sdist = dist / built.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as archive:  # it carries the C sources: with a compiler, pip builds them
        held = {name.split("/", 1)[-1] for name in archive.getnames()}
    assert {"setup.py", "parsers/xplane/_xline.c", "parsers/hlo/_hloscan.c", "parsers/wire/_protowire.h",
            "audit/base/_stamp.c", "costmodel/_recency.c"} <= held
    # WHEN pip installs it on a machine whose C compiler fails (the dependencies are this environment's)
    env = {**os.environ, "CC": "/bin/false", "CXX": "/bin/false", "PIP_NO_INPUT": "1"}
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                          "--no-cache-dir", "--disable-pip-version-check", "--target", str(target), str(sdist)],
                         env=env, capture_output=True, text=True, timeout=600)
    # THEN the install succeeds, without one C extension
    assert pip.returncode == 0, (pip.stdout + pip.stderr)[-3000:]
    assert (target / "audit" / "cli.py").exists()
    assert not [p for p in target.rglob("*") if p.suffix in (".so", ".pyd")]
    # AND `audit inspect` from it, on real captures, writes the C build's JSON report
    captures = [["tests/data/fixtures/gpu-mi300x/gemm.xplane.pb"],
                ["tests/data/captures/cpu-default-run/vm.xplane.pb", "--hardware",
                 str(ROOT / "tests/data/captures/cpu-default-run/cpu.toml")]]
    for i, (capture, *options) in enumerate(captures):
        built_report, _ = _inspect(capture, tmp_path / f"c{i}.json", no_c=False, options=tuple(options))
        args = ["inspect", str(ROOT / capture), *options, "--cache", "", "--json", str(tmp_path / f"sdist{i}.json"),
                "--quiet"]
        path = os.pathsep.join([str(target), *site.getsitepackages()])
        run = subprocess.run([sys.executable, "-S", "-c", FROM_INSTALL, str(target), *args], cwd=tmp_path,
                             env={**os.environ, "PYTHONPATH": path, "AUDIT_DECODER": ""},
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        said = json.loads(run.stdout.strip().splitlines()[-1])
        assert said == {"code": 0, "outside": [], "c": []}, said  # the install's own modules, no C part
        report = json.loads((tmp_path / f"sdist{i}.json").read_text())
        for key in ("command", "created"):
            report["source"].pop(key, None)
        assert report == built_report
