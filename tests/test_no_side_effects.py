"""`audit inspect` writes only what it is asked to: caches go to the user cache directory,
never into the profile's folder (a TensorBoard logdir, a shared run dir, a read-only mount)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import shared_fixture

from audit.cli import main


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A two-host run dir made of a real MI300X capture (so the summary cache is used)."""
    run = tmp_path / "logdir" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    for host in ("host-a", "host-b"):
        shutil.copy(shared_fixture("gpu-mi300x/gemm.xplane.pb"), run / f"{host}.xplane.pb")
    return run


@pytest.fixture
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("AUDIT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "audit" / "summaries"


@pytest.mark.slow
def test_inspect_writes_nothing_beside_the_profile(run_dir: Path, user_cache: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    logdir = run_dir.parents[2]
    before = _tree(logdir)
    out = tmp_path / "out" / "report.json"
    out.parent.mkdir()
    assert main(["inspect", str(run_dir), "--json", str(out), "--quiet", "--workers", "1"]) == 0
    assert _tree(logdir) == before
    assert json.loads(out.read_text())["summary"]["hosts"] == 2
    # The summaries went to the user cache, one entry per host, and are read back next time.
    entries = sorted(user_cache.glob("*.json"))
    assert len(entries) == 2
    stamps = [p.stat().st_mtime_ns for p in entries]
    assert main(["inspect", str(run_dir), "--json", str(out), "--quiet", "--workers", "1"]) == 0
    assert [p.stat().st_mtime_ns for p in entries] == stamps
    assert _tree(logdir) == before


@pytest.mark.slow
def test_audit_cache_moves_or_disables_the_summaries(run_dir: Path, user_cache: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    moved = tmp_path / "elsewhere"
    monkeypatch.setenv("AUDIT_CACHE", str(moved))
    assert main(["inspect", str(run_dir), "--quiet", "--workers", "1"]) == 0
    assert len(list(moved.glob("*.json"))) == 2 and not user_cache.exists()
    monkeypatch.setenv("AUDIT_CACHE", "")
    shutil.rmtree(moved)
    assert main(["inspect", str(run_dir), "--quiet", "--workers", "1"]) == 0
    assert not moved.exists() and not user_cache.exists()
    # --cache DIR wins over both.
    chosen = tmp_path / "chosen"
    assert main(["inspect", str(run_dir), "--quiet", "--workers", "1", "--cache", str(chosen)]) == 0
    assert len(list(chosen.glob("*.json"))) == 2


def test_single_file_inspect_writes_nothing_beside_it(user_cache: Path, tmp_path: Path) -> None:
    folder = tmp_path / "profile"
    folder.mkdir()
    shutil.copy(shared_fixture("gpu-mi300x/gemm.xplane.pb"), folder / "gemm.xplane.pb")
    before = _tree(folder)
    assert main(["inspect", str(folder / "gemm.xplane.pb"), "--quiet"]) == 0
    assert _tree(folder) == before
