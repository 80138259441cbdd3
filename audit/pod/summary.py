"""The map step: one host file -> a compact HostSummary, cached as Parquet.

A summary holds per (device, program, op) occurrences and times, the host's steps,
idle time per device, one representative step's events for the timeline, which async
collectives overlapped compute, the programs' HLO by fingerprint, and the device facts.
It is a few hundred KB where the host file is tens of MB to GB.
"""

from __future__ import annotations

import hashlib
import io
import json
import traceback
from typing import Any, cast
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import pandas as pd

from ..analyses.host_idle import host_idle
from ..analyses.programs import program_steps
from ..analyses.steps import _busy_in_windows, overlapped_collectives
from ..atomic import write_bytes, write_text
from ..base.errors import AuditError
from ..parsers.wire.input_files import is_url
from ..base.user_cache import summaries_dir
from . import files
from .trace_window import STEP, empty_trace, trace_window

CACHE_VERSION = "8"
TIMELINE_EVENTS = 2000
_TRACE_COLUMNS = ("trace_flops", "trace_model_flops", "trace_bytes", "trace_category")


@dataclass
class HostSummary:
    """One host, reduced. Frames carry no host column; the reduce step adds it."""

    host: str
    path: str
    platform: str
    ops: pd.DataFrame  # device, program_id, op, occurrences, dur_ps, self_ps, dur_min_ps, dur_max_ps, trace_*
    steps: pd.DataFrame  # device, step, start_ps, end_ps, program_id, programs (analyses.programs)
    idle: pd.DataFrame  # device, idle_ps
    strip: pd.DataFrame  # one median step on the first device: op, program_id, start_ps, dur_ps
    strip_step: dict[str, Any]  # device, step, start_ps, end_ps of that step (empty without steps)
    trace: pd.DataFrame  # what the trace-viewer export draws (pod.trace_window): device, op, program_id,
    #                      start_ps, dur_ps, occurrences, and the window on the device: step, window_start_ps,
    #                      window_end_ps
    overlapped: dict[str, bool]
    programs: dict[int, str]  # program id -> HLO fingerprint
    module_names: dict[int, str]
    step_source: str
    device_stats: dict[str, Any]
    device_names: dict[int, str]
    versions: dict[str, str]
    warnings: list[str]
    hlo: dict[str, bytes] = field(default_factory=dict)  # fingerprint -> HloProto bytes
    trace_scope: str = STEP  # step: one representative step; capture: the capture window (many programs)
    trace_left_out: dict[int, int] = field(default_factory=dict)  # device -> events beyond the trace's cap
    reader: str = "xplane"  # the format's reader (parsers.readers)
    host_idle: dict[str, Any] = field(default_factory=dict)  # analyses.host_idle: idle split, host activity


@dataclass
class HostFailure:
    """A host file that could not be read: the one line that says why."""

    path: str
    message: str  # one line
    internal: bool = False
    detail: str = ""  # the worker's traceback, for an internal error


def summarise_host(path: str, cache_dir: str | None = None, hlo_dir: str | None = None) -> HostSummary | HostFailure:
    """Read one host file (local or URL) and reduce it; runs on a Dask worker. `hlo_dir` is the
    HLO dump of a profile that carries none (an Nsight Systems export)."""
    try:
        key = files.identity(path) + (f"-{files.identity(hlo_dir)}" if hlo_dir else "") if cache_dir else None
        if cache_dir and key:
            cached = read_cached(cache_dir, key)
            if cached is not None:
                return cached
        summary = _summarise(path, hlo_dir)
        if cache_dir and key:
            write_cached(cache_dir, key, summary)
        return summary
    except AuditError as exc:
        return HostFailure(path, str(exc) if exc.path else f"{path}: {exc}")
    except Exception as exc:  # reported by the driver as an internal error naming the file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return HostFailure(path, f"{path}: {type(exc).__name__}: {first}", internal=True,
                           detail=traceback.format_exc())


def _summarise(path: str, hlo_dir: str | None = None) -> HostSummary:
    from ..parsers.readers import FALLBACK, reader_of_host

    # A URL is read as the one format remote storage is listed in; its bytes are not bound to a
    # name here, so the reader drops them once decoded.
    remote = is_url(path)
    reader = FALLBACK if remote else reader_of_host(path)
    host, protos = reader.read_host(path, files.fetch_bytes(path) if remote else None, hlo_dir)
    events = host.events
    programs, hlo = {}, {}
    for pid, proto in protos.items():
        fp = fingerprint(proto)
        programs[int(pid)] = fp
        hlo[fp] = proto
    starts = sorted({str(op) for op in events["op"].unique() if "-start" in str(op)})
    return HostSummary(
        host=host.host, path=path, platform=host.platform, ops=reduce_events(events),
        steps=program_steps(host.steps, events).drop(columns=["host"]).reset_index(drop=True),
        idle=idle_by_device(host.steps, events), **_strip(host.steps, events, trace=True),
        overlapped=overlapped_collectives(events, set(starts)), programs=programs,
        module_names={int(k): v for k, v in host.module_names.items()}, step_source=host.step_source,
        device_stats=host.device_stats, device_names={int(k): v for k, v in host.device_names.items()},
        versions=host.versions, warnings=host.warnings, hlo=hlo, reader=reader.name,
        host_idle=host_idle(host.host_events, events, host.steps, host.step_source))


def fingerprint(proto: bytes) -> str:
    """The module as this tool reads it: every process of one job serializes the same program
    with a few process-specific fields the schema does not read, and maps in any order."""
    from google.protobuf.message import DecodeError

    from ..parsers.hlo import schema as hlo_schema

    for message in (hlo_schema.HloProto, hlo_schema.HloModuleProto):
        try:
            parsed = message.FromString(proto)
        except (DecodeError, ValueError, RuntimeError):
            continue
        module = parsed.hlo_module if message is hlo_schema.HloProto else parsed
        if module.computations:
            module.DiscardUnknownFields()
            return hashlib.sha256(module.SerializeToString(deterministic=True)).hexdigest()[:16]
    return hashlib.sha256(proto).hexdigest()[:16]


def reduce_events(events: pd.DataFrame) -> pd.DataFrame:
    """Per (device, program, op): occurrences, summed times and per-occurrence min and max."""
    keys = ["device", "program_id", "op"]
    frame = events.assign(per_occ=events["dur_ps"] / events["occurrences"].clip(lower=1))
    agg = {"occurrences": ("occurrences", "sum"), "dur_ps": ("dur_ps", "sum"), "self_ps": ("self_ps", "sum"),
           "dur_min_ps": ("per_occ", "min"), "dur_max_ps": ("per_occ", "max")}
    if "kernels" in frame.columns:
        agg["kernels"] = ("kernels", "sum")
    agg.update({c: (c, "first") for c in _TRACE_COLUMNS if c in frame.columns})
    # Grouped on the op names' codes (observed only); names become plain strings once per row of the result.
    out = frame.groupby(keys, sort=False, observed=True).agg(**agg).reset_index()
    return out.assign(op=out["op"].astype(str))


def idle_by_device(steps: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """Per device, step time not covered by any op (the union of op intervals), in ps."""
    rows = []
    if not steps.empty and not events.empty:
        timed = events["start_ps"].to_numpy(np.int64) >= 0
        device = events["device"].to_numpy(np.int64)[timed]
        start = events["start_ps"].to_numpy(np.int64)[timed]
        end = start + events["dur_ps"].to_numpy(np.int64)[timed]
        order = np.argsort(device, kind="stable")  # each device's events as one slice
        device, start, end = device[order], start[order], end[order]
        for key, sgrp in steps.groupby("device", sort=False):
            dev = int(cast(int, key))
            s, e = sgrp["start_ps"].to_numpy(np.int64), sgrp["end_ps"].to_numpy(np.int64)
            lo, hi = np.searchsorted(device, dev, "left"), np.searchsorted(device, dev, "right")
            busy = int(_busy_in_windows(start[lo:hi], end[lo:hi], s, e).sum()) if hi > lo else 0
            rows.append((dev, int((e - s).sum()) - busy))
    return pd.DataFrame(rows, columns=["device", "idle_ps"])


def _strip(steps: pd.DataFrame, events: pd.DataFrame, trace: bool = False) -> dict[str, Any]:
    """The events of one representative (median-length) step on the host's first device, and
    (`trace`) what the trace-viewer export draws: that step on every device, or the capture window
    when the steps are not one repeated program (pod.trace_window)."""
    empty = pd.DataFrame({"op": pd.Series(dtype=str), "program_id": pd.Series(dtype="uint64"),
                          "start_ps": pd.Series(dtype="int64"), "dur_ps": pd.Series(dtype="int64")})
    if steps.empty:
        return {"strip": empty, "strip_step": {}, **({"trace": empty_trace()} if trace else {})}
    dev = int(steps["device"].min())
    dsteps = steps[steps["device"] == dev].assign(length=lambda d: d["end_ps"] - d["start_ps"])
    row = dsteps.sort_values("length").iloc[len(dsteps) // 2]
    s, e = int(row["start_ps"]), int(row["end_ps"])
    evs = events[(events["device"] == dev) & (events["start_ps"] >= s) & (events["start_ps"] < e)]
    evs = evs.sort_values("start_ps").head(TIMELINE_EVENTS)
    strip = pd.DataFrame({"op": evs["op"].astype(str).to_numpy(), "program_id": evs["program_id"].to_numpy(),
                          "start_ps": evs["start_ps"].to_numpy(), "dur_ps": evs["dur_ps"].to_numpy()})
    out = {"strip": strip, "strip_step": {"device": dev, "step": int(row["step"]), "start_ps": s, "end_ps": e}}
    if trace:
        window = trace_window(steps, events, dev, int(row["step"]))
        out.update(trace=window.frame, trace_scope=window.scope, trace_left_out=window.left_out)
    return out


_FRAMES = ("ops", "steps", "idle", "strip", "trace")
_FACTS = frozenset(f.name for f in fields(HostSummary)) - set(_FRAMES)


def default_cache_dir(paths: list[str]) -> str | None:
    """The user cache's `summaries` folder (`$AUDIT_CACHE` moves it, empty turns it off) for a
    profile of several hosts; nothing for a single file, which is read again about as fast.
    Never a folder beside the profile: a logdir or a shared run dir is not ours to write into."""
    if len(paths) < 2:
        return None
    return summaries_dir()


def write_cached(cache_dir: str, key: str, summary: HostSummary) -> None:
    """Frames as Parquet, facts as JSON, HLO once per fingerprint; each file written atomically."""
    root = Path(cache_dir)
    try:
        (root / "hlo").mkdir(parents=True, exist_ok=True)
        for fp, proto in summary.hlo.items():
            target = root / "hlo" / f"{fp}.pb"
            if not target.exists():
                write_bytes(target, proto)
        for name in _FRAMES:
            buf = io.BytesIO()
            getattr(summary, name).to_parquet(buf, index=False)
            write_bytes(root / f"{key}.{name}.parquet", buf.getvalue())
        facts = {k: getattr(summary, k) for k in ("host", "path", "platform", "strip_step", "overlapped",
                                                  "step_source", "device_stats", "versions", "warnings",
                                                  "trace_scope", "reader", "host_idle")}
        facts.update(programs={str(k): v for k, v in summary.programs.items()},
                     module_names={str(k): v for k, v in summary.module_names.items()},
                     device_names={str(k): v for k, v in summary.device_names.items()},
                     trace_left_out={str(k): v for k, v in summary.trace_left_out.items()}, version=CACHE_VERSION)
        # The facts file is written last: it marks the entry complete.
        write_text(root / f"{key}.json", json.dumps(facts, default=str))
    except OSError:
        pass  # a cache that cannot be written only costs the next run its speed


def read_cached(cache_dir: str, key: str) -> HostSummary | None:
    root = Path(cache_dir)
    try:
        facts = json.loads((root / f"{key}.json").read_text())
        if facts.get("version") != CACHE_VERSION:
            return None
        frames = {name: pd.read_parquet(root / f"{key}.{name}.parquet") for name in _FRAMES}
        programs = {int(k): v for k, v in facts.pop("programs").items()}
        hlo = {fp: (root / "hlo" / f"{fp}.pb").read_bytes() for fp in set(programs.values())}
    except (OSError, ValueError, KeyError):
        return None
    facts.pop("version")
    if not set(facts) <= _FACTS:  # written by another build that shares the version: a miss, not a crash
        return None
    module_names = {int(k): v for k, v in facts.pop("module_names").items()}
    device_names = {int(k): v for k, v in facts.pop("device_names").items()}
    left_out = {int(k): int(v) for k, v in facts.pop("trace_left_out").items()}
    return HostSummary(**facts, ops=frames["ops"], steps=frames["steps"], idle=frames["idle"], strip=frames["strip"],
                       trace=frames["trace"],
                       programs=programs, hlo=hlo, module_names=module_names, device_names=device_names,
                       trace_left_out=left_out)
