"""Speed of the server side against the same run's baselines, as medians:

- encoding: a 1 MiB JSON-RPC result written as one framed message with its STREAM_END
  (`MappingEncoder.message(final=True)`), binary and compatible mappings, divided by the median of
  `hashlib.sha256` + `zlib.crc32` of the same bytes. Goal: at most 1.3x.
- a call: a FastMCP 4.1 `tools/call` with a 64 KiB result on loopback, through
  `FramingMiddleware` (the request opted in, compatible and binary mappings) divided by the same
  call to the same app without it. Goal: at most 1.15x. The servers run under uvicorn in their own
  processes (one a variant); the client posts the requests (httpx2, one connection a server) and
  reads each body whole, alternating the servers call by call. Beside the latencies, each server
  process's CPU time a call (Linux's /proc), which the load of a shared machine does not change.

    python python/bench_server.py [--rounds N] [--calls N] [--clock wall|cpu]

After them, the same call made in this process (the app called as ASGI, no network) and timed
in CPU time: what the middleware itself adds to a call, which the loopback figures carry beside
the noise of a loaded machine.

ASCII and UTF-8 texts. The compatible mapping checks that an SSE event carries the message
unchanged (valid UTF-8, no CR, SPEC.md §18.3) and the binary one has no such check: that check's
own time is printed beside the encoding ratios. The encoding cases are timed in turn within each
round, so that every median of a round comes from the same moments of a loaded machine.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "src"), str(HERE / "tests")]

from bench import message  # noqa: E402

from mcp_framing.encoder import MappingEncoder, StreamEncoder, check_event_data  # noqa: E402


def texts() -> list[tuple[str, bytes]]:
    """The messages encoded: compact JSON (as MCP SDKs write it) of ASCII text and of text with
    UTF-8 on every line, and the latter's lines as a pretty-printed JSON array (a LF every line,
    each one a `data:` line of the compatible mapping's event)."""
    utf8 = message(True)
    lines = json.loads(utf8)["result"]["content"][0]["text"].splitlines()
    pretty = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": {"lines": lines}}}
    return [
        ("ascii", message(False)),
        ("utf-8", utf8),
        ("utf-8 pretty", json.dumps(pretty, ensure_ascii=False, indent=1).encode()),
    ]


def encoding(rounds: int, clock) -> None:
    """Each round times the floor, both mappings and the compatible mapping's event check one
    after the other, so that every median comes from the same moments of a loaded machine."""
    for text, body in texts():
        cases = {
            "floor": lambda body=body: (hashlib.sha256(body).digest(), zlib.crc32(body)),
            "binary": lambda body=body: MappingEncoder("binary", StreamEncoder(os.urandom(16))).message(body, True),
            "compat": lambda body=body: MappingEncoder("compat", StreamEncoder(os.urandom(16))).message(body, True),
            # What the compatible mapping does and the binary one does not (SPEC.md §18.3): the
            # check that an SSE event carries the message unchanged (UTF-8, no CR).
            "check": lambda body=body: check_event_data(body),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, run in cases.items():
                start = clock()
                run()
                times[name].append(clock() - start)
        m = {name: statistics.median(t) for name, t in times.items()}
        f = m["floor"]
        for mapping in ("binary", "compat"):
            e = m[mapping]
            print(
                f"encode 1 MiB {mapping:6} {text:12}: {e * 1e3:7.3f} ms, floor {f * 1e3:7.3f} ms, "
                f"ratio {e / f:5.2f} (goal <= 1.3)"
            )
        c = m["check"]
        print(f"  of which the compatible mapping's event check (§18.3): {c * 1e3:7.3f} ms, ratio {c / f:5.2f}")


SERVER = """
import sys
sys.path[:0] = [sys.argv[1] + "/src", sys.argv[1] + "/tests"]
import uvicorn
from starlette.middleware import Middleware
from servers import fastmcp_app
from mcp_framing.server import FramingMiddleware
middleware = [Middleware(FramingMiddleware)] if sys.argv[3] == "framed" else None
uvicorn.run(fastmcp_app(middleware=middleware), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system) a process has used so far, from Linux's /proc (None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def calls(n: int) -> None:
    import httpx2

    from servers import free_port

    # One server process a variant (the framed app twice: one answers only compatible calls, the
    # other only binary ones), so that each process's CPU time is its variant's.
    kinds = {"plain": "plain", "compat": "framed", "binary": "framed"}
    ports = {name: free_port() for name in kinds}
    procs = {
        name: subprocess.Popen([sys.executable, "-c", SERVER, str(HERE), str(ports[name]), kind])
        for name, kind in kinds.items()
    }
    try:
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
        key = os.urandom(16).hex()
        framed = dict(headers, **{"mcp-framing": "1", "mcp-framing-request-key": key})
        variants = {
            "plain": headers,
            "compat": dict(framed, **{"mcp-framing-mapping": "compat"}),
            "binary": dict(framed, accept="application/vnd.mcp-framing, " + headers["accept"]),
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "big", "arguments": {"size": 64 * 1024}},
        }
        async with httpx2.AsyncClient(timeout=30) as http:
            for port in ports.values():
                for _ in range(300):  # until the server listens
                    try:
                        await http.get(f"http://127.0.0.1:{port}/")
                        break
                    except httpx2.TransportError:
                        await asyncio.sleep(0.05)
            times: dict[str, list[float]] = {name: [] for name in variants}
            cpu: dict[str, float | None] = {}
            for i in range(n + 20):
                if i == 20:  # warmed up
                    cpu = {name: cpu_seconds(proc.pid) for name, proc in procs.items()}
                for name, h in variants.items():
                    start = time.perf_counter()
                    response = await http.post(f"http://127.0.0.1:{ports[name]}/mcp", json=body, headers=h)
                    await response.aread()
                    elapsed = time.perf_counter() - start
                    assert response.status_code == 200, response.status_code
                    if i >= 20:
                        times[name].append(elapsed)
            used: dict[str, float] = {}
            for name, proc in procs.items():
                before, after = cpu.get(name), cpu_seconds(proc.pid)
                if before is not None and after is not None:
                    used[name] = (after - before) / n
        base = statistics.median(times["plain"])
        print(f"tools/call 64 KiB unframed: {base * 1e3:7.3f} ms (median of {n})")
        for name in ("compat", "binary"):
            t = statistics.median(times[name])
            print(f"tools/call 64 KiB {name:6}  : {t * 1e3:7.3f} ms, ratio {t / base:5.2f} (goal <= 1.15)")
        if len(used) == len(procs):
            # What the load of a shared machine does not change: each server's CPU time a call.
            print(f"tools/call 64 KiB server CPU a call, unframed: {used['plain'] * 1e3:7.3f} ms")
            for name in ("compat", "binary"):
                ratio = used[name] / used["plain"]
                print(
                    f"tools/call 64 KiB server CPU a call, {name:6}  : {used[name] * 1e3:7.3f} ms, ratio {ratio:5.2f}"
                )
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait()


async def in_process(n: int) -> None:
    """The call without uvicorn or a socket: the ASGI app called directly, CPU time per call."""
    from starlette.middleware import Middleware

    from mcp_framing.server import FramingMiddleware
    from servers import fastmcp_app

    plain = fastmcp_app()
    framed = fastmcp_app(middleware=[Middleware(FramingMiddleware)])
    base = [(b"accept", b"application/json, text/event-stream"), (b"mcp-protocol-version", b"2025-06-18")]
    base.append((b"content-type", b"application/json"))
    opted = [*base, (b"mcp-framing", b"1"), (b"mcp-framing-request-key", os.urandom(16).hex().encode())]
    binary = [(b"accept", b"application/vnd.mcp-framing, application/json, text/event-stream"), *opted[1:]]
    variants = {"plain": (plain, base), "compat": (framed, [*opted, (b"mcp-framing-mapping", b"compat")])}
    variants["binary"] = (framed, binary)
    request = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"size":65536}}}'

    async def call(app, headers) -> None:  # type: ignore[no-untyped-def]
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST"}
        scope.update(scheme="http", path="/mcp", raw_path=b"/mcp", query_string=b"", root_path="")
        scope.update(headers=[(b"host", b"127.0.0.1"), *headers], client=("127.0.0.1", 1), server=("127.0.0.1", 2))
        sent = asyncio.Event()

        async def receive():  # type: ignore[no-untyped-def]
            if not sent.is_set():
                sent.set()
                return {"type": "http.request", "body": request, "more_body": False}
            await asyncio.Event().wait()  # the client stays

        async def send(message) -> None:  # type: ignore[no-untyped-def]
            pass

        await app(scope, receive, send)

    async with plain.router.lifespan_context(plain), framed.router.lifespan_context(framed):
        times: dict[str, list[float]] = {name: [] for name in variants}
        for i in range(n + 20):
            for name, (app, headers) in variants.items():
                start = time.process_time()
                await call(app, headers)
                if i >= 20:
                    times[name].append(time.process_time() - start)
    base_time = statistics.median(times["plain"])
    print(f"tools/call 64 KiB in process, unframed: {base_time * 1e3:7.3f} ms CPU (median of {n})")
    for name in ("compat", "binary"):
        t = statistics.median(times[name])
        print(f"tools/call 64 KiB in process, {name:6}  : {t * 1e3:7.3f} ms CPU, ratio {t / base_time:5.2f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=51)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    encoding(args.rounds, clock)
    asyncio.run(calls(args.calls))
    asyncio.run(in_process(args.calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
