"""The driver: run the map step over every host file and combine the summaries."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..optable.beside import EventWindow
from ..costmodel.units import seconds
from ..base.errors import InputError
from ..parsers.hlo.buffer_assignment import BufferAssignment, read_buffer_assignment
from ..parsers.hlo.model import Module
from ..parsers.hlo.opcodes import COLLECTIVES
from ..parsers.wire.input_files import is_url
from ..parsers.readers import host_label, total_bytes
from ..reports.model.report import DeviceSteps
from . import cluster, files
from .summary import HostFailure, HostSummary, default_cache_dir, summarise_host
from . import trace_window
from .trace_window import CAPTURE, STEP
from ..base.timebase import PS

if TYPE_CHECKING:
    from distributed import Client


@dataclass(frozen=True)
class PodSettings:
    """How to read the hosts: cache dir (None: the user cache; "": off), cluster, bad hosts."""

    cache: str | None = None
    scheduler: str | None = None
    workers: int | None = None
    skip_bad_hosts: bool = False
    progress: bool = True
    hlo: str | None = None  # the HLO dump folder of a profile that carries none (an Nsight Systems export)


@dataclass
class HostFacts:
    """What the driver keeps of one host besides the combined frames."""

    host: str
    path: str
    platform: str
    step_source: str
    versions: dict[str, Any]
    device_names: dict[int, str]
    programs: dict[int, str]  # program id -> fingerprint
    warnings: list[str] = field(default_factory=list)
    device_stats: dict[str, Any] = field(default_factory=dict[str, Any])  # this host's device planes' stats
    trace_scope: str = STEP  # what the trace-viewer export holds of this host (pod.trace_window)
    trace_left_out: dict[int, int] = field(default_factory=dict[int, int])  # device -> events beyond its cap
    reader: str = "xplane"  # the reader of its format (parsers.readers)
    host_idle: dict[str, Any] = field(default_factory=dict[str, Any])  # analyses.host_idle of this host


@dataclass
class Pod:
    """Every host, reduced: per-op rows (one per host, device, program, op), steps and facts."""

    paths: list[str]
    run: str
    hosts: list[HostFacts]
    ops: pd.DataFrame
    steps: pd.DataFrame
    idle_ps: pd.DataFrame  # host, device, idle_ps
    strips: list[tuple[str, dict[str, Any], pd.DataFrame]]  # host, step facts, events
    trace: pd.DataFrame  # the strip's step on every device: host, device, op, program_id, start_ps, dur_ps, ...
    overlapped: dict[str, bool]
    modules: dict[int, Module]
    module_names: dict[int, str]
    device_stats: dict[str, Any]
    warnings: list[str]
    buffers: dict[int, BufferAssignment] = field(default_factory=dict)  # each program's, where its HloProto has one

    @property
    def platform(self) -> str:
        return self.hosts[0].platform if self.hosts else ""

    def idle_seconds(self) -> float | None:
        """Mean per device of step time not covered by any op."""
        return None if self.idle_ps.empty or self.ops.empty else float(self.idle_ps["idle_ps"].mean()) * PS

    def timeline(self, kind_of: Mapping[tuple[int, str], str], device_names: Mapping[tuple[str, int], str]) -> list[dict[str, Any]]:
        return [{"device_class": device_names.get((host, step["device"]), f"device {step['device']}"),
                 "host": host, "device": step["device"], "step": step["step"], "start_s": 0.0,
                 "end_s": (step["end_ps"] - step["start_ps"]) * PS,
                 "events": [{"name": op, "kind": kind_of.get((int(pid), op), "unknown"),
                             "start_s": (int(st) - step["start_ps"]) * PS, "dur_s": int(du) * PS}
                            for op, pid, st, du in zip(ev["op"], ev["program_id"], ev["start_ps"], ev["dur_ps"])]}
                for host, step, ev in self.strips if step]


    def exported_window(self) -> EventWindow | None:
        """The events the trace-viewer export holds, named for the reasons that cite them."""
        if self.trace.empty:
            return None
        capture = any(h.trace_scope == CAPTURE for h in self.hosts)
        label = "the capture window" if capture else f"step {int(self.trace['step'].iloc[0])}"
        collectives = frozenset(f"{pid}/{i.name}" for pid, m in self.modules.items() for _, i in m.instructions()
                                if i.opcode.removesuffix("-start").removesuffix("-done") in COLLECTIVES)
        return EventWindow(self.trace[["host", "device", "program_id", "op", "start_ps", "dur_ps"]], label, collectives)

    def device_steps(self, device_names: Mapping[tuple[str, int], str]) -> DeviceSteps | None:
        """What the trace-viewer export draws of each host: its representative step on every device,
        or the capture window of a host whose steps are not one repeated program."""
        if self.trace.empty:
            return None
        events = self.trace.assign(host=self.trace["host"].astype(str))
        windows = events[["host", "device", "step", "window_start_ps", "window_end_ps"]].drop_duplicates(
            ["host", "device"]).rename(columns={"window_start_ps": "start_ps", "window_end_ps": "end_ps"})
        capture = {h.host: h.trace_left_out for h in self.hosts if h.trace_scope == CAPTURE}
        steps = self.steps.assign(host=self.steps["host"].astype(str))
        return DeviceSteps(events=events.drop(columns=["step", "window_start_ps", "window_end_ps"]),
                           windows=windows.reset_index(drop=True), device_names=dict(device_names),
                           capture=capture, cap=trace_window.TRACE_EVENTS,
                           steps=steps[steps["host"].isin(list(capture))].reset_index(drop=True))


def reduce_profile(path: str | Path, run: str | None = None, settings: PodSettings | None = None) -> Pod:
    """Read every host of one profile run, on a Dask cluster when there are several."""
    settings = settings or PodSettings()
    found = files.list_host_files(path, run)
    if not found.paths:
        raise InputError("no profile files in this run", path=path)
    cache = default_cache_dir(found.paths) if settings.cache is None else (settings.cache or None)
    if cache and is_url(cache):
        raise InputError("--cache must be a local directory", path=cache)
    # An in-memory filesystem lives in this process only: its hosts are read here.
    in_process = files.protocol(found.paths[0]) == "memory" and not cluster.scheduler_address(settings.scheduler)
    client = None if in_process else cluster.client_for(len(found.paths), settings.scheduler, settings.workers,
                                                        total_bytes(found.paths))
    try:
        results = _map(found.paths, cache, client, settings.progress, settings.hlo)
        return _combine(found, results, settings.skip_bad_hosts)
    finally:
        cluster.release(client)


HostResult = HostSummary | HostFailure


def _map(paths: list[str], cache: str | None, client: Client | None, progress: bool,
         hlo: str | None = None) -> Iterator[tuple[int, HostResult]]:
    """Yield (index, result) as hosts finish, so the driver holds one summary's HLO at a time."""
    bar = _Progress(len(paths)) if progress else None
    if client is None:
        for i, p in enumerate(paths):
            yield i, summarise_host(p, cache, hlo)
            if bar is not None:
                bar.step()
    else:
        from distributed import as_completed

        futures = client.map(summarise_host, paths, cache_dir=cache, hlo_dir=hlo, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        for future in as_completed(futures, loop=client.loop):
            result = future.result()
            i = index[future.key]
            future.release()
            yield i, result
            if bar is not None:
                bar.step()
    if bar is not None:
        bar.done()


def _combine(found: files.RunFiles, results: Iterable[tuple[int, HostResult]], skip_bad: bool) -> Pod:
    summaries: list[tuple[int, HostSummary]] = []
    failures: list[HostFailure] = []
    protos: dict[str, bytes] = {}
    for i, result in results:
        if isinstance(result, HostFailure):
            if result.internal or not skip_bad:
                _raise(result, len(found.paths))
            failures.append(result)
            continue
        for fp, proto in result.hlo.items():
            protos.setdefault(fp, proto)
        result.hlo = {}
        summaries.append((i, result))
    summaries.sort(key=lambda item: item[0])
    if not summaries:
        raise InputError(f"none of the {len(found.paths)} host files could be read", path=found.paths[0])
    warnings = list(found.warnings)
    if failures:
        warnings.append(f"{len(failures)} of {len(found.paths)} host files skipped (--skip-bad-hosts): "
                        + "; ".join(f.message for f in failures[:5]) + (" ..." if len(failures) > 5 else ""))
    hosts = [s for _, s in summaries]
    _distinct_names(hosts)
    modules, mismatch = _modules(hosts, protos, warnings)
    buffers = _buffer_assignments(hosts, protos)
    names: dict[int, str] = {}
    for h in hosts:
        names.update(h.module_names)
    return Pod(
        paths=[h.path for h in hosts], run=found.run,
        hosts=[HostFacts(h.host, h.path, h.platform, h.step_source, h.versions, h.device_names, h.programs,
                         h.warnings, h.device_stats, h.trace_scope, h.trace_left_out, h.reader, h.host_idle)
               for h in hosts],
        ops=_concat([h.ops for h in hosts], hosts), steps=_concat([h.steps for h in hosts], hosts),
        idle_ps=_concat([h.idle for h in hosts], hosts),
        strips=[(h.host, h.strip_step, h.strip) for h in hosts],
        trace=_concat([h.trace for h in hosts], hosts),
        overlapped=_first_seen([h.overlapped for h in hosts]), modules=modules, module_names=names,
        device_stats={k: v for h in hosts for k, v in h.device_stats.items()},
        warnings=list(dict.fromkeys(warnings + [w for h in hosts for w in h.warnings] + mismatch)),
        buffers=buffers)


def _raise(failure: HostFailure, total: int) -> None:
    line = failure.message.splitlines()[0]
    if failure.internal:
        error = RuntimeError(line)  # one line on the terminal; the worker's traceback goes to the saved file
        error.add_note(f"on the worker:\n{failure.detail}")
        raise error
    raise InputError(line + (" (--skip-bad-hosts analyses the other hosts)" if total > 1 else ""))


def _concat(frames: list[pd.DataFrame], hosts: list[HostSummary]) -> pd.DataFrame:
    labels = [h.host for h in hosts]
    out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].copy()
    codes = [i for i, f in enumerate(frames) for _ in range(len(f))]
    out.insert(0, "host", pd.Series(pd.Categorical.from_codes(codes, categories=pd.Index(labels, dtype=str)),
                                    index=out.index))
    if "op" in out.columns:
        out["op"] = out["op"].astype("category")
    return out


def _distinct_names(hosts: list[HostSummary]) -> None:
    """Rows are keyed by (host, device): files naming the same host are told apart by file name."""
    counts = Counter(h.host for h in hosts)
    for h in hosts:
        if counts[h.host] > 1:
            label = f"{h.host}:{host_label(h.path)}"
            h.warnings.append(f"several files name host {h.host!r}; this one is called {label!r}")
            h.host = label


def _modules(hosts: list[HostSummary], protos: dict[str, bytes],
             warnings: list[str]) -> tuple[dict[int, Module], list[str]]:
    """Decode each program's most common module once; hosts running another one are named."""
    from ..parsers.hlo.files import decode_programs

    by_program: dict[int, Counter[str]] = {}
    for h in hosts:
        for pid, fp in h.programs.items():
            by_program.setdefault(pid, Counter())[fp] += 1
    chosen = {pid: counts.most_common(1)[0][0] for pid, counts in by_program.items()}
    modules = decode_programs({pid: protos[fp] for pid, fp in chosen.items() if fp in protos},
                             hosts[0].path, warnings)
    differing = [h.host for h in hosts if any(chosen.get(pid) != fp for pid, fp in h.programs.items())]
    mismatch: list[str] = []
    if differing:
        mismatch.append(f"{len(differing)} host(s) ran programs whose HLO differs from the other hosts' "
                        f"(first: {', '.join(differing[:5])}); their ops are costed with the common HLO")
    return modules, mismatch


def _buffer_assignments(hosts: list[HostSummary], protos: dict[str, bytes]) -> dict[int, BufferAssignment]:
    """Each program's buffer assignment, from the HloProto most hosts ran (only the assignment's
    field is decoded; the module is stepped over)."""
    by_program: dict[int, Counter[str]] = {}
    for h in hosts:
        for pid, fp in h.programs.items():
            by_program.setdefault(pid, Counter())[fp] += 1
    chosen = {pid: counts.most_common(1)[0][0] for pid, counts in by_program.items()}
    found = {pid: read_buffer_assignment(protos[fp]) for pid, fp in chosen.items() if fp in protos}
    return {pid: a for pid, a in found.items() if a is not None}


def _first_seen(maps: list[dict[str, bool]]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for m in maps:
        for k, v in m.items():
            out.setdefault(k, v)
    return out


class _Progress:
    """A bar over hosts on stderr: redrawn in place on a terminal, a line per tenth elsewhere,
    and only once the work has taken a few seconds."""

    def __init__(self, total: int):
        self.total, self.done_n, self.start = total, 0, time.monotonic()
        self.tty = sys.stderr.isatty()
        self.shown = False
        self.last_tenth = 0

    def step(self) -> None:
        self.done_n += 1
        if self.total < 2 or time.monotonic() - self.start < 2.0:
            return
        tenth = self.done_n * 10 // self.total
        if not self.tty and tenth == self.last_tenth:
            return
        self.last_tenth = tenth
        filled = self.done_n * 30 // self.total
        text = f"hosts [{'#' * filled}{'.' * (30 - filled)}] {self.done_n}/{self.total} " \
               f"{seconds(time.monotonic() - self.start)}"
        sys.stderr.write(("\r" + text) if self.tty else text + "\n")
        sys.stderr.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown and self.tty:
            sys.stderr.write("\n")
