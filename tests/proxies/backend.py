"""The dying backend of tests/proxies.rs: an HTTP/1.1 origin that relays every request to the real
MCP server (examples/rmcp_server) and serves its response itself, so that it can end a
`tools/call` response body the way a dying backend does, at the byte it is told.

The way and the offset are in the request path, which every proxy passes through unchanged:

    /{way}/{offset}/mcp     offset: bytes of the response body sent before the end; a negative
                            offset counts from the end of the body (-1: all but its last byte)

    pass      the whole response, nothing cut (Content-Length)
    close     a close-delimited body (no Content-Length, no chunking, Connection: close), the
              connection closed (FIN) after `offset` bytes
    chunked   a chunked body whose chunks end exactly at `offset`, the connection closed (FIN)
              without the last (zero-length) chunk
    reset     a chunked body whose chunks end at `offset`, then a TCP reset (SO_LINGER 0) once
              every byte sent has been acknowledged
    kill      a chunked body in 16 KiB chunks, the process killed (SIGKILL) in the middle of the
              chunk that holds `offset`: the kernel closes the connection (FIN) mid-chunk
    stall     the head and `offset` bytes, then nothing for --stall seconds, then the rest
    stallhead nothing for --stall seconds, then the whole response

Every other request (initialize, notifications, tools/list, GET, DELETE) and every response to a
request that is not `tools/call` is relayed whole, with `Connection: close`: each connection
carries one request, so that no case inherits a connection a proxy pooled in an earlier one. Each connection is served by a process of its
own (a fork), so that `kill` kills a real process in the middle of a write and nothing else.

For every `tools/call` it prints one JSON line on stdout: {"way", "offset" (resolved), "length"
(of the whole body), "status", "content_type", "sent" (body bytes written before the end)}.

Usage: backend.py --upstream http://127.0.0.1:PORT/mcp [--port 0] [--stall SECONDS]
The first line on stdout is `listening PORT`.
"""

from __future__ import annotations

import argparse
import fcntl
import http.client
import json
import os
import signal
import socket
import socketserver
import struct
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "host",
}
CHUNK = 16 * 1024
SIOCOUTQ = 0x5411  # Linux: bytes in the send queue not yet acknowledged by the peer


class Backend(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream: urllib.parse.SplitResult
    stall: float

    def log_message(self, format: str, *args: object) -> None:
        pass

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0") or "0"))

    def relay(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = self.upstream.netloc
        connection.request(self.command, self.upstream.path, body=body or None, headers=headers)
        response = connection.getresponse()
        data = response.read()
        connection.close()
        kept = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
        return response.status, kept, data

    def head(self, status: int, headers: list[tuple[str, str]], framing: list[tuple[str, str]]):
        self.send_response_only(status)
        for name, value in headers + framing:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()

    def chunks(self, data: bytes) -> None:
        for start in range(0, len(data), CHUNK):
            piece = data[start : start + CHUNK]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.flush()

    def drained(self) -> None:
        """Waits (at most 5 s) until the peer has acknowledged every byte written."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            queued = struct.unpack("i", fcntl.ioctl(self.connection, SIOCOUTQ, b"\0" * 4))[0]
            if queued == 0:
                return
            time.sleep(0.005)

    def handle_one(self) -> None:
        body = self.read_body()
        parts = self.path.split("/")
        way, offset = (parts[1], int(parts[2])) if len(parts) > 3 else ("pass", 0)
        status, headers, data = self.relay(body)
        try:
            is_call = json.loads(body or b"null").get("method") == "tools/call"
        except (ValueError, AttributeError):
            is_call = False
        if not is_call or way == "pass":
            # Every connection serves one request: a proxy's pooled connection to a process that
            # died in an earlier case cannot make the next case fail.
            self.close_connection = True
            self.head(
                status, headers, [("Content-Length", str(len(data))), ("Connection", "close")]
            )
            self.wfile.write(data)
            self.wfile.flush()
            return
        cut = max(0, min(len(data), offset if offset >= 0 else len(data) + offset))
        content_type = {k.lower(): v for k, v in headers}.get("content-type", "")
        record = {
            "way": way,
            "offset": cut,
            "length": len(data),
            "status": status,
            "content_type": content_type,
        }
        sent = self.serve(way, cut, status, headers, data)
        # One write, shorter than PIPE_BUF: the lines of concurrent processes never interleave.
        os.write(1, (json.dumps({**record, "sent": sent}) + "\n").encode())
        self.close_connection = True
        if way in ("close", "chunked", "kill"):
            if way == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            self.connection.shutdown(socket.SHUT_WR)
        elif way == "reset":
            self.drained()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            # The process ends here: the kernel closes the socket with a reset, and nothing
            # (no shutdown of the server's own) sends a FIN before it.
            os._exit(0)

    def serve(self, way: str, cut: int, status: int, headers: list, data: bytes) -> int:
        if way == "close":
            self.head(status, headers, [("Connection", "close")])
            self.wfile.write(data[:cut])
            self.wfile.flush()
        elif way in ("chunked", "reset"):
            self.head(status, headers, [("Transfer-Encoding", "chunked")])
            self.chunks(data[:cut])
        elif way == "kill":
            self.head(status, headers, [("Transfer-Encoding", "chunked")])
            start = cut - cut % CHUNK
            self.chunks(data[:start])
            piece = data[start : start + CHUNK]
            self.wfile.write(b"%x\r\n" % len(piece) + piece[: cut - start])
            self.wfile.flush()
            self.drained()
        elif way == "stall":
            self.head(status, headers, [("Content-Length", str(len(data)))])
            self.wfile.write(data[:cut])
            self.wfile.flush()
            time.sleep(self.stall)
            self.wfile.write(data[cut:])
            cut = len(data)
        elif way == "stallhead":
            time.sleep(self.stall)
            self.head(status, headers, [("Content-Length", str(len(data)))])
            self.wfile.write(data)
            cut = len(data)
        else:
            raise ValueError(f"unknown way {way!r}")
        self.wfile.flush()
        return cut

    def handle_request(self) -> None:
        try:
            self.handle_one()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_DELETE = handle_request


class Server(socketserver.ForkingMixIn, socketserver.TCPServer):
    allow_reuse_address = True

    def handle_error(self, request: object, client_address: object) -> None:
        # A proxy that resets or drops a kept-alive connection is not an error of ours.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stall", type=float, default=10.0)
    args = parser.parse_args()
    Backend.upstream = urllib.parse.urlsplit(args.upstream)
    Backend.stall = args.stall
    with Server(("127.0.0.1", args.port), Backend) as server:
        print(f"listening {server.server_address[1]}", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
