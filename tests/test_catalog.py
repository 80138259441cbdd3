"""The hardware catalog: the book's TPU numbers, dense datasheet GPU peaks, `--hardware` parsing."""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit.costmodel.chips.catalog import CATALOG, canonical_name, lookup, names, parse_topology
from audit.base.errors import UsageError

REQUIRED = ("tpu-v2", "tpu-v3", "tpu-v4", "tpu-v5p", "tpu-v5e", "tpu-v6e", "a100", "h100", "h100-pcie",
            "h200", "b200", "mi300x", "mi355x")

# name: (bf16 FLOP/s, int8 OP/s, HBM B/s, HBM bytes, ICI one-way B/s per link), book ch. 2 tables.
BOOK_TPUS = {
    "tpu-v3": (1.4e14, 1.4e14, 9.0e11, 32e9, 1e11),
    "tpu-v4": (2.75e14, 2.75e14, 1.2e12, 32e9, 4.5e10),
    "tpu-v5p": (4.59e14, 9.18e14, 2.8e12, 96e9, 9e10),
    "tpu-v5e": (1.97e14, 3.94e14, 8.1e11, 16e9, 4.5e10),
    "tpu-v6e": (9.20e14, 1.84e15, 1.6e12, 32e9, 9e10),
}


def test_every_required_chip_has_positive_ceilings_with_sources():
    assert set(REQUIRED) <= set(CATALOG)
    assert "cpu" in names()
    for name in REQUIRED:
        hw = CATALOG[name]
        for key, q in hw.quantities().items():
            # A per-op overhead may be 0 where no figure has a source (TPU): a ceiling may not.
            floor_ok = q.value > 0 or (key == "op_overhead_s" and q.value == 0)
            assert floor_ok and math.isfinite(q.value), (name, key)
            assert q.source == "catalog" and q.note, (name, key)
        for dtype in ("bf16", "f32", "int8"):
            assert hw.peak(dtype).value > 0
        assert hw.hbm_bytes is not None and hw.interconnect.link_bytes_per_s is not None
        json.dumps(hw.to_json(), allow_nan=False)


@pytest.mark.parametrize("name", sorted(BOOK_TPUS))
def test_tpu_numbers_are_the_books(name):
    bf16, int8, hbm_bw, hbm, ici = BOOK_TPUS[name]
    hw = CATALOG[name]
    assert hw.peak("bf16").value == bf16
    assert hw.peak("s8").value == int8
    assert hw.hbm_bytes_per_s.value == hbm_bw
    assert hw.hbm_bytes.value == hbm
    assert hw.interconnect.link_bytes_per_s.value == ici
    assert hw.interconnect.hop_latency_s.value == pytest.approx(1e-6)


def test_book_worked_examples():
    v5e, v5p = CATALOG["tpu-v5e"], CATALOG["tpu-v5p"]
    # ch. 1: a bf16 matmul on v5e is compute-bound beyond B ~ 240.
    assert 235 < v5e.ridge("bf16") < 250
    # ch. 2 exercise: a buffer under 4.5e10 * 1us = 45 kB is ICI-latency bound on v5e.
    assert v5e.interconnect.link_bytes_per_s.value * v5e.interconnect.hop_latency_s.value == pytest.approx(45e3)
    # ch. 5: v5p ICI operational intensity C / W_bidi = 4.59e14 / 1.8e11 = 2550.
    bidi = 2 * v5p.interconnect.link_bytes_per_s.value
    assert v5p.peak("bf16").value / bidi == pytest.approx(2550, rel=1e-3)
    # ch. 2: v6e has a 256x256 MXU, the others 128x128.
    assert CATALOG["tpu-v6e"].mxu_tile == (256, 256) and v5e.mxu_tile == (128, 128)


def test_gpu_peaks_are_dense_not_sparse():
    h100 = CATALOG["h100"]
    assert h100.peak("bf16").value == pytest.approx(9.89e14, rel=1e-3)  # book ch. 1
    assert h100.hbm_bytes_per_s.value == pytest.approx(3.35e12)
    # The datasheet's sparse figures are twice these: 1979 TFLOP/s bf16, 3958 fp8.
    assert h100.peak("f8e4m3fn").value == pytest.approx(2 * h100.peak("bf16").value, rel=1e-3)
    assert CATALOG["a100"].peak("bf16").value == pytest.approx(3.12e14)
    assert CATALOG["b200"].peak("bf16").value == pytest.approx(2.25e15)
    assert CATALOG["mi300x"].peak("bf16").value == pytest.approx(1.3074e15)
    assert CATALOG["mi300x"].hbm_bytes_per_s.value == pytest.approx(5.3e12)
    assert CATALOG["h200"].peak("bf16").value == h100.peak("bf16").value
    assert CATALOG["h200"].hbm_bytes.value == pytest.approx(141e9)
    assert CATALOG["a100"].peak("tf32").value == pytest.approx(CATALOG["a100"].peak("bf16").value / 2)


def test_gpu_interconnect_is_one_way_per_gpu():
    assert CATALOG["h100"].interconnect.link_bytes_per_s.value == pytest.approx(4.5e11)  # 900 GB/s bidi
    assert CATALOG["b200"].interconnect.link_bytes_per_s.value == pytest.approx(9e11)
    assert CATALOG["h100"].interconnect.domain_size == 8
    assert CATALOG["h100-pcie"].interconnect.domain_size == 2


@pytest.mark.parametrize("name, topology, wraps", [
    ("tpu-v5e", (8, 16), (False, True)),      # book: a v5e 8x16 wraps on the long axis
    ("tpu-v5e", (16, 16), (True, True)),
    ("tpu-v5e", (4, 4), (False, False)),
    ("tpu-v5p", (4, 4, 8), (True, True, True)),  # multiples of a full cube wrap
    ("tpu-v4", (2, 2, 4), (False, False, False)),  # book: a 2x2x4 has no wraparound
    ("tpu-v4", (4, 4), (False, False)),         # third axis is 1: not whole cubes
    ("h100", (8,), (False,)),
])
def test_wraparound_rules(name, topology, wraps):
    assert CATALOG[name].interconnect.wraparound(topology) == wraps


@pytest.mark.parametrize("spec, name, topology", [
    ("tpu-v5e:8x4", "tpu-v5e", (8, 4)),
    ("v5e", "tpu-v5e", ()),
    ("TPU-V4P:4x4x4", "tpu-v4", (4, 4, 4)),
    ("tpu-v5p:4x4x8", "tpu-v5p", (4, 4, 8)),
    ("h100:8", "h100", (8,)),
    ("H100-SXM:2x8", "h100", (2, 8)),
    ("nvidia-h100", "h100", ()),
    ("Trillium:16x16", "tpu-v6e", (16, 16)),
    ("mi300x:64", "mi300x", (64,)),
])
def test_lookup_parses_names_and_topologies(spec, name, topology):
    hw = lookup(spec)
    assert (hw.name, hw.topology) == (name, topology)
    assert CATALOG[name].topology == ()  # lookup never mutates the catalog


@pytest.mark.parametrize("spec, words", [
    ("tpu-v9", ["unknown hardware", "tpu-v5e", "h100", "cpu"]),
    ("tpu-v5e:8y4", ["malformed topology"]),
    ("tpu-v5e:", ["malformed topology"]),
    ("tpu-v5e:0x4", ["malformed topology"]),
    ("tpu-v5e:32x4", ["does not fit", "16x16"]),
    ("tpu-v5e:4x4x4", ["2D torus"]),
    ("tpu-v5p:16x16x32", ["does not fit"]),
    ("h100:2x16", ["domain of 8"]),
    ("h100:2x2x2", ["NODESxPER_NODE"]),
    ("a100:100000x100000", ["more than any machine"]),
])
def test_bad_specs_raise_usage_error(spec, words):
    with pytest.raises(UsageError) as info:
        lookup(spec)
    text = str(info.value)
    assert all(w in text for w in words), text
    assert "\n" not in text


def test_canonical_names_and_aliases():
    assert canonical_name("tpu-v4p") == "tpu-v4"
    assert canonical_name("h100-sxm") == "h100"
    assert canonical_name(" V6E ") == "tpu-v6e"
    assert canonical_name("AMD-MI300X") == "mi300x"
    assert canonical_name("cpu") == "cpu"


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=3),
       st.sampled_from(["tpu-v4", "tpu-v5p", "tpu-v5e", "tpu-v6e", "tpu-v3"]))
def test_tpu_topology_accepted_exactly_when_it_fits(dims, name):
    spec = f"{name}:{'x'.join(map(str, dims))}"
    hw = CATALOG[name]
    limits = sorted(hw.interconnect.max_torus, reverse=True)
    fits = len(dims) <= hw.interconnect.torus_axes and all(
        d <= m for d, m in zip(sorted(dims, reverse=True), limits))
    if fits:
        assert lookup(spec).topology == tuple(dims)
    else:
        with pytest.raises(UsageError):
            lookup(spec)


@given(st.text(max_size=12))
def test_any_topology_text_parses_or_raises_usage_error(text):
    try:
        dims = parse_topology(text)
    except UsageError:
        return
    assert dims and all(d >= 1 for d in dims) and len(dims) <= 3
    assert "x".join(map(str, dims)) == re.sub(r"\s", "", text).lower()


@given(st.lists(st.integers(min_value=1, max_value=100), min_size=1, max_size=3))
def test_topology_round_trips(dims):
    assert parse_topology("x".join(map(str, dims))) == tuple(dims)


@pytest.mark.slow
def test_a_cpu_analysis_reads_no_catalog_file() -> None:
    # The catalog's 20 TOML files cost a third of a second of start-up that a CPU profile or a CPU
    # HLO dump never uses: they are read when a chip is first looked up, not on import.
    import subprocess
    import sys
    from pathlib import Path

    hlo = Path(__file__).parent / "data" / "hlo" / "diff_base.hlo"
    code = ("import sys; from audit.library import inspect; inspect(sys.argv[1]); "
            "from audit.costmodel.chips import catalog; print(catalog._catalog.cache_info().currsize); "
            "catalog.CATALOG; print(catalog._catalog.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code, str(hlo)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "1"]
