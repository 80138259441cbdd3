"""One name per thing: no two classes of the project share a name, and one quantity reads the same in the
code and in every output while the JSON keeps its contract's field names."""

from __future__ import annotations

import ast
import json
from collections import defaultdict
from dataclasses import fields

import audit
from audit.reports.model.columns import COLUMNS
from audit.optable.record import OpRecord
from conftest import ROOT, render

PACKAGES = ("audit", "parsers", "costmodel", "reports", "workloads")
REPORT = ROOT / "tests" / "data" / "reports" / "gemm-10daea0.json"  # written by an earlier version


def class_names(source: str) -> list[str]:
    """The classes a module defines at its top level, and its capitalised type aliases (`Diff = Mapping[...]`)."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            out.append(node.name)
        elif isinstance(node, ast.Assign):
            out += [t.id for t in node.targets if isinstance(t, ast.Name) and t.id[:1].isupper() and not t.id.isupper()]
    return out


def test_no_two_classes_share_a_name():
    where: dict[str, list[str]] = defaultdict(list)
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            for name in class_names(path.read_text()):
                where[name].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_the_check_sees_a_class_and_an_alias_of_one_name():
    assert class_names("class Report:\n    pass\nReport2 = 1\nDiff = dict\nSCHEMA = 'x'\n") == ["Report", "Report2",
                                                                                              "Diff"]


def test_the_roofline_fraction_has_one_name_in_code_and_text_and_keeps_its_json_field():
    names = {f.name for f in fields(OpRecord)}
    assert {"roofline_fraction", "achievable_fraction"} <= names and not names & {"efficiency",
                                                                                 "achievable_efficiency"}
    assert COLUMNS["efficiency"].label == "Roofline fraction"
    assert COLUMNS["achievable_efficiency"].label == "Achievable fraction"
    doc = json.loads(REPORT.read_text())
    entry = next(o for o in doc["ops"] if o.get("efficiency") is not None)
    op = OpRecord.from_json(entry)
    assert op.roofline_fraction == entry["efficiency"] and op.to_json()["efficiency"] == entry["efficiency"]
    assert "roofline_fraction" not in op.to_json()
    text = render(doc, "terminal")
    assert "Roofline fraction" in text and text.lower().count("roofline fraction") >= 2  # summary and op table
    trace = audit.load(REPORT).to_trace()
    args = [e["args"] for e in trace["traceEvents"] if "verdict" in e.get("args", {})]
    assert args and all("roofline_fraction" in a and "efficiency" not in a for a in args)
