"""The GitHub Action (action.yml): what the project's workflow and the gating page pass it is what it
declares, and its shell steps run as a runner would run them, on a real workload, with `gh` recorded."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "audit-pr.yml").read_text())
GATING = ROOT / "docs" / "gating.md"
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _step(key: str, value: str) -> dict:
    return next(s for s in ACTION["runs"]["steps"] if s.get(key) == value)


def _our_step(steps: list[dict], uses: str) -> dict:
    return next(s for s in steps if str(s.get("uses", "")).startswith(uses))


def test_the_action_is_composite_and_uses_exactly_the_inputs_it_declares():
    assert ACTION["runs"]["using"] == "composite"
    declared = set(ACTION["inputs"])
    used = set(re.findall(r"\binputs\.([a-z-]+)", yaml.safe_dump([ACTION["runs"], ACTION["outputs"]])))
    assert used == declared
    assert all("shell" in s for s in ACTION["runs"]["steps"] if "run" in s)
    script = ROOT / "scripts" / "audit-pr.sh"
    assert "$ACTION_PATH/scripts/audit-pr.sh" in _step("id", "diff")["run"] and os.access(script, os.X_OK)


def test_the_projects_workflow_uses_the_action_from_its_checkout():
    steps = WORKFLOW["jobs"]["audit"]["steps"]
    ours = _our_step(steps, "./")
    assert steps.index(ours) > steps.index(_our_step(steps, "actions/checkout"))
    required = {k for k, v in ACTION["inputs"].items() if v.get("required")}
    assert required <= set(ours["with"]) <= set(ACTION["inputs"])
    assert WORKFLOW["permissions"]["pull-requests"] == "write"


def test_the_gating_page_shows_a_valid_use_and_lists_every_input():
    text = GATING.read_text()
    example = yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    ours = _our_step(example["jobs"]["audit"]["steps"], "OWNER/roofline-audit@")
    required = {k for k, v in ACTION["inputs"].items() if v.get("required")}
    assert required <= set(ours["with"]) <= set(ACTION["inputs"])
    table = text.split("| input | default | meaning |", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"^\| `([a-z-]+)` \|", table, re.M)) == set(ACTION["inputs"])


def _evaluate(text: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    """`${{ ... }}` as a runner would fill it for this action on pull request 7 of o/r."""
    known = {"github.action_path": str(ROOT), "github.event.pull_request.number": "7",
             "github.repository": "o/r", "github.token": "t"}
    known.update({f"inputs.{k}": v for k, v in inputs.items()})
    known.update({f"steps.diff.outputs.{k}": v for k, v in outputs.items()})

    def value(match: re.Match[str]) -> str:
        assert match.group(1) in known, f"an expression this test does not know: {match.group(1)}"
        return known[match.group(1)]

    return _EXPRESSION.sub(value, text)


def _run_step(step: dict, cwd: Path, inputs: dict[str, str], outputs: dict[str, str], extra_path: str = "",
              github: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AUDIT_CACHE", "XLA_FLAGS", "JAX_PLATFORMS")}
    env.update({k: _evaluate(str(v), inputs, outputs) for k, v in step.get("env", {}).items()})
    env.update(github or {})
    env["PATH"] = os.pathsep.join(p for p in (extra_path, str(Path(sys.executable).parent), env["PATH"]) if p)
    env["XDG_CACHE_HOME"] = str(cwd / ".cache")
    return subprocess.run(["bash", "-e", "-c", _evaluate(step["run"], inputs, outputs)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1800)


def _inputs(**given: str) -> dict[str, str]:
    defaults = {k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()}
    return {**defaults, "token": "t", **given}


def _fake_gh(folder: Path, existing_id: str) -> tuple[str, Path]:
    """A `gh` that records its arguments and lists one earlier audit comment (or none)."""
    log = folder / "gh.log"
    gh = folder / "bin" / "gh"
    gh.parent.mkdir(parents=True)
    gh.write_text(f"#!/bin/sh\nprintf '%s ' \"$@\" | tr '\\n' ' ' >> {log}\necho >> {log}\n"
                  f'case "$*" in *--jq*) echo "{existing_id}";; esac\n')
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
    return str(gh.parent), log


@pytest.mark.slow
@pytest.mark.parametrize(("existing", "call"), [("", "api repos/o/r/issues/7/comments -f body="),
                                                ("42", "api -X PATCH repos/o/r/issues/comments/42 -f body=")])
def test_the_comment_step_updates_the_earlier_comment_or_posts_one(tmp_path, existing, call):
    out = tmp_path / "audit-pr" / "out"
    out.mkdir(parents=True)
    (out / "comment.md").write_text("audit diff: no regression\n<!-- audit-diff -->\n")
    path, log = _fake_gh(tmp_path, existing)
    proc = _run_step(_step("name", "Post or update the PR comment"), tmp_path, _inputs(), {}, extra_path=path)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls[-1].startswith(call) and "no regression" in calls[-1] and len(calls) == 2


@pytest.mark.slow
def test_the_diff_and_gate_steps_profile_both_sides_and_pass_an_unchanged_workload(tmp_path):
    """Base and head hold the same workload: the diff runs both, writes the comment and the job summary,
    and the gate passes (no regression on an unchanged program)."""
    for side in ("base", "head"):
        shutil.copytree(ROOT / "workloads", tmp_path / "audit-pr" / side / "workloads",
                        ignore=shutil.ignore_patterns("__pycache__"))
    output, summary = tmp_path / "github_output", tmp_path / "step_summary"
    github = {"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}
    inputs = _inputs(workload="workloads/matmul.py", args="--steps 3", repeat="2")
    proc = _run_step(_step("id", "diff"), tmp_path, inputs, {}, github=github)
    assert proc.returncode == 0, proc.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert outputs["status"] == "0" and outputs["verdict"] in ("no change", "inconclusive"), outputs
    out = tmp_path / "audit-pr" / "out"
    assert sorted(p.name for p in (out / "base").iterdir()) == ["run1.json", "run2.json"]
    assert (out / "head.html").is_file() and "<!-- audit-diff -->" in (out / "comment.md").read_text()
    assert "audit diff" in summary.read_text()
    assert json.loads((out / "diff.json").read_text())["gates"]["fail_on"] == 0.05  # fail-on-slowdown's default
    gate = _run_step(_step("name", "Gate"), tmp_path, inputs, outputs)
    assert gate.returncode == 0
    assert _run_step(_step("name", "Gate"), tmp_path, inputs, {"status": "1"}).returncode == 1
