"""The request's opt-in (SPEC.md §10, §16, §18.8) and the framed response's headers, read from
ASGI header lists (lower-case byte names)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..limits import MIN_MAX_FRAME_PAYLOAD

__all__ = [
    "BINARY_CONTENT_TYPE",
    "OptIn",
    "OptInError",
    "accepts_event_stream",
    "content_essence",
    "header_values",
    "parse_request_key",
    "response_headers",
]

BINARY_CONTENT_TYPE = "application/vnd.mcp-framing"
EVENT_STREAM = "text/event-stream"
_HEX32 = re.compile(r"[0-9a-fA-F]{32}")

Headers = Iterable[tuple[bytes, bytes]]


class OptInError(ValueError):
    """A malformed opt-in header: the request is answered `400` (§16)."""


def header_values(headers: Headers, name: bytes) -> list[str]:
    """Every value of header `name` (lower case), decoded as Latin-1 (HTTP's octets)."""
    return [value.decode("latin-1") for key, value in headers if key.lower() == name]


def content_essence(content_type: str | None) -> str:
    """The media type's `type/subtype`, lower case (§16: parameters are ignored).

    >>> content_essence("Text/Event-Stream; charset=utf-8")
    'text/event-stream'
    """
    return (content_type or "").split(";", 1)[0].strip().lower()


def parse_request_key(text: str) -> bytes:
    """A request key: 32 hex digits (either case), not all zero (§10).

    >>> parse_request_key("00" * 15 + "0A").hex()
    '0000000000000000000000000000000a'
    >>> parse_request_key("00" * 16)
    Traceback (most recent call last):
    ...
    mcp_framing.server.opt_in.OptInError: the Mcp-Framing-Request-Key header is not 32 hex digits
    """
    text = text.strip()
    if not _HEX32.fullmatch(text) or int(text, 16) == 0:
        raise OptInError("the Mcp-Framing-Request-Key header is not 32 hex digits")
    return bytes.fromhex(text)


def _accepts(media_range: str, essence: str) -> bool:
    parts = media_range.split(";")
    if content_essence(parts[0]) != essence:
        return False
    for param in parts[1:]:
        name, eq, q = param.partition("=")
        if eq and name.strip().lower() == "q":
            try:
                if not float(q.strip()) > 0.0:
                    return False
            except ValueError:
                return False
    return True


def accepts_event_stream(headers: Headers) -> bool:
    """Whether `Accept` lists `text/event-stream` (or `text/*`, `*/*`): the compatible mapping
    turns a JSON answer into an event stream only for such a client (§18.8)."""
    for value in header_values(headers, b"accept"):
        for media_range in value.split(","):
            essence = content_essence(media_range)
            if essence in (EVENT_STREAM, "*/*", "text/*"):
                return True
    return False


def _parse_limits(value: str) -> tuple[int | None, int | None]:
    frame: int | None = None
    message: int | None = None
    for param in value.split(","):
        name, eq, number = param.strip().partition("=")
        number = number.strip()
        if not eq:
            raise OptInError("the Mcp-Framing-Limits header is malformed")
        decimal = number.isascii() and number.isdigit()
        name = name.strip().lower()
        if name == "frame":
            if not decimal or not MIN_MAX_FRAME_PAYLOAD <= int(number) <= 0xFFFFFFFF or frame is not None:
                raise OptInError("the Mcp-Framing-Limits header is malformed")
            frame = int(number)
        elif name == "message":
            if not decimal or int(number) > 0xFFFFFFFFFFFFFFFF or message is not None:
                raise OptInError("the Mcp-Framing-Limits header is malformed")
            message = int(number)
    return frame, message


@dataclass(frozen=True)
class OptIn:
    """What an opted-in request asked for (§16): its key, the binary mapping (`Accept`), the
    compatible one (`Mcp-Framing-Mapping`), and the limits it decodes with.

    >>> OptIn.from_headers([(b"mcp-framing", b"1"), (b"mcp-framing-mapping", b"compat")]).mapping
    'compat'
    >>> OptIn.from_headers([(b"accept", b"application/json")]) is None
    True
    """

    request_key: bytes | None
    accepts_binary: bool
    accepts_compat: bool
    max_frame_payload: int | None
    max_message_size: int | None

    @classmethod
    def from_headers(cls, headers: Headers) -> OptIn | None:
        """The opt-in of a request, None if it did not opt in (`Mcp-Framing` lists no `1`);
        `OptInError` for a malformed key or limits header."""
        headers = list(headers)
        if not any(t.strip() == "1" for v in header_values(headers, b"mcp-framing") for t in v.split(",")):
            return None
        keys = header_values(headers, b"mcp-framing-request-key")
        key = parse_request_key(keys[0]) if keys else None
        binary = any(_accepts(r, BINARY_CONTENT_TYPE) for v in header_values(headers, b"accept") for r in v.split(","))
        limits = ",".join(header_values(headers, b"mcp-framing-limits"))
        frame, message = _parse_limits(limits) if limits else (None, None)
        compat = any(
            t.strip().lower() == "compat" for v in header_values(headers, b"mcp-framing-mapping") for t in v.split(",")
        )
        return cls(key, binary, compat, frame, message)

    @property
    def mapping(self) -> str:
        """§18.8: binary if accepted, else compatible if asked for, else §15."""
        if self.accepts_binary:
            return "binary"
        return "compat" if self.accepts_compat else "sse"


def response_headers(mapping: str) -> list[tuple[bytes, bytes]]:
    """The headers a framed response carries (§15, §16, §18.8)."""
    content_type = BINARY_CONTENT_TYPE if mapping == "binary" else EVENT_STREAM
    version = b"1; mapping=compat" if mapping == "compat" else b"1"
    return [
        (b"content-type", content_type.encode()),
        (b"mcp-framing", version),
        (b"cache-control", b"no-cache"),
        (b"x-accel-buffering", b"no"),
    ]
