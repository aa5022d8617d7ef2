"""The `mcp` 1.x line (on `httpx`): its stock client, given `framing_httpx_client_factory`,
verifies every response of a 1.x FastMCP server behind `FramingMiddleware` (whose SSE comes from
`sse_starlette`, with its ping comments), and a cut response fails at once with the outcome
instead of leaving the call waiting. Runs in target/stock-clients/venv-mcp1 (scripts/stock-clients):

    cd python && ../target/stock-clients/venv-mcp1/bin/python -m pytest -q tests_mcp1
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import mcp
import pytest
import uvicorn
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError

from mcp_framing import OUTCOME_DATA_KEY, FramingTransport
from mcp_framing.httpx1 import framing_httpx_client_factory
from mcp_framing.server import FramingMiddleware


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def server() -> FastMCP:
    app = FastMCP("one-x", stateless_http=True)

    @app.tool()
    def echo(text: str) -> str:
        return text

    @app.tool()
    def big(size: int) -> str:
        return "x" * size

    @app.tool()
    async def progress(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
        for i in range(steps):
            await ctx.report_progress(i, steps)
        return f"{steps} steps"

    return app


def cutting(app: Any, after: int) -> Any:
    """Ends every tools/call response body normally after `after` bytes (a proxy's cut)."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        is_call = False

        async def peek() -> Any:
            nonlocal is_call
            message = await receive()
            is_call = is_call or b'"tools/call"' in message.get("body", b"")
            return message

        sent = 0
        done = False

        async def cut(message: dict[str, Any]) -> None:
            nonlocal sent, done
            if done:
                return
            if is_call and message["type"] == "http.response.body":
                body = message.get("body", b"")
                if sent + len(body) >= after:
                    done = True
                    message = {"type": "http.response.body", "body": body[: after - sent], "more_body": False}
                sent += len(body)
            await send(message)

        await app(scope, peek, cut)

    return wrapped


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.ensure_future(srv.serve())
    while not srv.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        srv.should_exit = True
        await task


def test_this_is_the_one_x_line() -> None:
    assert mcp.__name__ == "mcp" and hasattr(mcp.client.streamable_http, "streamablehttp_client")


@pytest.mark.anyio
@pytest.mark.parametrize("mapping", ["compat", "binary", "sse"])
async def test_the_one_x_client_verifies_every_response_of_a_one_x_server_behind_the_middleware(
    mapping: str,
) -> None:
    transports: list[FramingTransport] = []
    factory = framing_httpx_client_factory(mapping=mapping, on_transport=transports.append)  # type: ignore[arg-type]
    seen: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with (
        serve(FramingMiddleware(server().streamable_http_app())) as url,
        streamablehttp_client(url, httpx_client_factory=factory) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        echo = await session.call_tool("echo", {"text": "one"})
        big = await session.call_tool("big", {"size": 70_000})
        steps = await session.call_tool("progress", {"steps": 4}, progress_callback=on_progress)
    assert echo.content[0].text == "one"  # type: ignore[union-attr]
    assert len(big.content[0].text) == 70_000  # type: ignore[union-attr]
    assert steps.content[0].text == "4 steps"  # type: ignore[union-attr]
    assert seen == [0, 1, 2, 3]
    stats = transports[0].stats
    assert stats.errors == 0 and stats.complete >= 4


@pytest.mark.anyio
@pytest.mark.parametrize("after", [1, 40, 300, 2000])
async def test_a_cut_response_fails_at_once_with_the_outcome(after: int) -> None:
    factory = framing_httpx_client_factory()
    app = cutting(FramingMiddleware(server().streamable_http_app()), after)
    async with (
        serve(app) as url,
        streamablehttp_client(url, httpx_client_factory=factory) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        start = time.monotonic()
        with pytest.raises(McpError) as raised:
            await session.call_tool("big", {"size": 5000})
        elapsed = time.monotonic() - start
    data = raised.value.error.data[OUTCOME_DATA_KEY]  # type: ignore[index]
    assert data["classification"] == "abandoned"
    assert elapsed < 10, elapsed  # not the SDK's read timeout


@pytest.mark.anyio
async def test_the_readme_examples_of_the_one_x_line_run_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's 1.x client calls the README's 1.x server, each block as written."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    (client,) = [b for b in blocks if "mcp_framing.httpx1" in b]
    (server_block,) = [b for b in blocks if "mcp.server.fastmcp" in b and "mcp_framing.server" in b]
    served: dict[str, Any] = {"__name__": "readme_server"}
    exec(server_block, served)
    async with serve(served["app"]) as url:
        code = client.replace("http://127.0.0.1:8000/mcp", url).replace("asyncio.run(main())", "")
        namespace: dict[str, Any] = {}
        exec(code, namespace)
        await namespace["main"]()
    assert capsys.readouterr().out == "results for framing\n"
