"""`audit mcp`: serve audit's tools to an agent over the Model Context Protocol (stdio)."""

from __future__ import annotations

import click

from ..base.errors import UsageError

INSTALL = "pip install 'roofline-audit[mcp]'"
SDK = ("mcp", "mcp_types", "pydantic", "anyio")  # the SDK and what it brings


@click.command("mcp")
def command() -> None:
    """Serve inspect, explain, diff, plan, calc and hardware as MCP tools over stdin and stdout.

    A client (Claude Code, Claude Desktop, VS Code, Cursor...) starts `audit mcp` itself; see
    docs/agents.md for its configuration. Each tool answers with the facts `--json` writes.
    """
    try:
        from ..mcp_server.server import serve
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing not in SDK:
            raise
        raise UsageError(f"audit mcp needs the MCP Python SDK ({missing} is not installed)", hint=INSTALL) from None
    serve()
