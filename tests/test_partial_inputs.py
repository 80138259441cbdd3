"""Inputs the tool can only partly understand give a correct partial report with a warning."""

from __future__ import annotations

import json

from audit.cli import main
from conftest import shared_fixture

HLO_WITH_UNKNOWN_OPS = """HloModule jit_mystery, entry_computation_layout={(f32[128,256]{1,0})->f32[128,256]{1,0}}

ENTRY %main (x: f32[128,256]) -> f32[128,256] {
  %x = f32[128,256]{1,0} parameter(0)
  %exp = f32[128,256]{1,0} exponential(%x)
  %mystery = f32[128,256]{1,0} custom-call(%exp), custom_call_target="my_vendor_kernel"
  ROOT %novel = f32[128,256]{1,0} frobnicate(%mystery)
}
"""


def test_hlo_dump_with_unknown_ops_lists_them_as_unknown_never_zero(tmp_path, capsys):
    path = tmp_path / "module.txt"
    path.write_text(HLO_WITH_UNKNOWN_OPS)
    assert main(["inspect", str(path), "--hardware", "h100", "--json", "-", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    ops = {o["name"]: o for o in report["ops"]}
    assert ops["exp"]["flops"] == 0 and ops["exp"]["transcendentals"] == 128 * 256
    novel = ops["novel"]
    assert novel["flops"] is None and novel["expected_s"] is None and novel["bound_by"] == "unknown"
    assert novel["reasons"]
    # An opaque kernel still reads its operand and writes its result: a lower bound, FLOPs unknown.
    mystery = ops["mystery"]
    assert mystery["flops"] is None and mystery["bytes"] == 2 * 4 * 128 * 256
    assert mystery["expected_s"] >= mystery["memory_s"] > 0 and "my_vendor_kernel" in mystery["lower_bound"]
    assert report["summary"]["unmodeled_ops"] == 2 and report["summary"]["lower_bound_ops"] == 1
    assert any("no cost model" in w and "mystery" in w for w in report["warnings"])


def test_programs_missing_from_host_metadata_are_measured_with_a_warning(tmp_path, capsys):
    from audit.parsers.xplane.schema import XSpace

    space = XSpace()
    space.ParseFromString(shared_fixture("gpu-mi300x/gemm.xplane.pb").read_bytes())
    (meta,) = [p for p in space.planes if p.name == "/host:metadata"]
    hlo_ids = {k for k, v in meta.stat_metadata.items() if v.name in ("Hlo Proto", "HLO Proto")}
    for md in meta.event_metadata.values():
        kept = [s for s in md.stats if s.metadata_id not in hlo_ids]
        del md.stats[:]
        md.stats.extend(kept)
    path = tmp_path / "nohlo.xplane.pb"
    path.write_bytes(space.SerializeToString())
    assert main(["inspect", str(path), "--json", "-", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ops"] and all(o["measured_s"] > 0 for o in report["ops"])
    assert all(o["flops"] is None and o["bound_by"] == "unknown" for o in report["ops"])
    assert any("no HLO" in w for w in report["warnings"])
