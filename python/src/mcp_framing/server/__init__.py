"""The server side: `FramingMiddleware` frames an ASGI MCP server's responses (SPEC.md §15, §16,
§18) and declares its contract in discovery results (§11.2), as the Rust crate's `FramingLayer`
does for rmcp. Standard library only.

    from starlette.middleware import Middleware
    from mcp_framing.server import FramingMiddleware

    app = mcp.http_app(middleware=[Middleware(FramingMiddleware)])  # FastMCP
"""

from __future__ import annotations

from .declare import Contract
from .middleware import FramingMiddleware

__all__ = ["Contract", "FramingMiddleware"]
