"""Every bound of the receiver, with its default and the reason for it (SPEC.md §6, §6.1, §15, §18.7)."""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "DEFAULT_COMPAT_EVENT_MARGIN",
    "DEFAULT_MAX_EVENT_DATA",
    "DEFAULT_MAX_FRAME_PAYLOAD",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "MAX_ABORT_TEXT",
    "MIN_MAX_FRAME_PAYLOAD",
    "Limits",
]

#: §6: the default largest frame payload; larger frames do not hash faster but raise the memory
#: buffered per stream.
DEFAULT_MAX_FRAME_PAYLOAD = 65_536
#: §6: the default largest message (MCP tool results with embedded images).
DEFAULT_MAX_MESSAGE_SIZE = 16_777_216
#: §3: the longest ABORT reason text.
MAX_ABORT_TEXT = 1024
#: §6: every control frame (the longest ABORT) fits a receiver's frame limit.
MIN_MAX_FRAME_PAYLOAD = 2 + MAX_ABORT_TEXT
#: §15: the least bound on one event's data (256 KiB).
DEFAULT_MAX_EVENT_DATA = 256 * 1024
#: §18.7: an event of the compatible mapping carries a whole message, plus this margin.
DEFAULT_COMPAT_EVENT_MARGIN = 64 * 1024


@dataclass(frozen=True)
class Limits:
    """The bounds one stream is decoded with; every field has the SPEC.md default.

    >>> Limits().max_frame_payload
    65536
    >>> Limits(max_frame_payload=100)
    Traceback (most recent call last):
    ...
    ValueError: max_frame_payload must be at least 1026 (SPEC.md §6), got 100
    """

    #: §6: the largest frame payload accepted (`FrameTooLarge` above it), checked on the raw
    #: length field before any byte of the payload is awaited.
    max_frame_payload: int = DEFAULT_MAX_FRAME_PAYLOAD
    #: §6: the largest message accepted (`MessageTooLarge`), checked at every DATA header.
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    #: §6.1: bytes of one stream (16 GiB): a peer cannot stream without end.
    max_stream_bytes: int = 16 << 30
    #: §6.1: messages of one stream (far above one request's notifications and response).
    max_messages: int = 65_536
    #: §6.1: KEEPALIVE frames in a row (more than 17 hours at one every 15 s).
    max_keepalives_in_a_row: int = 4096
    #: §6.1: ignorable frames in a row (version 1 senders send none).
    max_ignorable_in_a_row: int = 1024
    #: §15: SSE lines in a row that carry no data (comments, blank lines, other fields).
    max_sse_comments_in_a_row: int = 4096

    def __post_init__(self) -> None:
        if self.max_frame_payload < MIN_MAX_FRAME_PAYLOAD:
            raise ValueError(
                f"max_frame_payload must be at least {MIN_MAX_FRAME_PAYLOAD} (SPEC.md §6), got {self.max_frame_payload}"
            )
        for name in (
            "max_message_size",
            "max_stream_bytes",
            "max_messages",
            "max_keepalives_in_a_row",
            "max_ignorable_in_a_row",
            "max_sse_comments_in_a_row",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")

    def with_(self, **changes: int) -> Limits:
        """A copy with some fields changed.

        >>> Limits().with_(max_message_size=6).max_message_size
        6
        """
        return replace(self, **changes)

    def sse_event_bound(self) -> int:
        """§15: the base64 of one whole frame of the max frame payload, at least 256 KiB.

        >>> Limits().sse_event_bound()
        262144
        """
        frame = 20 + self.max_frame_payload
        return max(4 * ((frame + 2) // 3), DEFAULT_MAX_EVENT_DATA)

    def compat_event_bound(self) -> int:
        """§18.7: one message of the max message size, plus 64 KiB.

        >>> Limits().compat_event_bound()
        16842752
        """
        return self.max_message_size + DEFAULT_COMPAT_EVENT_MARGIN
