"""Test support: a small frame writer (SPEC.md §2–§5, §18.4) to build the bodies a framing server
sends, and the conformance manifest. Not shipped: the package only reads frames."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# `MCP_FRAMING_VECTORS` names another suite to check (as for tests/wire/reference_decoder.rs).
VECTORS = Path(os.environ.get("MCP_FRAMING_VECTORS", REPO / "tests" / "vectors"))
FIXTURES = REPO / "tests" / "fixtures" / "discovery"
KEY = bytes.fromhex("00112233445566778899aabbccddeeff")


def manifest() -> list[dict]:
    return json.loads((VECTORS / "manifest.json").read_text())["vectors"]


def frame(kind: int, seq: int, payload: bytes = b"") -> bytes:
    head = b"\x9f\x4d\x01" + bytes([kind]) + struct.pack(">III", seq, len(payload), zlib.crc32(payload))
    return head + struct.pack(">I", zlib.crc32(head)) + payload


class Writer:
    """Writes one stream: `frames` (binary mapping) or `compat` (§18.4) output."""

    def __init__(self, key: bytes = KEY, attempt: bytes | None = None, frame_size: int = 16384) -> None:
        self.attempt = attempt or os.urandom(16)
        self.key = key
        self.seq = int.from_bytes(self.attempt[:4], "big")
        self.frame_size = frame_size
        self.count = 0
        self.pending = [self._next(1, key + self.attempt)]  # HEAD, not written yet

    def _next(self, kind: int, payload: bytes = b"") -> bytes:
        out = frame(kind, self.seq, payload)
        self.seq = (self.seq + 1) & 0xFFFFFFFF
        return out

    def message_frames(self, message: bytes) -> tuple[list[bytes], bytes]:
        """The DATA frames and the MESSAGE_END of `message`."""
        data = [self._next(2, message[i : i + self.frame_size]) for i in range(0, len(message), self.frame_size)]
        end = self._next(3, struct.pack(">Q", len(message)) + hashlib.sha256(message).digest())
        self.count += 1
        return data, end

    def binary(self, messages: list[bytes], end: str = "stream_end") -> bytes:
        out = list(self.pending)
        self.pending = []
        for m in messages:
            data, message_end = self.message_frames(m)
            out += [*data, message_end]
        if end == "stream_end":
            out.append(self._next(4, struct.pack(">Q", self.count)))
        elif end.startswith("abort"):
            out.append(self._next(5, struct.pack(">H", int(end[5:] or 1)) + b"gone"))
        return b"".join(out)

    def compat(self, messages: list[bytes], end: bool = True) -> bytes:
        """The compatible mapping: per message one record, then its event (§18.4)."""
        out = []
        for i, m in enumerate(messages):
            data, message_end = self.message_frames(m)
            frames = [*self.pending, *(f[:20] for f in data), message_end]
            self.pending = []
            if end and i == len(messages) - 1:
                frames.append(self._next(4, struct.pack(">Q", self.count)))
            out.append(record(b"".join(frames)))
            out.append(b"".join(b"data: " + line + b"\n" for line in m.split(b"\n")) + b"\n")
        if not messages:
            frames = self.pending + ([self._next(4, struct.pack(">Q", 0))] if end else [])
            out.append(record(b"".join(frames)))
        return b"".join(out)


def record(frames: bytes) -> bytes:
    return b":mcp-framing " + base64.b64encode(frames) + b"\n"


def response(id_: object, result: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}, separators=(",", ":")).encode()


def contract(**changes: object) -> dict:
    value: dict = {
        "versions": [1],
        "sentinelRequired": True,
        "frameChecksum": "crc32",
        "messageDigest": "sha256",
        "maxFramePayload": 65536,
        "maxMessageSize": 16777216,
        "transports": ["binary", "sse", "compat"],
    }
    value.update(changes)
    return value
