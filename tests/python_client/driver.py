"""The official Python SDK (`mcp`, pinned in tests/stock_clients/requirements.txt) with the
package's wrapper (`mcp_framing.framing_http_client`), as a user writes it; run by
tests/stock/python_client.rs against real servers.

    driver.py calls URL --calls N [--seed S --lines N] [--mapping compat|binary|sse]
        initialize, then N `generate_text` calls; one JSON line per call:
        {"call": i, "outcome": "ok" | "error", "seconds": s, "sha256": hex, "match": bool,
         "error": message, "code": int, "report": {...outcome report...}}
        then {"stats": {...}} (what the wrapper handed the SDK).
    driver.py fleet URL[,URL...] --calls N [--tool TOOL[,TOOL...] --key-prefix P --ms MS]
                    [--handshake discover|initialize] [--retry-after FILE] [--attempts N]
        server/discover, then N `charge` calls (or, the tools of the fixture servers of
        tests/servers/, `count {key: P-i}` / `slow {key: P-i, ms: MS}` calls, several tools
        taken in turn) with keyed retries over the endpoints in turn (each attempt resolved with
        server/discover); the same JSON lines, each with the wall-clock time its call ended
        ("ended", seconds since the epoch) and the classification of each attempt sent during
        it ("attempts": the call's, then any request the SDK adds, as the `tools/list` it sends
        to learn a tool's output schema), and how long each attempt took ("attempt_seconds",
        in the same order: from its resolution to the next attempt's, or to the call's end).
        `--handshake initialize`: initialize instead, every
        attempt resolved with that result's contract (a server without server/discover).
        `--retry-after FILE`: a retry of a `slow` call is sent once FILE (the fixture servers'
        counter file) records the call's completion, `slow P-i`. `--attempts`: a call's attempts
        in all (default 4; 1: no retries).

Every log record at WARNING or above is printed to stderr as "LOG <level> <logger>: <message>".
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_framing import (
    OUTCOME_DATA_KEY,
    DiscoveringResolver,
    EndpointResolver,
    Resolution,
    RetrySchedule,
    framing_http_client,
    framing_transport,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stock_clients"))
from client import expected_text  # the stock client's copy of the server's rule


class Log(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        print(
            f"LOG {record.levelname} {record.name}: {record.getMessage()}",
            file=sys.stderr,
            flush=True,
        )


def emit(line: dict) -> None:
    print(json.dumps(line), flush=True)


async def progress(done: float, total: float | None, message: str | None) -> None:
    """Asking for progress: the request carries a progressToken, so the fixture servers' `slow`
    tool sends a notification first and an SSE response begins while it runs."""


async def call(
    session: ClientSession, i: int, tool: str, arguments: dict, expected: str | None
) -> dict:
    line: dict = {"call": i}
    start = time.monotonic()
    try:
        result = await session.call_tool(
            tool, arguments, progress_callback=progress if tool == "slow" else None
        )
        text = result.content[0].text
        line.update(
            outcome="ok",
            sha256=hashlib.sha256(text.encode()).hexdigest(),
            text=text[:80],
        )
        if expected is not None:
            line["match"] = text == expected
    except MCPError as err:
        line.update(outcome="error", error=err.error.message, code=err.error.code)
        data = err.error.data if isinstance(err.error.data, dict) else {}
        line["report"] = data.get(OUTCOME_DATA_KEY)
    line["seconds"] = round(time.monotonic() - start, 4)
    line["ended"] = time.time()
    return line


def stats(http) -> dict:
    s = framing_transport(http).stats
    return {
        "verified_messages": s.verified_messages,
        "messages_verified_by_attempts": sum(o.received.messages for o in s.outcomes),
        "complete": s.complete,
        "incomplete": s.incomplete,
        "attempts": s.attempts,
        "retries": s.retries,
        "errors": s.errors,
    }


async def calls(args: argparse.Namespace) -> None:
    expected = expected_text(args.seed, args.lines)
    async with framing_http_client(mapping=args.mapping) as http:
        async with (
            streamable_http_client(args.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            try:
                await session.initialize()
            except MCPError as err:
                data = err.error.data if isinstance(err.error.data, dict) else {}
                emit(
                    {
                        "call": "initialize",
                        "outcome": "error",
                        "error": err.error.message,
                        "report": data.get(OUTCOME_DATA_KEY),
                    }
                )
                emit({"stats": stats(http)})
                return
            for i in range(args.calls):
                line = await call(
                    session,
                    i,
                    "generate_text",
                    {"seed": args.seed, "lines": args.lines},
                    expected,
                )
                emit(line)
        emit({"stats": stats(http)})


class RoundRobin:
    """The endpoints in turn, each attempt with the contract of the session's `initialize`
    result (`Resolution` without a discovery): a fleet whose servers do not answer
    server/discover (the TypeScript SDK's v1 line)."""

    def __init__(self, endpoints: list[str]) -> None:
        self.endpoints = endpoints
        self._next = 0

    async def resolve(self, url: str) -> Resolution:
        endpoint = self.endpoints[self._next % len(self.endpoints)]
        self._next += 1
        return Resolution(endpoint)


class RetryAfterCompletion:
    """`inner`'s resolutions; before a retry of the current `slow` call (a second resolution
    for its key), waits until the counter file records the call's completion, so that the
    retry finds the result recorded rather than still running."""

    def __init__(self, inner: EndpointResolver, counter_file: Path) -> None:
        self.inner = inner
        self.counter_file = counter_file
        self.key = ""
        self.resolutions = 0

    def bind(self, transport: Any) -> None:
        """What the framing transport binds: `inner`'s (its discovery requests)."""
        bind = getattr(self.inner, "bind", None)
        if bind is not None:
            bind(transport)

    def next_call(self, key: str) -> None:
        self.key, self.resolutions = key, 0

    async def resolve(self, url: str) -> Resolution:
        self.resolutions += 1
        if self.resolutions > 1:
            line = f"slow {self.key}".encode()
            deadline = time.monotonic() + 60
            while line not in self.counter_file.read_bytes().splitlines():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no `{line.decode()}` recorded within a minute")
                await asyncio.sleep(0.01)
        return await self.inner.resolve(url)


class Timed:
    """`inner`'s resolutions, each one's start time noted (`starts`): an attempt's resolution
    begins it, so an attempt lasts from its own to the next one's (or to its call's end)."""

    def __init__(self, inner: EndpointResolver) -> None:
        self.inner = inner
        self.starts: list[float] = []

    def bind(self, transport: Any) -> None:
        """What the framing transport binds: `inner`'s (its discovery requests)."""
        bind = getattr(self.inner, "bind", None)
        if bind is not None:
            bind(transport)

    async def resolve(self, url: str) -> Resolution:
        self.starts.append(time.monotonic())
        return await self.inner.resolve(url)


async def fleet(args: argparse.Namespace) -> None:
    endpoints = args.url.split(",")
    retries = RetrySchedule(max_attempts=args.attempts, initial_backoff=0.02)
    discover = args.handshake == "discover"
    resolver: EndpointResolver = (
        DiscoveringResolver(endpoints) if discover else RoundRobin(endpoints)
    )
    resolver = timed = Timed(resolver)
    waiting = None
    if args.retry_after is not None:
        resolver = waiting = RetryAfterCompletion(resolver, Path(args.retry_after))
    tools = args.tool.split(",")
    async with framing_http_client(resolver=resolver, retries=retries) as http:
        async with (
            streamable_http_client(endpoints[0], http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            if discover:
                await session.discover()
            else:
                await session.initialize()
            for i in range(args.calls):
                tool = tools[i % len(tools)]
                key = f"{args.key_prefix}-{i}"
                if waiting is not None:
                    waiting.next_call(key)
                if tool == "count":
                    arguments: dict = {"key": key}
                elif tool == "slow":
                    arguments = {"key": key, "ms": args.ms}
                else:
                    arguments = {"account": f"acct-{i}", "amount": 100 + i}
                outcomes = framing_transport(http).stats.outcomes
                before = len(outcomes)
                timed.starts.clear()
                line = await call(session, i, tool, arguments, None)
                ends = [*timed.starts[1:], time.monotonic()]
                line["attempts"] = [o.classification for o in outcomes[before:]]
                line["attempt_seconds"] = [
                    round(end - start, 4) for start, end in zip(timed.starts, ends)
                ]
                emit(line)
        emit({"stats": stats(http)})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["calls", "fleet"])
    parser.add_argument("url")
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--seed", default="python-client")
    parser.add_argument("--lines", type=int, default=1200)
    parser.add_argument("--mapping", default="compat")
    parser.add_argument(
        "--tool", default="charge", help="charge, count, slow; or a list"
    )
    parser.add_argument("--key-prefix", default="python")
    parser.add_argument("--ms", type=int, default=1000, help="how long `slow` sleeps")
    parser.add_argument(
        "--handshake", choices=["discover", "initialize"], default="discover"
    )
    parser.add_argument("--retry-after", default=None, metavar="COUNTER_FILE")
    parser.add_argument("--attempts", type=int, default=4, help="1: no retries")
    args = parser.parse_args()
    root = logging.getLogger()
    root.addHandler(Log(logging.WARNING))
    root.setLevel(logging.WARNING)
    asyncio.run(calls(args) if args.what == "calls" else fleet(args))


if __name__ == "__main__":
    main()
