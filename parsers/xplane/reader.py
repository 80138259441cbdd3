"""The XPlane reader: one host's `.xplane.pb` into a `HostProfile` (op events, steps, modules, device
facts), registered in `parsers.readers` as `READER`; the pod layer lists a profile's hosts and reads each."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


from ...base.errors import InputError
from ..profile.events import HostExtraction, PlaneStats, to_u64
from .events_cpu import extract_cpu
from .events_gpu import GPU_PLANE, extract_gpu
from .events_tpu import TPU_PLANE, core_label, extract_tpu
from ..hlo.files import decode_programs
from .host_python import python_events
from ..profile.model import HostProfile, HostRead, ProfileReader
from ...base.ranges import ordinal
from ..profile.files import SUFFIX
from .space import claims, decode_xspace, list_hosts, read_xspace

_HLO_STATS = ("Hlo Proto", "HLO Proto")
_PROGRAM_SUFFIX = re.compile(r"^(.*)\((\d+)\)$")


def read_host(path: str | Path, data: bytes | None = None,
              decode_hlo: bool = True) -> tuple[HostProfile, dict[int, bytes]]:
    """Read one host's `.xplane.pb` (or its bytes, `data`, fetched from anywhere) into a
    HostProfile, with each program's HloProto bytes; `decode_hlo=False` leaves `modules`
    empty, for callers that decode each distinct module once across many hosts."""
    space = read_xspace(path) if data is None else decode_xspace(data, path)
    del data  # the space holds the bytes it needs (its lines are views of them), and no more than once
    planes = {plane.name: plane for plane in space.planes}
    host = space.hostnames[0] if space.hostnames else Path(path).name.removesuffix(SUFFIX)
    warnings = [f"profiler reported: {w}" for w in (*space.errors, *space.warnings)]
    names, protos, versions = _programs(planes.get("/host:metadata"))
    try:
        platform, extraction, device_stats = _extract(planes, host)
    except InputError as exc:  # range checks name the plane and line; the file is named here
        if exc.path is not None:
            raise
        raise InputError(exc.message, path=path) from None
    if extraction.events.empty and not protos and not names:
        raise InputError("holds no XLA programs (no HLO modules and no XLA op events); "
                         "is this a JAX/XLA profile?", path=path)
    if extraction.events.empty:
        warnings.append("no executed XLA ops in this profile (only compiled programs)")
    modules = decode_programs(protos, path, warnings) if decode_hlo else {}
    missing = sorted(set(int(p) for p in extraction.events["program_id"].unique()) - set(names))
    if missing:
        warnings.append(f"{len(missing)} program(s) ran but have no HLO in /host:metadata: "
                        f"{', '.join(map(str, missing[:5]))}")
    return HostProfile(
        host=host, path=str(path), platform=platform, events=extraction.events, steps=extraction.steps,
        modules=modules, module_names=names, step_source=extraction.step_source, device_stats=device_stats,
        device_names=extraction.device_names, versions=versions,
        warnings=warnings + extraction.warnings,
        profile_start_ns=_profile_start(planes.get("Task Environment")),
        host_events=python_events(planes.get("/host:CPU"))), protos


def _device_planes(planes: dict[str, Any], pattern: re.Pattern[str]) -> list[tuple[int, Any]]:
    found = [(ordinal(m.group(1), f"plane {name!r}"), plane) for name, plane in planes.items()
             if (m := pattern.match(name))]
    return sorted(found, key=lambda item: item[0])


def _extract(planes: dict[str, Any], host: str) -> tuple[str, HostExtraction, dict[str, dict[str, Any]]]:
    tpu = _device_planes(planes, TPU_PLANE)
    if tpu:
        return "tpu", extract_tpu(tpu, host), {p.name: _plane_stats(p) for _, p in tpu}
    gpu = _device_planes(planes, GPU_PLANE)
    if gpu:
        return "gpu", extract_gpu(gpu, planes.get("/host:CPU"), host), {p.name: _plane_stats(p) for _, p in gpu}
    cpu = planes.get("/host:CPU")
    if cpu is None:
        raise InputError("holds no XLA programs: no TPU, GPU or /host:CPU plane", path=host)
    stats = _plane_stats(cpu)
    meta = planes.get("/host:metadata")
    if meta is not None:
        stats.update({k: v for k, v in _plane_stats(meta).items() if k == "cpu_version"})
    return "cpu", extract_cpu(cpu, host), {cpu.name: stats}


def _plane_stats(plane: Any) -> dict[str, Any]:
    """Plane-level stats by name; `core_details` is decoded, other bytes values are left out."""
    stats = PlaneStats(plane).to_dict(plane.stats)
    if isinstance(stats.get("core_details"), bytes):
        stats["core_details"] = core_label(plane)
    return {k: v for k, v in stats.items() if not isinstance(v, bytes)}


def _programs(meta: Any) -> tuple[dict[int, str], dict[int, bytes], dict[str, str]]:
    """Program id -> module name and -> HloProto bytes, and the version stats of `/host:metadata`."""
    if meta is None:
        return {}, {}, {}
    ps = PlaneStats(meta)
    versions = {k: str(v) for k, v in ps.to_dict(meta.stats).items() if not isinstance(v, bytes)}
    names: dict[int, str] = {}
    protos: dict[int, bytes] = {}
    for key, md in meta.event_metadata.items():
        stats = ps.to_dict(md.stats)
        data = next((stats[s] for s in _HLO_STATS if isinstance(stats.get(s), bytes)), None)
        if data is None:
            continue
        program = _program_id(key, md, stats)
        match = _PROGRAM_SUFFIX.match(md.name)
        names[program] = match.group(1) if match else md.name
        protos[program] = data
    return names, protos, versions


def _program_id(key: int, md: Any, stats: dict[str, Any]) -> int:
    """XProf's rule: the `program_id` stat, else the metadata id, else the name's `(N)` suffix; as uint64."""
    value = stats.get("program_id")
    if isinstance(value, int) and not isinstance(value, bool):
        return to_u64(value)
    if md.id or key:
        return to_u64(md.id or key)
    match = _PROGRAM_SUFFIX.match(md.name)
    return to_u64(int(match.group(2))) if match else 0


def _profile_start(env: Any) -> int | None:
    if env is None:
        return None
    value = PlaneStats(env).to_dict(env.stats).get("profile_start_time")
    return int(value) if isinstance(value, int) else None


def _warm_up() -> str:
    from .xline import warm_up

    return warm_up()


def _read_host(host: str, data: bytes | None, hlo_dir: str | None) -> HostRead:
    # Modules are decoded by the caller, once per distinct program across hosts.
    return read_host(host, data=data, decode_hlo=False)


READER = ProfileReader(name="xplane", source_kind="xplane", claims=claims, owns_host=lambda host: True,
                       list_hosts=list_hosts, read_host=_read_host, suffix=SUFFIX, warm_up=_warm_up)
