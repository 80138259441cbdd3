"""What every profile reader hands to the rest of the tool: op events, steps, modules, device facts;
and what a reader is (`ProfileReader`; the registry of them is `readers`).

Events and steps are columnar (pandas DataFrames with the columns declared
here), so a profile with millions of events never becomes millions of Python
objects.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ...base.errors import InputError

from ..hlo.model import Module

# One row per executed HLO op on one device (one occurrence, or a pre-aggregated group).
EVENT_COLUMNS: dict[str, str] = {
    "host": "host name (one file per host)",
    "device": "device index: TPU core N, GPU ordinal, or CPU device_ordinal",
    "program_id": "XLA program id, unsigned 64-bit",
    "op": "HLO instruction name",
    "start_ps": "start, ps from profile start (-1 for aggregated events)",
    "dur_ps": "duration in ps (summed for aggregated events)",
    "self_ps": "duration minus direct children, ps",
    "occurrences": "executions this row stands for (1, or num_occurrences)",
    "step": "step index the op ran in, -1 if unknown",
    "run_id": "module launch id where the trace has one, else -1",
    # TPU traces state the compiler's own per-occurrence costs; NaN elsewhere.
    "trace_flops": "per occurrence, device-normalized FLOPs from the trace",
    "trace_model_flops": "per occurrence, model FLOPs from the trace",
    "trace_bytes": "per occurrence, bytes accessed from the trace",
    "trace_category": "hlo_category from the trace ('' if absent)",
}

# One row per step on one device.
STEP_COLUMNS: dict[str, str] = {
    "host": "host name",
    "device": "device index",
    "step": "step number as the trace names it",
    "start_ps": "ps from profile start",
    "end_ps": "ps from profile start",
}


@dataclass
class HostProfile:
    """Everything read from one host's `.xplane.pb`."""

    host: str
    path: str
    platform: str  # "tpu" | "gpu" | "cpu"
    events: pd.DataFrame  # EVENT_COLUMNS
    steps: pd.DataFrame  # STEP_COLUMNS
    modules: dict[int, Module]  # program id -> module
    module_names: dict[int, str]  # program id -> module name (also for programs without HLO)
    step_source: str = ""  # "Steps line", "StepTraceAnnotation", "module launches"
    device_stats: dict[str, dict[str, Any]] = field(default_factory=dict)  # plane name -> plane stats
    device_names: dict[int, str] = field(default_factory=dict)  # device index -> plane/label
    versions: dict[str, str] = field(default_factory=dict)  # e.g. jax_version from /host:metadata
    warnings: list[str] = field(default_factory=list)
    profile_start_ns: int | None = None
    # What the host's Python thread did (parsers.host_python: name, start_ps, end_ps); None where the
    # format records no host thread.
    host_events: pd.DataFrame | None = None


HostRead = tuple[HostProfile, dict[int, bytes]]  # the host, and each program's HloProto bytes


@dataclass
class HostFiles:
    """The host files of one profile run, and what was chosen on the way."""

    run: str
    paths: list[str]
    warnings: list[str] = field(default_factory=list)


def file_key(host: str) -> str:
    """What changes when a local host file does: its path, size and modification time."""
    try:
        st = os.stat(host)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=host) from None
    return f"{Path(host).resolve()}|{st.st_size}|{st.st_mtime_ns}"


@dataclass(frozen=True)
class ProfileReader:
    """One profile format.

    - `name`: the format's own name; `source_kind`: the report's `source.kind` for a profile in it.
    - `claims`: a local file or folder is in this format, by its name or its first bytes.
    - `owns_host`: a host path this reader's `list_hosts` gave.
    - `list_hosts`: the host files of a claimed path (`run` picks a run where the format has several).
    - `read_host`: one host file (`data`: its bytes, fetched from wherever it lies; `hlo_dir`: the HLO
      dump of a format that carries none) into a HostProfile, with its programs' HloProto bytes.
    - `change_key`: facts of a local host that change when its content does (the summary cache's key).
    - `separate_clocks`: each host's clock has its own origin, so steps of different hosts are not
      placed against each other.
    - `suffix`: the file ending that names the format, where one does (remote listings go by it).
    - `warm_up`: what the reader compiles or loads once per install, done ahead by `python -m
      audit.prepare` so a first run does not pay for it; returns what it did, in words.
    """

    name: str
    source_kind: str
    claims: Callable[[Path], bool]
    owns_host: Callable[[str], bool]
    list_hosts: Callable[[Path, str | None], HostFiles]
    read_host: Callable[[str, bytes | None, str | None], HostRead]
    change_key: Callable[[str], str] = file_key
    separate_clocks: bool = False
    suffix: str = ""
    warm_up: Callable[[], str] | None = None
