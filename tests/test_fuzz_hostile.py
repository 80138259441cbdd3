"""Fuzzing the readers through the CLI: crafted XPlane fields, crafted HLO, malformed reports, mutated bytes.

Every input ends in exit 0, 1 or 2, never 4; exit 2 is one line on stderr (`audit: error: ...`);
nothing but the named output is written, and nothing at all when the command fails; each input
takes bounded time. `make test` runs a few examples of each; `make fuzz` (AUDIT_FUZZ=1) runs the
hypothesis profile `fuzz` with many more, and the corpus in tests/data/hostile either way.
"""

from __future__ import annotations

import json
import os
import random
import resource
import time
from pathlib import Path

import pytest
from hostile_inputs import HLO_CRAFTS, REPORT_CRAFTS, XPLANE_CRAFTS, craft_hlo, craft_report, craft_xplane, mutate_bytes
from hypothesis import HealthCheck, given, settings, strategies as st

from audit.cli import main
from conftest import shared_fixture

settings.register_profile("quick", max_examples=25, deadline=None, derandomize=False,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.register_profile("fuzz", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
PROFILE = "fuzz" if os.environ.get("AUDIT_FUZZ") == "1" else "quick"
TIME_BOUND_S = 60.0  # per input, on a shared 2-core machine
MEMORY_BOUND_MB = 4096  # peak resident size of the test process
CORPUS = Path(__file__).parent / "data" / "hostile"
SEED = "gpu-mi300x/gemm.xplane.pb"
HLO_SEEDS = sorted((Path(__file__).parent / "data" / "hlo").glob("*.hlo"))


@pytest.fixture(scope="module")
def seed_profile() -> bytes:
    return shared_fixture(SEED).read_bytes()


@pytest.fixture(scope="module")
def seed_report(tmp_path_factory, seed_profile) -> dict:
    out = tmp_path_factory.mktemp("seed") / "r.json"
    assert main(["inspect", str(shared_fixture(SEED)), "-q", "--json", str(out)]) == 0
    return json.loads(out.read_text())


def run_cli(args: list[str], folder: Path, outputs: tuple[str, ...], capsys) -> tuple[int, str]:
    """Run `audit ARGS` and check the contract; return the exit code and stderr."""
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    capsys.readouterr()
    start = time.perf_counter()
    code = main(args)
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code in (0, 1, 2), f"exit {code}: {err.strip()[-400:]}"
    assert "Traceback" not in err
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("audit: error: "), err
    after = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    changed = {n for n in set(before) | set(after) if before.get(n) != after.get(n)}
    assert changed <= set(outputs), f"wrote {changed - set(outputs)}"
    if code != 0:
        assert not changed, f"left {changed} although it failed"
    assert elapsed < TIME_BOUND_S, f"{elapsed:.0f} s"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < MEMORY_BOUND_MB * 1024
    return code, err


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / f"case{time.perf_counter_ns()}"
    folder.mkdir()
    return folder


@settings(settings.get_profile(PROFILE))
@given(craft=st.sampled_from(XPLANE_CRAFTS), seed=st.integers(0, 2**32))
def test_crafted_xplane_fields(tmp_path, capsys, seed_profile, craft, seed):
    folder = _folder(tmp_path)
    path = folder / "p.xplane.pb"
    path.write_bytes(craft_xplane(seed_profile, craft, random.Random(seed)))
    run_cli(["inspect", str(path), "-q", "--json", str(folder / "out.json")], folder, ("out.json",), capsys)


@settings(settings.get_profile(PROFILE))
@given(craft=st.sampled_from(HLO_CRAFTS))
def test_crafted_hlo(tmp_path, capsys, craft):
    folder = _folder(tmp_path)
    path = folder / "m.hlo"
    path.write_text(craft_hlo("", craft, random.Random(0)))
    run_cli(["inspect", str(path), "--hardware", "h100", "-q", "--csv", str(folder / "out.csv")], folder,
            ("out.csv",), capsys)


@settings(settings.get_profile(PROFILE))
@given(craft=st.sampled_from([c for c in REPORT_CRAFTS if c not in ("steps-many", "runs")] if PROFILE == "quick"
                             else REPORT_CRAFTS), seed=st.integers(0, 2**32))
def test_malformed_reports(tmp_path, capsys, seed_report, craft, seed):
    folder = _folder(tmp_path)
    (folder / "base.json").write_text(json.dumps(seed_report))
    (folder / "head.json").write_bytes(craft_report(json.loads(json.dumps(seed_report)), craft, random.Random(seed)))
    run_cli(["diff", str(folder / "base.json"), str(folder / "head.json"), "-q", "--json", str(folder / "d.json")],
            folder, ("d.json",), capsys)


@settings(settings.get_profile(PROFILE))
@given(kind=st.sampled_from(["xplane", "hlo", "report"]), seed=st.integers(0, 2**32))
def test_mutated_bytes(tmp_path, capsys, seed_profile, seed_report, kind, seed):
    rng = random.Random(seed)
    folder = _folder(tmp_path)
    if kind == "xplane":
        path, data, args = folder / "m.xplane.pb", mutate_bytes(seed_profile, rng), ["inspect"]
    elif kind == "hlo":
        path, data, args = folder / "m.hlo", mutate_bytes(rng.choice(HLO_SEEDS).read_bytes(), rng), ["inspect"]
    else:
        path, data = folder / "m.json", mutate_bytes(json.dumps(seed_report).encode(), rng)
        args = ["diff", str(path)]
    path.write_bytes(data)
    extra = ["--hardware", "h100"] if kind == "hlo" else []
    run_cli([*args, str(path), "-q", *extra], folder, (), capsys)


def test_the_corpus_is_the_one_the_script_makes():
    from make_hostile_corpus import corpus

    made = corpus()
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    assert sorted(manifest) == sorted(made), "regenerate: python tests/make_hostile_corpus.py"
    for name, (data, code, says) in made.items():
        assert (CORPUS / name).read_bytes() == data and manifest[name] == {"exit": code, "says": says}, name


@pytest.mark.parametrize("name", sorted(json.loads((CORPUS / "MANIFEST.json").read_text())))
def test_the_corpus_ends_as_its_manifest_says(tmp_path, capsys, name):
    """Each crafted file: the exit code and the words of the one line it must produce."""
    expected = json.loads((CORPUS / "MANIFEST.json").read_text())[name]
    folder = _folder(tmp_path)
    path = folder / name
    path.write_bytes((CORPUS / name).read_bytes())
    if name.endswith(".json"):
        args = ["diff", str(path), str(path)]
    else:
        # The crafted GPU captures state no chip (a real device plane names its GPU): it is named here.
        chip = name.endswith((".hlo.txt", ".hlo.pb")) or name.startswith("gpu-")
        args = ["inspect", str(path), *(["--hardware", "h100"] if chip else [])]
    code, err = run_cli([*args, "-q"], folder, (), capsys)
    assert code == expected["exit"], err
    assert expected["says"] in err, err
