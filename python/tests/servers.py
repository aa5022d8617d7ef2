"""Test support for the server side: MCP servers of the official SDK (`mcp` 2.3) and of FastMCP
4.1, behind `FramingMiddleware`, served by uvicorn on a loopback port in this process."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import uvicorn
from fastmcp import Context as FastContext
from fastmcp import FastMCP
from mcp.server.mcpserver import Context, MCPServer

TEXT = "framed from Python"
BIG = 64 * 1024


def sdk_server(name: str = "sdk") -> Any:
    """The official SDK's server with the tools every test calls."""
    mcp = MCPServer(name)

    @mcp.tool()
    def echo(text: str) -> str:
        return text

    @mcp.tool()
    def big(size: int = BIG) -> str:
        return "x" * size

    @mcp.tool()
    async def progress(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
        for i in range(steps):
            await ctx.report_progress(i, steps, f"step {i}")
        return f"{steps} steps"

    @mcp.tool()
    async def fail(text: str) -> str:
        raise ValueError(text)

    return mcp


def sdk_app(*, json_response: bool = False, middleware: Callable[[Any], Any] | None = None) -> Any:
    """The SDK's stateless streamable HTTP app at /mcp, wrapped by `middleware`."""
    app = sdk_server().streamable_http_app(stateless_http=True, json_response=json_response)
    return middleware(app) if middleware else app


def fastmcp_app(*, json_response: bool = False, middleware: list[Any] | None = None) -> Any:
    """FastMCP 4.1's stateless HTTP app at /mcp with Starlette `middleware`."""
    mcp = FastMCP("fastmcp")

    @mcp.tool
    def echo(text: str) -> str:
        return text

    @mcp.tool
    def big(size: int = BIG) -> str:
        return "x" * size

    @mcp.tool
    async def progress(steps: int, ctx: FastContext) -> str:
        for i in range(steps):
            await ctx.report_progress(i, steps, f"step {i}")
        return f"{steps} steps"

    return mcp.http_app(path="/mcp", middleware=middleware, stateless_http=True, json_response=json_response)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """Serves `app` with uvicorn on 127.0.0.1 (lifespan on) and yields its /mcp URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await task
