"""A prediction judges each distinct op once and copies its record for every instruction like it:
the same report, op for op, as judging every instruction on its own."""

from __future__ import annotations

import pytest

from audit.optable import predicted
from audit.orchestration.pipeline import analyse_hlo

from conftest import shared_fixture

TPU_DUMP = "tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"


def test_records_copied_from_a_judged_twin_are_the_ones_judged_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    judged_alone: list[int] = []
    path = shared_fixture(TPU_DUMP)
    firsts: list[int] = []
    remember = predicted.PredictedRecords.__init__

    def counting(self: predicted.PredictedRecords, judge_one):  # type: ignore[no-untyped-def]
        remember(self, lambda r: firsts.append(1) or judge_one(r))

    monkeypatch.setattr(predicted.PredictedRecords, "__init__", counting)
    copied = analyse_hlo(path, hardware="v6e").to_json()["ops"]
    assert len(firsts) < len(copied) / 2  # the Llama layers' ops are judged once
    monkeypatch.setattr(predicted.PredictedRecords, "__init__", remember)

    def every_row(self: predicted.PredictedRecords, r, beside):  # type: ignore[no-untyped-def]
        judged_alone.append(1)
        return self.judge_one(r)

    monkeypatch.setattr(predicted.PredictedRecords, "judged", every_row)
    alone = analyse_hlo(path, hardware="v6e").to_json()["ops"]
    assert judged_alone and copied == alone


def test_a_layer_repeated_is_judged_once() -> None:
    from audit.optable.join import Joined

    calls: list[str] = []
    records = predicted.PredictedRecords(lambda r: calls.append(r.name) or _record_of(r))
    rows = [Joined(key=f"0/f.{i}", program_id=0, module="m", name=f"f.{i}", instr_found=True, opcode="fusion",
                   category="loop fusion", framework_op="jit(f)/tanh", source="f.py:3", shape="f32[8]",
                   fingerprint="ab", devices=1, occurrences=1.0, measured_s=None, measured_s_max=None, self_s=None,
                   cost=None, expectation=None) for i in range(3)]
    out = [records.judged(r, None) for r in rows]
    assert calls == ["f.0"] and [o.name for o in out] == ["f.0", "f.1", "f.2"] and [o.key for o in out] == \
        ["0/f.0", "0/f.1", "0/f.2"]


def _record_of(r):  # type: ignore[no-untyped-def]
    from audit.optable.judge import judge_table
    from audit.costmodel.chips.catalog import lookup

    return judge_table([r], lookup("v6e"))[0]


def test_fingerprints_remembered_for_shared_shapes_are_the_ones_computed_fresh() -> None:
    from audit.parsers import hlo_category
    from audit.parsers.hlo_files import load_hlo_file

    module = load_hlo_file(shared_fixture(TPU_DUMP))
    remembered = [hlo_category.fingerprint(module, i) for _, i in module.instructions()]
    assert len(module.__dict__["_fingerprints"]) < len(remembered)  # copies share their entry
    for (_, instr), known in zip(module.instructions(), remembered):
        shapes = tuple(f[1].shape for name in instr.operands if (f := module.find(name)) is not None)
        assert known == hlo_category._fingerprint(module, instr, shapes)
