"""A user's own Dask cluster (or anything else) on port 8787 must not leak into audit's stderr."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys

from conftest import shared_fixture


def test_two_hosts_with_port_8787_taken_print_nothing_but_progress(tmp_path):
    run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    for host in ("host-a", "host-b"):
        shutil.copy(shared_fixture("gpu-mi300x/gemm.xplane.pb"), run / f"{host}.xplane.pb")
    with contextlib.ExitStack() as stack:
        holder = stack.enter_context(socket.socket())
        with contextlib.suppress(OSError):  # already taken by someone else: the same situation
            holder.bind(("0.0.0.0", 8787))
            holder.listen()
        # --workers 2: two small hosts would be read in this process, with no cluster to start
        done = subprocess.run([sys.executable, "-m", "audit", "inspect", str(tmp_path), "--quiet", "--workers", "2",
                               "--cache", "", "--json", str(tmp_path / "r.json")],
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "8787" not in done.stderr and "Warning" not in done.stderr, done.stderr
    assert (tmp_path / "r.json").stat().st_size > 0
