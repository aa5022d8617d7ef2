"""The README's server examples run as written: each block is executed, its `app` served with
uvicorn, and a tool called through this package's framing client."""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mcp_framing import framing_http_client, framing_transport
from servers import serve
from support import REPO

README = (REPO / "python" / "README.md").read_text()
SERVERS = [b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "mcp_framing.server" in b]
#: The `mcp` 1.x line's example runs in its own environment (tests_mcp1); these run on `mcp` 2.3.
BLOCKS = [b for b in SERVERS if "mcp.server.fastmcp" not in b]


async def call(app: Any, tool: str, arguments: dict[str, Any]) -> str:
    async with (
        serve(app) as url,
        framing_http_client() as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool(tool, arguments)
        assert framing_transport(http).stats.errors == 0
        return result.content[0].text  # type: ignore[union-attr]


def test_the_readme_has_a_server_example_per_framework() -> None:
    assert len(SERVERS) == 5 and len(BLOCKS) == 4
    assert "from fastmcp import" in BLOCKS[0] and "MCPServer" in BLOCKS[1]
    assert "Starlette(" in BLOCKS[2] and "RedisStore" in BLOCKS[3]


@pytest.mark.anyio
@pytest.mark.parametrize("index", [0, 1, 2])
async def test_a_readme_server_example_serves_framed_responses(index: int) -> None:
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(BLOCKS[index], namespace)
    assert await call(namespace["app"], "search", {"q": "framing"}) == "results for framing"


@pytest.mark.anyio
async def test_the_readme_deduplicating_example_serves_through_redis(redis_url: str) -> None:
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(BLOCKS[3].replace("redis://127.0.0.1:6379/", redis_url), namespace)
    assert await call(namespace["app"], "charge", {"account": "acme", "amount": 3}) == "charged 3 to acme"
