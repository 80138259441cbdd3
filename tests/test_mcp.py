"""`audit mcp` driven by the MCP SDK's own stdio client, as an agent's host drives it: the server is a
subprocess, the tools are listed and called on real captures, and every answer is compared with
what the CLI's `--json` writes for the same input. Bad input comes back as a tool error carrying the
CLI's one line, and the server answers the next call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import ROOT, shared_fixture

AUDIT = Path(sys.executable).parent / "audit"
TOOLS = {"inspect", "explain", "diff", "plan", "calc", "hardware"}
H100 = ROOT / "tests" / "data" / "captures" / "h100-jax0.11"
HOSTILE = ROOT / "tests" / "data" / "hostile"
TEST_ENV = {k: os.environ[k] for k in ("XLA_FLAGS", "JAX_PLATFORMS", "AUDIT_CACHE") if k in os.environ}


def with_server(steps: Callable[[ClientSession], Awaitable[Any]], *, cwd: Path | None = None,
                env: dict[str, str] | None = None, errlog: Path | None = None) -> Any:
    """Start `audit mcp` under the SDK's stdio client, run `steps` in one session, and return what it returns."""

    async def main() -> Any:
        params = StdioServerParameters(command=str(AUDIT), args=["mcp"], cwd=cwd, env=TEST_ENV if env is None else env)
        with open(errlog or os.devnull, "w") as log:
            async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await steps(session)

    return anyio.run(main)


def cli_json(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """What `audit ARGS` writes on stdout as JSON."""
    proc = subprocess.run([str(AUDIT), *args], capture_output=True, text=True, timeout=600,
                          env=None if env is None else {**os.environ, **env})
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def cli_error(*args: str) -> str:
    """The one line `audit ARGS` prints for bad input (exit 2)."""
    proc = subprocess.run([str(AUDIT), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr
    return proc.stderr.strip()


def data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    doc = result.structured_content
    assert json.loads(result.content[0].text) == doc  # the text a text-only client reads says the same
    return doc


def error(result: Any) -> str:
    assert result.is_error and result.structured_content is None
    (line,) = [c.text for c in result.content]
    return line


@pytest.mark.slow
def test_the_tools_are_listed_with_typed_inputs_and_outputs():
    async def steps(session: ClientSession) -> Any:
        return (await session.list_tools()).tools

    tools = {t.name: t for t in with_server(steps)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.annotations is not None and tool.annotations.read_only_hint
    inspect = tools["inspect"].input_schema
    assert inspect["required"] == ["path"] and inspect["properties"]["rows"]["minimum"] == 1
    assert {"chip", "summary", "findings", "top_ops", "op"} <= set(tools["inspect"].output_schema["properties"])
    assert set(tools["plan"].input_schema["properties"]["kind"]["enum"]) == {"model", "train", "serve"}
    assert {"verdict", "regression", "tripped", "diff"} <= set(tools["diff"].output_schema["properties"])


@pytest.mark.slow
@pytest.mark.parametrize("capture", ["gpu-mi300x/gemm.xplane.pb", "h100-train-step", "h100-dump"])
def test_inspect_answers_the_facts_the_cli_json_writes(capture):
    path = {"h100-train-step": H100 / "train-step.xplane.pb", "h100-dump": H100 / "dump"}.get(capture) \
        or shared_fixture(capture)
    cli = cli_json("inspect", str(path), "--json", "-", "--quiet")
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async def steps(session: ClientSession) -> Any:
        first = await session.call_tool("inspect", {"path": str(path), "rows": 3}, progress_callback=on_progress)
        key = data(first)["top_ops"][1]["key"]
        more = await session.call_tool("inspect", {"path": str(path), "rows": 3, "offset": 1, "op": key})
        return data(first), data(more)

    first, more = with_server(steps)
    assert first["chip"] == cli["hardware"]["name"]
    assert first["summary"]["step_time_s"] == cli["summary"]["step_time_s"]
    assert first["summary"] == cli["summary"] and first["warnings"] == cli["warnings"]
    assert first["flagged"] == cli["flagged"][:3] and first["findings"] == cli.get("findings")
    assert first["source"]["paths"] == cli["source"]["paths"]
    # the rows are the report's own records, in the terminal's order; the next page continues it
    by_key = {o["key"]: o for o in cli["ops"]}
    for row in first["top_ops"]:
        assert all(row[k] == by_key[row["key"]].get(k) for k in ("self_s", "expected_s", "achievable_s", "verdict")
                   if k in row)
    assert more["top_ops"][0] == first["top_ops"][1] and more["top_ops_page"]["offset"] == 1
    assert more["top_ops_page"]["total"] == first["top_ops_page"]["total"] == sum(not o["container"]
                                                                                   for o in cli["ops"])
    assert more["op"] == by_key[first["top_ops"][1]["key"]]
    assert progress and progress[-1][1] and f"analysing {path.name}" in " ".join(m or "" for _, m in progress)
    assert [v for v, _ in progress] == sorted(v for v, _ in progress)


@pytest.mark.slow
def test_bad_input_is_a_tool_error_with_the_cli_line_and_the_server_keeps_serving(tmp_path):
    gemm = shared_fixture("gpu-mi300x/gemm.xplane.pb")
    truncated = tmp_path / "truncated.xplane.pb"
    truncated.write_bytes(gemm.read_bytes()[: gemm.stat().st_size // 2])
    hostile = HOSTILE / "gpu-duration-max.xplane.pb"
    says = json.loads((HOSTILE / "MANIFEST.json").read_text())[hostile.name]["says"]
    missing = tmp_path / "no-such.xplane.pb"

    async def steps(session: ClientSession) -> Any:
        out = {}
        for name, path in (("missing", missing), ("truncated", truncated), ("hostile", hostile)):
            out[name] = await session.call_tool("inspect", {"path": str(path)})
        out["op"] = await session.call_tool("explain", {"path": str(gemm), "op": "no-such-op"})
        out["chip"] = await session.call_tool("calc", {"kind": "matmul", "m": 8, "k": 8, "n": 8,
                                                       "hardware": "no-such-chip"})
        out["rows"] = await session.call_tool("inspect", {"path": str(gemm), "rows": 0})
        out["again"] = await session.call_tool("inspect", {"path": str(gemm)})
        return out

    got = with_server(steps)
    assert error(got["missing"]) == cli_error("inspect", str(missing))
    assert error(got["truncated"]) == cli_error("inspect", str(truncated))
    assert error(got["hostile"]) == cli_error("inspect", str(hostile)) and says in error(got["hostile"])
    assert error(got["op"]).startswith("audit: error: no op 'no-such-op'")
    assert error(got["chip"]) == cli_error("calc", "matmul", "--m", "8", "--k", "8", "--n", "8",
                                          "--hardware", "no-such-chip")
    assert got["rows"].is_error and "rows" in got["rows"].content[0].text  # the input schema refused it
    assert data(got["again"])["chip"] == "mi300x"


@pytest.mark.slow
def test_diff_answers_the_verdict_the_changes_and_the_gate_as_the_cli_does():
    base, head = ROOT / "tests/data/hlo/diff_base.hlo", ROOT / "tests/data/hlo/diff_head.hlo"
    step, graphs = H100 / "train-step.xplane.pb", H100 / "train-step-cmdbuf.xplane.pb"

    async def steps(session: ClientSession) -> Any:
        hlo = await session.call_tool("diff", {"base": str(base), "head": str(head), "hardware": "tpu-v5e",
                                               "fail_on_flops": True})
        profiles = await session.call_tool("diff", {"base": str(step), "head": str(graphs), "rows": 2})
        return data(hlo), data(profiles)

    hlo, profiles = with_server(steps)
    cli = cli_json("diff", str(base), str(head), "--hardware", "tpu-v5e", "--fail-on-flops", "--json", "-", "-q")
    assert hlo["regression"] is cli["regression"] is True and hlo["verdict"] == cli["verdict"]
    assert hlo["tripped"] == cli["gates"]["tripped"] and hlo["tripped"]
    assert hlo["diff"]["compile_time"] == cli["compile_time"] and hlo["diff"]["gates"] == cli["gates"]
    cli = cli_json("diff", str(step), str(graphs), "--json", "-", "-q")
    assert profiles["verdict"] == cli["verdict"] and profiles["diff"]["measured"] == cli["measured"]
    for name, page in profiles["lists"].items():
        assert page["total"] == len(cli["compile_time"][name])
        assert profiles["diff"]["compile_time"][name] == cli["compile_time"][name][:2]
    assert profiles["lists"]["added_ops"]["total"] > 2  # the cuBLAS calls one compile ran as Triton fusions


@pytest.mark.slow
def test_plan_calc_and_hardware_answer_what_their_commands_write():
    plan_args = {"kind": "train", "model": "llama3-8b", "hardware": "tpu-v5e:16x16", "tokens": 1e12,
                 "batch_tokens": 4e6, "layout": "dp=64,tp=4"}
    serve_args = {"kind": "serve", "model": "llama3-8b", "hardware": "h100:8", "batch": 8, "context": 4096}
    collective_args = {"kind": "collective", "op": "all-gather", "shape": "bf16[2048,8192]", "mesh": "X=8,Y=4",
                       "axes": "Y", "hardware": "tpu-v5e:8x4"}

    async def steps(session: ClientSession) -> Any:
        calls = [("plan", plan_args), ("plan", serve_args), ("plan", {"kind": "model", "model": "llama3-70b"}),
                 ("calc", {"kind": "matmul", "m": 4096, "k": 8192, "n": 8192, "hardware": "h100"}),
                 ("calc", collective_args), ("hardware", {"action": "show", "name": "tpu-v5e:8x4"}),
                 ("hardware", {})]
        return [data(await session.call_tool(name, args)) for name, args in calls]

    train, serve, model, matmul, collective, show, listing = with_server(steps)
    assert train["plan"] == cli_json("plan", "train", "--model", "llama3-8b", "--hardware", "tpu-v5e:16x16",
                                     "--tokens", "1e12", "--batch-tokens", "4e6", "--layout", "dp=64,tp=4",
                                     "--json", "-")
    assert serve["plan"] == cli_json("plan", "serve", "--model", "llama3-8b", "--hardware", "h100:8", "--batch",
                                     "8", "--context", "4096", "--json", "-")
    assert model["plan"] == cli_json("plan", "model", "--model", "llama3-70b", "--json", "-")
    assert matmul["result"] == cli_json("calc", "matmul", "--m", "4096", "--k", "8192", "--n", "8192",
                                        "--hardware", "h100", "--json", "-")
    assert collective["result"] == cli_json("calc", "collective", "--op", "all-gather", "--shape", "bf16[2048,8192]",
                                            "--mesh", "X=8,Y=4", "--axes", "Y", "--hardware", "tpu-v5e:8x4",
                                            "--json", "-")
    assert show["hardware"] == cli_json("hardware", "show", "tpu-v5e:8x4", "--json")
    from audit.costmodel.chips.catalog import chips

    names = [row["name"] for row in listing["entries"]]
    assert names[: len(chips())] == [hw.name for hw in chips()]
    h100 = next(row for row in listing["entries"] if row["name"] == "h100")
    assert h100["figures"]["peak_flops_per_s.bf16"]["value"] == matmul["result"]["peak_flops_per_s"]


@pytest.mark.slow
def test_explain_gives_every_figure_with_its_source_and_the_suggestion(tmp_path):
    report = tmp_path / "step.json"
    subprocess.run([str(AUDIT), "inspect", str(H100 / "train-step.xplane.pb"), "--json", str(report), "--quiet"],
                   check=True, timeout=600)
    cli = json.loads(report.read_text())
    op = max((o for o in cli["ops"] if o["flops"]), key=lambda o: o["self_s"] or 0)

    async def steps(session: ClientSession) -> Any:
        return data(await session.call_tool("explain", {"path": str(report), "op": op["key"]}))

    got = with_server(steps)
    figures = {f["key"]: f for f in got["figures"]}
    assert got["key"] == op["key"] and got["verdict"] == op["verdict"]
    assert got["reasons"] == op["reasons"] and got["suggestion"] == op["suggestion"]
    assert figures["measured_s"]["value"] == op["measured_s"] and figures["measured_s"]["source"] == "trace"
    assert figures["expected_s"]["source"] == figures["achievable_s"]["source"] == "model"
    assert figures["flops"]["source"] == op["provenance"]["flops"] and figures["flops"]["unit"] == "FLOP"
    assert figures["efficiency"]["value"] == op["efficiency"] and figures["efficiency"]["source"] == "verdict"
    assert got["achievable_source"] == op["achievable_source"] and got["hardware"]["name"] == "h100"
    assert all(f["text"] and f["meaning"] for f in got["figures"])


@pytest.mark.slow
def test_nothing_is_written_that_the_call_did_not_ask_for(tmp_path):
    """The CLI keeps a multi-host profile's per-host summaries in the user cache; the server does not,
    unless a call names a folder."""
    job = tmp_path / "job"
    job.mkdir()
    for i in range(4):
        (job / f"proc{i}.zip").symlink_to(shared_fixture(f"gpu-a100-pax-nsys-jax/pax_fsdp4_4proc_proc{i}.zip"))
    home, work, kept = tmp_path / "home", tmp_path / "work", tmp_path / "kept"
    home.mkdir()
    work.mkdir()
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "JAX_PLATFORMS": "cpu"}
    beats: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        beats.append(value)

    async def steps(session: ClientSession) -> Any:
        first = await session.call_tool("inspect", {"path": str(job)}, progress_callback=on_progress)
        asked = await session.call_tool("inspect", {"path": str(job), "cache": str(kept), "rows": 1})
        return data(first), data(asked)

    first, asked = with_server(steps, cwd=work, env=env)
    assert list(home.rglob("*")) == [] and list(work.rglob("*")) == []
    assert list(kept.glob("*.parquet"))  # written where the call said
    cli = cli_json("inspect", str(job), "--json", "-", "--quiet", env={"AUDIT_CACHE": ""})
    assert first["chip"] == cli["hardware"]["name"] and first["summary"]["step_time_s"] == cli["summary"]["step_time_s"]
    assert first["summary"]["hosts"] == 4 and asked["summary"] == first["summary"]
    assert len(beats) >= 2


@pytest.mark.slow
def test_without_the_sdk_audit_mcp_says_how_to_install_it_in_one_line():
    hide = "import sys; sys.modules['mcp'] = None; from audit.cli import main; sys.exit(main(['mcp']))"
    proc = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["audit: error: audit mcp needs the MCP Python SDK (mcp is not installed) "
                                        "(pip install 'roofline-audit[mcp]')"]


@pytest.mark.slow
def test_the_findings_part_is_passed_through_as_the_report_has_it(tmp_path):
    """The step diagnosis attaches `findings` to a report; inspect returns them as the JSON holds them, and
    a report without them (an older one) says none."""
    from dataclasses import replace

    import audit
    from audit.reports.model.findings import Finding

    capture = shared_fixture("gpu-mi300x/gemm.xplane.pb")
    report = audit.inspect(capture)
    assert report.model.part("findings"), "the step diagnosis finds something on the GEMM benchmark"
    gemm = max(report.model.ops, key=lambda o: o.self_s or 0.0)
    finding = Finding("kernel-gap", f"{gemm.name} is the step's largest op", (gemm.self_s or 0.0) / 42, None,
                      (gemm.key,), "see its suggestion", "trace")
    with_findings = tmp_path / "with-findings.json"
    audit.Report(report.model.attach("findings", [finding.to_json()])).save(str(with_findings))
    plain = tmp_path / "plain.json"
    audit.Report(replace(report.model, parts={k: v for k, v in report.model.parts.items() if k != "findings"})
                 ).save(str(plain))

    async def steps(session: ClientSession) -> Any:
        found = await session.call_tool("inspect", {"path": str(with_findings), "parts": ["findings", "programs"]})
        none = await session.call_tool("inspect", {"path": str(plain)})
        direct = await session.call_tool("inspect", {"path": str(capture)})
        return data(found), data(none), data(direct)

    found, none, direct = with_server(steps)
    assert direct["findings"] == report.to_json()["findings"]
    saved = json.loads(with_findings.read_text())
    assert found["findings"] == saved["findings"] == found["parts"]["findings"]
    assert found["parts"]["programs"] == saved["programs"]
    assert none["findings"] is None and none["summary"] == found["summary"]


def test_a_fault_inside_a_tool_is_an_internal_error_and_the_next_call_is_answered(monkeypatch, caplog):
    """As `audit` exits 4 for a bug (tests/test_cli_exit_codes.py), the server says `internal error` for
    that call, logs the traceback, and serves on; here in-process, through the SDK's in-memory client."""
    from mcp import Client

    from audit.mcp_server import reports
    from audit.mcp_server.server import build_server

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(reports, "inspect", broken)

    async def main() -> Any:
        async with Client(build_server()) as client:
            fault = await client.call_tool("inspect", {"path": str(shared_fixture("gpu-mi300x/gemm.xplane.pb"))})
            after = await client.call_tool("calc", {"kind": "matmul", "m": 64, "k": 64, "n": 64, "hardware": "h100"})
            return fault, after

    fault, after = anyio.run(main)
    assert error(fault).startswith("audit: internal error: ZeroDivisionError: float division by zero")
    assert "Traceback" in caplog.text and "ZeroDivisionError" in caplog.text
    assert data(after)["result"]["flops"] == 2 * 64**3
