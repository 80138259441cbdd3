"""One collective, three spellings: synchronous, `async-start(calls=)` and XLA's `X-start`/`X-done`.

XLA writes an asynchronous collective either as a real start/done pair (all-gather, all-reduce,
collective-permute), as an `async-start` wrapping the collective, or with the sugar
`all-to-all-start`/`all-to-all-done` that its parser reads as that wrapper. Whichever it
wrote, the op that carries the collective counts exactly once in the summary, the split by
bound and the top ops, and the wrapped op and the done cost nothing.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxlib import _hlo

from audit.orchestration.pipeline import analyse_hlo

GROUP = "replica_groups={{0,1,2,3,4,5,6,7}}"
PAIRS = "source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}"
ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
RAGGED_OPERANDS = "p, o, s32[8]{0} parameter(1), s32[8]{0} parameter(2), s32[8]{0} parameter(3), s32[8]{0} parameter(4)"


def _kinds(rows: int) -> dict[str, tuple[str, str, bool]]:
    """kind -> (output shape, attributes, has a reducer) for an f32[rows,1024] input on 8 devices."""
    return {
        "all-gather": (f"f32[{rows * 8},1024]", f"{GROUP}, dimensions={{0}}", False),
        "all-reduce": (f"f32[{rows},1024]", f"{GROUP}, to_apply=add", True),
        "reduce-scatter": (f"f32[{rows // 8},1024]", f"{GROUP}, dimensions={{0}}, to_apply=add", True),
        "all-to-all": (f"f32[{rows},1024]", f"{GROUP}, dimensions={{0}}", False),
        "collective-permute": (f"f32[{rows},1024]", PAIRS, False),
        "collective-broadcast": (f"f32[{rows},1024]", GROUP, False),
        "ragged-all-to-all": (f"f32[{rows},1024]", GROUP, False),
    }


KINDS = tuple(_kinds(8))
SPELLINGS = ("sync", "wrapped", "sugared")


def module_text(kind: str, spelling: str, rows: int = 8) -> str:
    """A scheduled 8-partition module running one `kind` collective on an f32[rows,1024] array."""
    out, attrs, reducer = _kinds(rows)[kind]
    inp = f"f32[{rows},1024]{{1,0}}"
    ragged = kind == "ragged-all-to-all"
    params = f"  p = {inp} parameter(0)\n" + (f"  o = {out}{{1,0}} parameter(5)\n" if ragged else "")
    operands = "p"
    wrapped_params, wrapped_operands, operand_shapes = "  q = {inp} parameter(0)\n".format(inp=inp), "q", inp
    if ragged:
        operands = "p, o, i1, i2, i3, i4"
        params += "".join(f"  i{n} = s32[8]{{0}} parameter({n})\n" for n in range(1, 5))
        wrapped_params += f"  r = {out}{{1,0}} parameter(1)\n" + "".join(
            f"  j{n} = s32[8]{{0}} parameter({n + 1})\n" for n in range(1, 5))
        wrapped_operands = "q, r, j1, j2, j3, j4"
        operand_shapes = f"{inp}, {out}{{1,0}}, s32[8]{{0}}, s32[8]{{0}}, s32[8]{{0}}, s32[8]{{0}}"
    head = ADD if reducer else ""
    if spelling == "sync":
        body = f"  ROOT c = {out}{{1,0}} {kind}({operands}), {attrs}\n"
    elif spelling == "wrapped":
        head += f"wrapped {{\n{wrapped_params}  ROOT c = {out}{{1,0}} {kind}({wrapped_operands}), {attrs}\n}}\n\n"
        body = (f"  s = (({operand_shapes}), {out}{{1,0}}) async-start({operands}), calls=wrapped\n"
                f"  ROOT d = {out}{{1,0}} async-done(s)\n")
    else:
        shape = {"all-gather": f"({inp}, {out}{{1,0}})", "all-reduce": f"{out}{{1,0}}",
                 "collective-permute": f"({inp}, {out}{{1,0}}, u32[], u32[])"}.get(
                     kind, f"(({operand_shapes}), {out}{{1,0}})")
        body = (f"  s = {shape} {kind}-start({operands}), {attrs}\n"
                f"  ROOT d = {out}{{1,0}} {kind}-done(s)\n")
    return f"HloModule m, is_scheduled=true, num_partitions=8\n\n{head}ENTRY main {{\n{params}{body}}}\n"


def _report(tmp_path, kind: str, spelling: str, rows: int = 8, hardware: str = "h100:8") -> dict:
    path = tmp_path / f"{kind}-{spelling}-{rows}.hlo"
    path.write_text(module_text(kind, spelling, rows))
    return analyse_hlo(path, hardware=hardware).to_json()


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_spelling_parses_with_xlas_own_parser(kind, spelling):
    assert _hlo.hlo_module_from_text(module_text(kind, spelling)) is not None


@pytest.mark.parametrize("kind", KINDS)
def test_the_three_spellings_give_the_same_step(tmp_path, kind):
    reports = {s: _report(tmp_path, kind, s) for s in SPELLINGS}
    sync = reports["sync"]["summary"]
    assert sync["expected_s"] > 0
    for spelling, report in reports.items():
        summary = report["summary"]
        assert summary["unmodeled_ops"] == 0, (spelling, report["warnings"])
        assert summary["expected_s"] == pytest.approx(sync["expected_s"], rel=1e-9), spelling
        assert summary["time_by_bound_s"] == pytest.approx(sync["time_by_bound_s"], rel=1e-9), spelling
        assert summary["expected_step_s"] == pytest.approx(sync["expected_step_s"], rel=1e-9), spelling
        # The top op of the step is the one carrying the collective, whatever its spelling.
        top = [o for o in report["ops"] if not o["container"]][0]
        assert top["comm_bytes"] > 0 and top["expected_s"] == pytest.approx(sync["expected_s"], rel=1e-9)
        assert len(report["collectives"]) == 1, spelling


@pytest.mark.parametrize("kind", KINDS)
def test_the_wrapped_op_and_the_done_point_at_the_carrier_and_cost_nothing(tmp_path, kind):
    for spelling in ("wrapped", "sugared"):
        ops = {o["name"]: o for o in _report(tmp_path, kind, spelling)["ops"]}
        assert ops["d"]["expected_s"] == 0.0
        assert any("carries the cost" in r for r in ops["d"]["reasons"])
        if spelling == "wrapped":
            assert ops["c"]["expected_s"] == 0.0
            assert any("costed on s" in r for r in ops["c"]["reasons"])


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(KINDS), rows=st.sampled_from([8, 64, 512, 4096]),
       hardware=st.sampled_from(["h100:8", "mi300x:8", "tpu-v5e:8", "tpu-v5p:2x2x2"]))
def test_totals_do_not_depend_on_the_spelling(tmp_path_factory, kind, rows, hardware):
    tmp = tmp_path_factory.mktemp("spellings")
    totals = [_report(tmp, kind, s, rows, hardware)["summary"] for s in SPELLINGS]
    for summary in totals:
        assert summary["unmodeled_ops"] == 0
        assert summary["expected_s"] == pytest.approx(totals[0]["expected_s"], rel=1e-9)
        assert summary["time_by_bound_s"] == pytest.approx(totals[0]["time_by_bound_s"], rel=1e-9)


def send_recv_text(rows: int = 8) -> str:
    """The ring permute of `module_text("collective-permute", ...)` spelled as send/recv."""
    shape = f"f32[{rows},1024]{{1,0}}"
    pairs = '_xla_send_recv_source_target_pairs="{{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}"'
    return (f"HloModule m, is_scheduled=true, num_partitions=8\n\nENTRY main {{\n"
            f"  p = {shape} parameter(0)\n  tok = token[] after-all()\n"
            f"  r = ({shape}, u32[], token[]) recv(tok), channel_id=1, frontend_attributes={{{pairs}}}\n"
            f"  s = ({shape}, u32[], token[]) send(p, tok), channel_id=1, frontend_attributes={{{pairs}}}\n"
            f"  rd = ({shape}, token[]) recv-done(r), channel_id=1\n"
            f"  sd = token[] send-done(s), channel_id=1\n"
            f"  ROOT g = {shape} get-tuple-element(rd), index=0\n}}\n")


def test_send_recv_parses_with_xlas_own_parser():
    assert _hlo.hlo_module_from_text(send_recv_text()) is not None


@pytest.mark.parametrize("rows", [8, 4096])
def test_send_recv_costs_what_the_permute_it_spells_costs(tmp_path, rows):
    path = tmp_path / "send_recv.hlo"
    path.write_text(send_recv_text(rows))
    spelled = analyse_hlo(path, hardware="h100:8").to_json()
    sync = _report(tmp_path, "collective-permute", "sync", rows)["summary"]
    assert spelled["summary"]["unmodeled_ops"] == 0
    assert spelled["summary"]["expected_s"] == pytest.approx(sync["expected_s"], rel=1e-9)
    ops = {o["name"]: o for o in spelled["ops"]}
    assert ops["s"]["comm_bytes"] == rows * 1024 * 4
    assert all(ops[n]["expected_s"] == 0.0 for n in ("r", "rd", "sd"))
