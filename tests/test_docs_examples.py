"""The README and the pages in docs/ say only what the tool does: every `sh` and `python` example runs.

Each page's examples run in order, in one scratch folder per page that holds copies of the
project's workloads and inputs and the real captures the pages name (see docs/development.md);
`.venv/bin` comes first on PATH, as after `make install`. A command must exit 0, or the code its
trailing comment names (`# exit 2: ...`, `# exit 0 or 1`); an exit 2 is one line; nothing prints
a traceback or an internal error. A block preceded by `<!-- file: NAME -->` is written to NAME
instead of run; one preceded by `<!-- not run: needs ... -->` needs the network, a GPU or a TPU,
and says which.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT, shared_fixture

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = ("sh", "python")
LANGUAGES = (*RUNNABLE, "text", "toml", "yaml")
NOT_RUN_REASONS = ("needs the network", "needs a GPU", "needs a TPU")
README_LIMIT = 15_000  # bytes
SCREENSHOT = ROOT / "docs" / "images" / "report.png"
H100 = Path("tests/data/captures/h100-jax0.11")
A100_JOB = "gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc{}.zip"
MAXTEXT = "gpu-h100-maxtext"

_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
_COMMENT = re.compile(r"<!--\s*(not run|file):\s*(.*?)\s*-->\s*\Z", re.S)
_EXIT = re.compile(r"#\s*exit\s+(\d+)(?:\s+or\s+(\d+))?\b")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    text: str
    not_run: str | None = None
    file: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a markdown page, each with the `not run` or `file` comment right before it."""
    text = page.read_text()
    out = []
    for match in _FENCE.finditer(text):
        before = text[:match.start()].rstrip()
        last = before.rsplit("\n", 1)[-1]
        note = _COMMENT.search(last) if last.startswith("<!--") else None
        out.append(Block(page, text.count("\n", 0, match.start()) + 1, match.group(1).strip(), match.group(2),
                         not_run=note.group(2) if note and note.group(1) == "not run" else None,
                         file=note.group(2) if note and note.group(1) == "file" else None))
    return out


def commands(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """A shell block's commands (continuation lines joined), each with the exit codes it may end in."""
    out: list[tuple[str, tuple[int, ...]]] = []
    pending = ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = (pending + line).strip()
        pending = ""
        if not command or command.startswith("#"):
            continue
        found = _EXIT.search(command)
        codes = tuple(int(c) for c in found.groups() if c is not None) if found else (0,)
        out.append((command, codes))
    return out


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _links(page: Path) -> list[tuple[str, str]]:
    """(target, anchor) of every relative link of a page."""
    text = _FENCE.sub("", page.read_text())
    found = re.findall(r"\]\(([^)\s]+)\)", text)
    return [(t.split("#", 1)[0], t.split("#", 1)[1] if "#" in t else "") for t in found
            if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_short_and_docs_has_the_pages():
    assert len((ROOT / "README.md").read_bytes()) <= README_LIMIT
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert {"inputs", "reading-a-report", "gating", "planning", "hardware", "robustness", "performance",
            "architecture"} <= pages


def test_the_readme_shows_the_report_as_a_png():
    assert "](docs/images/report.png)" in (ROOT / "README.md").read_text()
    data = SCREENSHOT.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 800 and height >= 400


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(page):
    for target, anchor in _links(page):
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.name}: broken link {target}"
        if anchor and path.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", _FENCE.sub("", path.read_text()), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{page.name}: no heading #{anchor} in {target}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_block_says_its_language_and_only_a_reason_keeps_an_example_from_running(page):
    for block in blocks(page):
        assert block.language in LANGUAGES, f"{block.where}: a fence says its language, one of {LANGUAGES}"
        if block.language == "text":
            assert not any(line.startswith(("audit ", "make ", "$ ")) for line in block.text.splitlines()), (
                f"{block.where}: a shell example in a text block is never run; make it `sh`")
        if block.not_run is not None:
            assert block.language == "sh", f"{block.where}: only a shell block may be left unrun"
            assert block.not_run.startswith(NOT_RUN_REASONS), (
                f"{block.where}: 'not run: {block.not_run}' must say it needs the network, a GPU or a TPU")


def test_the_reasons_check_and_the_command_split_see_what_they_should(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("<!-- not run: takes long -->\n```sh\naudit run x.py \\\n    --steps 3   # exit 0 or 1\n```\n"
                    "<!-- file: w.py -->\n```python\nx = 1\n```\n")
    shell, script = blocks(page)
    assert shell.not_run == "takes long" and not shell.not_run.startswith(NOT_RUN_REASONS)
    assert commands(shell.text) == [("audit run x.py      --steps 3   # exit 0 or 1", (0, 1))]
    assert script.file == "w.py" and script.language == "python"


def _audit(bin_dir: Path, cwd: Path, *args: str) -> None:
    subprocess.run([str(bin_dir / "audit"), *args], cwd=cwd, check=True, capture_output=True, timeout=600)


def _demo_recipe(bin_dir: Path) -> list[str]:
    """The Makefile's `demo` recipe, so the scratch folder's out/demo is what `make demo` writes."""
    recipe = (ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n")[1].strip()
    return recipe.replace("$(BIN)/", f"{bin_dir}/").split()


@pytest.fixture(scope="session")
def scratch_template(tmp_path_factory) -> Path:
    """The inputs the pages name, made once: copies, links to real captures, and real runs."""
    from test_nsys_sqlite import build_export, dump_folder

    root = tmp_path_factory.mktemp("docs-template")
    bin_dir = Path(sys.executable).parent
    for folder in ("workloads", "scripts", str(H100), "tests/data/hostile"):
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "job").mkdir()
    for i in range(4):
        (root / "job" / f"proc{i}.zip").symlink_to(shared_fixture(A100_JOB.format(i)))
    (root / "maxtext").mkdir()
    for module in shared_fixture(MAXTEXT).glob("*.hlo.pb"):
        (root / "maxtext" / module.name).symlink_to(module)
    build_export(root / "report.sqlite", shared_fixture(A100_JOB.format(0)))
    dump_folder(root / "dump", shared_fixture(A100_JOB.format(0)))
    for run in ("2026_11_21_10_00_00", "2026_11_24_10_00_00"):
        folder = root / "logdir" / "plugins" / "profile" / run
        folder.mkdir(parents=True)
        shutil.copy(ROOT / H100 / "train-step.xplane.pb", folder / "h100.xplane.pb")
    subprocess.run(_demo_recipe(bin_dir), cwd=root, check=True, capture_output=True, timeout=900, env=_env(root))
    _audit(bin_dir, root, "run", "workloads/matmul.py", "--quiet", "--json", "base.json")
    _audit(bin_dir, root, "run", "workloads/matmul.py", "--quiet", "--json", "head.json", "--", "--d", "512")
    return root


def _env(cwd: Path) -> dict[str, str]:
    """A user's shell after `make install`: the venv first on PATH, no test-suite settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("AUDIT_CACHE", "XLA_FLAGS", "JAX_PLATFORMS",
                                                                "PYTHONPATH")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["XDG_CACHE_HOME"] = str(cwd / ".cache")
    return env


def _run_shell(block: Block, cwd: Path) -> None:
    for command, codes in commands(block.text):
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=_env(cwd),
                              capture_output=True, text=True, timeout=900)
        said = proc.stdout + proc.stderr
        where = f"{block.where}: `{command}`"
        assert proc.returncode in codes, f"{where} exited {proc.returncode}, not {codes}:\n{said[-3000:]}"
        assert "Traceback (most recent call last)" not in said and "internal error" not in said, f"{where}:\n{said}"
        if proc.returncode == 2:
            errors = [line for line in proc.stderr.splitlines() if line.startswith("audit: error:")]
            assert len(errors) == 1 and errors[0] == proc.stderr.strip().splitlines()[-1], f"{where}:\n{proc.stderr}"


def _run_python(block: Block, cwd: Path) -> None:
    script = cwd / f"example_{block.line}.py"
    script.write_text(block.text)
    proc = subprocess.run([sys.executable, script.name], cwd=cwd, env=_env(cwd), capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, f"{block.where}:\n{proc.stderr[-3000:]}"


RUN_PAGES = [p for p in PAGES if any(b.language in RUNNABLE and b.not_run is None for b in blocks(p))]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda p: p.name)
def test_every_example_of_the_page_runs_as_written(page, scratch_template, tmp_path):
    cwd = tmp_path / "scratch"
    shutil.copytree(scratch_template, cwd, symlinks=True)
    ran = 0
    for block in blocks(page):
        if block.file is not None:
            (cwd / block.file).write_text(block.text)
        elif block.not_run is None and block.language == "sh":
            _run_shell(block, cwd)
            ran += 1
        elif block.not_run is None and block.language == "python":
            _run_python(block, cwd)
            ran += 1
    assert ran


@pytest.mark.browser
def test_the_screenshot_script_renders_a_report_from_its_verdict_down(tmp_path):
    import audit

    html = tmp_path / "report.html"
    html.write_text(audit.inspect(ROOT / H100 / "train-step.xplane.pb").to_html())
    script = [sys.executable, str(ROOT / "scripts" / "screenshot.py"), "--html", str(html)]
    proc = subprocess.run([*script, "--out", str(tmp_path / "shot.png"), "--height", "600"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = (tmp_path / "shot.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1280, 600)
    missing = subprocess.run([sys.executable, str(ROOT / "scripts" / "screenshot.py"), "--html",
                              str(tmp_path / "none.html")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "run `make demo` first" in missing.stderr


@pytest.mark.slow
def test_every_json_field_the_reading_page_names_is_in_a_real_report(scratch_template):
    """The JSON report's field list on docs/reading-a-report.md, against `make demo`'s report."""
    import json

    keys: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            keys.update(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads((scratch_template / "out" / "demo" / "report.json").read_text()))
    page = (ROOT / "docs" / "reading-a-report.md").read_text()
    listing = page.split("## The JSON report", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    listing = re.sub(r"\w+(\|\w+)+", "", re.sub(r'"[^"]*"', "", listing))  # values, not fields
    named = set(re.findall(r"[a-z_]+", listing)) - {"str"}
    assert named - keys == set()
