"""Crafted Nsight inputs and hardware files made from real ones: nsys-jax archives (members replaced,
decompression bombs, damaged tables), Nsight SQLite exports (tables dropped, values retyped) and
the catalog's own TOML files with crafted values.

Used by the hostile-input tests, the corpus script and the campaign (bench/hostile_campaign.py).
Every function is deterministic given its `random.Random`.
"""

from __future__ import annotations

import functools
import io
import lzma
import random
import re
import sqlite3
import zipfile
from pathlib import Path
from typing import Callable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hostile_hlo import PROTO_CRAFTS, craft_hlo_proto

TRACE = "nvtx_gpu_proj_trace/trace.parquet"
DEVICES = "device-metadata.parquet"
THREADS = "thread-metadata.parquet"
_AFTER = re.compile(r"^dump/module_\d+\..*after_optimizations\.hlo\.pb\.xz$")


_BOMB_STREAM = 16 << 20


@functools.lru_cache(maxsize=1)
def _zero_stream() -> bytes:
    return lzma.compress(b"\0" * _BOMB_STREAM, preset=9)


def xz_bomb(expanded_bytes: int) -> bytes:
    """An xz file of zero bytes that expands to `expanded_bytes` (16 MiB streams one after another,
    2.6 kB compressed each): 6.5 GB from 1 MB."""
    return _zero_stream() * max(1, expanded_bytes // _BOMB_STREAM)


def deflate_member(name: str, expanded_bytes: int) -> tuple[zipfile.ZipInfo, bytes]:
    """A zip member of zero bytes, deflated (about a thousand times smaller)."""
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    return info, b"\0" * expanded_bytes


def rewrite_zip(data: bytes, edit: Callable[[dict[str, tuple[zipfile.ZipInfo, bytes]]], None]) -> bytes:
    """The archive `data` with its members (name -> (info, bytes)) edited in place by `edit`."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        members = {i.filename: (i, z.read(i.filename)) for i in z.infolist()}
    edit(members)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info, body in members.values():
            z.writestr(info, body, compress_type=info.compress_type, compresslevel=9)
    return out.getvalue()


def _table(members: dict[str, tuple[zipfile.ZipInfo, bytes]], name: str) -> pd.DataFrame:
    return pq.read_table(io.BytesIO(members[name][1])).to_pandas()


def _put_table(members: dict[str, tuple[zipfile.ZipInfo, bytes]], name: str, frame: pd.DataFrame) -> None:
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame), out)
    members[name] = (members[name][0], out.getvalue())


def _trace_values(frame: pd.DataFrame, rng: random.Random) -> pd.DataFrame:
    column = rng.choice(["Projected Start", "Projected Duration", "RangeId", "ParentId", "TID", "NumGPUOps"])
    rows = [rng.randrange(len(frame)) for _ in range(rng.randint(1, 20))]
    value = rng.choice([2**63 - 1, -(2**63), -1, 2**53, float("nan"), float("inf")])
    frame[column] = frame[column].astype("float64" if isinstance(value, float) else frame[column].dtype)
    frame.loc[rows, column] = value
    return frame


def _trace_retyped(frame: pd.DataFrame, rng: random.Random) -> pd.DataFrame:
    column = rng.choice(["Projected Start", "Projected Duration", "RangeId", "ParentId", "Name", "TID"])
    frame[column] = rng.choice([frame[column].astype(str), pd.Series([None] * len(frame), dtype=object),
                                pd.Series([[1, 2]] * len(frame))])
    return frame


def _trace_names(frame: pd.DataFrame, rng: random.Random) -> pd.DataFrame:
    names = ["TSL:XlaModule:#hlo_module=x,program_id=99999999999999999999999#", "TSL:XlaModule:#hlo_module=,#",
             "TSL:Thunk:#hlo_op=#", "TSL:Thunk:#hlo_op=" + "x" * 100_000 + "#", "\x00", "TSL:XlaModule:#prefix=#"]
    rows = [rng.randrange(len(frame)) for _ in range(rng.randint(1, 50))]
    frame.loc[rows, "Name"] = [rng.choice(names) for _ in rows]
    return frame


def _trace_parents(frame: pd.DataFrame, rng: random.Random) -> pd.DataFrame:
    """Ranges that are their own parents, or parents of each other (a cycle), or of nothing."""
    rows = [rng.randrange(len(frame)) for _ in range(rng.randint(1, 50))]
    how = rng.choice(["self", "cycle", "missing"])
    if how == "self":
        frame.loc[rows, "ParentId"] = frame.loc[rows, "RangeId"].to_numpy()
    elif how == "cycle":
        frame.loc[rows, "ParentId"] = frame.loc[rows[::-1], "RangeId"].to_numpy()
    else:
        frame.loc[rows, "ParentId"] = 1e15
    return frame


_TRACE_EDITS: dict[str, Callable[[pd.DataFrame, random.Random], pd.DataFrame]] = {
    "trace-duplicate-rows": lambda f, rng: pd.concat([f, f.sample(rng.randint(1, 200), random_state=rng.randrange(1000))],
                                                     ignore_index=True),
    "trace-values": _trace_values,
    "trace-retyped": _trace_retyped,
    "trace-column-dropped": lambda f, rng: f.drop(columns=[rng.choice(["Name", "RangeId", "Projected Start", "TID"])]),
    "trace-names": _trace_names,
    "trace-parents": _trace_parents,
    "trace-empty": lambda f, rng: f.iloc[:0],
}


def _devices_edit(members: dict[str, tuple[zipfile.ZipInfo, bytes]], rng: random.Random) -> None:
    if DEVICES not in members:
        return
    frame = _table(members, DEVICES)
    column = rng.choice(list(frame.columns))
    value = rng.choice([-1, 0, 2**62, "x", None, float("nan")])
    frame[column] = pd.Series([value] * len(frame), index=frame.index, dtype=object)
    try:
        _put_table(members, DEVICES, frame)
    except (pa.ArrowException, ValueError):
        members[DEVICES] = (members[DEVICES][0], b"PAR1" + bytes(rng.randrange(256) for _ in range(64)))


def _dump_edit(members: dict[str, tuple[zipfile.ZipInfo, bytes]], craft: str, rng: random.Random) -> None:
    dumps = sorted(n for n in members if _AFTER.match(n))
    for name in rng.sample(dumps, min(len(dumps), rng.randint(1, 3))) if craft != "xz-bomb" else dumps:
        info, body = members[name]
        if craft == "xz-bomb":
            body = xz_bomb(6_500_000_000)
        elif craft == "dump-truncated":
            body = body[: rng.randrange(6, len(body))]
        elif craft == "dump-not-xz":
            body = body[:6] + bytes(rng.randrange(256) for _ in range(200))
        else:
            body = lzma.compress(craft_hlo_proto(lzma.decompress(body), rng.choice(sorted(PROTO_CRAFTS)), rng))
        members[name] = (info, body)


def patch_member(data: bytes, name: str, *, flags: int = 0, method: int | None = None) -> bytes:
    """The zip `data` with member `name`'s general-purpose flags OR-ed with `flags` (bit 0: encrypted) and
    its compression method set to `method`, in its local header and its central directory entry alike:
    what another zip tool writes, or a damaged one (Python's zip writer writes neither)."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        local = z.getinfo(name).header_offset
    at = out.find(b"PK\x01\x02")
    while at >= 0:
        size = int.from_bytes(out[at + 28:at + 30], "little")
        if out[at + 46:at + 46 + size] == name.encode():
            for flag_at, method_at in ((local + 6, local + 8), (at + 8, at + 10)):
                out[flag_at:flag_at + 2] = (int.from_bytes(out[flag_at:flag_at + 2], "little") | flags).to_bytes(2, "little")
                if method is not None:
                    out[method_at:method_at + 2] = method.to_bytes(2, "little")
            break
        at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


ZIP_MEMBER_CRAFTS: tuple[str, ...] = ("member-encrypted", "member-method-unknown", "member-method-bzip2",
                                      "member-method-lzma", "member-stored-deflated")


def craft_zip_member(data: bytes, craft: str, rng: random.Random) -> bytes:
    """An nsys-jax archive one of whose members (the trace, a table, a dump) is encrypted, compressed by a
    method no reader here has, or stated under a method its bytes are not in."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = sorted(i.filename for i in z.infolist() if not i.is_dir())
    name = rng.choice([n for n in (TRACE, DEVICES, THREADS) if n in names] + [n for n in names if _AFTER.match(n)][:2])
    if craft == "member-encrypted":
        return patch_member(data, name, flags=1)
    method = {"member-method-unknown": rng.choice([99, 97, 6, 65535]), "member-method-bzip2": zipfile.ZIP_BZIP2,
              "member-method-lzma": zipfile.ZIP_LZMA, "member-stored-deflated": zipfile.ZIP_DEFLATED}[craft]
    return patch_member(data, name, method=method)


NSYS_CRAFTS: tuple[str, ...] = (*_TRACE_EDITS, "xz-bomb", "zip-bomb", "dump-truncated", "dump-not-xz", "dump-proto",
                                "devices", "threads-garbage", "member-missing")


def craft_nsys(data: bytes, craft: str, rng: random.Random) -> bytes:
    """The nsys-jax archive `data` with one kind of damage a truncation, an edit or an attacker makes."""
    def edit(members: dict[str, tuple[zipfile.ZipInfo, bytes]]) -> None:
        if craft in _TRACE_EDITS:
            _put_table(members, TRACE, _TRACE_EDITS[craft](_table(members, TRACE), rng))
        elif craft == "zip-bomb":
            members[TRACE] = deflate_member(TRACE, 300 << 20)
        elif craft == "devices":
            _devices_edit(members, rng)
        elif craft == "threads-garbage" and THREADS in members:
            members[THREADS] = (members[THREADS][0], rng.choice([b"", b"PAR1", b"x" * 100]))
        elif craft == "member-missing":
            members.pop(rng.choice([TRACE, DEVICES, THREADS, *sorted(n for n in members if _AFTER.match(n))]), None)
        elif craft.startswith(("xz-", "dump-")):
            _dump_edit(members, craft, rng)
    return rewrite_zip(data, edit)


# ---- Nsight SQLite exports -------------------------------------------------------------------

_SQL_TABLES = ("NVTX_EVENTS", "StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
               "TARGET_INFO_GPU", "TARGET_INFO_NVTX_CUDA_DEVICE")
_SQL_EDITS: dict[str, list[str]] = {
    "table-dropped": [f"DROP TABLE {t}" for t in _SQL_TABLES],
    "values-text": ["UPDATE NVTX_EVENTS SET start = 'x' WHERE rowid % 7 = 0", "UPDATE NVTX_EVENTS SET end = 'later'",
                    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 'gpu'", "UPDATE TARGET_INFO_GPU SET smCount = 'x'",
                    "UPDATE NVTX_EVENTS SET globalTid = 'x'", "UPDATE StringIds SET value = x'00ff'"],
    "values-extreme": ["UPDATE NVTX_EVENTS SET end = 9223372036854775807 WHERE rowid % 5 = 0",
                       "UPDATE NVTX_EVENTS SET start = -9223372036854775808 WHERE rowid % 3 = 0",
                       "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1000",
                       "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 9223372036854775807",
                       "UPDATE TARGET_INFO_GPU SET clockRate = -1, smCount = 0, memoryBandwidth = 9223372036854775807",
                       "UPDATE NVTX_EVENTS SET globalTid = -1"],
    "values-null": ["UPDATE NVTX_EVENTS SET end = NULL", "UPDATE NVTX_EVENTS SET textId = NULL, text = NULL",
                    "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = NULL", "UPDATE TARGET_INFO_GPU SET name = NULL",
                    "UPDATE NVTX_EVENTS SET eventType = NULL"],
    "strings-missing": ["DELETE FROM StringIds WHERE id % 2 = 0", "DELETE FROM StringIds"],
    "duplicate-rows": ["INSERT INTO NVTX_EVENTS SELECT * FROM NVTX_EVENTS",
                       "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",
                       "INSERT INTO TARGET_INFO_GPU SELECT * FROM TARGET_INFO_GPU"],
    "ranges-crossed": ["UPDATE NVTX_EVENTS SET start = end, end = start"],
}
SQLITE_CRAFTS: tuple[str, ...] = (*_SQL_EDITS, "pages-damaged")


def craft_sqlite(path: Path, craft: str, rng: random.Random) -> None:
    """Damage the SQLite export at `path` in place: SQL edits, or bytes of its pages flipped."""
    if craft == "pages-damaged":
        data = bytearray(path.read_bytes())
        for _ in range(rng.randint(1, 40)):
            i = rng.randrange(100, len(data))
            data[i] ^= rng.randint(1, 255)
        path.write_bytes(bytes(data))
        return
    db = sqlite3.connect(path)
    try:
        for statement in rng.sample(_SQL_EDITS[craft], rng.randint(1, len(_SQL_EDITS[craft]))):
            try:
                db.execute(statement)
            except sqlite3.Error:
                pass  # a table an earlier edit dropped
        db.commit()
    finally:
        db.close()


# ---- hardware files --------------------------------------------------------------------------

_TOML_VALUES = ["0", "-1", "nan", "inf", "-inf", "1e308", "1e-308", "9223372036854775807", "99999999999999999999999",
                '"x"', "[]", "{}", "true", '""', "[1, 2, 3]", "-0.0"]
TOML_CRAFTS: tuple[str, ...] = ("value", "unit", "kind", "key-deleted", "key-unknown", "deep", "long", "duplicate",
                                "table-retyped", "count-fraction", "integer-out-of-range", "caches-many")


def craft_toml(text: str, craft: str, rng: random.Random) -> str:
    """A catalog hardware file's text with one crafted value, key or structure."""
    lines = text.splitlines()
    numbers = [i for i, line in enumerate(lines) if "value = " in line]
    keyed = [i for i, line in enumerate(lines) if re.match(r"^\w+ = ", line)]
    i = rng.choice(numbers or keyed)
    if craft == "value":
        lines[i] = re.sub(r"value = [^,]+", "value = " + rng.choice(_TOML_VALUES), lines[i])
    elif craft == "unit":
        lines[i] = re.sub(r'unit = "[^"]*"', 'unit = ' + rng.choice(['"GB/s"', '"x"', '""', "1"]), lines[i])
    elif craft == "kind":
        lines[i] = re.sub(r'kind = "[^"]*"', 'kind = ' + rng.choice(['"guess"', '""', "3"]), lines[i])
    elif craft == "key-deleted":
        del lines[rng.choice(keyed)]
    elif craft == "key-unknown":
        lines.insert(rng.choice(keyed), rng.choice(["bogus = 1", "peak = { value = 1 }", "\u00e9 = 2"]))
    elif craft == "deep":
        depth = rng.choice([100, 5000])
        at = next((k for k, line in enumerate(lines) if line.startswith("notes = ")), None)
        deep = "notes = " + rng.choice(["[" * depth + "]" * depth, "{a=" * depth + "1" + "}" * depth])
        if at is None:
            lines.insert(1, deep)
        else:
            lines[at] = deep
    elif craft == "long":
        lines.insert(1, 'vendor = "' + "v" * rng.choice([10_000, 5_000_000]) + '"')
    elif craft == "duplicate":
        lines.insert(rng.choice(keyed) + 1, lines[rng.choice(keyed)])
    elif craft == "count-fraction":  # figures that count whole things (SMs, tile rows) at a fraction or beyond
        counts = [k for k, line in enumerate(lines) if re.match(r"^(compute_units|gemm_tile_\w+) = ", line)] or [i]
        k = rng.choice(counts)
        lines[k] = re.sub(r"value = [^,]+", "value = " + rng.choice(["0.5", "1e-300", "1e300", "inf", "7.25"]), lines[k])
    elif craft == "integer-out-of-range":  # counts of devices, links, axes: negative, zero or past any machine
        ints = [k for k, line in enumerate(lines) if re.match(r"^\w+ = -?\d+$", line)] or [i]
        k = rng.choice(ints)
        lines[k] = lines[k].split("=")[0] + "= " + rng.choice(["-1", "0", "-9223372036854775808", "9223372036854775807",
                                                                "1048577"])
    elif craft == "caches-many":  # more levels than a chip has (63 passed the reader; only the C walk refused them)
        start = next((k for k, line in enumerate(lines) if line == "[[caches]]"), None)
        if start is not None:
            end = next((k for k in range(start + 1, len(lines)) if not lines[k].strip()), len(lines))
            lines[start:end] = lines[start:end] * rng.choice([9, 63, 200])
    elif craft == "table-retyped":
        j = next((k for k, line in enumerate(lines) if line.startswith("[")), len(lines) - 1)
        lines[j] = rng.choice(["[[peak_flops]]", "[interconnect.x.y]", "[caches]", "[]"])
    return "\n".join(lines) + "\n"

