"""A response body in any mapping, to verified messages (SPEC.md §15, §16, §18): which mapping a
response is in (decided from its headers, before its body), and the decoder that reads it."""

from __future__ import annotations

from typing import Literal

from .compat import CompatDecoder
from .decoder import StreamDecoder
from .limits import Limits
from .sse import SseDecoder

__all__ = [
    "BINARY_MEDIA_TYPE",
    "EVENT_STREAM",
    "MAPPINGS",
    "BodyDecoder",
    "Mapping",
    "body_decoder",
    "mapping_of_response",
]

#: A transport mapping's token (§8, §18.1).
Mapping = Literal["binary", "sse", "compat"]
MAPPINGS: tuple[Mapping, ...] = ("binary", "sse", "compat")
BINARY_MEDIA_TYPE = "application/vnd.mcp-framing"
EVENT_STREAM = "text/event-stream"
#: The version token this package speaks (`Mcp-Framing: 1`, §16).
VERSION_TOKEN = "1"

#: A decoder of one body: same interface whatever the mapping (`feed`, `finish`, `error`).
BodyDecoder = StreamDecoder | SseDecoder | CompatDecoder


def body_decoder(
    mapping: Mapping,
    limits: Limits | None = None,
    request_key: bytes | None = None,
    max_event_data: int | None = None,
) -> BodyDecoder:
    """The decoder of a body in `mapping`, with `limits`, expecting `request_key` in HEAD.

    `max_event_data` overrides the SSE event bound (default: the one the limits imply, §15,
    §18.7).

    >>> body_decoder("compat").max_event_data
    16842752
    >>> body_decoder("smoke")
    Traceback (most recent call last):
    ...
    ValueError: unknown mapping 'smoke'
    """
    if mapping == "binary":
        return StreamDecoder(limits, request_key)
    if mapping == "sse":
        return SseDecoder(limits, request_key, max_event_data)
    if mapping == "compat":
        return CompatDecoder(limits, request_key, max_event_data)
    raise ValueError(f"unknown mapping {mapping!r}")


def _content_mapping(content_type: str | None) -> Mapping | None:
    if content_type is None:
        return None
    essence = content_type.split(";", 1)[0].strip().lower()
    if essence == BINARY_MEDIA_TYPE:
        return "binary"
    if essence == EVENT_STREAM:
        return "sse"
    return None


def mapping_of_response(framing_header: str | None, content_type: str | None) -> Mapping | None:
    """The mapping a successful response is framed in, from its `Mcp-Framing` and `Content-Type`
    headers alone (§16, §18.8); None: not framed (for a client that opted in: `NotFramed`).

    >>> mapping_of_response("1; mapping=compat", "text/event-stream")
    'compat'
    >>> mapping_of_response("1", "application/vnd.mcp-framing")
    'binary'
    >>> mapping_of_response(None, "text/event-stream") is None
    True
    >>> mapping_of_response("1; mapping=compat", "application/vnd.mcp-framing") is None
    True
    """
    if framing_header is None:
        return None
    parts = framing_header.split(";")
    if parts[0].strip() != VERSION_TOKEN:
        return None
    named = None
    for parameter in parts[1:]:
        name, eq, token = parameter.partition("=")
        if not eq:
            return None
        if name.strip().lower() == "mapping":
            if named is not None:
                return None
            named = token.strip().strip('"').lower()
    carried = _content_mapping(content_type)
    if carried is None or named is None:
        return carried
    if named == "compat" and carried == "sse":
        return "compat"
    if named == carried:
        return carried
    return None
