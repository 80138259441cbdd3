"""Where the map step runs: in this process, a local Dask cluster, or the user's cluster."""

from __future__ import annotations

import atexit
import logging
import os
import re
from typing import TYPE_CHECKING

from ..base.errors import InputError, UsageError

if TYPE_CHECKING:  # Dask loads only when a cluster is used
    from distributed import Client, LocalCluster

SCHEDULER_ENV = "AUDIT_DASK_SCHEDULER"
_local: dict[int, Client] = {}  # workers -> Client of a local cluster, kept for the process's life


# What distributed accepts as a scheduler address: [protocol://]host:port (host may be [IPv6]).
_ADDRESS = re.compile(r"^(?:(?:tcp|tls|ucx|ws|wss)://)?(?:\[[0-9a-fA-F:]+\]|[A-Za-z0-9.\-]+):\d{1,5}/?$")


def scheduler_address(option: str | None) -> str | None:
    """The scheduler named by --scheduler or the environment. **Raises:** `UsageError` for one that is
    not an address at all, at once rather than after a connection timeout."""
    address = option or os.environ.get(SCHEDULER_ENV) or None
    if address is not None and not _ADDRESS.match(address.strip()):
        where = "--scheduler" if option else SCHEDULER_ENV
        raise UsageError(f"{where} {address!r} is not a scheduler address; expected tcp://HOST:PORT")
    return address


# A local cluster's start-up (worker processes that each import the tool: seconds of CPU) pays only
# when there is enough to read in parallel: this many hosts, or host files this big together.
CLUSTER_MIN_HOSTS = 16
CLUSTER_MIN_BYTES = 64 << 20


def local_workers(hosts: int, workers: int | None) -> int:
    """One single-threaded worker per core (a host file is decoded by one Python thread), capped."""
    return max(1, min(workers or os.cpu_count() or 1, hosts))


def in_process(hosts: int, workers: int | None, input_bytes: int | None) -> bool:
    """Whether a local run reads its hosts here: one host, one core, or (unless `--workers` asks for a
    cluster) a few small host files of known size, which a cluster would take longer to start than to read."""
    if hosts < 2 or (local_workers(hosts, workers) == 1 and workers is None):
        return True
    return workers is None and input_bytes is not None and hosts < CLUSTER_MIN_HOSTS \
        and input_bytes < CLUSTER_MIN_BYTES


def client_for(hosts: int, scheduler: str | None = None, workers: int | None = None,
               input_bytes: int | None = None) -> Client | None:
    """A Dask client, or None when the hosts are read in this process (see `in_process`);
    `input_bytes`: what the host files hold together, where known (local files)."""
    address = scheduler_address(scheduler)
    if address:
        from distributed import Client

        try:
            return Client(address, timeout="5s", set_as_default=False)
        except Exception as exc:  # a cluster outside this process: any failure to reach it is the address's
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"cannot reach the Dask scheduler: {reason}", path=address,
                             hint=f"check --scheduler / {SCHEDULER_ENV}") from None
    if in_process(hosts, workers, input_bytes):
        return None
    n = local_workers(hosts, workers)
    client = _local.get(n)
    if client is None:
        client = _start_local(n)
        _local[n] = client
    return client


def _start_local(n: int) -> Client:
    from distributed import Client, LocalCluster

    # Workers are separate processes (the decoder holds the GIL); no dashboard. The scheduler's HTTP
    # server starts even without a dashboard, on 8787 unless told: a free port keeps a user's own Dask
    # cluster from turning into "Port 8787 is already in use" lines on stderr. Logs only for what is
    # critical: a host that fails reaches the driver as one line, while distributed's errors (a worker's
    # heartbeat to a scheduler closing at exit on a busy machine) would print tracebacks after the report.
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                           scheduler_kwargs={"dashboard": False}, silence_logs=logging.CRITICAL, memory_limit=0)
    client = Client(cluster, set_as_default=False)
    atexit.register(_close, client, cluster)
    return client


def _close(client: Client, cluster: LocalCluster) -> None:
    try:
        client.close()
        cluster.close()
    except Exception:  # best effort while the interpreter exits
        pass


def release(client: Client | None) -> None:
    """Close a client to a user's cluster; local clusters stay up for the next analysis."""
    if client is not None and client not in _local.values():
        client.close()
