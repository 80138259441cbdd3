"""The MCP server: one tool per kind of question, each answering with the CLI's `--json` facts.

Inputs are typed (the schema a client sees says each one's meaning and range); outputs are the
models of `results.py`. The tools only read: nothing is written unless a call names where (the
inspect tool's `cache`), and per-host summaries are not cached unless `$AUDIT_CACHE` says where.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from .. import __version__
from ..base.options import DEFAULTS
from ..base.user_cache import SUMMARIES_ENV
from ..reports.model.report import PartName
from .answer import answer
from .catalog_tools import collective_doc, hardware_doc, matmul_doc
from .diff_tool import diff_doc
from .plan_tool import PlanKind, plan_doc
from .progress import CallProgress
from .report_tools import explain_doc, inspect_doc
from .reports import Analysis, report_of
from .results import CalcResult, DiffResult, ExplainResult, HardwareResult, InspectResult, PlanResult

Ctx = Context[Any, Any]
InputPath = Annotated[str, Field(description="A .xplane.pb, a profile run dir, a TensorBoard logdir, an nsys-jax "
                                         "archive, an Nsight Systems SQLite export (with hlo), an HLO dump "
                                         "(.hlo.pb, .txt, .hlo, or an --xla_dump_to folder), or a JSON report.")]
ChipSpec = Annotated[str | None, Field(description="Chip to judge against, NAME[:TOPOLOGY] or FILE.toml"
                                                    "[:TOPOLOGY] (default: detected from the trace).")]
Rows = Annotated[int, Field(ge=1, description="Rows of each list in the reply.")]
OpKey = Annotated[str, Field(description="An op's key (`key` in top_ops, flagged) or its name when only one "
                                         "op has it.")]
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
INSTRUCTIONS = (
    "audit judges every op of a JAX program against two ceilings of its chip: the roofline (a lower bound: "
    "peak FLOP/s and memory bandwidth) and the achievable time (what good kernels take). inspect a profile "
    "or dump for the summary, findings and top ops; explain one op; diff two runs after a change; plan a "
    "transformer before running it; calc one matmul or collective; hardware for a chip's figures. "
    "Numbers are SI units (seconds, bytes, FLOP/s); each says where it comes from.")


async def inspect(ctx: Ctx, path: InputPath, hardware: ChipSpec = None,
                  rows: Rows = DEFAULTS.top,
                  offset: Annotated[int, Field(ge=0, description="Top ops to skip: the next page.")] = 0,
                  op: Annotated[str | None, Field(description="Also return this op's full record (its key, "
                                                              "or its name when only one op has it).")] = None,
                  parts: Annotated[list[PartName], Field(description="Report parts to return as the JSON "
                                                                     "report has them.")] = [],  # noqa: B006
                  run: Annotated[str | None, Field(description="Run of a TensorBoard logdir (default: the "
                                                               "latest).")] = None,
                  hlo: Annotated[str | None, Field(description="The HLO dump folder of an Nsight Systems "
                                                               "SQLite export.")] = None,
                  min_efficiency: Annotated[float, Field(ge=0, le=1)] = DEFAULTS.thresholds.min_efficiency,
                  min_share: Annotated[float, Field(ge=0, le=1)] = DEFAULTS.thresholds.min_share,
                  cache: Annotated[str | None, Field(description="Keep per-host summaries in this folder "
                                                                 "(nothing is written otherwise).")] = None,
                  ) -> Annotated[CallToolResult, InspectResult]:
    """Analyse a profile, run dir, archive or HLO dump (or read a JSON report), as `audit inspect --json`
    does: the chip, summary (step time, measured vs roofline vs achievable), warnings, findings, flagged
    and top ops. Ask again with offset for more rows, op for one op's full record, parts for report parts;
    the analysis is kept, so asking again is cheap."""
    how = Analysis(hardware=hardware, run=run, min_efficiency=min_efficiency, min_share=min_share, hlo=hlo,
                   cache=cache)

    def work(progress: CallProgress) -> dict[str, Any]:
        return inspect_doc(report_of(path, how, progress), rows, offset, op, parts)

    return await answer(ctx, f"inspect {path}", work, analysis=True)


async def explain(ctx: Ctx, path: InputPath, op: OpKey, hardware: ChipSpec = None,
                  ) -> Annotated[CallToolResult, ExplainResult]:
    """One op of a report (or of a profile or dump, analysed as inspect does): every figure with its unit
    and source (hlo, trace, model, verdict), its verdict and the reasons, and the suggestion."""
    how = Analysis(hardware=hardware)

    def work(progress: CallProgress) -> dict[str, Any]:
        return explain_doc(report_of(path, how, progress), op)

    return await answer(ctx, f"explain {op}", work, analysis=True)


async def diff(ctx: Ctx,
               base: Annotated[str, Field(description="The run before the change: a JSON report, profile or "
                                                      "HLO dump; repeated runs as a directory of reports, a "
                                                      "glob or comma-separated paths.")],
               head: Annotated[str, Field(description="The run after the change, as base.")],
               fail_on_slowdown: Annotated[float | None, Field(ge=0, description="Step-time change that counts, "
                                                                                 "in percent (default 5).")] = None,
               strict: Annotated[bool, Field(description="An inconclusive verdict also trips the gate.")] = False,
               fail_on_flops: bool = False, fail_on_comm_bytes: bool = False,
               hardware: ChipSpec = None, rows: Rows = DEFAULTS.diff_top,
               ) -> Annotated[CallToolResult, DiffResult]:
    """Compare two runs, as `audit diff --json` does: the step-time verdict against noise, what changed
    in the program (FLOPs, bytes, ops added, removed, changed), and the gate's answer (regression)."""
    def work(progress: CallProgress) -> dict[str, Any]:
        return diff_doc(base, head, hardware, rows, progress, slowdown_percent=fail_on_slowdown, strict=strict,
                        fail_on_flops=fail_on_flops, fail_on_comm_bytes=fail_on_comm_bytes)

    return await answer(ctx, "diff", work, analysis=True)


async def plan(ctx: Ctx, kind: Annotated[PlanKind, Field(description="model: parameters, FLOPs, memory; "
                                                                      "train: step time, memory, layouts; "
                                                                      "serve: decode latency, throughput.")],
               model: Annotated[str | None, Field(description="A named architecture (e.g. llama3-8b).")] = None,
               layers: Annotated[int | None, Field(ge=1)] = None, d_model: Annotated[int | None, Field(ge=1)] = None,
               d_ff: Annotated[int | None, Field(ge=1)] = None, heads: Annotated[int | None, Field(ge=1)] = None,
               kv_heads: Annotated[int | None, Field(ge=1)] = None,
               head_dim: Annotated[int | None, Field(ge=1)] = None, vocab: Annotated[int | None, Field(ge=1)] = None,
               hardware: Annotated[str | None, Field(description="train, serve: chip and topology, e.g. "
                                                                 "tpu-v5e:16x16 or h100:8.")] = None,
               chips: Annotated[int | None, Field(ge=1, description="Chips (default: the topology's).")] = None,
               layout: Annotated[str | None, Field(description="Evaluate this layout, e.g. dp=8,tp=4.")] = None,
               seq: Annotated[int | None, Field(ge=1, description="Sequence length in tokens.")] = None,
               tokens: Annotated[float | None, Field(gt=0, description="train: tokens in total.")] = None,
               batch_tokens: Annotated[float | None, Field(gt=0, description="train: tokens per step.")] = None,
               batch: Annotated[int | None, Field(ge=1, description="serve: sequences decoded together.")] = None,
               context: Annotated[int | None, Field(ge=1, description="serve: KV cache length.")] = None,
               mfu: Annotated[float | None, Field(gt=0, le=1)] = None,
               requests_per_s: Annotated[float | None, Field(gt=0)] = None,
               output_tokens: Annotated[int | None, Field(ge=1)] = None,
               ) -> Annotated[CallToolResult, PlanResult]:
    """Plan a transformer before profiling it, as `audit plan model|train|serve --json` does (the book's
    math, ch. 4-8): parameters, FLOPs, memory, step or decode time, and the breakdown by layout."""
    shape = {"layers": layers, "d_model": d_model, "d_ff": d_ff, "heads": heads, "kv_heads": kv_heads,
             "head_dim": head_dim, "vocab": vocab}
    options = {"chips": chips, "layout_text": layout, "seq": seq, "tokens": tokens, "batch_tokens": batch_tokens,
               "batch": batch, "context": context, "mfu": mfu, "requests_per_s": requests_per_s,
               "output_tokens": output_tokens}

    def work(progress: CallProgress) -> dict[str, Any]:
        return {"kind": kind, "plan": plan_doc(kind, model, shape, hardware, options)}

    return await answer(ctx, f"plan {kind}", work)


async def calc(ctx: Ctx, kind: Literal["matmul", "collective"],
               hardware: Annotated[str, Field(description="Chip and topology, e.g. tpu-v5e:8x4 or h100:8.")],
               m: Annotated[int | None, Field(ge=1, description="matmul: rows of the left operand.")] = None,
               k: Annotated[int | None, Field(ge=1, description="matmul: contracting dimension.")] = None,
               n: Annotated[int | None, Field(ge=1, description="matmul: columns of the right operand.")] = None,
               dtype: Annotated[str, Field(description="matmul: element type.")] = "bf16",
               precision: Annotated[str, Field(description="matmul: default, high, highest or a dot "
                                                           "algorithm.")] = "default",
               op: Annotated[str | None, Field(description="collective: all-gather, reduce-scatter, all-reduce, "
                                                           "all-to-all or collective-permute.")] = None,
               shape: Annotated[str | None, Field(description="collective: the array one device sees, e.g. "
                                                              "bf16[2048,8192].")] = None,
               mesh: Annotated[str | None, Field(description="collective: the mesh, e.g. X=8,Y=4.")] = None,
               axes: Annotated[str | None, Field(description="collective: axes it runs over, e.g. Y.")] = None,
               wraparound: Literal["auto", "yes", "no"] = "auto",
               ) -> Annotated[CallToolResult, CalcResult]:
    """Napkin math from the auditor's own cost model, as `audit calc matmul|collective --json` does:
    FLOPs, bytes, roofline and achievable time and what bounds them."""

    def work(progress: CallProgress) -> dict[str, Any]:
        from ..base.errors import UsageError

        if kind == "matmul":
            if m is None or k is None or n is None:
                raise UsageError("calc matmul needs m, k and n")
            return {"kind": kind, "result": matmul_doc(m, k, n, dtype, precision, hardware)}
        if op is None or shape is None or mesh is None or axes is None:
            raise UsageError("calc collective needs op, shape, mesh and axes")
        return {"kind": kind, "result": collective_doc(op, shape, mesh, axes, hardware, wraparound)}

    return await answer(ctx, f"calc {kind}", work)


async def hardware(ctx: Ctx, action: Literal["list", "show"] = "list",
                   name: Annotated[str | None, Field(description="show: NAME[:TOPOLOGY], e.g. tpu-v5e:8x4, "
                                                                 "h100:8, cpu, or FILE.toml.")] = None,
                   ) -> Annotated[CallToolResult, HardwareResult]:
    """The hardware catalog, as `audit hardware list` and `audit hardware show NAME --json`: every
    figure with its unit and source (catalog, measured, estimate, calibrated, user)."""
    return await answer(ctx, f"hardware {action}", lambda progress: hardware_doc(action, name))


TOOLS = (inspect, explain, diff, plan, calc, hardware)


def build_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("audit", title="audit: roofline auditor for JAX", version=__version__,
                                       instructions=INSTRUCTIONS)
    for tool in TOOLS:
        server.add_tool(tool, annotations=READ_ONLY)
    return server


def serve() -> None:
    """Serve over stdin and stdout until the client closes them."""
    os.environ.setdefault(SUMMARIES_ENV, "")  # write no cache the caller did not ask for
    build_server().run("stdio")
