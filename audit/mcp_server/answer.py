"""A tool's reply: the JSON document as structured content (and as text, for clients that read
only text), or a tool error carrying the one line the CLI would print for the same input.

Bad input (`AuditError`) is the caller's to fix, so the reply says it as `audit: error: ...`;
anything else is a bug in audit, said as `audit: internal error: ...` with its traceback on the
server's stderr. Either way the call ends and the server keeps serving.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent

from ..base.errors import AuditError
from ..reports.json_report import clean, render_json
from .progress import CallProgress

JSON = dict[str, Any]
_log = logging.getLogger("audit.mcp")
# One analysis at a time: the pipeline was written for one command per process, and two large
# profiles read at once would only compete for the same cores and memory.
_ONE_AT_A_TIME = anyio.Lock()


def error_line(exc: AuditError) -> str:
    """The line `audit` prints on stderr for this error (audit.cli.main)."""
    return f"audit: error: {exc}"


def failure(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def success(doc: JSON) -> CallToolResult:
    """The document as the JSON writer writes it (NaN-free, plain types), both as data and as text."""
    return CallToolResult(content=[TextContent(type="text", text=render_json(doc).rstrip("\n"))],
                          structured_content=clean(doc))


async def answer(ctx: Context[Any, Any], what: str, work: Callable[[CallProgress], JSON], *,
                 analysis: bool = False) -> CallToolResult:
    """Run `work` off the event loop, reporting progress, and reply with its document or its error;
    an `analysis` (reading profiles) waits for the one before it, napkin math and the catalog do not."""
    try:
        if analysis:
            async with _ONE_AT_A_TIME:
                doc = await CallProgress(ctx, what).run(work)
        else:
            doc = await CallProgress(ctx, what).run(work)
    except AuditError as exc:
        return failure(error_line(exc))
    except Exception as exc:  # a bug in audit: say so, keep the traceback for the server's log
        _log.exception("%s failed", what)
        return failure(f"audit: internal error: {type(exc).__name__}: {exc} (please report; the traceback is "
                       "in the server's log)")
    return success(doc)
