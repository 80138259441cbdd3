"""The install without a C compiler: pip builds no C extension, and the product falls back to numba for
the trace decoder, then to Python (the HLO scan, the record copier, the residency walk). A real
`audit inspect` runs in a child process in which the C extensions cannot be imported, and its JSON
report is the C build's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

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


def _inspect(capture: str, out: Path, no_c: bool, decoder: str = "") -> tuple[dict, dict]:
    env = {**os.environ, "AUDIT_DECODER": decoder}
    env.pop("NO_C", None)
    if no_c:
        env["NO_C"] = "1"
    proc = subprocess.run([sys.executable, "-c", CHILD, "inspect", str(ROOT / capture), "--cache", "",
                           "--json", str(out), "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    builds = json.loads(proc.stdout.strip().splitlines()[-1])
    assert builds.pop("code") in (0, None), proc.stderr[-2000:]  # the report is written: no gate tripped
    report = json.loads(out.read_text())
    for key in ("command", "created"):
        report["source"].pop(key, None)
    return report, builds


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
