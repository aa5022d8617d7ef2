"""A fixture MCP server on FastMCP (`fastmcp`, pinned in tests/stock_clients/requirements.txt):
`FastMCP.http_app(stateless_http=True, json_response=...)` under uvicorn. The tools: tools.py.

Usage: python fastmcp_app.py --counter-file PATH [--port P] [--json] [--exit-with-stdin]
Prints "listening on http://127.0.0.1:PORT/mcp" once it accepts connections.
"""

from __future__ import annotations

import os

os.environ.setdefault("FASTMCP_LOG_LEVEL", "WARNING")  # no INFO lines on every start

import tools
from fastmcp import Context, FastMCP

args = tools.options(__doc__)
server = FastMCP("fixture-fastmcp")
for tool in tools.tools(Context):
    server.tool(tool, output_schema=None)
tools.serve(
    server.http_app(path="/mcp", stateless_http=True, json_response=args.json),
    args.port,
)
