"""A fixture MCP server on the official Python SDK (`mcp`, pinned in
tests/stock_clients/requirements.txt): `MCPServer.streamable_http_app(stateless_http=True,
json_response=...)` under uvicorn. The tools: tools.py. With `--framing`, framed in-process as
python/README.md says: the app wrapped, `FramingMiddleware(app, ...)` (`--frame-all compat`:
`frame_all_responses="compat"`; `--redis URL`: `dedupe=Deduplicator(RedisStore(...))`).

Usage: python sdk_python.py --counter-file PATH [--port P] [--json] [--exit-with-stdin]
       [--framing [--frame-all compat] [--redis URL]]
(`--json`: `json_response=True`). Prints "listening on http://127.0.0.1:PORT/mcp" once it
accepts connections.
"""

from __future__ import annotations

import tools
from mcp.server.mcpserver import Context, MCPServer

from mcp_framing.server import FramingMiddleware

args = tools.options(__doc__)
server = MCPServer("fixture-sdk-python")
for tool in tools.tools(Context):
    server.add_tool(tool, structured_output=False)
app = server.streamable_http_app(stateless_http=True, json_response=args.json)
if args.framing:
    app = FramingMiddleware(app, **tools.framing(args))
tools.serve(app, args.port)
