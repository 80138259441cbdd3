"""What crosses the links is the logical array: neither the tile padding of a TPU layout nor the
memory space of its buffer changes the bytes a collective sends.

A TPU buffer `bf16[5,100]{1,0:T(8,128)(2,1)}` holds 1,000 bytes of data in an 8x128 tile of
2,048 bytes; HBM traffic is the buffer's, the wire carries the 1,000. libtpu's collective
matmuls permute buffers in on-chip VMEM (`S(1)`, as in `data/hlo/tpu-aot/`), which cost no HBM
traffic at all but still cross the links.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.costmodel.ops.module import cost_module
from audit.parsers.hlo.text import parse_hlo_text

PADDED = "bf16[5,100]{1,0:T(8,128)(2,1)}"
LOGICAL, BUFFER = 5 * 100 * 2, 8 * 128 * 2
PAIRS = "source_target_pairs={{0,1},{1,0}}"
SEND_PAIRS = 'frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,0}}"}'


def _module(body: str, params: str = "") -> str:
    return (f"HloModule m, num_partitions=2\n\nENTRY main {{\n  p = {PADDED} parameter(0)\n{params}"
            f"{body}}}\n")


CASES = {
    "collective-permute": (_module(f"  ROOT c = {PADDED} collective-permute(p), {PAIRS}\n"), "c", LOGICAL),
    "collective-permute-start": (_module(
        f"  s = ({PADDED}, {PADDED}, u32[], u32[]) collective-permute-start(p), {PAIRS}\n"
        f"  ROOT c = {PADDED} collective-permute-done(s)\n"), "s", LOGICAL),
    "collective-broadcast": (_module(f"  ROOT c = {PADDED} collective-broadcast(p), replica_groups={{{{0,1}}}}\n"),
                             "c", LOGICAL),
    "send": (_module(f"  tok = token[] after-all()\n  s = ({PADDED}, u32[], token[]) send(p, tok), channel_id=1, "
                     f"{SEND_PAIRS}\n  ROOT d = token[] send-done(s), channel_id=1\n"), "s", LOGICAL),
    "ragged-all-to-all": (_module(
        f"  ROOT c = {PADDED} ragged-all-to-all(p, o, i1, i2, i3, i4), replica_groups={{{{0,1}}}}\n",
        f"  o = {PADDED} parameter(1)\n" + "".join(f"  i{n} = s32[2]{{0}} parameter({n + 1})\n" for n in range(1, 5))),
        "c", LOGICAL / 2),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_the_wire_carries_the_logical_array_and_hbm_the_padded_buffer(kind):
    text, name, sent = CASES[kind]
    cost = cost_module(parse_hlo_text(text))[name]
    assert cost.collective is not None
    assert cost.collective.bytes == LOGICAL  # before: 2,048, the padded tile
    assert cost.comm_bytes == sent
    assert cost.bytes_read == BUFFER


def test_a_permute_of_an_on_chip_buffer_still_crosses_the_links():
    # As libtpu writes the permutes of a collective matmul on v6e: both buffers in VMEM.
    vmem = "bf16[512,8192]{1,0:T(8,128)(2,1)S(1)}"
    text = (f"HloModule m, num_partitions=2\n\nENTRY main {{\n  p = {vmem} parameter(0)\n"
            f"  s = ({vmem}, {vmem}, u32[]{{:S(2)}}, u32[]{{:S(2)}}) collective-permute-start(p), channel_id=3, "
            f"{PAIRS}\n  ROOT d = {vmem} collective-permute-done(s)\n}}\n")
    cost = cost_module(parse_hlo_text(text))["s"]
    assert cost.comm_bytes == 512 * 8192 * 2  # before: 0, and the transfer was priced as a bare latency
    assert cost.bytes == 0  # no HBM traffic


def test_every_permute_of_a_real_v6e_collective_matmul_sends_its_buffer():
    # libtpu's collective matmuls on v6e pass VMEM buffers round the ring (data/hlo/tpu-aot).
    path = Path(__file__).parent / "data" / "hlo" / "tpu-aot" / "fsdp_mlp.tpu-v6e-2x4.after_optimizations.txt"
    module = parse_hlo_text(path.read_text())
    costs = cost_module(module)
    sent = {}
    for _, instr in module.instructions():
        if instr.opcode == "collective-permute-start":
            buffer = module.find(instr.operands[0])
            assert buffer is not None
            sent[instr.name] = (costs[instr.name].comm_bytes, buffer[1].shape)
    on_chip = [name for name, (_, shape) in sent.items() if shape.memory_space == 1]
    assert len(on_chip) > len(sent) / 2  # most of them: before, all these sent nothing
    assert all(comm == shape.byte_size > 0 for comm, shape in sent.values())
