"""The transport under the official SDK's `ClientSession`, against an in-process framing server
(httpx2's MockTransport): what the caller gets for clean, cut, refused and retried responses."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_framing import (
    OUTCOME_DATA_KEY,
    Discovery,
    FramingContract,
    FramingTransport,
    Resolution,
    RetrySchedule,
    framing_http_client,
)
from support import Writer, contract, response

URL = "http://mcp.test/mcp"
TEXT = "line of text café ✓\n" * 200


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Server:
    """A framing MCP server: answers initialize (declaring `contract`), tools/list and tools/call
    (`echo`), framed in the compatible or binary mapping; cuts tool-call bodies as told."""

    def __init__(self, declared: dict | None = None, mapping: str = "compat") -> None:
        self.declared = declared
        self.mapping = mapping
        self.cuts: list[int | None] = []  # per tools/call attempt: cut after N bytes (None: whole)
        self.executions: dict[str, int] = {}  # request key -> executions
        self.deduplicate = False
        self.requests: list[httpx2.Request] = []
        self.event_ids = False
        self.plain = False
        # The tools/call response as the server writes it, `{id}` standing for its id's JSON.
        self.raw_call_response: bytes | None = None
        self.after_final = False  # the notification after the tools/call response (§1: answers nothing)

    def result(self, body: dict) -> Any:
        method = body["method"]
        if method == "initialize":
            capabilities: dict = {"tools": {}}
            if self.declared is not None:
                capabilities["experimental"] = {"io.github.mcp-framing/framing": self.declared}
            return {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "serverInfo": {"name": "test", "version": "1"},
            }
        if method == "tools/list":
            return {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        if method == "tools/call":
            return {"content": [{"type": "text", "text": body["params"]["arguments"]["text"]}]}
        return {}

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if request.method != "POST":
            return httpx2.Response(405)
        body = json.loads(request.content)
        if "id" not in body:
            return httpx2.Response(202)
        key_hex = request.headers.get("mcp-framing-request-key")
        key = bytes.fromhex(key_hex) if key_hex else bytes(16)
        if body["method"] == "tools/call":
            seen = self.executions.get(key.hex(), 0)
            if not (self.deduplicate and seen):
                self.executions[key.hex()] = seen + 1
        message = response(body["id"], self.result(body))
        if body["method"] == "tools/call" and self.raw_call_response is not None:
            message = self.raw_call_response.replace(b"{id}", json.dumps(body["id"]).encode())
        if self.plain or key_hex is None:
            return httpx2.Response(200, headers={"content-type": "application/json"}, content=message)
        writer = Writer(key)
        notification = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}'
        messages = [notification, message] if body["method"] == "tools/call" else [message]
        if body["method"] == "tools/call" and self.after_final:
            messages.reverse()
        if self.mapping == "compat":
            framed = writer.compat(messages)
            if self.event_ids:
                framed = framed.replace(b"\ndata: ", b"\nid: 7\ndata: ")
            headers = {"content-type": "text/event-stream", "mcp-framing": "1; mapping=compat"}
        else:
            framed = writer.binary(messages)
            headers = {"content-type": "application/vnd.mcp-framing", "mcp-framing": "1"}
        if body["method"] == "tools/call" and self.cuts:
            cut = self.cuts.pop(0)
            if cut is not None:
                framed = framed[:cut] if cut >= 0 else framed[: len(framed) + cut]  # < 0: from the end
        return httpx2.Response(200, headers=headers, content=framed)

    def client(self, **options: Any) -> httpx2.AsyncClient:
        return framing_http_client(transport=httpx2.MockTransport(self.handler), **options)


async def session_run(server: Server, calls: list[str], **options: Any) -> tuple[list[Any], FramingTransport]:
    """Initializes, then calls `echo` with each text; returns results or the MCPError of each."""
    outcomes: list[Any] = []
    async with server.client(**options) as http:
        transport = http._transport
        assert isinstance(transport, FramingTransport)
        async with (
            streamable_http_client(URL, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            try:
                await session.initialize()
            except MCPError as err:
                return [err], transport
            for text in calls:
                try:
                    result = await session.call_tool("echo", {"text": text})
                    outcomes.append(result.content[0].text)
                except MCPError as err:
                    outcomes.append(err)
    return outcomes, transport


async def list_after_initialize(transport: FramingTransport) -> bytes:
    """The body the transport hands the SDK for `tools/list` (id 2) after `initialize` (id 1)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    await (await transport.handle_async_request(httpx2.Request("POST", URL, json=init))).aread()
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    return await (await transport.handle_async_request(httpx2.Request("POST", URL, json=call))).aread()


def report(err: MCPError) -> dict:
    assert err.error.message.startswith("mcp-framing: "), err.error.message
    assert err.error.code == -32603
    return err.error.data[OUTCOME_DATA_KEY]


@pytest.mark.anyio
async def test_a_framed_call_reaches_the_caller_byte_for_byte() -> None:
    server = Server(contract())
    outcomes, transport = await session_run(server, [TEXT])
    assert outcomes == [TEXT]
    call = next(r for r in server.requests if b"tools/call" in r.content)
    assert call.headers["mcp-framing"] == "1"
    assert call.headers["mcp-framing-mapping"] == "compat"
    assert call.headers["mcp-framing-limits"] == "frame=65536, message=16777216"
    key = call.headers["mcp-framing-request-key"]
    assert json.loads(call.content)["params"]["_meta"]["io.github.mcp-framing/requestKey"] == key
    assert transport.stats.complete >= 2 and transport.stats.errors == 0


@pytest.mark.anyio
async def test_the_binary_mapping_is_read_when_asked_for() -> None:
    server = Server(contract(), mapping="binary")
    outcomes, _ = await session_run(server, [TEXT], mapping="binary")
    assert outcomes == [TEXT]
    call = next(r for r in server.requests if b"tools/call" in r.content)
    assert call.headers["accept"].startswith("application/vnd.mcp-framing")


@pytest.mark.anyio
async def test_a_call_cut_at_any_offset_fails_with_the_outcome_and_no_unverified_message() -> None:
    server = Server(contract())
    whole = Writer().compat([b"x" * 10, response(1, {"content": []})])
    cuts = list(range(0, len(whole), 7))
    server.cuts = list(cuts)
    outcomes, transport = await session_run(server, ["cut"] * len(cuts))
    assert len(outcomes) == len(cuts)
    for cut, outcome in zip(cuts, outcomes, strict=True):
        assert isinstance(outcome, MCPError), f"cut at {cut}: {outcome!r}"
        data = report(outcome)
        assert data["classification"] == "abandoned", (cut, data)
        assert data["kind"] == "Truncated"
        assert data["regime"] == "B"
        # The server declares no deduplication: a retry could run the tool again (§11.6).
        assert (data["retryDecision"], data["retryReason"]) == ("surface_to_caller", "not_deduplicated")
        assert data["attempts"] == 1
        assert data["requestKeyFingerprint"].startswith("sha256:")
        assert outcome.error.message.startswith("mcp-framing: response abandoned: truncated")
    # Only verified messages reached the SDK: the initialize result and the progress
    # notifications whose MESSAGE_END arrived before the cut.
    verified = sum(o.received.messages for o in transport.stats.outcomes)
    assert transport.stats.verified_messages == verified
    assert transport.stats.errors == len(cuts)


@pytest.mark.anyio
async def test_a_server_that_declares_no_contract_is_refused_as_regime_c() -> None:
    server = Server(declared=None)
    (refused,), _ = await session_run(server, ["never sent"])
    data = report(refused)
    assert (data["classification"], data["kind"]) == ("configuration_error", "NoContract")
    assert data["attempts"] == 1  # the initialize that revealed it; nothing else was sent
    assert "Regime C" in data["detail"]
    assert "put a framing layer in front of the server (mcp-frame proxy" in data["detail"]


@pytest.mark.anyio
async def test_a_contract_without_the_sentinel_is_refused_as_regime_c() -> None:
    server = Server(contract(sentinelRequired=False))
    (refused,), _ = await session_run(server, ["never sent"])
    assert report(refused)["kind"] == "SentinelNotRequired"


@pytest.mark.anyio
async def test_accepting_ambiguity_still_verifies_a_server_that_frames_without_declaring_a_contract() -> None:
    server = Server(declared=None)  # frames every opted-in response, declares nothing
    outcomes, transport = await session_run(server, [TEXT], accept_ambiguity=True)
    assert outcomes == [TEXT]
    assert transport.policy is not None and transport.policy.regime == "C"
    call = next(r for r in server.requests if b"tools/call" in r.content)
    assert call.headers["mcp-framing"] == "1"  # opted in, so that the response proves itself
    assert {o.classification for o in transport.stats.outcomes} == {"clean"}
    assert transport.stats.errors == 0


@pytest.mark.anyio
async def test_accepting_ambiguity_never_delivers_an_unframed_response(caplog: pytest.LogCaptureFixture) -> None:
    server = Server(declared=None)
    server.plain = True  # answers every request unframed
    with caplog.at_level(logging.WARNING, logger="mcp_framing"):
        (failed,), transport = await session_run(server, [TEXT], accept_ambiguity=True)
    data = report(failed)  # the initialize itself: nothing unframed reaches the SDK (§11.3)
    assert (data["classification"], data["kind"], data["regime"]) == ("ambiguous", "NotFramed", "C")
    assert (data["retryDecision"], data["retryReason"]) == ("surface_to_caller", "ambiguous")
    assert failed.error.message.startswith("mcp-framing: response completion ambiguous (Regime C)")
    assert transport.stats.verified_messages == 0
    assert any("outcome=ambiguous" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_a_cut_keyed_call_is_retried_once_with_the_same_key_where_the_server_deduplicates() -> None:
    declared = contract(deduplication={"methods": ["tools/call"], "windowMs": 60000, "scope": "principal"})
    server = Server(declared)
    server.deduplicate = True
    server.cuts = [100, None, 250, None]
    retries = RetrySchedule(max_attempts=3, initial_backoff=0.0)
    outcomes, transport = await session_run(server, ["one", "two"], retries=retries)
    assert outcomes == ["one", "two"]
    calls = [json.loads(r.content) for r in server.requests if b"tools/call" in r.content]
    assert len(calls) == 4
    keys = [c["params"]["_meta"]["io.github.mcp-framing/requestKey"] for c in calls]
    assert keys[0] == keys[1] and keys[2] == keys[3] and keys[0] != keys[2]
    assert calls[1]["id"] == f"{calls[0]['id']}~attempt-2"  # a new JSON-RPC id (§10)
    assert sorted(server.executions.values()) == [1, 1]  # one execution per logical call
    assert transport.stats.retries == 2


@pytest.mark.anyio
async def test_retries_stop_at_the_attempt_budget_and_surface_the_last_outcome() -> None:
    declared = contract(deduplication={"methods": ["tools/call"], "windowMs": 60000, "scope": "principal"})
    server = Server(declared)
    server.cuts = [10, 10, 10]
    outcomes, _ = await session_run(server, ["x"], retries=RetrySchedule(max_attempts=3, initial_backoff=0.0))
    data = report(outcomes[0])
    assert (data["attempts"], data["retryDecision"], data["retryReason"]) == (3, "surface_to_caller", "keyed")


class Downgrading:
    """A resolver that drops the contract once told to (an old instance behind a balancer)."""

    def __init__(self) -> None:
        self.downgraded = False

    async def resolve(self, url: str) -> Resolution:
        parsed = None if self.downgraded else FramingContract.parse(contract())
        return Resolution(url, Discovery("server/discover", parsed, sticky=False))


@pytest.mark.anyio
async def test_a_downgrade_on_a_later_resolution_fails_closed() -> None:
    server = Server(contract())
    resolver = Downgrading()
    transport = FramingTransport(httpx2.MockTransport(server.handler), resolver=resolver)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "a"}}}
    body = await (await transport.handle_async_request(httpx2.Request("POST", URL, json=call))).aread()
    assert b'"text":"a"' in body
    resolver.downgraded = True
    body = await (await transport.handle_async_request(httpx2.Request("POST", URL, json=call))).aread()
    data = json.loads(body.split(b"data: ", 1)[1])["error"]["data"][OUTCOME_DATA_KEY]
    assert (data["classification"], data["kind"], data["attempts"]) == ("configuration_error", "Downgrade", 0)
    assert len([r for r in server.requests if b"tools/call" in r.content]) == 1  # nothing sent


@pytest.mark.anyio
async def test_the_sdk_never_sees_an_event_id_so_it_never_resumes_unverified_data() -> None:
    server = Server(contract())
    server.event_ids = True
    transport = FramingTransport(httpx2.MockTransport(server.handler))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "t"}}}
    for message in (init, call):
        answer = await transport.handle_async_request(httpx2.Request("POST", URL, json=message))
        body = await answer.aread()
        assert answer.headers["content-type"] == "text/event-stream"
        assert b"id:" not in body.replace(b'"id":', b"")
        assert body.endswith(b"\n\n")


@pytest.mark.anyio
async def test_a_stalled_response_is_abandoned_after_the_idle_timeout() -> None:
    stalled = anyio.Event()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if body["method"] == "initialize":
            return await Server(contract()).handler(request)
        key = bytes.fromhex(request.headers["mcp-framing-request-key"])
        head = Writer(key).compat([], end=False)

        async def stream():  # HEAD, then nothing: a server that went quiet
            yield head
            await stalled.wait()

        return httpx2.Response(
            200, headers={"content-type": "text/event-stream", "mcp-framing": "1; mapping=compat"}, content=stream()
        )

    transport = FramingTransport(httpx2.MockTransport(handler), idle_timeout=0.05)
    body = await list_after_initialize(transport)
    error = json.loads(body.split(b"data: ", 1)[1])
    assert error["id"] == 2
    assert error["error"]["data"][OUTCOME_DATA_KEY]["kind"] == "IdleTimeout"


@pytest.mark.anyio
async def test_a_verified_message_that_is_not_utf8_fails_the_request_unaltered() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if body["method"] == "initialize":
            return await Server(contract()).handler(request)
        key = bytes.fromhex(request.headers["mcp-framing-request-key"])
        return httpx2.Response(
            200,
            headers={"content-type": "application/vnd.mcp-framing", "mcp-framing": "1"},
            content=Writer(key).binary([b'{"jsonrpc":"2.0","id":2,"result":"\xff"}']),
        )

    transport = FramingTransport(httpx2.MockTransport(handler), mapping="binary")
    body = await list_after_initialize(transport)
    data = json.loads(body.split(b"data: ", 1)[1])["error"]["data"][OUTCOME_DATA_KEY]
    assert (data["classification"], data["kind"]) == ("invalid_message", "InvalidUtf8")
    assert b"\xff" not in body


@pytest.mark.anyio
async def test_an_unframed_answer_to_an_opted_in_request_is_a_contract_violation() -> None:
    server = Server(contract())

    async def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if body["method"] == "initialize":
            return await server.handler(request)
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=response(body["id"], {}))

    transport = FramingTransport(httpx2.MockTransport(handler))
    body = await list_after_initialize(transport)
    data = json.loads(body.split(b"data: ", 1)[1])["error"]["data"][OUTCOME_DATA_KEY]
    assert (data["classification"], data["kind"], data["retryDecision"]) == (
        "contract_violation",
        "NotFramed",
        "do_not_retry",
    )


@pytest.mark.anyio
async def test_a_response_on_the_get_stream_ends_it_unverified() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        events = (
            b'data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'
            b'data: {"jsonrpc":"2.0","id":9,"result":{}}\n\n'
            b'data: {"jsonrpc":"2.0","method":"notifications/message","params":{}}\n\n'
        )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=events)

    transport = FramingTransport(httpx2.MockTransport(handler))
    body = await (await transport.handle_async_request(httpx2.Request("GET", URL))).aread()
    assert b"list_changed" in body
    assert b'"id":9' not in body and b"notifications/message" not in body


@pytest.mark.anyio
async def test_an_http_error_status_is_reported_at_once_and_never_retried() -> None:
    statuses = [404, 503, 503, 200]
    seen = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if body["method"] == "initialize":
            return await Server(contract()).handler(request)
        seen.append(body["id"])
        return httpx2.Response(statuses.pop(0), content=b"no such \x1b[31msession")

    transport = FramingTransport(
        httpx2.MockTransport(handler), retries=RetrySchedule(max_attempts=2, initial_backoff=0.0)
    )
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    await (await transport.handle_async_request(httpx2.Request("POST", URL, json=init))).aread()
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    body = await (await transport.handle_async_request(httpx2.Request("POST", URL, json=listing))).aread()
    data = json.loads(body.split(b"data: ", 1)[1])["error"]["data"][OUTCOME_DATA_KEY]
    assert (data["classification"], data["kind"], data["httpStatus"], data["attempts"]) == (
        "http_error",
        "HttpStatus",
        404,
        1,
    )
    assert "\\u{1b}" in data["detail"]  # the server's text, escaped (§3.1)
    # A 5xx is retried where the method allows it (tools/list is idempotent), up to the budget.
    body = await (await transport.handle_async_request(httpx2.Request("POST", URL, json=listing))).aread()
    data = json.loads(body.split(b"data: ", 1)[1])["error"]["data"][OUTCOME_DATA_KEY]
    assert (data["httpStatus"], data["attempts"], data["retryDecision"]) == (503, 2, "surface_to_caller")
    assert seen == [2, 2, "2~attempt-2"]


@pytest.mark.anyio
async def test_a_final_response_whose_sentinel_was_cut_is_delivered_once_and_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    declared = contract(deduplication={"methods": ["tools/call"], "windowMs": 60000, "scope": "principal"})
    server = Server(declared, mapping="binary")
    server.cuts = [-10]  # inside STREAM_END (28 bytes): the final response arrived whole
    with caplog.at_level(logging.WARNING, logger="mcp_framing"):
        outcomes, transport = await session_run(server, ["kept"], mapping="binary", retries=RetrySchedule())
    assert outcomes == ["kept"]  # delivered (SPEC.md §7 row 4), not retried
    assert len([r for r in server.requests if b"tools/call" in r.content]) == 1
    delivered = [o for o in transport.stats.outcomes if not o.sentinel_seen]
    assert [(o.classification, o.regime) for o in delivered] == [("clean", "B")]
    assert any("without its sentinel" in r.getMessage() for r in caplog.records)


DEDUPLICATING = contract(deduplication={"methods": ["tools/call"], "windowMs": 60000, "scope": "principal"})
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


async def post_events(server: Server, message: dict, **options: Any) -> list[bytes]:
    """Posts `message` (after an initialize) through the transport; the data of every event the
    SDK would read, as bytes."""
    async with server.client(**options) as http:
        for sent in (INITIALIZE, message):
            reply = await http.post(URL, json=sent, headers={"accept": "application/json, text/event-stream"})
        events = reply.content.split(b"\n\n")
    return [b"\n".join(line[6:] for line in e.split(b"\n") if line.startswith(b"data: ")) for e in events if e]


@pytest.mark.anyio
async def test_a_retried_final_response_comes_back_byte_for_byte_but_for_its_id() -> None:
    # What a parse and a dump would change: member order, number spellings, unicode escapes,
    # whitespace.
    raw = '{"result": {"z":1.0,"a":1e2,"n":-0,"s":"caf\\u00e9 \\ud83d\\ude00 \\/"}, "jsonrpc":"2.0",  "id" : {id} }'
    server = Server(DEDUPLICATING)
    server.deduplicate = True
    server.raw_call_response = raw.encode()
    server.cuts = [120, None]
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    events = await post_events(server, call, retries=RetrySchedule(max_attempts=2, initial_backoff=0.0))
    sent = [json.loads(r.content)["id"] for r in server.requests if b"tools/call" in r.content]
    assert sent == [7, "7~attempt-2"]
    assert events[-1] == raw.replace("{id}", "7").encode()


@pytest.mark.anyio
async def test_a_retried_final_response_with_two_ids_fails_as_a_duplicate_id() -> None:
    server = Server(DEDUPLICATING)
    server.deduplicate = True
    server.raw_call_response = b'{"jsonrpc":"2.0","id":"elsewhere","result":{},"id":{id}}'
    server.cuts = [120, None]
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    events = await post_events(server, call, retries=RetrySchedule(max_attempts=2, initial_backoff=0.0))
    error = json.loads(events[-1])
    assert error["id"] == 7
    data = error["error"]["data"][OUTCOME_DATA_KEY]
    assert (data["classification"], data["kind"], data["attempts"]) == ("invalid_message", "DuplicateId", 2)
    assert data["retryDecision"] == "do_not_retry"
    assert "regime" not in data  # not a stream outcome (§11.7)


@pytest.mark.anyio
async def test_a_message_after_the_final_response_fails_the_call_as_message_after_final_response() -> None:
    server = Server(contract())
    server.after_final = True
    (failed,), transport = await session_run(server, ["x"])
    data = report(failed)
    assert (data["classification"], data["kind"], data["regime"]) == ("abandoned", "MessageAfterFinalResponse", "B")
    assert (data["retryDecision"], data["retryReason"]) == ("surface_to_caller", "not_deduplicated")
    assert transport.stats.verified_messages == 1  # the initialize result; nothing of the call


@pytest.mark.anyio
async def test_a_verified_message_with_carriage_returns_reaches_the_sdk_as_the_same_json() -> None:
    # Only the binary and §15 mappings carry a CR; in a JSON text it is whitespace, which the SSE
    # events the SDK reads write as line breaks (as the TypeScript package does).
    server = Server(contract(), mapping="binary")
    server.raw_call_response = b'{"jsonrpc":"2.0",\r\n"id":{id},\r"result":{"content":[{"type":"text","text":"cr"}]}}'
    outcomes, transport = await session_run(server, ["x"], mapping="binary")
    assert outcomes == ["cr"]
    assert transport.stats.errors == 0


@pytest.mark.anyio
async def test_keyed_retries_are_on_by_default_where_the_server_deduplicates_and_off_with_false() -> None:
    server = Server(DEDUPLICATING)
    server.deduplicate = True
    server.cuts = [100, None]
    outcomes, transport = await session_run(server, ["one"])  # no retry option
    assert outcomes == ["one"]
    assert transport.retries.max_attempts == 4
    assert transport.stats.retries == 1
    assert sorted(server.executions.values()) == [1]
    server = Server(DEDUPLICATING)
    server.cuts = [100]
    outcomes, transport = await session_run(server, ["one"], retries=False)
    data = report(outcomes[0])
    assert (data["attempts"], data["retryDecision"], data["retryReason"]) == (1, "surface_to_caller", "keyed")


@pytest.mark.parametrize(
    "headers",
    [
        [("content-type", "text/event-stream"), ("content-type", "application/vnd.mcp-framing"), ("mcp-framing", "1")],
        [("content-type", "text/event-stream"), ("mcp-framing", "1; mapping=compat"), ("mcp-framing", "1")],
        [("content-type", "text/event-stream"), ("mcp-framing", "1"), ("mcp-framing", "1; mapping=compat")],
    ],
)
@pytest.mark.anyio
async def test_a_response_whose_field_lines_disagree_is_not_framed(headers: list[tuple[str, str]]) -> None:
    # SPEC.md §18.8: several Content-Type or Mcp-Framing lines that disagree: not framed, whatever
    # the body holds (httpx2 joins repeated fields with ", ").
    server = Server(contract())

    async def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if body["method"] == "initialize":
            return await server.handler(request)
        key = bytes.fromhex(request.headers["mcp-framing-request-key"])
        return httpx2.Response(200, headers=headers, content=Writer(key).compat([response(body["id"], {})]))

    transport = FramingTransport(httpx2.MockTransport(handler))
    body = await list_after_initialize(transport)
    data = json.loads(body.split(b"data: ", 1)[1])["error"]["data"][OUTCOME_DATA_KEY]
    assert (data["classification"], data["kind"]) == ("contract_violation", "NotFramed")


@pytest.mark.anyio
@pytest.mark.parametrize("declared", [contract(), None], ids=["declaring", "declaring-nothing"])
async def test_an_unframed_handshake_fails_at_once_as_not_framed_and_never_reaches_the_sdk(declared: Any) -> None:
    server = Server(declared)
    server.plain = True  # ignores the opt-in: the initialize result comes back unframed
    (failed,), transport = await session_run(server, ["never sent"])
    data = report(failed)  # as the Rust engine: the handshake response itself, NotFramed (§11.3, §16)
    assert (data["classification"], data["kind"], data["retryDecision"]) == (
        "contract_violation",
        "NotFramed",
        "do_not_retry",
    )
    # The message says what to do, in the Rust client's words.
    assert failed.error.message.startswith(
        "mcp-framing: response framing contract violated: response is not framed (content-type "
    )
    assert (
        "although framing was requested: the server does not frame its responses, or a proxy or gateway on the "
        "way removed the framing: put a framing layer in front of the server (mcp-frame proxy, or FramingLayer "
        "in a Rust server), or connect without mcp-framing (the SDK's stock transport)"
    ) in failed.error.message
    assert transport.stats.verified_messages == 0
    assert [json.loads(r.content)["method"] for r in server.requests] == ["initialize"]


@pytest.mark.anyio
async def test_a_retried_final_response_is_parsed_once_and_its_id_put_back_where_that_parse_found_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(DEDUPLICATING)
    server.deduplicate = True
    server.cuts = [120, None]
    text = "a result only the final response carries " * 100
    expected = {"content": [{"type": "text", "text": text}]}
    parses: list[int] = []
    raw_decode = json.JSONDecoder.raw_decode

    def counting(self: json.JSONDecoder, s: str, idx: int = 0) -> tuple[Any, int]:
        value, end = raw_decode(self, s, idx)
        if value == expected or (isinstance(value, dict) and value.get("result") == expected):
            parses.append(end - idx)  # the final response's result, read as a value or within one
        return value, end

    monkeypatch.setattr(json.JSONDecoder, "raw_decode", counting)
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}}
    events = await post_events(server, call, retries=RetrySchedule(max_attempts=2, initial_backoff=0.0))
    assert json.loads(events[-1]) == {"jsonrpc": "2.0", "id": 7, "result": expected}  # (the test's own parse)
    assert len(parses) == 2  # the §7.1 reading of the attempt's response, and the test's own: no second one


@pytest.mark.anyio
async def test_a_final_response_to_another_request_id_is_the_streams_final_response_as_in_every_client() -> None:
    # SPEC.md §7.1: the first JSON-RPC response is the final one whatever its id (HEAD echoed the
    # request key); the Rust engine and the TypeScript package deliver it the same way.
    server = Server(contract())
    server.raw_call_response = b'{"jsonrpc":"2.0","id":"someone-else","result":{}}'
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    events = await post_events(server, call)
    assert events[-1] == server.raw_call_response


@pytest.mark.anyio
async def test_a_long_response_looking_message_that_is_not_json_fails_the_call_at_once_as_the_sdks_parse_error() -> (
    None
):
    # The transport reads a final response that ends with its sentinel no further than its head
    # (SPEC.md §7.1 read lazily): the rest is the SDK's to parse, and its parser fails the
    # request for its id at once, as it did when the transport read the message whole and handed
    # it on as no response (then failing the call as NoFinalResponse, which the SDK never read).
    server = Server(contract())
    text = b"x" * 8000
    server.raw_call_response = (
        b'{"jsonrpc":"2.0","id":{id},"result":{"content":[{"type":"text","text":"' + text + b'"}]}'
    )
    with anyio.fail_after(10):
        (failed,), _ = await session_run(server, ["unused"])
    assert isinstance(failed, MCPError) and failed.error.code == -32700, failed  # the SDK's PARSE_ERROR
    assert "Failed to parse SSE message" in failed.error.message
