"""What a caller catches when mcp-framing fails a request: the SDK's `MCPError`, inside the
exception groups of the SDK's task groups, and `framing_error` unwrapping it to a `FramingError`."""

from __future__ import annotations

import json

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_framing import FramingError, framing_error, framing_http_client

URL = "http://mcp.test/mcp"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def connect(handler: object) -> None:
    """The README's client, its `initialize` not caught inside the SDK's context managers."""
    transport = httpx2.MockTransport(handler)  # type: ignore[arg-type]
    async with (
        framing_http_client(transport=transport, retries=False) as http,
        streamable_http_client(URL, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()


async def raised(handler: object) -> BaseException:
    with pytest.raises(BaseException) as caught:
        await connect(handler)
    return caught.value


@pytest.mark.anyio
async def test_a_refused_connection_is_unwrapped_from_the_sdk_exception_groups() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("All connection attempts failed", request=request)

    exc = await raised(refuse)
    assert not isinstance(exc, MCPError)  # what the caller gets without the helper: a group
    error = framing_error(exc)
    assert isinstance(error, FramingError)
    assert (error.classification, error.kind, error.retry_decision) == ("abandoned", "Send", "surface_to_caller")
    assert error.message.startswith("mcp-framing: response abandoned: the request could not be sent")
    assert "All connection attempts failed" in error.detail
    assert isinstance(error.__cause__, MCPError)
    assert error.code == -32603
    assert error.report["attempts"] == 1


@pytest.mark.anyio
async def test_a_server_that_does_not_frame_is_unwrapped_with_the_message_saying_what_to_do() -> None:
    def plain(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if "id" not in body:
            return httpx2.Response(202)
        result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "plain", "version": "1"}}
        answer = {"jsonrpc": "2.0", "id": body["id"], "result": result}
        return httpx2.Response(200, headers={"content-type": "application/json"}, json=answer)

    error = framing_error(await raised(plain))
    assert error is not None
    assert (error.classification, error.kind) == ("contract_violation", "NotFramed")
    assert "put a framing layer in front of the server (mcp-frame proxy" in str(error)


def test_an_error_mcp_framing_did_not_make_is_not_a_framing_error() -> None:
    assert framing_error(MCPError(-32602, "unknown tool")) is None
    assert framing_error(MCPError(-32603, "internal", {"other": {"classification": "abandoned"}})) is None
    assert framing_error(ValueError("boom")) is None
    # the report must be the §11.7 shape, not any value under the key
    forged = MCPError(-32603, "x", {"io.github.mcp-framing/outcome": "abandoned"})
    assert framing_error(forged) is None
