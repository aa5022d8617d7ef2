"""The official Python SDK (`mcp`, pinned in tests/stock_clients/requirements.txt) with the
package's wrapper (`mcp_framing.framing_http_client`), as a user writes it; run by
tests/python_client.rs against real servers.

    driver.py calls URL --calls N [--seed S --lines N] [--mapping compat|binary|sse]
        initialize, then N `generate_text` calls; one JSON line per call:
        {"call": i, "outcome": "ok" | "error", "seconds": s, "sha256": hex, "match": bool,
         "error": message, "code": int, "report": {...outcome report...}}
        then {"stats": {...}} (what the wrapper handed the SDK).
    driver.py fleet URL,URL --calls N [--tool charge|count --key-prefix P]
        server/discover, then N `charge` calls (or `count {key: P-i}` calls, the tool of the
        fixture servers of tests/servers/) with keyed retries over both endpoints (each attempt
        resolved with server/discover); the same JSON lines.

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

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_framing import (
    OUTCOME_DATA_KEY,
    DiscoveringResolver,
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


async def call(
    session: ClientSession, i: int, tool: str, arguments: dict, expected: str | None
) -> None:
    line: dict = {"call": i}
    start = time.monotonic()
    try:
        result = await session.call_tool(tool, arguments)
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
    emit(line)


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
                await call(
                    session,
                    i,
                    "generate_text",
                    {"seed": args.seed, "lines": args.lines},
                    expected,
                )
        emit({"stats": stats(http)})


async def fleet(args: argparse.Namespace) -> None:
    endpoints = args.url.split(",")
    retries = RetrySchedule(max_attempts=4, initial_backoff=0.02)
    async with framing_http_client(
        resolver=DiscoveringResolver(endpoints), retries=retries
    ) as http:
        async with (
            streamable_http_client(endpoints[0], http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.discover()
            for i in range(args.calls):
                if args.tool == "count":
                    tool, arguments = "count", {"key": f"{args.key_prefix}-{i}"}
                else:
                    tool, arguments = (
                        "charge",
                        {"account": f"acct-{i}", "amount": 100 + i},
                    )
                await call(session, i, tool, arguments, None)
        emit({"stats": stats(http)})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["calls", "fleet"])
    parser.add_argument("url")
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--seed", default="python-client")
    parser.add_argument("--lines", type=int, default=1200)
    parser.add_argument("--mapping", default="compat")
    parser.add_argument("--tool", choices=["charge", "count"], default="charge")
    parser.add_argument("--key-prefix", default="python")
    args = parser.parse_args()
    root = logging.getLogger()
    root.addHandler(Log(logging.WARNING))
    root.setLevel(logging.WARNING)
    asyncio.run(calls(args) if args.what == "calls" else fleet(args))


if __name__ == "__main__":
    main()
