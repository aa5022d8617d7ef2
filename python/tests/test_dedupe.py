"""Deduplication behind `FramingMiddleware` (SPEC.md §17): a keyed call executes once and its
retries replay it, on the in-memory store and on Redis; a call keeps running when its client goes
away; a Rust server (examples/fleet.rs) and a Python server on one Redis replay each other's
records. Needs `redis-server` (scripts/test installs it) and, for the cross-language test, cargo."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
import redis.asyncio as aioredis
from mcp.server.mcpserver import MCPServer

from mcp_framing import body_decoder
from mcp_framing.server import Deduplicator, FramingMiddleware, MemoryStore, RedisStore
from mcp_framing.server.dedupe import DEDUPE_DATA_KEY, REQUEST_KEY_META
from servers import serve
from support import REPO

HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


class Ledger:
    """An MCP server whose `charge` tool counts its executions; `gate` holds it until set."""

    def __init__(self) -> None:
        self.executions = 0
        self.started = asyncio.Event()
        self.gate: asyncio.Event | None = None
        mcp = MCPServer("ledger")

        @mcp.tool()
        async def charge(account: str, amount: int) -> str:
            self.started.set()
            if self.gate is not None:
                await self.gate.wait()
            self.executions += 1
            return f"charged {amount} to {account}"

        self.mcp = mcp

    def app(self, dedup: Deduplicator, json_response: bool = False) -> Any:
        inner = self.mcp.streamable_http_app(stateless_http=True, json_response=json_response)
        return FramingMiddleware(inner, dedupe=dedup)


def charge(key: str, id_: int, amount: int = 5, account: str = "acme") -> dict[str, Any]:
    meta = {"io.github.mcp-framing/requestKey": key}
    params = {"name": "charge", "arguments": {"account": account, "amount": amount}, "_meta": meta}
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


def final(response: httpx2.Response) -> dict[str, Any]:
    """The final JSON-RPC response of a JSON or SSE body."""
    if response.headers["content-type"].startswith("application/json"):
        return json.loads(response.content)
    data = [line[5:].strip() for line in response.content.splitlines() if line.startswith(b"data:")]
    return json.loads(data[-1])


@pytest.mark.anyio
@pytest.mark.parametrize("json_response", [False, True])
async def test_a_keyed_call_executes_once_and_its_retry_replays_it_under_its_own_id(json_response: bool) -> None:
    ledger = Ledger()
    key = os.urandom(16).hex()
    async with serve(ledger.app(Deduplicator(MemoryStore()), json_response)) as url, httpx2.AsyncClient() as http:
        first = await http.post(url, json=charge(key, 1), headers=HEADERS)
        retry = await http.post(url, json=charge(key, 7), headers=HEADERS)
        other = await http.post(url, json=charge(os.urandom(16).hex(), 8), headers=HEADERS)
    assert ledger.executions == 2  # the first call and the other key, never the retry
    assert first.headers["mcp-framing-dedupe"] == "execute"
    assert retry.headers["mcp-framing-dedupe"] == "replay"
    assert final(retry) == dict(final(first), id=7)
    assert final(other)["id"] == 8


@pytest.mark.anyio
async def test_a_key_reused_with_other_arguments_is_refused_as_a_conflict() -> None:
    ledger = Ledger()
    key = os.urandom(16).hex()
    async with serve(ledger.app(Deduplicator(MemoryStore()))) as url, httpx2.AsyncClient() as http:
        await http.post(url, json=charge(key, 1), headers=HEADERS)
        conflict = await http.post(url, json=charge(key, 2, amount=6), headers=HEADERS)
    error = final(conflict)["error"]
    assert error["code"] == -32080
    assert error["data"][DEDUPE_DATA_KEY]["reason"] == "key_conflict"
    assert ledger.executions == 1


@pytest.mark.anyio
async def test_a_replay_is_framed_afresh_for_a_client_that_opted_in() -> None:
    ledger = Ledger()
    key = os.urandom(16)
    framed = dict(HEADERS, **{"mcp-framing": "1", "mcp-framing-request-key": key.hex()})
    framed["mcp-framing-mapping"] = "compat"
    async with serve(ledger.app(Deduplicator(MemoryStore()))) as url, httpx2.AsyncClient() as http:
        first = await http.post(url, json=charge(key.hex(), 1), headers=framed)
        retry = await http.post(url, json=charge(key.hex(), 2), headers=framed)
    for response, id_ in ((first, 1), (retry, 2)):
        decoder = body_decoder("compat", request_key=key)
        messages = decoder.feed(response.content)
        assert decoder.finish().verdict == "clean"
        assert json.loads(messages[-1])["id"] == id_
    assert ledger.executions == 1


@pytest.mark.anyio
async def test_a_keyed_call_runs_to_its_end_when_its_client_goes_away_and_the_retry_gets_its_result() -> None:
    ledger = Ledger()
    ledger.gate = asyncio.Event()
    key = os.urandom(16).hex()
    async with serve(ledger.app(Deduplicator(MemoryStore()))) as url, httpx2.AsyncClient() as http:

        async def first() -> None:
            await http.post(url, json=charge(key, 1), headers=HEADERS)

        task = asyncio.ensure_future(first())
        await ledger.started.wait()
        task.cancel()  # the client goes away while the tool runs
        with pytest.raises(asyncio.CancelledError):
            await task
        ledger.gate.set()
        retry = await http.post(url, json=charge(key, 2), headers=HEADERS)
    assert final(retry)["result"]["content"][0]["text"] == "charged 5 to acme"
    assert ledger.executions == 1


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Any]:
    client = aioredis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.mark.anyio
async def test_two_python_servers_on_one_redis_execute_a_keyed_call_once(redis_client: Any) -> None:
    a, b = Ledger(), Ledger()
    key = os.urandom(16).hex()
    async with (
        serve(a.app(Deduplicator(RedisStore(redis_client)))) as url_a,
        serve(b.app(Deduplicator(RedisStore(redis_client)))) as url_b,
        httpx2.AsyncClient() as http,
    ):
        first = await http.post(url_a, json=charge(key, 1), headers=HEADERS)
        retry = await http.post(url_b, json=charge(key, 2), headers=HEADERS)
        record = await redis_client.hgetall("mcp-framing:dedupe:" + _only_key(await redis_client.keys("*")))
    assert (a.executions, b.executions) == (1, 0)
    assert retry.headers["mcp-framing-dedupe"] == "replay"
    assert final(retry) == dict(final(first), id=2)
    assert record[b"s"] == b"r" and record[b"g"] == b"1" and re.fullmatch(rb"[0-9a-f]{32}", record[b"t"])


def _only_key(keys: list[bytes]) -> str:
    assert len(keys) == 1, keys
    return keys[0].decode().removeprefix("mcp-framing:dedupe:")


@pytest.mark.anyio
async def test_the_redis_scripts_answer_as_the_store_vectors_say(redis_client: Any) -> None:
    store = RedisStore(redis_client)
    token, other = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
    fp = "38cba6e2a1fa5ddb985655c4acb1f841a8ad90e7241c31a2f7df0f4c5bece83d"
    assert await store.claim("k", fp, token, 30_000, 86_400_000, True) == ["claimed", 1]
    state, left = await store.claim("k", fp, other, 30_000, 86_400_000, True)
    assert state == "in_flight" and 0 < left <= 30_000
    assert (await store.claim("k", "0" * 64, other, 30_000, 86_400_000, True)) == ["conflict", fp]
    assert await store.renew("k", other, 30_000) is False
    assert await store.complete("k", other, "r", b"{}", 86_400_000) is False
    assert await store.complete("k", token, "r", b'{"content": []}', 86_400_000) is True
    assert await store.complete("k", token, "r", b"{}", 86_400_000) is True  # again: already done
    assert await store.claim("k", fp, other, 30_000, 86_400_000, True) == ["done", "r", b'{"content": []}']
    fields = await redis_client.hgetall("mcp-framing:dedupe:k")
    assert fields == {b"s": b"r", b"fp": fp.encode(), b"t": token.encode(), b"g": b"1", b"r": b'{"content": []}'}
    assert 86_000_000 < await redis_client.pttl("mcp-framing:dedupe:k") <= 86_400_000


def fleet_backend(redis_url: str) -> tuple[subprocess.Popen[str], str]:
    """The Rust crate's fleet backend (rmcp behind `FramingLayer::dedupe` on a `RedisStore`)."""
    cargo = shutil.which("cargo")
    assert cargo, "cargo is needed"
    command = [cargo, "run", "--quiet", "--features", "rmcp,redis,demo", "--example", "fleet", "--"]
    proc = subprocess.Popen(
        [*command, "backend", "--redis", redis_url, "--name", "rust"], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"listening (http://\S+)", line)
    assert match, f"the fleet backend said {line!r}"
    return proc, match.group(1)


@pytest.mark.anyio
async def test_a_rust_server_and_a_python_server_on_one_redis_replay_each_others_records(
    redis_url: str, redis_client: Any
) -> None:
    proc, rust_url = await asyncio.to_thread(fleet_backend, redis_url)
    ledger = Ledger()
    python_app = ledger.app(Deduplicator(RedisStore(redis_client, prefix="fleet-demo:")))
    try:
        async with serve(python_app) as python_url, httpx2.AsyncClient(timeout=30) as http:
            rust_first = os.urandom(16).hex()
            by_rust = await http.post(rust_url, json=charge(rust_first, 1), headers=HEADERS)
            replayed_by_python = await http.post(python_url, json=charge(rust_first, 2), headers=HEADERS)
            python_first = os.urandom(16).hex()
            by_python = await http.post(python_url, json=charge(python_first, 3, amount=9), headers=HEADERS)
            replayed_by_rust = await http.post(rust_url, json=charge(python_first, 4, amount=9), headers=HEADERS)
            stats = (await http.get(rust_url.removesuffix("/mcp") + "/stats")).json()
    finally:
        proc.terminate()
        proc.wait()
    assert by_rust.headers["mcp-framing-dedupe"] == "execute"
    assert replayed_by_python.headers["mcp-framing-dedupe"] == "replay"
    assert final(replayed_by_python) == dict(final(by_rust), id=2)
    assert by_python.headers["mcp-framing-dedupe"] == "execute"
    assert replayed_by_rust.headers["mcp-framing-dedupe"] == "replay"
    assert final(replayed_by_rust)["result"] == final(by_python)["result"]
    assert final(replayed_by_rust)["id"] == 4
    assert stats["executions"] == 1 and ledger.executions == 1


@pytest.mark.anyio
async def test_an_explicit_cancellation_still_reaches_the_handler_of_a_keyed_call() -> None:
    cancelled = asyncio.Event()
    started = asyncio.Event()
    mcp = MCPServer("cancellable")

    @mcp.tool()
    async def wait_forever() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    # A session (stateful mode): the cancellation is a notification on the session (MCP 2025-*).
    app = FramingMiddleware(mcp.streamable_http_app(), dedupe=Deduplicator(MemoryStore()))
    async with serve(app) as url, httpx2.AsyncClient(timeout=30) as http:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        response = await http.post(url, json=init, headers=HEADERS)
        session = dict(HEADERS, **{"mcp-session-id": response.headers["mcp-session-id"]})
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        params = {"name": "wait_forever", "arguments": {}, "_meta": {REQUEST_KEY_META: os.urandom(16).hex()}}
        call = asyncio.ensure_future(
            http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}, headers=session)
        )
        await started.wait()
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        await http.post(url, json=cancel, headers=session)
        await cancelled.wait()
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
    assert cancelled.is_set()


def cut_first_attempts(app: Any, cut_keys: set[str], offsets: list[int]) -> Any:
    """Ends the body of a key's first `tools/call` response normally after the next offset's
    bytes (a proxy's idle timeout), whichever server it reached; later attempts pass."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        key = dict(scope["headers"]).get(b"mcp-framing-request-key", b"").decode()
        body = b""

        async def peek() -> Any:
            nonlocal body
            message = await receive()
            body += message.get("body", b"")
            return message

        state = {"left": None, "done": False}

        async def cut(message: dict[str, Any]) -> None:
            if state["done"]:
                return
            first = key and key not in cut_keys and b'"tools/call"' in body
            if state["left"] is None and message["type"] == "http.response.start" and first:
                cut_keys.add(key)
                state["left"] = offsets.pop(0)
            left = state["left"]
            if left is not None and message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if len(chunk) >= left:
                    state["done"] = True
                    message = {"type": "http.response.body", "body": chunk[:left], "more_body": False}
                else:
                    state["left"] = left - len(chunk)
            await send(message)

        await app(scope, peek, cut)

    return wrapped


class Alternating:
    """Every attempt to the next of two endpoints (a retry lands on the other server)."""

    def __init__(self, endpoints: list[str]) -> None:
        self.endpoints = endpoints
        self.n = 0

    async def resolve(self, url: str) -> Any:
        from mcp_framing import Resolution

        self.n += 1
        return Resolution(self.endpoints[self.n % 2])


@pytest.mark.anyio
async def test_cut_keyed_calls_retried_across_two_servers_on_one_redis_execute_once_each(redis_client: Any) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from mcp_framing import framing_http_client, framing_transport

    a, b = Ledger(), Ledger()
    cut_keys: set[str] = set()
    offsets = [1 + 13 * i for i in range(24)]  # within the response: its record, its event
    app_a = cut_first_attempts(a.app(Deduplicator(RedisStore(redis_client))), cut_keys, offsets)
    app_b = cut_first_attempts(b.app(Deduplicator(RedisStore(redis_client))), cut_keys, offsets)
    results = []
    async with serve(app_a) as url_a, serve(app_b) as url_b:
        resolver = Alternating([url_a, url_b])
        async with (
            framing_http_client(resolver=resolver) as http,
            streamable_http_client(url_a, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for i in range(24):
                result = await session.call_tool("charge", {"account": f"acct-{i}", "amount": i})
                results.append(result.content[0].text)  # type: ignore[union-attr]
            stats = framing_transport(http).stats
    assert results == [f"charged {i} to acct-{i}" for i in range(24)]
    assert len(cut_keys) == 24  # every call was cut once
    assert a.executions + b.executions == 24  # one execution per logical call
    assert stats.retries == 24 and stats.incomplete == 24  # every cut seen, and retried once


class DownStore(MemoryStore):
    """A store that cannot be reached."""

    async def claim(self, *args: Any) -> list[Any]:
        raise ConnectionError("connection refused")


@pytest.mark.anyio
async def test_a_store_that_cannot_be_reached_refuses_the_call_and_never_runs_it_unprotected() -> None:
    ledger = Ledger()
    async with serve(ledger.app(Deduplicator(DownStore()))) as url, httpx2.AsyncClient() as http:
        response = await http.post(url, json=charge(os.urandom(16).hex(), 1), headers=HEADERS)
    error = final(response)["error"]
    assert error["code"] == -32084
    assert error["data"][DEDUPE_DATA_KEY]["retryable"] is True
    assert ledger.executions == 0


@pytest.mark.anyio
async def test_a_duplicate_that_outwaits_its_bound_is_refused_in_progress_and_the_call_runs_once() -> None:
    ledger = Ledger()
    ledger.gate = asyncio.Event()
    key = os.urandom(16).hex()
    async with serve(ledger.app(Deduplicator(MemoryStore(), wait=0.05))) as url, httpx2.AsyncClient() as http:
        first = asyncio.ensure_future(http.post(url, json=charge(key, 1), headers=HEADERS))
        await ledger.started.wait()
        duplicate = await http.post(url, json=charge(key, 2), headers=HEADERS)
        ledger.gate.set()
        await first
    error = final(duplicate)["error"]
    assert (error["code"], error["data"][DEDUPE_DATA_KEY]["reason"]) == (-32081, "in_progress")
    assert ledger.executions == 1


@pytest.mark.anyio
@pytest.mark.parametrize("policy", ["reexecute", "refuse"])
async def test_an_expired_lease_is_taken_over_or_refused_as_outcome_unknown_by_policy(policy: str) -> None:
    from mcp_framing.server import Refusal
    from mcp_framing.server.dedupe import Execution, KeyedCall

    now = [1000.0]
    store = MemoryStore(clock=lambda: now[0])
    dedup = Deduplicator(store, lease=30.0, on_expired_lease=policy)  # type: ignore[arg-type]
    call = KeyedCall.from_request(charge(os.urandom(16).hex(), 1), None, None)
    assert call is not None
    first = await dedup.begin(call)
    assert isinstance(first, Execution)
    first.abandon()  # the holder stopped: no renewal, no completion
    now[0] += 31  # past the lease
    if policy == "reexecute":
        second = await dedup.begin(call)
        assert isinstance(second, Execution)
        second.abandon()
        assert (await store.claim(call.store_key, call.fingerprint, "x" * 32, 1, 1, True))[0] == "in_flight"
        # the first holder's completion is fenced off
        assert await first.complete(b'{"jsonrpc":"2.0","id":1,"result":{}}') == "lease_lost"
    else:
        with pytest.raises(Refusal) as refused:
            await dedup.begin(call)
        assert (refused.value.reason, refused.value.code) == ("outcome_unknown", -32083)


def test_covered_meta_entries_are_part_of_the_fingerprint_and_the_rest_of_meta_is_not() -> None:
    from mcp_framing.server.dedupe import fingerprint

    base = {"name": "t", "arguments": {"a": 1}}
    assert fingerprint(dict(base, _meta={"progressToken": 1})) == fingerprint(dict(base, _meta={"progressToken": 2}))
    covered = ("tenant",)
    one = fingerprint(dict(base, _meta={"tenant": "a", "progressToken": 1}), covered)
    two = fingerprint(dict(base, _meta={"tenant": "b", "progressToken": 1}), covered)
    assert one != two
    assert fingerprint(dict(base, _meta={"progressToken": 1}), covered) == fingerprint(base)
