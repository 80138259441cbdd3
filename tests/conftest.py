"""Test settings: real JAX on CPU with 8 simulated devices, and the real captures in tests/data/fixtures."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

# Before anything imports JAX: 8 simulated CPU devices, CPU backend only.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# No per-host summary caches written beside the fixtures; cache tests name their own.
os.environ.setdefault("AUDIT_CACHE", "")

# `make test-fallbacks`: the suite on the install without a C compiler. Before anything imports audit,
# this process and every Python process a test starts (PYTHONPATH) refuse the C extensions
# (tests/without_c/sitecustomize.py); a test of the C build itself is skipped (`skip_without_c`).
WITHOUT_C = os.environ.get("AUDIT_TEST_WITHOUT_C") == "1"
if WITHOUT_C:
    import runpy

    _NO_C = Path(__file__).resolve().parent / "without_c"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(_NO_C), *filter(None, [os.environ.get("PYTHONPATH")])])
    runpy.run_path(str(_NO_C / "sitecustomize.py"))  # run by path: a system sitecustomize may be imported already

import pytest  # noqa: E402

skip_without_c = pytest.mark.skipif(WITHOUT_C, reason="AUDIT_TEST_WITHOUT_C=1: a test of the C build, run on "
                                                      "the fallbacks")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "fixtures"


def shared_fixture(relative: str) -> Path:
    """Path of a real capture in tests/data/fixtures; fail loudly if it is missing."""
    path = FIXTURES / relative
    if not path.exists():
        pytest.fail(f"fixture missing: {path} (tests/data/fixtures/README.md lists the real captures)")
    return path


@pytest.fixture
def fixture_path():
    return shared_fixture


def read_hosts(path: str | Path, run: str | None = None) -> list:
    """Each host of a profile as `audit inspect` reads it (audit.pod): the reader of its format lists
    the host files of the run, the reader of each host file reads it, and each program's HLO is decoded
    from the bytes the reader returns. In this process, one host after another."""
    from audit.parsers.hlo.files import decode_programs
    from audit.parsers.readers import reader_of_host
    from audit.pod.files import list_host_files

    hosts = []
    for host_path in list_host_files(path, run).paths:
        host, protos = reader_of_host(host_path).read_host(host_path, None, None)
        host.modules = decode_programs(protos, host_path, host.warnings)
        hosts.append(host)
    return hosts


def render(report: dict, fmt: str) -> str:
    """A JSON report read back and rendered in one format, as a report written earlier would be."""
    from audit.reports.model.report import ReportModel
    from audit.reports.render import Format, ReportRenderer
    from audit.reports.sections import RenderOptions

    return ReportRenderer(ReportModel.from_json(report)).render(Format(fmt), RenderOptions())


H100_CAPTURES = ROOT / "tests" / "data" / "captures" / "h100-jax0.11"


@pytest.fixture(scope="session")
def h100_step() -> dict:
    """The JSON report of the real H100 training step captured op by op (JAX 0.11.2); not to be changed."""
    from audit.orchestration.pipeline import analyse_profile

    return analyse_profile(H100_CAPTURES / "train-step.xplane.pb").to_json()


@pytest.fixture(scope="session")
def h100_step_graphs() -> dict:
    """The same step captured with CUDA graphs (one command_buffer_1 op per step); not to be changed."""
    from audit.orchestration.pipeline import analyse_profile

    return analyse_profile(H100_CAPTURES / "train-step-cmdbuf.xplane.pb").to_json()


# A test that spawns a process (a workload, the CLI's `run`, pytest, a build, a Dask worker) takes
# seconds and must say so with `slow` (or `browser`): `make test-quick` leaves those out. Each unmarked
# test's setup and call are watched, session fixtures it triggers included, and one that spawned fails.
_SPAWNED = pytest.StashKey[list]()


def _watch_spawns(log: list) -> Callable[[], None]:
    import multiprocessing.util
    import subprocess

    real_init, real_fork, real_spawn = subprocess.Popen.__init__, os.fork, multiprocessing.util.spawnv_passfds

    def popen(self, args, *rest, **kwargs):
        log.append(f"subprocess {str(args)[:160]}")
        return real_init(self, args, *rest, **kwargs)

    def fork():
        log.append("os.fork")
        return real_fork()

    def spawn(path, args, passfds):
        log.append(f"multiprocessing {path}")
        return real_spawn(path, args, passfds)

    subprocess.Popen.__init__ = popen  # type: ignore[method-assign]
    os.fork = fork
    multiprocessing.util.spawnv_passfds = spawn

    def undo() -> None:
        subprocess.Popen.__init__ = real_init  # type: ignore[method-assign]
        os.fork = real_fork
        multiprocessing.util.spawnv_passfds = real_spawn

    return undo


def _watched(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("slow") or item.get_closest_marker("browser"):
        yield
        return
    undo = _watch_spawns(item.stash.setdefault(_SPAWNED, []))
    try:
        yield
    finally:
        undo()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _watched(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _watched(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    spawned = item.stash.get(_SPAWNED, [])
    if spawned and report.when == "call" and report.passed:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} spawned a process ({spawned[0]}) and is not marked slow: "
                           "mark it @pytest.mark.slow so that make test-quick leaves it out")
