"""A user's own Dask cluster (or anything else) on port 8787 must not leak into audit's stderr."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys

import pytest

from conftest import shared_fixture


@pytest.mark.slow
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


_SCHEDULER_GOES_FIRST = '''
import time


def main():
    from audit.pod import cluster

    client = cluster.client_for(2, workers=2)
    # At exit the scheduler can close while a worker is between two heartbeats, or the client retries.
    client.cluster.sync(client.cluster.scheduler.close)
    time.sleep(4)


if __name__ == "__main__":
    main()
'''


@pytest.mark.slow
def test_a_local_cluster_closing_under_its_workers_prints_no_traceback(tmp_path):
    """A busy machine can close the local scheduler before a worker's heartbeat or the client's reconnect:
    distributed's own error lines are not audit's output, whose report was already written."""
    script = tmp_path / "close_first.py"
    script.write_text(_SCHEDULER_GOES_FIRST)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and " ERROR " not in done.stderr, done.stderr
