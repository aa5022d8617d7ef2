"""A stock MCP client: the official Python SDK (`mcp`, pinned in requirements.txt) over its own
Streamable HTTP transport, exactly as a user would write it. It never opts in to framing.

For every URL given it runs `initialize`, `tools/list` and `tools/call generate_text`, checks the
result byte for byte against the text it derives itself from the arguments (the server's rule,
written down in examples/rmcp_server.rs), and prints one JSON line:

    {"client": "python", "url": ..., "outcome": "ok" | "error", "phase": ..., "tools": [...],
     "bytes": N, "sha256": hex, "match": bool, "error": ..., "code": JSON-RPC error code,
     "seconds": ..., "warnings": [...]}

`warnings` holds every record the SDK (or anything else) logged at WARNING or above, and every
Python warning. Exit status 0 when every URL gave the exact text and no warning, 1 otherwise.

Usage: client.py [--seed S] [--lines N] [--timeout SECONDS] URL...
(--timeout sets the SDK's per-request read timeout; without it the SDK's defaults apply.)
"""

import argparse
import asyncio
import hashlib
import json
import logging
import sys
import time
import warnings

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


def expected_text(seed: str, lines: int) -> str:
    """The server's `generate_text` rule (examples/rmcp_server.rs)."""
    out = []
    for i in range(lines):
        run = chr(ord("a") + i % 26) * (i % 64)
        out.append(f'{i:06} {seed} "quoted" back\\slash\ttab café ✓ {run}\n')
    return "".join(out)


class Capture(logging.Handler):
    """Keeps every log record at WARNING or above."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def leaves(exc: BaseException) -> list[BaseException]:
    """The exception, or the leaves of an exception group (anyio's task groups raise those)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaves(e)]
    return [exc]


async def run(url: str, seed: str, lines: int, timeout: float | None, capture: Capture) -> dict:
    report: dict = {"client": "python", "url": url, "phase": "initialize"}
    start = time.monotonic()
    try:
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=timeout) as session:
                init = await session.initialize()
                report["protocol"] = init.protocol_version
                report["phase"] = "tools/list"
                tools = await session.list_tools()
                report["tools"] = sorted(tool.name for tool in tools.tools)
                report["phase"] = "tools/call"
                start = time.monotonic()
                result = await session.call_tool("generate_text", {"seed": seed, "lines": lines})
                report["seconds"] = round(time.monotonic() - start, 3)
                if result.is_error:
                    raise RuntimeError(f"tool error: {result.content}")
                text = result.content[0].text
                data = text.encode("utf-8")
                report["bytes"] = len(data)
                report["sha256"] = hashlib.sha256(data).hexdigest()
                report["match"] = text == expected_text(seed, lines)
                report["outcome"] = "ok"
    except BaseException as exc:  # noqa: BLE001 - every failure is reported, none is hidden
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        report.setdefault("seconds", round(time.monotonic() - start, 3))
        report["outcome"] = "error"
        report["error"] = "; ".join(f"{type(e).__name__}: {e}" for e in leaves(exc))
        codes = [e.code for e in leaves(exc) if isinstance(getattr(e, "code", None), int)]
        if codes:
            report["code"] = codes[0]
    report["warnings"] = list(capture.records)
    capture.records.clear()
    return report


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", default="stock-clients")
    parser.add_argument("--lines", type=int, default=1200)
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("urls", nargs="+")
    args = parser.parse_args()

    capture = Capture()
    root = logging.getLogger()
    root.addHandler(capture)
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)
    warnings.simplefilter("default")

    clean = True
    for url in args.urls:
        report = await run(url, args.seed, args.lines, args.timeout, capture)
        clean &= report["outcome"] == "ok" and report.get("match") is True and not report["warnings"]
        print(json.dumps(report), flush=True)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
