"""The fixture servers' tools, shared by the two Python servers (sdk_python.py, fastmcp_app.py;
the Node.js servers' twin is tools.mjs): the same four tools in every fixture server, whatever
its SDK, so that one test drives them all.

- generate_text {seed, lines}: the text of examples/rmcp_server.rs's rule (mixed UTF-8 with
  multi-byte characters, deterministic; `expected_text` of tests/stock_clients/client.py), so
  that the stock clients check it byte for byte as they check the rmcp server's;
- count {key}: records one execution of `count KEY` and returns "count KEY N", N the executions
  of that key recorded so far;
- slow {key, ms}: sends one progress notification (to the request's progressToken, when it has
  one: an SSE response has begun), records `slow-start KEY`, sleeps `ms` milliseconds, then
  records `slow KEY` (an execution that the client's going away cancelled records no
  `slow KEY`);
- notify {seed, lines, steps}: sends `steps` progress notifications (to the request's
  progressToken, when it has one) before the result of generate_text {seed, lines}, so that the
  response is an SSE stream.

Every execution that completes appends one line "TOOL KEY\\n" to the counter file
(`--counter-file PATH`) in one write of an O_APPEND descriptor: atomic, so that server processes
can share one file, and the test counts executions by reading it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stock_clients"))
from client import expected_text  # the rule, written down once for Python

COUNTER_FILE = ""


def options(description: str) -> argparse.Namespace:
    """The command line every fixture server takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument(
        "--json", action="store_true", help="every response application/json"
    )
    parser.add_argument("--counter-file", required=True)
    parser.add_argument(
        "--exit-with-stdin",
        action="store_true",
        help="exit when standard input closes (a test that started the server cannot leak it)",
    )
    parser.add_argument(
        "--framing",
        action="store_true",
        help="serve behind mcp_framing.server.FramingMiddleware (the package's README recipe)",
    )
    parser.add_argument(
        "--frame-all",
        choices=["compat"],
        help='with --framing: frame_all_responses="compat" (every POST framed, opted in or not)',
    )
    parser.add_argument(
        "--redis",
        metavar="URL",
        help="with --framing: deduplicate keyed tool calls on this Redis (RedisStore)",
    )
    args = parser.parse_args()
    if (args.frame_all or args.redis) and not args.framing:
        parser.error("--frame-all and --redis go with --framing")
    if args.exit_with_stdin:
        threading.Thread(target=exit_at_end_of_stdin, daemon=True).start()
    global COUNTER_FILE
    COUNTER_FILE = args.counter_file
    return args


def framing(args: argparse.Namespace) -> dict[str, Any]:
    """The `FramingMiddleware` options of the command line (`--frame-all`, `--redis`), as the
    package's README writes them: a `Deduplicator` over a `RedisStore` on a redis-py client."""
    options: dict[str, Any] = {}
    if args.frame_all:
        options["frame_all_responses"] = args.frame_all
    if args.redis:
        import redis.asyncio as redis

        from mcp_framing.server import Deduplicator, RedisStore

        options["dedupe"] = Deduplicator(RedisStore(redis.from_url(args.redis)))
    return options


def exit_at_end_of_stdin() -> None:
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


def record(tool: str, key: str) -> int:
    """Appends "TOOL KEY\\n" to the counter file; the executions of that line recorded so far."""
    line = f"{tool} {key}\n".encode()
    fd = os.open(COUNTER_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return Path(COUNTER_FILE).read_bytes().splitlines(keepends=True).count(line)


async def generate_text(seed: str, lines: int) -> str:
    """The text of the rule, `lines` lines."""
    text = expected_text(seed, lines)
    record("generate_text", seed)
    return text


async def count(key: str) -> str:
    """Records an execution of `key`; how many so far."""
    return f"count {key} {record('count', key)}"


def tools(context_type: type) -> list[Callable[..., Awaitable[str]]]:
    """The four tools, `slow` and `notify` taking the SDK's request context (`context_type`, which
    the SDK recognizes by its annotation) for their progress notifications."""

    async def slow(key: str, ms: int, ctx: Any) -> str:
        """Sleeps `ms` ms, then records an execution of `key`."""
        await ctx.report_progress(0, 1)
        record("slow-start", key)
        await asyncio.sleep(ms / 1000)
        record("slow", key)
        return f"slow {key} done after {ms} ms"

    async def notify(seed: str, lines: int, steps: int, ctx: Any) -> str:
        """`steps` progress notifications, then the text of the rule."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps)
        text = expected_text(seed, lines)
        record("notify", seed)
        return text

    for tool in (slow, notify):
        tool.__annotations__["ctx"] = context_type
    return [generate_text, count, slow, notify]


def serve(app: Any, port: int) -> None:
    """Serves the ASGI `app` under uvicorn at http://127.0.0.1:PORT/mcp; prints the ready line,
    "listening on URL", once the socket listens (connections wait in its backlog until the app's
    lifespan has started)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
