"""The compiled XLine decoders (C, numba) read what protobuf reads, and refuse what it cannot be."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.parsers.xplane import xline as xd
from audit.parsers.xplane.schema import XLine
from conftest import ROOT, skip_without_c

BUILDS = [pytest.param("c", marks=skip_without_c), "numba"]
_I64 = st.integers(-(1 << 63), (1 << 63) - 1)
_U64 = st.integers(1, (1 << 64) - 1)
# Non-zero values: the profiler writes XStat's value as a oneof, so even a zero is on the wire; this
# schema's plain proto3 fields leave zeros out, and a stat with no value reads as ABSENT.
_VALUES = st.one_of(
    st.fixed_dictionaries({"int64_value": _I64.filter(bool)}), st.fixed_dictionaries({"uint64_value": _U64}),
    st.fixed_dictionaries({"double_value": st.floats(allow_nan=False).filter(bool)}),
    st.fixed_dictionaries({"str_value": st.text(min_size=1, max_size=12)}),
    st.fixed_dictionaries({"bytes_value": st.binary(min_size=1, max_size=12)}),
    st.fixed_dictionaries({"ref_value": _U64}))
_STATS = st.lists(st.tuples(st.integers(0, 6), _VALUES), max_size=4)
_EVENTS = st.lists(st.tuples(_I64, _I64, _I64, _STATS), max_size=8)
_SLOTS = 3  # stat metadata ids 1, 2, 3 are read into slots 0, 1, 2; 0, 4, 5, 6 are skipped


def _slot_of() -> np.ndarray:
    slot_of = np.full(6, -1, np.int64)
    slot_of[1:4] = np.arange(_SLOTS)
    return slot_of


def _expected(stats: list[tuple[int, dict[str, object]]], slot: int) -> dict[str, object] | None:
    """The slot's value as protobuf reads it: the last stat of that metadata id wins."""
    found = [value for sid, value in stats if sid == slot + 1]
    return found[-1] if found else None


@pytest.mark.parametrize("build", BUILDS)
@settings(max_examples=60, deadline=None)
@given(ts=_I64.filter(lambda t: t >= 0), events=_EVENTS)
def test_every_build_reads_the_fields_protobuf_wrote(build: str, ts: int, events: list) -> None:
    # GIVEN any line protobuf writes: any ids, offsets, durations and stat values
    line = XLine(timestamp_ns=ts, name="thread")
    for mid, off, dur, stats in events:
        ev = line.events.add(metadata_id=mid, offset_ps=off, duration_ps=dur)
        for sid, value in stats:
            ev.stats.add(metadata_id=sid, **value)  # type: ignore[arg-type]
    data = line.SerializeToString()
    # WHEN a compiled build decodes its bytes
    d = xd.decode_line(data, _slot_of(), _SLOTS, build)
    # THEN each event and each slot holds protobuf's value, in 64 raw bits
    assert d.timestamp_ns == ts
    assert list(d.metadata_id) == [e[0] for e in events]
    assert list(d.offset_ps) == [e[1] for e in events] and list(d.duration_ps) == [e[2] for e in events]
    for i, (_, _, _, stats) in enumerate(events):
        for slot in range(_SLOTS):
            want = _expected(stats, slot)
            kind, raw = int(d.kind[i, slot]), int(d.value[i, slot])
            if want is None:
                assert kind == xd.ABSENT
                continue
            (field, value), = want.items()
            if field in ("str_value", "bytes_value"):
                text = value.encode() if isinstance(value, str) else value
                assert data[raw:raw + int(d.length[i, slot])] == text
                assert kind == (xd.STRING if field == "str_value" else xd.BYTES)
            elif field == "double_value":
                assert kind == xd.DOUBLE and np.int64(raw).view(np.float64) == value
            else:
                assert raw % (1 << 64) == value % (1 << 64)  # type: ignore[operator]
                assert kind == {"int64_value": xd.INT64, "uint64_value": xd.UINT64, "ref_value": xd.REF}[field]


def _real_shaped_line() -> bytes:
    """A line of four events in the shape of a real trace's: each with a string and an integer stat."""
    line = XLine(timestamp_ns=5)
    for i in range(4):
        ev = line.events.add(metadata_id=i, offset_ps=i * 10, duration_ps=3)
        ev.stats.add(metadata_id=1, str_value="fusion.1")
        ev.stats.add(metadata_id=2, int64_value=-i)
    return line.SerializeToString()


@skip_without_c
@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), cut=st.integers(0, 400), flip=st.integers(0, 255))
def test_the_c_build_refuses_damaged_bytes_without_reading_past_them(data: bytes, cut: int, flip: int) -> None:
    # GIVEN random bytes, and a real line cut short or with one byte changed
    good = _real_shaped_line()
    damaged = [data, good[:cut], good[:cut % len(good)] + bytes([flip]) + good[cut % len(good) + 1:]]
    for raw in damaged:
        # WHEN the C build decodes them THEN it returns events or raises ValueError (never crashes), and
        # every string it returns lies inside the bytes
        try:
            d = xd.decode_line(raw, _slot_of(), _SLOTS, "c")
        except ValueError:
            continue
        strings = (d.kind == xd.STRING) | (d.kind == xd.BYTES)
        ends = d.value[strings] + d.length[strings]
        assert ((d.value[strings] >= 0) & (ends <= len(raw))).all()


@skip_without_c
def test_the_c_build_refuses_output_arrays_of_the_wrong_size() -> None:
    from audit.parsers.xplane import _xline  # type: ignore[attr-defined]

    line = XLine(timestamp_ns=1)
    line.events.add(metadata_id=1, offset_ps=2, duration_ps=3)
    data = line.SerializeToString()
    mid, off, dur, occ = (np.zeros(1, np.int64) for _ in range(4))
    kind, value, length = np.zeros(2, np.uint8), np.zeros(2, np.int64), np.zeros(1, np.int32)  # length too short
    with pytest.raises(ValueError, match="disagree"):
        _xline.decode(data, _slot_of(), mid, off, dur, occ, kind, value, length)
    with pytest.raises(TypeError, match="8-byte items"):
        _xline.decode(data, _slot_of().astype(np.int32), mid, off, dur, occ, kind, value, length)
    # Too few events in the arrays for the line: malformed for this call, never written past
    assert _xline.decode(data, _slot_of(), mid[:0], off[:0], dur[:0], occ[:0], kind[:0], value[:0],
                         length[:0]) is None


@pytest.mark.slow
@pytest.mark.parametrize(("chosen", "expected"), [pytest.param("", "c", marks=skip_without_c),
                                                   pytest.param("c", "c", marks=skip_without_c),
                                                   ("numba", "numba"), ("python", "")])
def test_audit_decoder_picks_the_build(chosen: str, expected: str) -> None:
    env = {**os.environ, "AUDIT_DECODER": chosen}
    code = "from audit.parsers.xplane import xline as x; import sys; print(repr(x.build()), 'numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    build, numba_imported = out.split()
    assert build == repr(expected)
    # The C build costs no numba import (about half a second of start-up)
    assert numba_imported == str(expected == "numba")


@pytest.mark.parametrize("chosen", ["C", "numpy", "pure-python"])
def test_a_decoder_name_it_does_not_know_is_refused_not_ignored(monkeypatch, chosen: str) -> None:
    # A misspelt AUDIT_DECODER once read the trace with the default build, so a comparison of the paths
    # passed without comparing anything.
    from audit.base.errors import UsageError
    from audit.parsers.xplane import xline

    monkeypatch.setenv("AUDIT_DECODER", chosen)
    with pytest.raises(UsageError, match=f"AUDIT_DECODER={chosen}: not a decoder"):
        xline.build()


# `audit inspect` of the default run's CPU trace where numba is not installed (and, with NO_C, no C
# build either): the finder refuses those imports as a missing package would.
_WITHOUT_NUMBA = """
import os, sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name == "numba" or name.startswith("numba.") or (os.environ.get("NO_C") and name.endswith("._xline")):
            raise ImportError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
from audit.cli import main
from audit.parsers.xplane import xline
sys.argv = ["audit", *sys.argv[1:]]
try:
    code = main()
except SystemExit as exit:
    code = exit.code
print("exit", code or 0, "numba" in sys.modules, repr(xline.build()) if not code else "")
"""


@pytest.mark.slow
@pytest.mark.parametrize(("chosen", "no_c", "expected"), [
    ("", True, "exit 0 False ''"),  # no C build, no numba: read through protobuf messages
    pytest.param("", False, "exit 0 False 'c'", marks=skip_without_c),
    ("python", True, "exit 0 False ''"),
    ("numba", True, "exit 2 False"),  # named, not there: said, not replaced by another path
])
def test_without_numba_the_decoder_falls_back_to_python(tmp_path, chosen: str, no_c: bool, expected: str) -> None:
    # GIVEN an install without numba (an extra), with or without the C build
    capture = ROOT / "tests" / "data" / "captures" / "cpu-default-run"
    env = {**os.environ, "AUDIT_DECODER": chosen, "NO_C": "1" if no_c else ""}
    # WHEN audit inspects a real CPU trace
    done = subprocess.run([sys.executable, "-c", _WITHOUT_NUMBA, "inspect", str(capture / "vm.xplane.pb"), "--hardware",
                           str(capture / "cpu.toml"), "--json", str(tmp_path / "r.json"), "--quiet"],
                          env=env, capture_output=True, text=True, timeout=300)
    # THEN it reads the trace without importing numba, or, where AUDIT_DECODER names numba, says in one
    # line that numba is not installed and exits 2
    assert done.stdout.strip().splitlines()[-1:] == [expected], done.stderr[-2000:]
    if chosen == "numba":
        said = done.stderr.strip().splitlines()
        assert len(said) == 1 and said[0].startswith("audit: error: ")
        assert said[0].endswith("AUDIT_DECODER=numba: numba is not installed (pip install 'roofline-audit[numba]')")
    else:
        assert json.loads((tmp_path / "r.json").read_text())["summary"]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 127) | (128 if n > 127 else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _line_with_string_length(length: int) -> bytes:
    """A line of one event whose one stat claims a string of `length` bytes (with 3 bytes there)."""
    stat = b"\x08\x01" + b"\x2a" + _varint(length) + b"abc"
    event = b"\x08\x01" + b"\x22" + _varint(len(stat)) + stat
    return b"\x18\x05" + b"\x22" + _varint(len(event)) + event


@pytest.mark.slow
@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("length", [(1 << 64) - 11, (1 << 64) - 1, (1 << 63), (1 << 63) - 1, 4, 1 << 40])
def test_a_string_length_past_the_bytes_is_refused_at_once(build: str, length: int) -> None:
    # GIVEN a stat whose string length is past its bytes, or past 2^63 so that 64 bits read it as
    # negative (2^64-11 reads as -11 and would step the reader back eleven bytes, forever)
    data = _line_with_string_length(length)
    # WHEN either build decodes it THEN it is malformed, at once (a subprocess bounds a regression)
    code = ("import sys, numpy as np; from audit.parsers.xplane import xline as xd\n"
            "slot_of = np.array([-1, 0], np.int64)\n"
            "try:\n    xd.decode_line(bytes.fromhex(sys.argv[1]), slot_of, 1, sys.argv[2])\n"
            "except ValueError:\n    print('refused')\n")
    done = subprocess.run([sys.executable, "-c", code, data.hex(), build], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "refused", done.stderr


def _decoded_or_refused(data: bytes, build: str) -> tuple | str:
    try:
        d = xd.decode_line(data, _slot_of(), _SLOTS, build)
    except ValueError:
        return "refused"
    present = d.kind != xd.ABSENT
    return (d.timestamp_ns, d.metadata_id.tolist(), d.offset_ps.tolist(), d.duration_ps.tolist(), d.kind.tolist(),
            np.where(present, d.value, 0).tolist(), np.where(present, d.length, 0).tolist())


@skip_without_c
@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, 400), at=st.integers(0, 400), byte=st.integers(0, 255), length=st.integers(0, (1 << 64) - 1))
def test_the_c_and_numba_builds_agree_on_damaged_lines(cut: int, at: int, byte: int, length: int) -> None:
    # GIVEN a real-shaped line cut short, with one byte changed, or with a string length set to any 64 bits
    good = _real_shaped_line()
    changed = good[:at % len(good)] + bytes([byte]) + good[at % len(good) + 1:]
    for data in (good[:cut], changed, _line_with_string_length(length)):
        # WHEN both builds decode them THEN they return the same events, or both refuse them
        assert _decoded_or_refused(data, "c") == _decoded_or_refused(data, "numba")
