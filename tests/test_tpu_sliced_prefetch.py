"""TPU constructs of real libtpu programs that were left unpriced: memory space assignment's sliced
prefetch (`slice-start`/`slice-done` into VMEM, then a `ConcatBitcast` naming the slices as one buffer)
and XLA's windowed-einsum loops, which count by 2. The program is tests/data/hlo/tpu-aot (libtpu's own
compile for a v6e 2x4; README there)."""

from __future__ import annotations

import pytest

from audit.costmodel.ops.loops import trip_count
from audit.costmodel.ops.module import cost_module
from audit.orchestration.pipeline import analyse_hlo
from audit.parsers.hlo.files import load_hlo_file
from conftest import ROOT

V6E = ROOT / "tests/data/hlo/tpu-aot/fsdp_mlp.tpu-v6e-2x4.after_optimizations.txt"


@pytest.fixture(scope="module")
def module():
    return load_hlo_file(V6E)


def test_every_op_of_the_real_v6e_program_is_priced():
    report = analyse_hlo(V6E, hardware="tpu-v6e:2x4").to_json()
    assert report["summary"]["unmodeled_ops"] == 0
    assert not [w for w in report["warnings"] if "no cost model" in w or "no known trip count" in w]


def test_a_sliced_prefetch_reads_its_slice_from_hbm_and_writes_nothing_there(module):
    costs = cost_module(module)
    starts = [(i, costs[i.name]) for _, i in module.instructions() if i.opcode == "slice-start"]
    assert len(starts) == 18
    for instr, c in starts:
        dest = instr.shape.tuple_shapes[1]
        assert dest.memory_space == 1  # the slice lands in VMEM
        assert c.bytes_read == dest.elements * dest.bits // 8 and c.bytes_written == 0
    dones = [costs[i.name] for _, i in module.instructions() if i.opcode == "slice-done"]
    concats = [costs[i.name] for _, i in module.instructions() if i.custom_call_target == "ConcatBitcast"]
    assert len(dones) == 18 and len(concats) == 7
    assert all(c.bytes_read == c.bytes_written == 0 and c.flops == 0 for c in dones + concats)


def test_a_windowed_einsum_loop_counting_by_two_has_its_trip_count(module):
    loops = [i for _, i in module.instructions() if i.opcode == "while"]
    counted = {i.name: trip_count(module, i) for i in loops}
    # counter from 0 while < 4, adding 2: two trips (each runs two windows of the matmul).
    assert counted["while.10"] == (2, "inferred from the loop condition")
    assert all(n is not None for n, _ in counted.values())
