"""The skill document an agent reads (audit/skills/SKILL.md) and the page on using audit from an agent
(docs/agents.md): `audit skills install` writes the skill, its examples run as written, it names
the tools the server serves, and the client configurations on the page start `audit mcp`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from test_docs_examples import blocks, _run_shell

SKILL = ROOT / "audit" / "skills" / "SKILL.md"
AUDIT = Path(sys.executable).parent / "audit"


def _audit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(AUDIT), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_skill_says_its_name_and_when_to_use_it_and_stays_short():
    text = SKILL.read_text()
    front = text.split("---\n")[1]
    fields = dict(line.split(": ", 1) for line in front.strip().splitlines())
    assert fields["name"] == "audit" and fields["description"].count("Use when") == 1
    assert len(text) < 6000  # an agent reads all of it on every use


def test_the_skill_names_every_tool_the_server_serves():
    from audit.mcp_server.server import TOOLS

    named = set(re.findall(r"^\| [^|]+ \| `(\w+)` \|", SKILL.read_text(), re.M))
    assert named == {tool.__name__ for tool in TOOLS}


@pytest.mark.slow
def test_install_writes_the_skill_and_never_replaces_another_unasked(tmp_path):
    done = _audit("skills", "install", "--dir", "skills", cwd=tmp_path)
    target = tmp_path / "skills" / "audit" / "SKILL.md"
    assert done.returncode == 0 and done.stdout == "" and "Wrote skills/audit/SKILL.md" in done.stderr
    assert target.read_text() == SKILL.read_text() == _audit("skills", "show", cwd=tmp_path).stdout
    assert _audit("skills", "install", "--dir", "skills", cwd=tmp_path).returncode == 0  # the same file again
    target.write_text("my own notes\n")
    refused = _audit("skills", "install", "--dir", "skills", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--force" in refused.stderr
    assert target.read_text() == "my own notes\n"
    assert _audit("skills", "install", "--dir", "skills", "--force", cwd=tmp_path).returncode == 0
    assert target.read_text() == SKILL.read_text()
    assert _audit("skills", "install", cwd=tmp_path).returncode == 0  # the default: the project's .claude/skills
    assert (tmp_path / ".claude" / "skills" / "audit" / "SKILL.md").read_text() == SKILL.read_text()


@pytest.mark.slow
def test_the_skill_examples_run_as_written(tmp_path):
    shutil.copytree(ROOT / "workloads", tmp_path / "workloads", ignore=shutil.ignore_patterns("__pycache__"))
    examples = [b for b in blocks(SKILL) if b.language == "sh"]
    assert examples
    for block in examples:
        _run_shell(block, tmp_path)
    assert (tmp_path / "before.json").exists() and (tmp_path / "after.json").exists()


def test_the_agents_page_configures_each_client_to_start_audit_mcp():
    page = ROOT / "docs" / "agents.md"
    configs = [json.loads(b.text) for b in blocks(page) if b.language == "text" and b.text.lstrip().startswith("{")]
    assert len(configs) >= 3
    for config in configs:
        (servers,) = [v for k, v in config.items() if k in ("mcpServers", "servers")]
        assert servers["audit"]["command"].endswith("audit") and servers["audit"]["args"] == ["mcp"]
    assert "(docs/agents.md)" in (ROOT / "README.md").read_text()
