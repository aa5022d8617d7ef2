"""`FramingMiddleware` in front of the official SDK's (`mcp` 2.3) and FastMCP 4.1's streamable
HTTP apps under uvicorn, read by this package's framing client, by the SDK's stock client and by
the decoders directly."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware

from mcp_framing import body_decoder, framing_http_client, framing_transport
from mcp_framing.contract import EXTENSION_KEY
from mcp_framing.server import Contract, FramingMiddleware
from mcp_framing.server.declare import Declaration
from servers import TEXT, fastmcp_app, sdk_app, serve

KEY = bytes(range(1, 17))
HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def call(name: str, arguments: dict[str, Any], id_: int = 2) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def opt_in(mapping: str, key: bytes, **limits: int) -> dict[str, str]:
    headers = dict(HEADERS, **{"mcp-framing": "1", "mcp-framing-request-key": key.hex()})
    if mapping == "binary":
        headers["accept"] = "application/vnd.mcp-framing, " + headers["accept"]
    if mapping == "compat":
        headers["mcp-framing-mapping"] = "compat"
    if limits:
        headers["mcp-framing-limits"] = ", ".join(f"{k}={v}" for k, v in limits.items())
    return headers


def decode(response: httpx2.Response, mapping: str, key: bytes | None) -> Any:
    expected = {"binary": "application/vnd.mcp-framing", "sse": "text/event-stream", "compat": "text/event-stream"}
    assert response.headers["content-type"] == expected[mapping]
    assert response.headers["mcp-framing"] == ("1; mapping=compat" if mapping == "compat" else "1")
    if "content-length" in response.headers and "content-encoding" not in response.headers:
        assert int(response.headers["content-length"]) == len(response.content)
    decoder = body_decoder(mapping, request_key=key)  # type: ignore[arg-type]
    messages = decoder.feed(response.content)
    return messages, decoder.finish()


SERVERS: dict[str, Callable[..., Any]] = {
    "sdk-sse": lambda mw=FramingMiddleware, **o: sdk_app(middleware=lambda app: mw(app, **o)),
    "sdk-json": lambda mw=FramingMiddleware, **o: sdk_app(json_response=True, middleware=lambda app: mw(app, **o)),
    "fastmcp-sse": lambda mw=FramingMiddleware, **o: fastmcp_app(middleware=[Middleware(mw, **o)]),
    "fastmcp-json": lambda mw=FramingMiddleware, **o: fastmcp_app(json_response=True, middleware=[Middleware(mw, **o)]),
}


async def session_calls(url: str, client: httpx2.AsyncClient) -> list[Any]:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with streamable_http_client(url, http_client=client) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        echo = await s.call_tool("echo", {"text": TEXT})
        big = await s.call_tool("big", {"size": 70_000})
        steps = await s.call_tool("progress", {"steps": 5}, progress_callback=on_progress)
        return [echo.content[0].text, len(big.content[0].text), steps.content[0].text, progress]  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize("server", list(SERVERS))
@pytest.mark.parametrize("mapping", ["compat", "binary", "sse"])
async def test_the_framing_client_verifies_every_response_of_each_server_in_each_mapping(
    server: str, mapping: str
) -> None:
    async with serve(SERVERS[server]()) as url, framing_http_client(mapping=mapping) as http:  # type: ignore[arg-type]
        results = await session_calls(url, http)
        stats = framing_transport(http).stats
    expected_progress = [] if server.endswith("json") else [0, 1, 2, 3, 4]
    assert results == [TEXT, 70_000, "5 steps", expected_progress]
    assert stats.errors == 0
    assert stats.complete >= 4  # initialize and the three calls, each verified whole


@pytest.mark.anyio
@pytest.mark.parametrize("server", list(SERVERS))
async def test_a_stock_client_reads_every_response_of_a_server_that_frames_all_of_them(server: str) -> None:
    async with serve(SERVERS[server](frame_all_responses="compat")) as url, httpx2.AsyncClient() as http:
        results = await session_calls(url, http)
        raw = await http.post(url, json=call("echo", {"text": TEXT}), headers=HEADERS)
    expected_progress = [] if server.endswith("json") else [0, 1, 2, 3, 4]
    assert results == [TEXT, 70_000, "5 steps", expected_progress]
    # The answer is an event stream in the compatible mapping, its HEAD without a request key.
    messages, verdict = decode(raw, "compat", None)
    assert verdict.verdict == "clean"
    assert json.loads(messages[-1])["result"]["content"][0]["text"] == TEXT


def sse_data(body: bytes) -> list[bytes]:
    """The data of every SSE event of `body`, comments dropped (what a stock client reads)."""
    events, data = [], []
    for line in body.replace(b"\r\n", b"\n").split(b"\n"):
        if not line:
            if data:
                events.append(b"\n".join(data))
            data = []
        elif line.startswith(b"data:"):
            data.append(line[6:] if line[5:6] == b" " else line[5:])
    return events


@pytest.mark.anyio
@pytest.mark.parametrize("server", ["sdk-sse", "fastmcp-sse"])
async def test_the_compatible_mapping_passes_every_event_byte_for_byte_and_declares_the_contract(server: str) -> None:
    plain_app = sdk_app() if server == "sdk-sse" else fastmcp_app()
    framed_app = SERVERS[server](frame_all_responses="compat")
    async with serve(plain_app) as plain, serve(framed_app) as framed, httpx2.AsyncClient() as http:
        bodies = []
        for url in (plain, framed):
            init = await http.post(url, json=INIT, headers=HEADERS)
            tool = await http.post(url, json=call("progress", {"steps": 3}), headers=HEADERS)
            bodies.append((init.content, tool.content))
    (plain_init, plain_tool), (framed_init, framed_tool) = bodies
    # Every byte but the comment records is the app's; the initialize result gains the contract.
    assert b"\n".join(line for line in framed_tool.split(b"\n") if not line.startswith(b":mcp-framing ")) == plain_tool
    contract = Contract(16384, 16 << 20, "compat")
    expected = Declaration(contract, "initialize").apply_bytes(sse_data(plain_init)[0])
    assert sse_data(framed_init) == [expected]
    result = json.loads(expected or b"")["result"]
    assert result["capabilities"]["experimental"][EXTENSION_KEY] == {
        "versions": [1],
        "sentinelRequired": True,
        "frameChecksum": "crc32",
        "messageDigest": "sha256",
        "maxFramePayload": 16384,
        "maxMessageSize": 16777216,
        "transports": ["binary", "sse", "compat"],
        "alwaysFramed": "compat",
    }


@pytest.mark.anyio
@pytest.mark.parametrize("server", ["sdk-json", "fastmcp-json"])
async def test_a_json_discovery_result_gets_the_contract_and_a_recomputed_content_length(server: str) -> None:
    plain_app = sdk_app(json_response=True) if server == "sdk-json" else fastmcp_app(json_response=True)
    async with serve(plain_app) as plain, serve(SERVERS[server]()) as framed, httpx2.AsyncClient() as http:
        before = await http.post(plain, json=INIT, headers=HEADERS)
        after = await http.post(framed, json=INIT, headers=HEADERS)
        tool_before = await http.post(plain, json=call("echo", {"text": TEXT}), headers=HEADERS)
        tool_after = await http.post(framed, json=call("echo", {"text": TEXT}), headers=HEADERS)
    expected = Declaration(Contract(16384, 16 << 20), "initialize").apply_bytes(before.content)
    assert after.content == expected
    assert int(after.headers["content-length"]) == len(after.content)
    # Not opted in, not a discovery request: exactly the app's answer.
    assert tool_after.content == tool_before.content
    assert tool_after.headers["content-type"] == "application/json"


@pytest.mark.anyio
@pytest.mark.parametrize("mapping", ["binary", "sse", "compat"])
async def test_a_message_over_the_clients_limit_ends_the_stream_with_abort_code_5(mapping: str) -> None:
    key = os.urandom(16)
    async with serve(SERVERS["sdk-sse"]()) as url, httpx2.AsyncClient() as http:
        headers = opt_in(mapping, key, message=10_000)
        response = await http.post(url, json=call("big", {"size": 20_000}), headers=headers)
    _, verdict = decode(response, mapping, key)
    assert verdict.verdict == "aborted" and verdict.abort is not None
    assert verdict.abort.code == 5


@pytest.mark.anyio
async def test_a_malformed_request_key_is_answered_400() -> None:
    async with serve(SERVERS["sdk-sse"]()) as url, httpx2.AsyncClient() as http:
        headers = dict(HEADERS, **{"mcp-framing": "1", "mcp-framing-request-key": "00" * 16})
        response = await http.post(url, json=call("echo", {"text": TEXT}), headers=headers)
    assert response.status_code == 400
    assert b"Mcp-Framing-Request-Key" in response.content


def raw_app(events: list[bytes], then: str) -> Any:
    """An ASGI app answering every POST with these SSE events, then raising (`raise`), ending
    its body (`end`) or returning without ending it (`return`)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for event in events:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        if then == "raise":
            raise RuntimeError("the tool's storage went away")
        if then == "end":
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


NOTE = b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\r\n\r\n'


@pytest.mark.anyio
@pytest.mark.parametrize("mapping", ["binary", "sse", "compat"])
@pytest.mark.parametrize("then", ["raise", "end", "return"])
async def test_an_app_that_fails_or_ends_mid_stream_gives_an_abort_never_a_clean_end(mapping: str, then: str) -> None:
    key = os.urandom(16)
    app = FramingMiddleware(raw_app([NOTE, b"data: {}\n", b"\n"], then))
    async with serve(app) as url, httpx2.AsyncClient() as http:
        response = await http.post(url, json=call("echo", {"text": TEXT}), headers=opt_in(mapping, key))
    messages, verdict = decode(response, mapping, key)
    assert verdict.verdict == "aborted" and verdict.abort is not None
    assert verdict.abort.code == 4  # upstream failed: sent again, it may succeed (SPEC.md §3.1)
    if then == "raise":
        assert "the tool's storage went away" in verdict.abort.reason
    assert len(messages) == 2  # the notification and the `{}` event before the failure


@pytest.mark.anyio
async def test_a_long_notification_stream_never_stalls_the_tool() -> None:
    seen: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with (
        serve(SERVERS["sdk-sse"]()) as url,
        framing_http_client(mapping="compat") as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        result = await asyncio.wait_for(
            s.call_tool("progress", {"steps": 500}, progress_callback=on_progress), timeout=30
        )
    assert result.content[0].text == "500 steps"  # type: ignore[union-attr]
    assert seen == list(range(500))


@pytest.mark.anyio
@pytest.mark.parametrize("mapping", ["binary", "compat"])
async def test_gzip_in_front_compresses_the_framed_bytes_and_the_client_verifies_them(mapping: str) -> None:
    def app() -> Any:
        return GZipMiddleware(FramingMiddleware(sdk_app(json_response=True)), minimum_size=100)

    async with serve(app()) as url, framing_http_client(mapping=mapping) as http:  # type: ignore[arg-type]
        results = await session_calls(url, http)
        stats = framing_transport(http).stats
    assert results[:3] == [TEXT, 70_000, "5 steps"]
    assert stats.errors == 0
    async with serve(app()) as url, httpx2.AsyncClient() as raw:
        key = os.urandom(16)
        headers = dict(opt_in("binary", key), **{"accept-encoding": "gzip"})
        response = await raw.post(url, json=call("big", {"size": 70_000}), headers=headers)
    assert response.headers["content-encoding"] == "gzip"
    assert decode(response, "binary", key)[1].verdict == "clean"


@pytest.mark.anyio
async def test_gzip_behind_is_not_asked_to_compress_what_is_framed() -> None:
    inner = sdk_app(json_response=True, middleware=lambda app: GZipMiddleware(app, minimum_size=100))
    async with serve(FramingMiddleware(inner)) as url, httpx2.AsyncClient() as http:
        key = os.urandom(16)
        headers = dict(opt_in("binary", key), **{"accept-encoding": "gzip"})
        framed = await http.post(url, json=call("big", {"size": 70_000}), headers=headers)
        plain = await http.post(
            url, json=call("big", {"size": 70_000}), headers=dict(HEADERS, **{"accept-encoding": "gzip"})
        )
    assert "content-encoding" not in framed.headers
    assert decode(framed, "binary", key)[1].verdict == "clean"
    assert plain.headers["content-encoding"] == "gzip"  # not opted in: the app's answer as it was


@pytest.mark.anyio
async def test_an_app_that_compresses_regardless_is_refused_with_an_abort_that_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        body = gzip.compress(b'{"jsonrpc":"2.0","id":2,"result":{}}')
        headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    key = os.urandom(16)
    async with serve(FramingMiddleware(app)) as url, httpx2.AsyncClient() as http:
        response = await http.post(url, json=call("echo", {"text": TEXT}), headers=opt_in("binary", key))
    _, verdict = decode(response, "binary", key)
    assert verdict.verdict == "aborted" and verdict.abort is not None
    assert "content-coded" in verdict.abort.reason
    assert any("compression middleware in front of FramingMiddleware" in r.message for r in caplog.records)


@pytest.mark.anyio
async def test_lifespan_and_other_scopes_pass_through() -> None:
    events: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                events.append(message["type"])
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        else:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    async with serve(FramingMiddleware(app)) as url, httpx2.AsyncClient() as http:
        response = await http.post(url, content=b"{}", headers=opt_in("binary", os.urandom(16)))
    assert response.status_code == 204 and response.content == b""
    assert events == ["lifespan.startup", "lifespan.shutdown"]


def test_frame_all_responses_takes_only_the_compatible_mapping() -> None:
    with pytest.raises(ValueError, match="compat"):
        FramingMiddleware(sdk_app(), frame_all_responses="sse")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_the_lf_of_the_final_events_crlf_split_from_it_still_reaches_the_client() -> None:
    final = b'event: message\r\ndata: {"jsonrpc":"2.0","id":2,"result":{}}\r\n\r'
    app = FramingMiddleware(raw_app([NOTE, final, b"\n"], "end"))
    key = os.urandom(16)
    async with serve(app) as url, httpx2.AsyncClient() as http:
        response = await http.post(url, json=call("echo", {"text": TEXT}), headers=opt_in("compat", key))
    assert response.content.endswith(b'"result":{}}\r\n\r\n')
    messages, verdict = decode(response, "compat", key)
    assert verdict.verdict == "clean" and len(messages) == 2


@pytest.mark.parametrize("mapping", ["binary", "sse", "compat", None])
def test_the_relay_writes_the_same_bytes_however_the_apps_body_is_split(mapping: str | None) -> None:
    from mcp_framing.encoder import MappingEncoder, StreamEncoder
    from mcp_framing.server.relay import SseRelay

    body = (
        b"\xef\xbb\xbfid: prime\r\ndata:\r\n\r\n: keep-alive\n\n"
        + NOTE
        + b'event: message\rdata: {"jsonrpc":"2.0",\rdata: "id":2,"result":{"t":"\xc3\xa9"}}\r\r'
        + b"data: after the final response\n\n"
    )

    def relay() -> SseRelay:
        encoder = None if mapping is None else MappingEncoder(mapping, StreamEncoder(KEY, bytes(range(16))))  # type: ignore[arg-type]
        return SseRelay(encoder, 1 << 20)

    whole = relay()
    expected = whole.feed(body) + whole.end()
    assert whole.done
    for cut in range(len(body) + 1):
        for second in (cut, min(len(body), cut + 3)):
            r = relay()
            out = r.feed(body[:cut]) + r.feed(body[cut:second]) + r.feed(body[second:]) + r.end()
            assert out == expected, (cut, second)
    if mapping is not None:
        decoder = body_decoder(mapping, request_key=KEY)  # type: ignore[arg-type]
        messages = decoder.feed(expected)
        assert decoder.finish().verdict == "clean" and len(messages) == 2
