"""`audit mcp`: the product's work as tools of a Model Context Protocol server over stdio.

Each tool calls the functions the matching command calls (the library's `inspect`, `load` and
`diff`, the planner, the napkin math, the catalog) and answers with the same JSON the command's
`--json` writes, so an agent reads the facts a person's terminal shows. `server.py` registers
the tools; `answer.py` turns a result or an error into the tool's reply; the other modules each
hold the work of one tool. Only `audit.commands.mcp` imports this package, once the SDK is
known to be installed (the `mcp` extra).
"""
