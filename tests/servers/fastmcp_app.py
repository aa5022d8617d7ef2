"""A fixture MCP server on FastMCP (`fastmcp`, pinned in tests/stock_clients/requirements.txt):
`FastMCP.http_app(stateless_http=True, json_response=...)` under uvicorn. The tools: tools.py.
With `--framing`, framed in-process as python/README.md says: `FramingMiddleware` in the app's
`middleware` list (`--frame-all compat`: `frame_all_responses="compat"`; `--redis URL`:
`dedupe=Deduplicator(RedisStore(...))`).

Usage: python fastmcp_app.py --counter-file PATH [--port P] [--json] [--exit-with-stdin]
       [--framing [--frame-all compat] [--redis URL]]
Prints "listening on http://127.0.0.1:PORT/mcp" once it accepts connections.
"""

from __future__ import annotations

import os

os.environ.setdefault("FASTMCP_LOG_LEVEL", "WARNING")  # no INFO lines on every start

import tools
from fastmcp import Context, FastMCP
from starlette.middleware import Middleware

from mcp_framing.server import FramingMiddleware

args = tools.options(__doc__)
server = FastMCP("fixture-fastmcp")
for tool in tools.tools(Context):
    server.tool(tool, output_schema=None)
middleware = [Middleware(FramingMiddleware, **tools.framing(args))] if args.framing else None
tools.serve(
    server.http_app(path="/mcp", middleware=middleware, stateless_http=True, json_response=args.json),
    args.port,
)
