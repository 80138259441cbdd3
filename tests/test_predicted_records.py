"""A prediction judges each distinct op once and copies its record for every instruction like it:
the same report, op for op, as judging every instruction on its own."""

from __future__ import annotations

import pytest

from audit.optable import predicted
from audit.orchestration.pipeline import analyse_hlo

from conftest import shared_fixture, skip_without_c

TPU_DUMP = "tpu-v6e-llama3-8b/module_0262.jit_train_step.after_optimizations.txt"


def test_records_copied_from_a_judged_twin_are_the_ones_judged_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.optable import judge
    from audit.optable.join import join_static

    path = shared_fixture(TPU_DUMP)
    judged: list[str] = []

    def counting(module, pid, costs, expectations, devices, judge_one, alone):  # type: ignore[no-untyped-def]
        return predicted.predicted_records(module, pid, costs, expectations, devices,
                                           lambda r: judged.append(r.name) or judge_one(r), alone)

    monkeypatch.setattr(judge, "predicted_records", counting)
    copied = analyse_hlo(path, hardware="v6e").to_json()["ops"]
    assert len(judged) < len(copied) / 2  # the Llama layers' ops are judged once

    def every_row_alone(module, pid, costs, expectations, devices, judge_one, alone):  # type: ignore[no-untyped-def]
        return [judge_one(r) for r in join_static(module, pid, costs, expectations, devices)]

    monkeypatch.setattr(judge, "predicted_records", every_row_alone)
    alone = analyse_hlo(path, hardware="v6e").to_json()["ops"]
    assert len(alone) == len(copied) and copied == alone


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
    from audit.parsers.hlo import category as hlo_category
    from audit.parsers.hlo.files import load_hlo_file

    module = load_hlo_file(shared_fixture(TPU_DUMP))
    remembered = [hlo_category.fingerprint(module, i) for _, i in module.instructions()]
    assert len(module.__dict__["_fingerprints"]) < len(remembered)  # copies share their entry
    for (_, instr), known in zip(module.instructions(), remembered):
        shapes = tuple(f[1].shape for name in instr.operands if (f := module.find(name)) is not None)
        assert known == hlo_category._fingerprint(module, instr, shapes)


def test_a_record_built_from_its_values_is_the_one_its_constructor_builds() -> None:
    from dataclasses import fields

    from audit.optable.record import OpRecord, record_of

    original = _record_of(_row("f.0"))
    values = [getattr(original, f.name) for f in fields(OpRecord)]
    assert record_of(values) == OpRecord(*values) == original
    with pytest.raises(ValueError):
        record_of(values[:-1])  # a value short is refused, not a record with a field unset


def _row(name):  # type: ignore[no-untyped-def]
    from audit.optable.join import Joined

    return Joined(key=f"0/{name}", program_id=0, module="m", name=name, instr_found=True, opcode="fusion",
                  category="loop fusion", framework_op="jit(f)/tanh", source="f.py:3", shape="f32[8]",
                  fingerprint="ab", devices=1, occurrences=1.0, measured_s=None, measured_s_max=None, self_s=None,
                  cost=None, expectation=None)


@skip_without_c
def test_the_c_stamp_and_its_python_twin_make_the_same_report(monkeypatch: pytest.MonkeyPatch) -> None:
    path = shared_fixture(TPU_DUMP)
    assert predicted._stamp is not predicted._stamp_values, "the C extension was not built"
    stamped = analyse_hlo(path, hardware="v6e").to_json()["ops"]
    monkeypatch.setattr(predicted, "_stamp", predicted._stamp_values)
    assert analyse_hlo(path, hardware="v6e").to_json()["ops"] == stamped


def test_a_stamp_changes_the_identity_and_nothing_else() -> None:
    from dataclasses import fields

    from audit.optable.join import IDENTITY

    template = _record_of(_row("f.0"))
    identity = ("0/g.7", 0, "m2", "g.7", "loop fusion", "jit(g)/exp", "g.py:9", "f32[16]", "cd", 0.5, "", 4)
    for stamp in (predicted._stamp, predicted._stamp_values):
        copy = stamp(template, *identity)
        assert type(copy) is type(template)
        assert [getattr(copy, n) for n in IDENTITY] == list(identity)
        assert all(getattr(copy, f.name) == getattr(template, f.name) for f in fields(copy) if f.name not in IDENTITY)
        with pytest.raises(TypeError):
            stamp(template, *identity[:-1])
