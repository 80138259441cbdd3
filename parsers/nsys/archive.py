"""nsys-jax archives (NVIDIA's Nsight Systems wrapper for JAX) -> one `HostProfile` per process.

An archive (a `.zip`, or the folder it unpacks to) holds, per process:
`nvtx_gpu_proj_trace/trace.parquet` (the XLA module and thunk ranges projected onto the GPU
timeline), `device-metadata.parquet` (Nsight's `TARGET_INFO_GPU` and `TARGET_INFO_NVTX_CUDA_DEVICE`
rows), `thread-metadata.parquet` (thread names, which tie XLA's launcher threads to devices) and
`dump/` (xz-compressed HLO protos of every program, before and after optimization).
`nsys-jax-combine` merges the archives of one job into one: a file that differs between
processes becomes a folder with one member per input archive (`trace.parquet/<input stem>`).

A host is named by a path: the archive, or `ARCHIVE#STEM` for one process of a combined one.
"""

from __future__ import annotations

import io
import lzma
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ...base.errors import InputError
from ..wire.compressed import xz_bytes, zip_member
from ..hlo.gpu_target import CONFIG_SUFFIX, config_bytes_to_stats, marker_stats
from .nvtx import RANGE_COLUMNS, has_xla_ranges, read_xla_ranges
from ..profile.model import HostFiles, HostProfile, ProfileReader, file_key
from ...base.ranges import MAX_TIMESTAMP_NS, time_range, whole_int64

TRACE = "nvtx_gpu_proj_trace/trace.parquet"
DEVICES = "device-metadata.parquet"
THREADS = "thread-metadata.parquet"
DUMP = "dump/"
MEMBER_MARK = "#"
_XZ_MAGIC = b"\xfd7zXZ\x00"
# Columns of the two layouts Nsight's nvtx_gpu_proj_trace recipe has written, mapped to RANGE_COLUMNS.
_PROJECTED = {"Name": "name", "Projected Start": "start_ns", "Projected Duration": "dur_ns", "RangeId": "range_id",
              "ParentId": "parent_id", "TID": "tid", "NumGPUOps": "gpu_ops"}
_START_END = {"Text": "name", "Start": "start_ns", "End": "end_ns", "Range ID": "range_id",
              "Parent ID": "parent_id", "TID": "tid"}
_XLA_DEVICE = re.compile(r"#global=(\d+),local=(\d+),process=(\d+)(?:,slice=(\d+))?#")
_GPU_FIELDS = {"name": "device_name", "totalMemory": "memory_size", "memoryBandwidth": "memory_bandwidth",
               "smCount": "core_count", "computeMajor": "compute_cap_major", "computeMinor": "compute_cap_minor",
               "l2CacheSize": "l2_cache_size", "chipName": "chip_name"}


class Archive:
    """The files of one nsys-jax output, in a zip or an unpacked folder, by their path inside it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        try:
            if path.is_dir():
                self.names = sorted(str(p.relative_to(path)).replace("\\", "/") for p in path.rglob("*") if p.is_file())
            else:
                self._zip = zipfile.ZipFile(path)
                self.names = sorted(i.filename for i in self._zip.infolist() if not i.is_dir())
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise InputError(f"not a readable nsys-jax archive ({exc})", path=path) from None

    def read(self, name: str) -> bytes:
        try:
            if self._zip is not None:
                return zip_member(self._zip, name)
            return (self.path / name).read_bytes()
        except (zipfile.BadZipFile, OSError, EOFError, KeyError, lzma.LZMAError) as exc:
            raise InputError(f"cannot read {name} ({exc}): the archive is truncated or damaged", path=self.path) from None

    def members(self, name: str) -> dict[str, str]:
        """`name` as one file ({"": name}) or, in a combined archive, its per-process members by stem."""
        if name in self.names:
            return {"": name}
        prefix = name + "/"
        return {n[len(prefix):]: n for n in self.names if n.startswith(prefix) and "/" not in n[len(prefix):]}


def looks_like_archive(path: Path) -> bool:
    """A zip or folder holding nsys-jax's projected NVTX trace (as one file or per process)."""
    if path.is_dir():
        return (path / TRACE).exists()
    if not path.is_file():  # a FIFO or device: reading to its end to find a zip directory never ends
        return False
    if not zipfile.is_zipfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as z:
            return any(n == TRACE or n.startswith(TRACE + "/") for n in z.namelist())
    except (zipfile.BadZipFile, OSError, EOFError):
        return False


def find_hosts(path: Path) -> list[str] | None:
    """The processes of an nsys-jax path (archive, unpacked folder, combined archive, or a folder
    of archives), as host paths; None when `path` is none of these."""
    if looks_like_archive(path):
        members = Archive(path).members(TRACE)
        if "" in members:
            return [str(path)]
        return [f"{path}{MEMBER_MARK}{stem}" for stem in sorted(members)]
    if not path.is_dir():
        return None
    inside = sorted(p for p in path.iterdir() if (p.suffix == ".zip" or p.is_dir()) and looks_like_archive(p))
    if not inside:
        return None
    hosts: list[str] = []
    for p in inside:
        hosts.extend(find_hosts(p) or [])
    return hosts


def split_host(host_path: str) -> tuple[Path, str]:
    """(archive, member stem) of a host path; the stem is "" for a one-process archive."""
    p = Path(host_path)
    if not p.exists() and MEMBER_MARK in host_path:
        archive, stem = host_path.rsplit(MEMBER_MARK, 1)
        if Path(archive).exists():
            return Path(archive), stem
    return p, ""


def is_host_path(host_path: str) -> bool:
    archive, _ = split_host(host_path)
    return archive.exists() and looks_like_archive(archive)


def _member(archive: Archive, name: str, stem: str, required: bool = True) -> bytes | None:
    members = archive.members(name)
    chosen = members.get(stem) or members.get("")
    if chosen is None:
        if required:
            raise InputError(f"no {name}{'/' + stem if stem else ''} in this nsys-jax archive", path=archive.path)
        return None
    return archive.read(chosen)


def read_archive_host(host_path: str) -> tuple[HostProfile, dict[int, bytes]]:
    """One process of an nsys-jax archive: its op events, steps, devices and programs' HLO bytes.

    **Raises:** `InputError` for a truncated, damaged or foreign archive, or one without XLA ranges.
    """
    path, stem = split_host(host_path)
    archive = Archive(path)
    ranges = _ranges(archive, stem)
    if not has_xla_ranges(ranges["name"]):
        raise InputError("holds no XLA module or thunk ranges (TSL:XlaModule / TSL:Thunk): was XLA's NVTX "
                         "annotation on, and is this a JAX program?", path=host_path)
    devices = _devices(archive, stem)
    ranges["device"] = _device_of_ranges(archive, stem, ranges, devices)
    host = _host_name(devices, path, stem)
    found = read_xla_ranges(ranges.drop(columns=["tid"]), host)
    protos, missing = _programs(archive, stem, found.module_names)
    warnings = list(found.warnings)
    if missing:
        warnings.append(f"no HLO dump after optimization in the archive for program(s) {', '.join(missing)}")
    stats = {f"/device:GPU:{d['global']}": d["stats"] for d in devices}
    profile = HostProfile(
        host=host, path=host_path, platform="gpu", events=found.events, steps=found.steps, modules={},
        module_names=found.module_names, step_source=found.step_source, device_stats=stats,
        device_names={d["global"]: f"{d['stats'].get('device_name', 'GPU')} (device {d['global']})" for d in devices},
        warnings=warnings)
    return profile, protos


def _ranges(archive: Archive, stem: str) -> pd.DataFrame:
    data = _member(archive, TRACE, stem)
    assert data is not None
    try:
        source = pq.ParquetFile(io.BytesIO(data))
        columns = set(source.schema_arrow.names)
        layout = _PROJECTED if set(_PROJECTED) - {"NumGPUOps"} <= columns else _START_END
        if not set(layout) - {"NumGPUOps"} <= columns:
            raise InputError(f"{TRACE} is not Nsight's NVTX GPU projection (columns: {', '.join(sorted(columns))})",
                             path=archive.path)
        wanted = [c for c in layout if c in columns]
        table = source.read(columns=wanted).to_pandas()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"{TRACE} cannot be read ({exc}): the archive is truncated or damaged",
                         path=archive.path) from None
    table = table.rename(columns=layout)
    try:
        out = _range_frame(table)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"{TRACE}: a column holds values that are not range names, times or ids ({exc})",
                         path=archive.path) from None
    repeated = out["range_id"][out["range_id"].duplicated()]
    if len(repeated):
        raise InputError(f"{TRACE}: range id {repeated.iloc[0]} is on more than one row ({len(repeated)} repeated "
                         "ids); Nsight numbers each range once, so the file is damaged or joined from several",
                         path=archive.path)
    assert set(out.columns) >= set(RANGE_COLUMNS) - {"device"}
    return out


def _range_frame(table: pd.DataFrame) -> pd.DataFrame:
    if "end_ns" in table.columns:
        table["dur_ns"] = table.pop("end_ns") - table["start_ns"]
    table = table.dropna(subset=["range_id"])
    # A range that launched nothing has no projection (NaN start): -1, as RANGE_COLUMNS says.
    out = pd.DataFrame({
        "name": table["name"].fillna("").astype(str),
        "start_ns": _int64s(table["start_ns"].fillna(-1), "start"),
        "dur_ns": _int64s(table["dur_ns"].fillna(0), "duration"),
        "range_id": _int64s(table["range_id"], "range id"),
        "parent_id": _int64s(table["parent_id"].fillna(-1), "parent id"),
        "tid": _int64s(table["tid"].fillna(-1), "thread id"),
        "gpu_ops": _int64s(table["gpu_ops"].fillna(-1), "GPU op count") if "gpu_ops" in table else -1,
    })
    for column, what, low in (("start_ns", "start (ns)", -1), ("dur_ns", "duration (ns)", 0)):
        bad = out[column][(out[column] < low) | (out[column] > MAX_TIMESTAMP_NS)]
        if len(bad):
            time_range(int(bad.iloc[0]), what, TRACE, low=low, high=MAX_TIMESTAMP_NS)
    return out


def _int64s(values: pd.Series, what: str) -> np.ndarray:
    """Whole numbers of 64 bits. **Raises:** `ValueError` for text, a fraction, an infinity or more bits."""
    numbers = pd.to_numeric(values, errors="raise")
    if numbers.dtype.kind != "i":
        floats = numbers.to_numpy(np.float64)
        bad = ~whole_int64(floats)
        if bad.any():
            raise ValueError(f"a {what} of {float(floats[bad][0])!r}")
    return numbers.to_numpy(np.int64)


def _devices(archive: Archive, stem: str) -> list[dict[str, Any]]:
    """Each GPU the process drove: its global XLA device id, process index and trace stats.
    An archive from before nsys-jax wrote device metadata (mid-2024) describes its GPU in the
    dump: XLA's gpu_target_config, else the target in the dumps' file names."""
    data = _member(archive, DEVICES, stem, required=False)
    if data is None:
        return [{"global": 0, "process": None, "local": 0, "stats": _dump_target(archive, stem)}]
    try:
        frame = pq.read_table(io.BytesIO(data)).to_pandas()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"{DEVICES} cannot be read ({exc})", path=archive.path) from None
    try:
        rows = device_rows(frame)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"{DEVICES} holds a value that is not a device fact ({exc})", path=archive.path) from None
    return [{**row, "stats": {**row["stats"], "described_by": "nsys-jax device metadata", "described_in": DEVICES}}
            if row["stats"] else row for row in rows]


def _dump_target(archive: Archive, stem: str) -> dict[str, Any]:
    """The GPU this process's programs were compiled for, as the dump states it ({} if it does not)."""
    dumps = [n for n in archive.names if n.startswith(DUMP)]
    pattern = re.compile(rf"^(dump/[^/]*{re.escape(CONFIG_SUFFIX)}(?:\.xz)?)(?:/(.+))?$")
    configs = [(m.group(2) or "", n) for n in dumps if (m := pattern.match(n))]
    for _, name in sorted(configs, key=lambda c: (c[0] != stem, c[0] != "", c[1])):
        stats = config_bytes_to_stats(archive.read(name), name)
        if stats is not None:
            return stats
    return marker_stats(dumps) or {}


def device_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Nsight's TARGET_INFO_GPU (and TARGET_INFO_NVTX_CUDA_DEVICE) columns -> device facts, with
    the stats named as XPlane device planes name them, so hardware detection reads both alike."""
    columns: dict[tuple[str, str], Any] = {}
    for col in frame.columns:
        table, name = (col if isinstance(col, tuple) else ("TARGET_INFO_GPU", str(col)))[:2]
        match = re.match(r"^\('(\w+)', '(\w+)'\)$", str(col))
        if match:
            table, name = match.group(1), match.group(2)
        columns[(str(table), str(name))] = col
    rows = []
    for i in range(len(frame)):
        record = {key: frame[col].iloc[i] for key, col in columns.items()}

        def get(table: str, name: str, record: dict[tuple[str, str], Any] = record) -> Any:
            return record.get((table, name))
        stats: dict[str, Any] = {"device_vendor": "NVIDIA"}
        for field, stat in _GPU_FIELDS.items():
            value = get("TARGET_INFO_GPU", field)
            if value is not None and not (isinstance(value, float) and np.isnan(value)):
                stats[stat] = value.item() if hasattr(value, "item") else value
        clock = get("TARGET_INFO_GPU", "clockRate")
        if clock is not None:
            stats["clock_rate"] = float(clock) / 1e3  # Nsight states Hz; XPlane planes state kHz
        label = str(get("TARGET_INFO_NVTX_CUDA_DEVICE", "name") or "")
        match = _XLA_DEVICE.search(label)
        cu = get("TARGET_INFO_NVTX_CUDA_DEVICE", "deviceId")
        fallback = int(cu) if cu is not None else int(frame.index[i]) if str(frame.index[i]).isdigit() else i
        rows.append({"global": int(match.group(1)) if match else fallback,
                     "local": int(match.group(2)) if match else i,
                     "process": int(match.group(3)) if match else None, "stats": stats})
    return rows or [{"global": 0, "process": None, "local": 0, "stats": {}}]


def _device_of_ranges(archive: Archive, stem: str, ranges: pd.DataFrame, devices: list[dict[str, Any]]) -> np.ndarray:
    """The device of each range: the process's only GPU, or, with several, the one whose XLA
    launcher thread (`XlaLauncher:#global=N,...#`) pushed it; other threads count as the first."""
    first = devices[0]["global"]
    if len(devices) == 1:
        return np.full(len(ranges), first, dtype=np.int64)
    data = _member(archive, THREADS, stem, required=False)
    if data is None:
        return np.full(len(ranges), first, dtype=np.int64)
    threads = pq.read_table(io.BytesIO(data)).to_pandas().reset_index()
    by_tid: dict[int, int] = {}
    for tid, name in zip(threads["TID"], threads["Name"].astype(str)):
        match = _XLA_DEVICE.search(name) if name.startswith("XlaLauncher") else None
        if match:
            by_tid[int(tid)] = int(match.group(1))
    return ranges["tid"].map(by_tid).fillna(first).to_numpy(np.int64)


def _host_name(devices: list[dict[str, Any]], path: Path, stem: str) -> str:
    processes = {d["process"] for d in devices}
    if len(processes) == 1 and None not in processes:
        return f"process {processes.pop()}"
    return stem or path.name.removesuffix(".zip")


def _programs(archive: Archive, stem: str, names: dict[int, str]) -> tuple[dict[int, bytes], list[str]]:
    """HloProto bytes of each program, from `dump/module_NNNN.NAME.*after_optimizations.hlo.pb[.xz]`."""
    dumps = [n for n in archive.names if n.startswith(DUMP)]
    protos: dict[int, bytes] = {}
    missing = []
    for program, module in names.items():
        pattern = re.compile(rf"^dump/module_0*{program}\.{re.escape(module)}\.(?:[^/]*[._])?after_optimizations"
                             r"\.hlo\.pb(?:\.xz)?(?:/(.+))?$")
        matches = [(m.group(1) or "", n) for n in dumps if (m := pattern.match(n))]
        chosen = next((n for s, n in matches if s == stem), None) or next((n for s, n in matches if not s), None) \
            or (matches[0][1] if matches else None)
        if chosen is None:
            missing.append(f"{module} ({program})")
            continue
        data = archive.read(chosen)
        if data[:6] == _XZ_MAGIC:
            try:
                data = xz_bytes(data, chosen)
            except InputError as exc:
                raise InputError(exc.message, path=archive.path) from None
        protos[program] = data
    return protos, missing



def _is_zip(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def _claims(path: Path) -> bool:
    """A zip (by name or magic: list_hosts says if it is not nsys-jax's), or a folder of its output."""
    if path.is_file():
        return path.suffix.lower() == ".zip" or _is_zip(path)
    return path.is_dir() and find_hosts(path) is not None


def list_archive_hosts(path: Path, run: str | None = None) -> HostFiles:
    """The processes of an nsys-jax archive, combined archive, unpacked folder or folder of archives.

    **Raises:** `InputError` for a zip that is not an nsys-jax archive, and for a folder that also
    holds XPlane captures (two profiles, not one run).
    """
    if path.is_file():
        if not zipfile.is_zipfile(path):
            raise InputError("not a readable zip archive: truncated or damaged", path=path)
        if not looks_like_archive(path):
            raise InputError("a zip archive without nvtx_gpu_proj_trace/trace.parquet: not an nsys-jax output",
                             path=path)
    hosts = find_hosts(path)
    if hosts is None:
        raise InputError("no nsys-jax archive here", path=path)
    _refuse_xplanes_beside(path, hosts)
    return HostFiles(run=path.name, paths=hosts)


def _refuse_xplanes_beside(path: Path, hosts: list[str]) -> None:
    """A folder of nsys-jax archives that also holds XPlane captures is two profiles, not one:
    reading only the archives would drop the captures without a word."""
    from ..profile.files import SUFFIX as XPLANE_SUFFIX

    if not path.is_dir():
        return
    folders = [Path(h) for h in hosts if Path(h).is_dir()]
    beside = sorted(str(p.relative_to(path)) for p in path.rglob(f"*{XPLANE_SUFFIX}")
                    if not any(f == p or f in p.parents for f in folders))
    if beside:
        shown = ", ".join(beside[:3]) + (f" and {len(beside) - 3} more" if len(beside) > 3 else "")
        raise InputError(f"holds nsys-jax archives and XPlane captures ({shown}): two kinds of profile, "
                         "not one run", path=path, hint="inspect each on its own: an archive, or the folder of the captures")


def _change_key(host_path: str) -> str:
    """One process of a combined archive is keyed by the archive and the process; an unpacked
    archive changes in its files, not in its folder's entry."""
    local, member = split_host(host_path)
    trace = local / TRACE
    key = file_key(str(trace) if local.is_dir() and trace.exists() else str(local))
    return f"{key}|{member}"


READER = ProfileReader(
    name="nsys-jax", source_kind="nsys", claims=_claims,
    owns_host=is_host_path, list_hosts=list_archive_hosts,
    read_host=lambda host, data, hlo_dir: read_archive_host(host), change_key=_change_key, separate_clocks=True)
