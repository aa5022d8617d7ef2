"""The server side: `FramingMiddleware` frames an ASGI MCP server's responses (SPEC.md §15, §16,
§18), declares its contract in discovery results (§11.2) and, with a `Deduplicator`, executes a
keyed tool call at most once per key (§17) on a `MemoryStore` or a `RedisStore` shared with the
Rust crate's servers (§17.12.1), as the Rust crate's `FramingLayer` does for rmcp. Standard
library only (the Redis store takes a redis-py client: the `[redis]` extra).

    from starlette.middleware import Middleware
    from mcp_framing.server import FramingMiddleware

    app = mcp.http_app(middleware=[Middleware(FramingMiddleware)])  # FastMCP
"""

from __future__ import annotations

from .declare import Contract
from .dedupe import Deduplicator, MemoryStore, RedisStore, Refusal, StoreError
from .middleware import FramingMiddleware

__all__ = ["Contract", "Deduplicator", "FramingMiddleware", "MemoryStore", "RedisStore", "Refusal", "StoreError"]
