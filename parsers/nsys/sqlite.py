"""Nsight Systems SQLite exports (`nsys export --type sqlite`) of a JAX program -> one `HostProfile`.

The export keeps NVTX push/pop ranges on CPU threads (`NVTX_EVENTS`, eventType 59, text inline
or through `StringIds`), the CUDA API calls that launched GPU work (`CUPTI_ACTIVITY_KIND_RUNTIME`)
and the GPU work itself (`CUPTI_ACTIVITY_KIND_KERNEL`, `_MEMCPY`, `_MEMSET`), tied by
`correlationId`; `TARGET_INFO_GPU` describes the GPUs. A range is projected onto the GPU as
nsys-jax's recipe does: from the first GPU operation launched inside it (or inside a range it
contains) to the end of the last. The HLO is not in the export: it comes from the dump folder
given beside it (`--hlo DIR`, what `--xla_dump_to` wrote, as `.hlo.pb` protos).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from ...base.errors import InputError
from ..wire.compressed import xz_bytes
from .archive import device_rows
from .nvtx import has_xla_ranges, read_xla_ranges
from ..profile.model import HostFiles, HostProfile, ProfileReader
from ...base.ranges import MAX_TIMESTAMP_NS as MAX_NS, time_range, whole_int64

HEADER = b"SQLite format 3\x00"
PUSH_POP = 59  # NVTX_EVENTS.eventType of a push/pop range
_GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
_NEEDED = ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME")
_ID_COLUMNS = (".globalTid", ".deviceId")


def looks_like_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(len(HEADER)) == HEADER
    except OSError:
        return False


def read_sqlite_host(path: str, hlo_dir: str | None) -> tuple[HostProfile, dict[int, bytes]]:
    """One Nsight Systems SQLite export: op events, steps, devices, and the programs' HLO from `hlo_dir`.

    **Raises:** `InputError` when the file is not an Nsight export, lacks the XLA ranges or the
    CUDA activity, or no HLO dump is given for the programs it ran.
    """
    if not looks_like_sqlite(Path(path)):
        raise InputError("not an SQLite file (no SQLite header): truncated, or not an nsys export", path=path)
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"not a readable SQLite file ({exc})", path=path) from None
    try:
        tables = _tables(db, path)
        missing = [t for t in _NEEDED if t not in tables]
        if missing:
            raise InputError(f"an SQLite file without {' and '.join(missing)}: not an Nsight Systems export "
                             "with NVTX and CUDA traced (nsys profile --trace=cuda,nvtx; nsys export --type sqlite)",
                             path=path)
        ranges = _ranges(db, tables)
        if ranges.empty or not has_xla_ranges(ranges["name"]):
            raise InputError("no XLA module or thunk ranges (TSL:XlaModule / TSL:Thunk) in NVTX_EVENTS: profile a "
                             "JAX program with NVTX tracing on (nsys profile --trace=cuda,nvtx)", path=path)
        gpu = [t for t in _GPU_TABLES if t in tables]
        if not gpu:
            raise InputError("no GPU activity (CUPTI_ACTIVITY_KIND_KERNEL) in this export: the XLA ranges cannot "
                             "be placed on the GPU timeline (nsys profile --trace=cuda)", path=path)
        ranges = _project(db, ranges, gpu)
        devices = device_rows(_device_frame(db, tables))
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:  # pandas wraps the errors of its queries
        raise InputError(f"cannot read the SQLite export ({str(exc).rsplit(': ', 1)[-1]}): truncated or damaged",
                         path=path) from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"TARGET_INFO_GPU holds a value that is not a device fact ({exc})", path=path) from None
    finally:
        db.close()
    by_cuda = {d["local"]: d["global"] for d in devices}
    ranges["device"] = ranges.pop("cuda_device").map(lambda d: by_cuda.get(int(d), int(d))).astype(np.int64)
    host = Path(path).name.removesuffix(".sqlite")
    found = read_xla_ranges(ranges, host)
    protos = programs_from_dump(hlo_dir, found.module_names, path)
    stats = {f"/device:GPU:{d['global']}": d["stats"] for d in devices}
    profile = HostProfile(
        host=host, path=path, platform="gpu", events=found.events, steps=found.steps, modules={},
        module_names=found.module_names, step_source=found.step_source, device_stats=stats,
        device_names={d["global"]: f"{d['stats'].get('device_name', 'GPU')} (device {d['global']})" for d in devices},
        warnings=list(found.warnings))
    return profile, protos


def _tables(db: sqlite3.Connection, path: str) -> set[str]:
    try:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise InputError(f"not a readable SQLite file ({exc})", path=path) from None


def _ranges(db: sqlite3.Connection, tables: set[str]) -> pd.DataFrame:
    """Push/pop ranges with a parent (the innermost range containing each on its thread)."""
    text = "COALESCE(n.text, s.value)" if "StringIds" in tables else "n.text"
    join = "LEFT JOIN StringIds AS s ON n.textId = s.id" if "StringIds" in tables else ""
    # Only XLA's ranges and NCCL's: they nest among themselves as they did among all ranges, and
    # GPU work launched inside another range still lands in the XLA range around it.
    frame = pd.read_sql_query(
        f"SELECT n.start AS start, n.end AS end, {text} AS name, n.globalTid AS tid FROM NVTX_EVENTS AS n {join} "
        f"WHERE n.eventType = {PUSH_POP} AND n.end IS NOT NULL AND ({text} LIKE '%XlaModule:#%' OR {text} LIKE "
        f"'%Thunk:#%' OR {text} LIKE 'NCCL:%')", db)
    frame = integer_columns(frame, {"start": "NVTX_EVENTS.start", "end": "NVTX_EVENTS.end",
                                    "tid": "NVTX_EVENTS.globalTid"})
    frame["name"] = frame["name"].fillna("").astype(str)
    frame = frame.sort_values(["tid", "start", "end"], ascending=[True, True, False], kind="stable")
    frame = frame.reset_index(drop=True)
    frame["range_id"] = np.arange(len(frame), dtype=np.int64)
    frame["parent_id"] = _parents(frame["tid"].to_numpy(), frame["start"].to_numpy(), frame["end"].to_numpy())
    return frame


def integer_columns(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """`frame` with `columns` (frame column -> the export's TABLE.column) as int64, nulls dropped; times
    (every column but ids) within a profiling session.

    SQLite lets any cell hold text or a real; an export writes integers in these columns.
    **Raises:** `InputError` naming the table and column for a value that is not a 64-bit integer,
    or a time beyond a 10-hour session.
    """
    frame = frame.dropna(subset=list(columns))
    for name, column in columns.items():
        values = pd.to_numeric(frame[name], errors="coerce")
        if values.dtype.kind != "i":  # text or reals among the integers
            whole = pd.Series(whole_int64(values.to_numpy(np.float64, na_value=np.nan)), index=values.index)
            if not whole.all():
                raise InputError(f"{column} holds {str(frame[name][~whole].iloc[0])[:40]!r}, not an "
                                 "integer: the export is damaged")
            values = values.astype(np.int64)
        if not column.endswith(_ID_COLUMNS) and not ((values >= 0) & (values <= MAX_NS)).all():
            time_range(int(values[(values < 0) | (values > MAX_NS)].iloc[0]), "time (ns)", column, high=MAX_NS)
        frame = frame.assign(**{name: values})
    return frame


def _parents(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Innermost enclosing range per range, for ranges sorted by (thread, start, -end)."""
    parent = np.full(len(start), -1, dtype=np.int64)
    stack: list[int] = []
    for i, (t, s, e) in enumerate(zip(tid.tolist(), start.tolist(), end.tolist())):
        while stack and (tid[stack[-1]] != t or end[stack[-1]] < e or end[stack[-1]] <= s):
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return parent


def _project(db: sqlite3.Connection, ranges: pd.DataFrame, gpu_tables: list[str]) -> pd.DataFrame:
    """Each range's projection onto the GPU: first start and last end of the GPU work launched in it."""
    union = " UNION ALL ".join(f"SELECT start, end, deviceId, correlationId FROM {t}" for t in gpu_tables)
    work = pd.read_sql_query(
        f"SELECT r.globalTid AS tid, r.start AS launch, g.start AS gstart, g.end AS gend, g.deviceId AS device "
        f"FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN ({union}) AS g ON g.correlationId = r.correlationId", db)
    gpu = f"{'/'.join(gpu_tables)}"
    work = integer_columns(work, {"tid": "CUPTI_ACTIVITY_KIND_RUNTIME.globalTid",
                                  "launch": "CUPTI_ACTIVITY_KIND_RUNTIME.start", "gstart": f"{gpu}.start",
                                  "gend": f"{gpu}.end", "device": f"{gpu}.deviceId"})
    n = len(ranges)
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n, -1, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    device = np.full(n, -1, dtype=np.int64)
    innermost = _innermost(ranges, work)
    hit = innermost >= 0
    np.minimum.at(lo, innermost[hit], work["gstart"].to_numpy(np.int64)[hit])
    np.maximum.at(hi, innermost[hit], work["gend"].to_numpy(np.int64)[hit])
    np.add.at(count, innermost[hit], 1)
    device[innermost[hit]] = work["device"].to_numpy(np.int64)[hit]
    parent = ranges["parent_id"].to_numpy()
    depth = _depth(parent)
    for level in range(int(depth.max(initial=0)), 0, -1):  # children before parents
        child = np.nonzero((depth == level) & (count > 0) & (parent >= 0))[0]
        up = parent[child]
        np.minimum.at(lo, up, lo[child])
        np.maximum.at(hi, up, hi[child])
        np.add.at(count, up, count[child])
        unset = device[up] < 0
        device[up[unset]] = device[child[unset]]
    launched = count > 0
    first_device = int(device[launched][0]) if launched.any() else 0
    return pd.DataFrame({
        "name": ranges["name"], "start_ns": np.where(launched, lo, -1), "dur_ns": np.where(launched, hi - lo, 0),
        "range_id": ranges["range_id"], "parent_id": parent, "gpu_ops": count,
        "cuda_device": np.where(device >= 0, device, first_device),
    })


def _innermost(ranges: pd.DataFrame, work: pd.DataFrame) -> np.ndarray:
    """For each launch, the innermost range on its thread containing its CPU time (-1: none).

    Ranges on a thread nest, so the innermost one containing a time is the last range starting
    at or before it, or, if that one has ended, the nearest of its ancestors still open.
    """
    out = np.full(len(work), -1, dtype=np.int64)
    threads = ranges.groupby("tid", sort=False).indices
    for tid, rows in work.groupby("tid", sort=False).indices.items():
        mine = threads.get(tid)
        if mine is None:
            continue
        starts = ranges["start"].to_numpy()[mine]
        ends = ranges["end"].to_numpy()[mine]
        ids = ranges["range_id"].to_numpy()[mine]
        local = pd.Series(np.arange(len(mine)), index=ids)
        parent = local.reindex(ranges["parent_id"].to_numpy()[mine]).fillna(-1).to_numpy(np.int64)
        times = work["launch"].to_numpy()[rows]
        k = np.searchsorted(starts, times, side="right") - 1
        for _ in range(64):  # one step up the nesting per pass; ranges nest a few levels deep
            open_ = k >= 0
            open_[open_] = ends[k[open_]] < times[open_]
            if not open_.any():
                break
            k[open_] = parent[k[open_]]
        found = k >= 0
        out[rows[found]] = ids[k[found]]
    return out


def _depth(parent: np.ndarray) -> np.ndarray:
    depth = np.zeros(len(parent), dtype=np.int64)
    current = parent.copy()
    for _ in range(64):
        has = current >= 0
        if not has.any():
            break
        depth[has] += 1
        current = np.where(has, parent[np.where(has, current, 0)], -1)
    return depth


def _device_frame(db: sqlite3.Connection, tables: set[str]) -> pd.DataFrame:
    """TARGET_INFO_GPU (and the XLA device names of TARGET_INFO_NVTX_CUDA_DEVICE) as nsys-jax's
    device metadata lays them out: (table, column) pairs."""
    if "TARGET_INFO_GPU" not in tables:
        return pd.DataFrame()
    gpus = pd.read_sql_query("SELECT * FROM TARGET_INFO_GPU", db)
    frame = pd.DataFrame({("TARGET_INFO_GPU", c): gpus[c] for c in gpus.columns})
    if "TARGET_INFO_NVTX_CUDA_DEVICE" in tables and "id" in gpus.columns:
        names = pd.read_sql_query("SELECT name, deviceId FROM TARGET_INFO_NVTX_CUDA_DEVICE", db)
        by_id = dict(zip(names["deviceId"], names["name"]))
        frame[("TARGET_INFO_NVTX_CUDA_DEVICE", "name")] = gpus["id"].map(by_id)
        frame[("TARGET_INFO_NVTX_CUDA_DEVICE", "deviceId")] = gpus["id"]
    return frame


def programs_from_dump(hlo_dir: str | None, names: dict[int, str], path: str) -> dict[int, bytes]:
    """HloProto bytes of each program from an `--xla_dump_to` folder: `module_NNNN.NAME.*after_optimizations
    .hlo.pb` (or `.pb.xz`). **Raises:** `InputError` when no folder is given or it lacks them all."""
    if not names:
        return {}
    wanted = ", ".join(f"{n} (program {p})" for p, n in sorted(names.items()))
    if hlo_dir is None:
        raise InputError(f"an Nsight Systems export holds no HLO: pass the dump folder of {wanted} with --hlo DIR "
                         "(what XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_proto wrote)", path=path)
    root = Path(hlo_dir)
    if not root.is_dir():
        raise InputError("--hlo must be the folder XLA dumped the HLO to", path=hlo_dir)
    files = [p for p in root.iterdir() if p.is_file()]
    protos: dict[int, bytes] = {}
    for program, module in names.items():
        pattern = re.compile(rf"^module_0*{program}\.{re.escape(module)}\.(?:.*[._])?after_optimizations"
                             r"\.hlo\.pb(?:\.xz)?$")
        match = next((p for p in sorted(files) if pattern.match(p.name)), None)
        if match is None:
            continue
        data = match.read_bytes()
        try:
            protos[program] = xz_bytes(data, match.name) if match.name.endswith(".xz") else data
        except InputError as exc:
            raise InputError(exc.message, path=hlo_dir) from None
    if not protos:
        text = any(p.name.endswith("after_optimizations.txt") for p in files)
        raise InputError(f"no HLO proto after optimization for {wanted} in this folder"
                         + (" (only text dumps: add --xla_dump_hlo_as_proto)" if text else ""), path=hlo_dir)
    return protos


def _claims(path: Path) -> bool:
    return path.is_file() and (path.suffix.lower() == ".sqlite" or looks_like_sqlite(path))


READER = ProfileReader(
    name="nsys-sqlite", source_kind="nsys", claims=_claims,
    owns_host=lambda host: _claims(Path(host)), list_hosts=lambda path, run: HostFiles(run=path.name, paths=[str(path)]),
    read_host=lambda host, data, hlo_dir: read_sqlite_host(host, hlo_dir), separate_clocks=True)
