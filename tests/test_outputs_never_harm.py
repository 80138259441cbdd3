"""Outputs never harm: devices and FIFOs are written into, not replaced; an input is never an output."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from audit.atomic import write_text
from audit.cli import main
from audit.base.errors import ExitCode

HLO = Path(__file__).parent / "data" / "hlo" / "diff_base.hlo"


def _inspect(*args: str) -> int:
    return main(["inspect", str(HLO), "--hardware", "h100", "-q", *args])


def _drain(fifo: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(fifo, "rb") as f:
            into.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_json_into_a_fifo_is_written_through_and_the_fifo_stays_a_fifo(tmp_path):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _drain(fifo, got)
    assert _inspect("--json", str(fifo)) == ExitCode.OK
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(got[0])["schema"] == "audit.report/v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temp file left beside it


def test_json_to_a_device_node_leaves_it_a_device(tmp_path):
    """`--json /dev/null` as root used to rename a regular file over the device node."""
    node = tmp_path / "null"
    if os.geteuid() == 0:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # the same device as /dev/null
    else:
        node.symlink_to("/dev/null")
    assert _inspect("--json", str(node), "--csv", str(node)) == ExitCode.OK
    assert stat.S_ISCHR(os.stat(node).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_dev_stdout_is_written_into(capfd):
    assert _inspect("--json", "/dev/stdout") == ExitCode.OK
    assert json.loads(capfd.readouterr().out)["schema"] == "audit.report/v1"


def test_a_symlink_to_a_regular_file_stays_a_link_and_its_target_is_replaced(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_regular_file_is_still_replaced_atomically(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    inode = out.stat().st_ino
    write_text(out, "new")
    assert out.read_text() == "new" and out.stat().st_ino != inode  # renamed over, never truncated in place


def test_an_output_that_is_the_input_is_refused_and_the_input_is_untouched(tmp_path, capsys):
    hlo = tmp_path / "m.hlo"
    hlo.write_bytes(HLO.read_bytes())
    before = hlo.read_bytes()
    assert main(["inspect", str(hlo), "--hardware", "h100", "-q", "--csv", str(hlo)]) == ExitCode.INPUT
    err = capsys.readouterr().err.strip()
    assert err == f"audit: error: --csv {hlo} would overwrite the input {hlo}; name another output file"
    assert hlo.read_bytes() == before


def test_an_output_inside_an_input_run_directory_named_like_its_profile_is_refused(tmp_path, fixture_path):
    run = tmp_path / "run"
    run.mkdir()
    profile = run / "host.xplane.pb"
    profile.write_bytes(fixture_path("gpu-mi300x/gemm.xplane.pb").read_bytes())
    before = profile.stat().st_mtime_ns
    assert main(["inspect", str(run), "-q", "--json", str(profile)]) == ExitCode.INPUT
    assert profile.stat().st_mtime_ns == before


def test_diff_refuses_to_write_over_one_of_its_reports(tmp_path, capsys):
    report = tmp_path / "a.json"
    assert _inspect("--json", str(report)) == ExitCode.OK
    before = report.read_bytes()
    assert main(["diff", str(report), str(report), "-q", "--json", str(report)]) == ExitCode.INPUT
    assert "would overwrite the input" in capsys.readouterr().err
    assert report.read_bytes() == before


@pytest.mark.parametrize("name", ["z.json", "z.xplane.pb", "z.hlo.pb"])
def test_a_device_behind_an_input_name_is_refused_not_read(tmp_path, capsys, name):
    """`/dev/zero` named like a report or profile used to be read until memory ran out."""
    link = tmp_path / name
    link.symlink_to("/dev/zero")
    command = ["diff", str(link), str(link)] if name.endswith(".json") else ["inspect", str(link)]
    assert main([*command, "-q"]) == ExitCode.INPUT
    err = capsys.readouterr().err.strip()
    assert err == f"audit: error: {link}: this is a character device, not " + {
        "z.json": "an audit JSON report", "z.xplane.pb": "an XSpace profile (.xplane.pb)",
        "z.hlo.pb": "an HLO dump"}[name]


@pytest.mark.parametrize("name", ["f.json", "f.xplane.pb"])
def test_a_fifo_nobody_writes_reads_as_empty_at_once(tmp_path, capsys, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    command = ["diff", str(fifo), str(fifo)] if name.endswith(".json") else ["inspect", str(fifo)]
    assert main([*command, "-q"]) == ExitCode.INPUT
    assert "empty" in capsys.readouterr().err


@pytest.mark.slow
def test_a_fifo_nobody_writes_inside_a_run_dir_reads_as_empty_at_once(tmp_path, capsys):
    # What a CPU run would calibrate ahead is decided by a glance at the run's first file: a FIFO
    # there is not opened for it (the open would wait for a writer that never comes).
    os.mkfifo(tmp_path / "h.xplane.pb")
    done = subprocess.run([sys.executable, "-m", "audit", "inspect", str(tmp_path), "-q"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == ExitCode.INPUT and "empty" in done.stderr, done.stderr


def test_a_report_piped_through_a_fifo_is_read(tmp_path):
    """As `audit diff <(gsutil cat gs://.../base.json) head.json` passes it: a pipe whose writer is there."""
    report = tmp_path / "a.json"
    assert _inspect("--json", str(report)) == ExitCode.OK
    fifo = tmp_path / "piped.json"
    os.mkfifo(fifo)
    # As with <(...), the pipe is open at both ends before audit opens it by name (a pipe whose ends
    # all close loses its data).
    held_read_end = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    write_end = os.open(fifo, os.O_WRONLY)

    def write() -> None:
        with os.fdopen(write_end, "wb") as f:
            f.write(report.read_bytes())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        assert main(["diff", str(fifo), str(report), "-q"]) == ExitCode.OK
    finally:
        writer.join(timeout=30)
        os.close(held_read_end)
