"""A fixture MCP server on the official Python SDK (`mcp`, pinned in
tests/stock_clients/requirements.txt): `MCPServer.streamable_http_app(stateless_http=True,
json_response=...)` under uvicorn. The tools: tools.py.

Usage: python sdk_python.py --counter-file PATH [--port P] [--json] [--exit-with-stdin]
(`--json`: `json_response=True`). Prints "listening on http://127.0.0.1:PORT/mcp" once it
accepts connections.
"""

from __future__ import annotations

import tools
from mcp.server.mcpserver import Context, MCPServer

args = tools.options(__doc__)
server = MCPServer("fixture-sdk-python")
for tool in tools.tools(Context):
    server.add_tool(tool, structured_output=False)
tools.serve(
    server.streamable_http_app(stateless_http=True, json_response=args.json), args.port
)
