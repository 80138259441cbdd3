"""Compressed, tabular and embedded inputs that are hostile: decompression is bounded, tables are
type- and range-checked, and each ends in one line naming the member, table or program."""

from __future__ import annotations

import json
import lzma
import random
import shutil
import time
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from hostile_archives import (DEVICES, TRACE, craft_nsys, craft_sqlite, deflate_member, patch_member, rewrite_zip,
                              xz_bomb)
from hostile_hlo import craft_hlo_proto

from audit.cli import main
from audit.base.errors import ExitCode, InputError
from audit.parsers.wire.compressed import MAX_RATIO, RATIO_FLOOR_BYTES, expansion_limit, xz_bytes
from conftest import read_hosts
from audit.parsers.xplane.schema import XSpace
from conftest import shared_fixture

ARCHIVE = "gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc0.zip"
STEP_DUMP = "dump/module_0040.pjit__wrapped_step_fn.sm_8.0_gpu_after_optimizations.hlo.pb.xz"


def _inspect(path: Path, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["inspect", str(path), "-q", *extra])
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return code, err


def _crafted_archive(tmp_path: Path, craft: str, seed: int = 0) -> Path:
    path = tmp_path / "crafted.zip"
    path.write_bytes(craft_nsys(shared_fixture(ARCHIVE).read_bytes(), craft, random.Random(seed)))
    return path


def test_an_xz_bomb_is_refused_after_the_limit_not_expanded():
    bomb = xz_bomb(6_500_000_000)  # 6.5 GB in 1 MB, as found in a crafted nsys-jax dump
    assert len(bomb) < 1_100_000
    start = time.perf_counter()
    with pytest.raises(InputError) as caught:
        xz_bytes(bomb, "dump/m.hlo.pb.xz")
    limit = expansion_limit(len(bomb))
    assert limit == MAX_RATIO * len(bomb) and limit > RATIO_FLOOR_BYTES
    assert str(caught.value) == (f"dump/m.hlo.pb.xz: {len(bomb):,} compressed bytes expand to more than {limit:,} "
                                 f"({MAX_RATIO} times as many): refused as a decompression bomb (real dumps expand 8 "
                                 "to 30 times)")
    assert time.perf_counter() - start < 30  # stopped at 200 MB, not 6.5 GB


def test_real_dumps_expand_as_before():
    """Multi-stream xz and the real dumps, whose ratios (8 to 30) stay far below the limit."""
    with zipfile.ZipFile(shared_fixture(ARCHIVE)) as z:
        data = z.read(STEP_DUMP)
    assert xz_bytes(data, STEP_DUMP) == lzma.decompress(data)
    two = lzma.compress(b"first") + b"\0" * 4 + lzma.compress(b"second")
    assert xz_bytes(two, "two.xz") == b"firstsecond"
    with pytest.raises(InputError, match=r"^t.xz is not valid xz \(.*\): truncated or damaged$"):
        xz_bytes(data[:1000], "t.xz")


def test_an_nsys_jax_dump_that_is_an_xz_bomb_exits_2_naming_the_member(tmp_path, capsys):
    code, err = _inspect(_crafted_archive(tmp_path, "xz-bomb"), capsys)
    assert code == ExitCode.INPUT
    assert err.startswith(f"audit: error: {tmp_path / 'crafted.zip'}: {STEP_DUMP}: ") and "decompression bomb" in err


def test_a_zip_member_that_would_expand_past_the_limit_is_refused_before_reading(tmp_path, capsys):
    path = tmp_path / "bomb.zip"
    path.write_bytes(rewrite_zip(shared_fixture(ARCHIVE).read_bytes(),
                                 lambda m: m.update({"nvtx_gpu_proj_trace/trace.parquet":
                                                     deflate_member("nvtx_gpu_proj_trace/trace.parquet", 300 << 20)})))
    code, err = _inspect(path, capsys)
    assert code == ExitCode.INPUT
    assert "nvtx_gpu_proj_trace/trace.parquet: " in err and "refused as a decompression bomb" in err


@pytest.mark.parametrize("member", [TRACE, DEVICES])
@pytest.mark.parametrize(("flags", "method", "words"), [
    (1, None, "is encrypted"),  # RuntimeError from the zip reader: exit 4
    (0, 99, "is compressed by method 99"),  # NotImplementedError: exit 4
    (0, zipfile.ZIP_DEFLATED, "is not valid deflate data"),  # stored bytes read as deflate: zlib.error, exit 4
    (0, zipfile.ZIP_BZIP2, "is not valid bzip2 data"),
    (0, zipfile.ZIP_LZMA, "is not valid lzma data"),
])
def test_a_damaged_zip_member_exits_2_naming_it(tmp_path, capsys, member, flags, method, words):
    # GIVEN the real archive with one member encrypted or stated under a compression method its bytes are not in
    data = shared_fixture(ARCHIVE).read_bytes()
    with zipfile.ZipFile(shared_fixture(ARCHIVE)) as z:
        assert z.getinfo(member).compress_type == zipfile.ZIP_STORED  # as nsys-jax writes its tables
    path = tmp_path / "damaged.zip"
    path.write_bytes(patch_member(data, member, flags=flags, method=method))
    # WHEN it is inspected THEN one line names the member
    code, err = _inspect(path, capsys)
    assert code == ExitCode.INPUT and member in err and words in err, err


def test_repeated_ranges_in_the_trace_exit_2(tmp_path, capsys):
    code, err = _inspect(_crafted_archive(tmp_path, "trace-duplicate-rows"), capsys)
    assert code == ExitCode.INPUT
    assert "nvtx_gpu_proj_trace/trace.parquet: range id " in err and "is on more than one row" in err


def test_a_trace_column_of_lists_exits_2_naming_the_member(tmp_path, capsys):
    code, err = _inspect(_crafted_archive(tmp_path, "trace-retyped", seed=1), capsys)
    assert code == ExitCode.INPUT
    assert "nvtx_gpu_proj_trace/trace.parquet: a column holds values that are not range names, times or ids" in err


@pytest.mark.parametrize(("seed", "words"), [
    (2, "nvtx_gpu_proj_trace/trace.parquet: start (ns) -9223372036854775808 is out of range (-1 to 36,028,797,018,963, "
        "a 10-hour session)"),
    (4, "nvtx_gpu_proj_trace/trace.parquet: duration (ns) -1 is out of range (0 to 36,028,797,018,963, a 10-hour "
        "session)"),
    (8, "nvtx_gpu_proj_trace/trace.parquet: a column holds values that are not range names, times or ids (a duration "
        "of inf)"),
])
def test_range_times_beyond_a_session_exit_2_as_xplane_times_do(tmp_path, capsys, seed, words):
    code, err = _inspect(_crafted_archive(tmp_path, "trace-values", seed), capsys)
    assert (code, err) == (ExitCode.INPUT, f"audit: error: {tmp_path / 'crafted.zip'}: {words}")


def test_a_program_id_beyond_64_bits_exits_2_naming_the_range(tmp_path, capsys):
    code, err = _inspect(_crafted_archive(tmp_path, "trace-names"), capsys)
    assert code == ExitCode.INPUT
    assert "XLA module range 'TSL:XlaModule:#hlo_module=x,program_id=99999999999999999999999#': the program id is " \
           "beyond 64 bits" in err


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> tuple[Path, Path]:
    from test_nsys_sqlite import build_export, dump_folder

    root = tmp_path_factory.mktemp("sqlite")
    return build_export(root / "seed.sqlite", shared_fixture(ARCHIVE)), dump_folder(root / "dump",
                                                                                   shared_fixture(ARCHIVE))


@pytest.mark.parametrize(("craft", "seed", "words"), [
    ("values-text", 1, "NVTX_EVENTS.start holds 'x', not an integer: the export is damaged"),
    ("values-text", 0, "CUPTI_ACTIVITY_KIND_KERNEL.deviceId holds 'gpu', not an integer: the export is damaged"),
    ("values-extreme", 0, "NVTX_EVENTS.end: time (ns) 9223372036854775807 is out of range (0 to 36,028,797,018,963, "
                          "a 10-hour session)"),
    # Damage pandas meets in the GPU activity query (its own DatabaseError, not sqlite3's).
    ("pages-damaged", 89, "cannot read the SQLite export (database disk image is malformed): truncated or damaged"),
])
def test_sqlite_cells_that_are_not_times_or_ids_exit_2_naming_the_column(tmp_path, capsys, export, craft, seed,
                                                                         words):
    path = tmp_path / "x.sqlite"
    shutil.copy(export[0], path)
    craft_sqlite(path, craft, random.Random(seed))
    code, err = _inspect(path, capsys, "--hlo", str(export[1]))
    assert code == ExitCode.INPUT and err == f"audit: error: {path}: {words}", err


def _cpu_capture(tmp_path: Path) -> Path:
    @jax.jit
    def step(a: jax.Array) -> jax.Array:
        return jnp.tanh(a @ a).sum()

    a = jnp.ones((64, 64))
    step(a).block_until_ready()
    with jax.profiler.trace(str(tmp_path / "trace")):
        for _ in range(2):
            step(a).block_until_ready()
    return next((tmp_path / "trace").rglob("*.xplane.pb"))


def _set_stat(space: XSpace, stat_name: str, value: int) -> int:
    changed = 0
    for plane in space.planes:
        ids = {k for k, md in plane.stat_metadata.items() if md.name == stat_name}
        for line in plane.lines:
            for ev in line.events:
                for st in ev.stats:
                    if st.metadata_id in ids:
                        st.ClearField("int64_value")
                        st.uint64_value = value
                        changed += 1
    return changed


@pytest.mark.slow
@pytest.mark.parametrize(("stat", "code"), [("device_ordinal", ExitCode.INPUT), ("run_id", ExitCode.OK)])
def test_a_u64_max_stat_of_a_cpu_thunk(tmp_path, capsys, stat, code):
    """A device ordinal beyond any host is refused naming the plane; a run id is an id, kept by its bits."""
    space = XSpace()
    space.ParseFromString(_cpu_capture(tmp_path).read_bytes())
    assert _set_stat(space, stat, 2**64 - 1) > 0
    path = tmp_path / "crafted.xplane.pb"
    path.write_bytes(space.SerializeToString())
    got, err = _inspect(path, capsys)
    assert got == code, err
    if code == ExitCode.INPUT:
        assert err == (f"audit: error: {path}: plane '/host:CPU': stat device_ordinal 18446744073709551615 of a "
                       "thunk event is out of range (0 to 1,048,576)")
    else:
        assert len(read_hosts(path)[0].events) > 0


def test_embedded_hlo_with_a_deep_backend_config_loses_its_program_only(tmp_path):
    """A profile's events are kept when one program's HLO is refused; the warning says which and why."""
    space = XSpace()
    space.ParseFromString((Path(__file__).parent / "data/captures/h100-jax0.11/train-step.xplane.pb").read_bytes())
    meta = next(p for p in space.planes if p.name == "/host:metadata")
    stats = [st for md in meta.event_metadata.values() for st in md.stats
             if meta.stat_metadata[st.metadata_id].name == "Hlo Proto"]
    for st in stats:
        st.bytes_value = craft_hlo_proto(st.bytes_value, "backend-config-deep", random.Random(0))
    path = tmp_path / "crafted.xplane.pb"
    path.write_bytes(space.SerializeToString())
    out = tmp_path / "r.json"
    assert main(["inspect", str(path), "-q", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert any("could not be decoded" in w and "has a backend_config nested more than 64 deep" in w
               for w in report["warnings"]), report["warnings"]
    assert report["ops"]
