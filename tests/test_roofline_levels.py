"""The roofline as a lower bound: cache-aware memory roofs, bytes touched not bytes named,
and expected times that real ops (the MI300X captures) do not beat."""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache, partial

import pytest
from hypothesis import given, settings, strategies as st

from audit.costmodel.chips.catalog import CATALOG
from audit.costmodel.chips.hardware import Hardware, MemoryLevel, Quantity
from audit.costmodel.ops.module import cost_module
from audit.costmodel.costs import OpCost
from audit.costmodel.roofline import expect
from audit.parsers.hlo.files import load_hlo_file
from audit.parsers.hlo.text import parse_hlo_text
from conftest import shared_fixture

FASTER = 1.25


def costs_of(text: str):
    module = parse_hlo_text(text)
    return cost_module(module)


# --- bytes touched ---------------------------------------------------------------------------

def test_fused_input_sliced_after_a_convert_is_read_only_where_sliced():
    # The default run's dynamic-slice_convert_fusion: convert the whole array, keep 1/8 of it.
    costs = costs_of("""HloModule m
%f (p: bf16[8,128,1024], i: s32[]) -> bf16[1,128,1024] {
  %p = bf16[8,128,1024] parameter(0)
  %i = s32[] parameter(1)
  %c = f32[8,128,1024] convert(%p)
  %z = s32[] constant(0)
  %ds = f32[1,128,1024] dynamic-slice(%c, %i, %z, %z), dynamic_slice_sizes={1,128,1024}
  ROOT %o = bf16[1,128,1024] convert(%ds)
}
ENTRY %main {
  %a = bf16[8,128,1024] parameter(0)
  %b = s32[] parameter(1)
  ROOT %fu = bf16[1,128,1024] fusion(%a, %b), kind=kLoop, calls=%f
}""")
    slab = 128 * 1024 * 2
    assert costs["fu"].bytes_read == slab + 4 and costs["fu"].bytes_written == slab


def test_disjoint_slices_of_a_fused_input_add_up():
    costs = costs_of("""HloModule m
%f (p: f32[1024]) -> (f32[128], f32[128]) {
  %p = f32[1024] parameter(0)
  %n = f32[1024] negate(%p)
  %s0 = f32[128] slice(%n), slice={[0:128]}
  %s1 = f32[128] slice(%n), slice={[512:640]}
  ROOT %t = (f32[128], f32[128]) tuple(%s0, %s1)
}
ENTRY %main {
  %a = f32[1024] parameter(0)
  ROOT %fu = (f32[128], f32[128]) fusion(%a), kind=kLoop, calls=%f
}""")
    assert costs["fu"].bytes_read == 2 * 128 * 4 and costs["fu"].bytes_written == 2 * 128 * 4


def test_in_place_scatter_fusion_touches_only_the_updated_rows():
    # The default run's wrapped_scatter: f32[1,128,1024] updated at 128 single elements.
    costs = costs_of("""HloModule m
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%f (p0: f32[1,128,1024], p1: s32[128,3], p2: f32[128,1,1,1]) -> f32[1,128,1024] {
  %p0 = f32[1,128,1024] parameter(0)
  %p1 = s32[128,3] parameter(1)
  %p2 = f32[128,1,1,1] parameter(2)
  ROOT %sc = f32[1,128,1024] scatter(%p0, %p1, %p2), update_window_dims={1,2,3}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1,2}, index_vector_dim=1, to_apply=%add
}
ENTRY %main {
  %x = f32[1,128,1024] parameter(0)
  %i = s32[128,3] parameter(1)
  %u = f32[128,1,1,1] parameter(2)
  ROOT %fu = f32[1,128,1024] fusion(%x, %i, %u), kind=kLoop, calls=%f
}""")
    updates = 128 * 4
    assert costs["fu"].bytes_read == 128 * 3 * 4 + updates + updates  # indices, updates, touched region
    assert costs["fu"].bytes_written == updates


def test_broadcast_input_is_read_once():
    costs = costs_of("""HloModule m
%f (p: f32[256], q: f32[64,256]) -> f32[64,256] {
  %p = f32[256] parameter(0)
  %q = f32[64,256] parameter(1)
  %b = f32[64,256] broadcast(%p), dimensions={1}
  ROOT %m = f32[64,256] multiply(%b, %q)
}
ENTRY %main {
  %a = f32[256] parameter(0)
  %c = f32[64,256] parameter(1)
  ROOT %fu = f32[64,256] fusion(%a, %c), kind=kLoop, calls=%f
}""")
    assert costs["fu"].bytes_read == 256 * 4 + 64 * 256 * 4


def test_gather_reads_each_row_at_most_once():
    # 4096 lookups into a 100-row table: the output is 41x the table, the reads are the table.
    costs = costs_of("""HloModule m
ENTRY %main {
  %t = f32[100,64] parameter(0)
  %i = s32[4096,1] parameter(1)
  ROOT %g = f32[4096,64] gather(%t, %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}
}""")
    assert costs["g"].bytes_read == 100 * 64 * 4 + 4096 * 4 and costs["g"].bytes_written == 4096 * 64 * 4


# --- cache-aware memory roofs ----------------------------------------------------------------

def _op(flops: float, read: float, written: float = 0.0, dtype: str = "bf16") -> OpCost:
    return OpCost(flops=flops, bytes_read=read, bytes_written=written, dtype=dtype)


@pytest.mark.parametrize("name, level, capacity", [("h100", "L2", 50e6), ("a100", "L2", 40e6),
                                                   ("mi300x", "Infinity Cache", 256e6)])
def test_gpu_working_set_in_the_last_level_cache_is_judged_at_its_bandwidth(name, level, capacity):
    hw = CATALOG[name]
    cache = hw.caches[0]
    assert (cache.name, cache.capacity_bytes.value) == (level, capacity)
    assert cache.bytes_per_s.value > hw.hbm_bytes_per_s.value and cache.bytes_per_s.note
    held = expect(_op(0, capacity / 2), hw)
    assert held.memory_level == level and held.memory_s == pytest.approx(capacity / 2 / cache.bytes_per_s.value)
    spilled = expect(_op(0, capacity * 2), hw)
    assert spilled.memory_level == "HBM"
    assert spilled.memory_s == pytest.approx(capacity * 2 / hw.hbm_bytes_per_s.value)


def test_tpu_memory_roof_stays_hbm():
    for hw in (h for h in CATALOG.values() if h.kind == "tpu"):
        assert hw.caches == () and expect(_op(0, 1e3), hw).memory_level == "HBM"


def _cpu_like(levels: list[tuple[float, float]], dram: float = 5e9) -> Hardware:
    q = lambda v, u: Quantity(v, u, "calibrated", "test")  # noqa: E731
    return Hardware(name="cpu", kind="cpu", vendor="test", peak_flops={"f32": q(1e11, "FLOP/s")},
                    hbm_bytes_per_s=q(dram, "B/s"), op_overhead_s=q(1e-6, "s"),
                    caches=tuple(MemoryLevel(f"L{i + 1}", q(c, "B"), q(bw, "B/s"))
                                 for i, (c, bw) in enumerate(levels)))


def test_a_level_never_judges_slower_than_a_larger_one_that_also_holds_the_data():
    hw = _cpu_like([(32e3, 1e11), (1e6, 2e11), (32e6, 1e11)])  # L1 measured slower than L2
    assert hw.memory_level(1e3)[0] == "L2"  # the faster roof of the two that hold it
    assert hw.memory_level(2e6)[0] == "L3" and hw.memory_level(1e9)[0] == "DRAM"
    assert hw.memory_level(None)[0] == "DRAM"


# --- the expected time is a lower bound built from its roof terms ----------------------------

HARDWARE = [CATALOG["h100"], CATALOG["mi300x"], CATALOG["tpu-v6e"], CATALOG["tpu-v2"],
            _cpu_like([(32e3, 2e11), (1e6, 1.5e11), (32e6, 1e11)])]


def _check_bound(cost: OpCost, hw: Hardware, scale_bytes: float, scale_flops: float) -> None:
    base = expect(cost, hw)
    if base.expected_s is None:
        return
    grown = expect(dataclasses.replace(cost, bytes_read=cost.bytes_read * scale_bytes,
                                       bytes_written=cost.bytes_written * scale_bytes,
                                       flops=cost.flops * scale_flops), hw)
    for e in (base, grown):
        terms = [t for t in (e.compute_s, e.memory_s, e.comm_s) if t is not None]
        assert e.expected_s >= 0 and all(e.expected_s >= t for t in terms)
    assert grown.expected_s >= base.expected_s * (1 - 1e-12)


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 1e15), st.floats(0, 1e11), st.floats(0, 1e11), st.sampled_from(["bf16", "f32", "s8"]),
       st.floats(1, 1e3), st.floats(1, 1e3), st.sampled_from(range(len(HARDWARE))))
def test_expected_time_is_non_negative_monotone_and_above_every_roof_term(
        flops, read, written, dtype, scale_bytes, scale_flops, which):
    _check_bound(_op(flops, read, written, dtype), HARDWARE[which], scale_bytes, scale_flops)


@lru_cache(maxsize=None)
def _real_costs() -> dict[str, list[OpCost]]:
    """Every handler's costs on the real H100 MaxText and v6e Llama dumps, by opcode."""
    by_opcode: dict[str, list[OpCost]] = {}
    for path in ("gpu-h100-maxtext/module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb",
                 "tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"):
        module = load_hlo_file(shared_fixture(path))
        costs = cost_module(module)
        for name, c in costs.items():
            found = module.find(name)
            if found is not None and c.modeled and c.bytes is not None and c.flops is not None:
                by_opcode.setdefault(found[1].opcode, []).append(c)
    return by_opcode


def test_every_handler_on_real_programs_gives_a_lower_bound_monotone_in_bytes_and_flops():
    by_opcode = _real_costs()
    assert len(by_opcode) >= 20
    for costs in by_opcode.values():
        for c in costs[:25]:
            for hw in HARDWARE[:3]:
                for scale_bytes, scale_flops in ((1.0, 1.0), (2.0, 1.0), (1.0, 3.0), (1e3, 1e3)):
                    _check_bound(c, hw, scale_bytes, scale_flops)


# --- real captures ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mi300x_ops():
    import json
    import subprocess
    import sys

    ops = []
    for capture in ("gemm", "attention", "elementwise", "conv3d-8gpu"):
        done = subprocess.run([sys.executable, "-m", "audit", "inspect",
                               str(shared_fixture(f"gpu-mi300x/{capture}.xplane.pb")), "--quiet", "--json", "-"],
                              capture_output=True, text=True, check=True)
        ops += [o for o in json.loads(done.stdout)["ops"]
                if not o["container"] and o["measured_s"] and o["expected_s"]]
    return ops


@pytest.mark.slow
def test_real_mi300x_ops_do_not_beat_their_roofs(mi300x_ops):
    # 57 timed kernels over the four captures. Judged against the trace's memory_bandwidth (half
    # the datasheet) and HBM only, 26 of them ran over 1.25x faster than the roofline; against the
    # datasheet HBM and the 256 MB Infinity Cache, with fused inputs counted as far as they are
    # read, none beats max(compute, memory) by that much.
    assert len(mi300x_ops) == 57
    roof = lambda o: max(t for t in (o["compute_s"], o["memory_s"], o["comm_s"]) if t is not None)  # noqa: E731
    assert [o["name"] for o in mi300x_ops if o["measured_s"] < roof(o) / FASTER] == []
    # With the per-kernel overhead (1 us, XLA's GPU model figure, below the shortest real
    # kernel) added, none runs faster either: with the former 5 us estimate, 5 tiny kernels did.
    faster = [o for o in mi300x_ops if o["measured_s"] < o["expected_s"] / FASTER]
    assert faster == []
    levels = {o["memory_level"] for o in mi300x_ops}
    assert levels <= {"HBM", "Infinity Cache"} and "Infinity Cache" in levels
    assert all(math.isfinite(o["expected_s"]) for o in mi300x_ops)


def test_calc_names_the_memory_level_and_keeps_hbm_bandwidth_its_meaning():
    from audit.costmodel.napkin import matmul

    small = matmul(1024, 1024, 1024, "bf16", CATALOG["h100"])  # 6.3 MB: fits the 50 MB L2
    assert small["memory_level"] == "L2" and small["memory_source"] == "catalog"
    assert small["hbm_bytes_per_s"] == 3.35e12 and small["memory_bytes_per_s"] == CATALOG["h100"].caches[0].bytes_per_s.value
    assert small["memory_s"] == pytest.approx(small["bytes"] / small["memory_bytes_per_s"])
    large = matmul(16384, 16384, 16384, "bf16", CATALOG["h100"])
    assert large["memory_level"] == "HBM" and large["memory_bytes_per_s"] == 3.35e12


def _generic(opcode: str, rows: int):
    from audit.parsers.hlo.model import Computation, Instruction, Module, Shape

    shape = Shape("f32", (rows, 64))
    a = Instruction("a", "parameter", shape, attributes=(("parameter_number", "0"),))
    b = Instruction("b", "parameter", shape, attributes=(("parameter_number", "1"),))
    x = Instruction("x", opcode, shape, ("a", "b"))
    return cost_module(Module("m", {"main": Computation("main", [a, b, x])}, "main"))["x"]


def test_every_opcode_handler_gives_an_expected_time_that_grows_with_its_arrays():
    from audit.costmodel.ops.module import HANDLERS

    covered = set(_real_costs())
    for opcode in HANDLERS:
        sizes = [_generic(opcode, rows) for rows in (8, 512, 65536)]
        if not all(c.modeled and c.bytes is not None and c.flops is not None for c in sizes):
            continue  # needs attributes a bare instruction lacks; the real programs cover it
        covered.add(opcode)
        for hw in HARDWARE:
            times = []
            for c in sizes:
                e = expect(c, hw)
                terms = [t for t in (e.compute_s, e.memory_s, e.comm_s) if t is not None]
                assert e.expected_s is None or (e.expected_s >= 0 and all(e.expected_s >= t for t in terms))
                times.append(e.expected_s)
            if None not in times:
                assert times == sorted(times), (opcode, hw.name, times)
    sugared = {f"{kind}-start": partial(_async_start, kind)
               for kind in ("reduce-scatter", "all-to-all", "ragged-all-to-all")}
    for opcode, make in (("dot", _dot), ("convolution", _convolution), ("fft", _fft), *sugared.items()):
        covered.add(opcode)
        for hw in HARDWARE:
            times = [expect(make(n), hw).expected_s for n in (8, 256, 4096)]
            assert all(t is not None and t >= 0 for t in times) and times == sorted(times), (opcode, hw.name)
    # ragged-all-to-all needs its offset and size operands: its handler is tested with them.
    assert set(HANDLERS) - covered <= {"ragged-all-to-all"}, set(HANDLERS) - covered


def _fft(n: int) -> OpCost:
    return cost_module(parse_hlo_text(f"""HloModule f
ENTRY e {{
  a = c64[{n},1024]{{1,0}} parameter(0)
  ROOT f = c64[{n},1024]{{1,0}} fft(a), fft_type=FFT, fft_length={{1024}}
}}"""))["f"]


def _async_start(kind: str, n: int) -> OpCost:
    from test_async_spellings import module_text

    return cost_module(parse_hlo_text(module_text(kind, "sugared", n)))["s"]


def _dot(n: int) -> OpCost:
    return costs_of(f"""HloModule m
ENTRY %main {{
  %x = bf16[{n},512] parameter(0)
  %w = bf16[512,{n}] parameter(1)
  ROOT %d = bf16[{n},{n}] dot(%x, %w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}""")["d"]


def _convolution(n: int) -> OpCost:
    return costs_of(f"""HloModule m
ENTRY %main {{
  %x = f32[4,{n},16] parameter(0)
  %k = f32[3,16,32] parameter(1)
  ROOT %c = f32[4,{n},32] convolution(%x, %k), window={{size=3 pad=1_1}}, dim_labels=b0f_0io->b0f
}}""")["c"]


@pytest.mark.slow
def test_reports_state_each_cache_roof_with_its_source(tmp_path):
    import subprocess
    import sys

    md = tmp_path / "r.md"
    done = subprocess.run([sys.executable, "-m", "audit", "inspect",
                           str(shared_fixture("gpu-mi300x/gemm.xplane.pb")), "--markdown", str(md), "--top", "3"],
                          capture_output=True, text=True, check=True)
    assert "HBM 5.30 TB/s [catalog], Infinity Cache 256 MB at 17.2 TB/s [catalog]" in done.stdout
    assert "Infinity Cache 256 MB at 17.2 TB/s (catalog)" in md.read_text()
