"""The compatible SSE mapping (SPEC.md §18): every message stays a plain MCP `message` event, the
frames travel in `:mcp-framing <base64>` comment records, and the receiver rebuilds the binary
stream of §2–§7 from both (§18.5), which a frame decoder verifies."""

from __future__ import annotations

import base64
import binascii
from collections import deque
from typing import Any

from .frames import ABORT, DATA, HEADER_LEN, MESSAGE_END, header_passes
from .limits import Limits
from .sse import EventStreamDecoder

__all__ = ["CompatDecoder"]

_MARK = b"mcp-framing"  # §18.2: a comment whose text starts with it is a record
_PREFIX = _MARK + b" "
_FRAME, _DATA, _BROKEN = 0, 1, 2


class CompatDecoder(EventStreamDecoder):
    """The receiver of §18.5: records are queued and flushed into the binary stream up to a DATA
    header, which waits for the next message event; the event's bytes are that run's payloads.

    >>> dec = CompatDecoder()
    >>> dec.feed(b'data: {"jsonrpc":"2.0","id":1,"result":{}}\\n\\n')  # no records: not framed
    []
    >>> dec.error.kind
    'UnframedEvent'
    """

    def __init__(
        self,
        limits: Limits | None = None,
        request_key: bytes | None = None,
        max_event_data: int | None = None,
    ) -> None:
        super().__init__(limits, request_key, max_event_data)
        self._queue: deque[tuple[int, bytes, int]] = deque()  # (what, bytes, DATA payload length)
        self._waiting = -1  # payload length of the DATA frame waiting for its event; -1: none
        self._open = False  # an event filled DATA frames; no MESSAGE_END or ABORT moved since
        self.records = 0
        self.message_events = 0

    def _comment(self, text: bytes) -> None:
        if not text.startswith(_MARK):
            return  # a keep-alive
        record = self.records
        self.records += 1
        # step 1: no record while a DATA frame waits for its event
        if self._waiting >= 0:
            self._fail("EventMissing", record=record)
            return
        b64 = text[len(_PREFIX) :] if text.startswith(_PREFIX) else b""
        try:
            data = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            data = b""
        if not data or base64.b64encode(data) != b64:
            # canonical padded base64 of at least one byte (§18.2)
            self._fail("InvalidRecord", record=record)
            return
        # Kinds and lengths come only from headers that pass §2 checks 1 and 2.
        queue = self._queue
        at = 0
        n = len(data)
        while at < n:
            header = data[at : at + HEADER_LEN]
            if not header_passes(header):
                queue.append((_BROKEN, data[at:], 0))
                break
            length = int.from_bytes(header[8:12], "big")
            if header[3] == DATA:
                queue.append((_DATA, header, length))
                at += HEADER_LEN
                continue
            end = at + HEADER_LEN + length
            if end > n:
                queue.append((_BROKEN, data[at:], 0))
                break
            queue.append((_FRAME, data[at:end], 0))
            at = end
        self._flush(record)

    def _flush(self, record: int) -> None:
        """step 2: moves queued items into the binary stream up to a DATA header, which waits."""
        queue = self._queue
        frames = self.frames
        while queue:
            what, item, length = queue.popleft()
            frames.feed(item)
            if what == _FRAME:
                if item[3] in (MESSAGE_END, ABORT):
                    self._open = False
            elif what == _BROKEN:
                self._fail("InvalidRecord", record=record)
                return
            else:
                if self._open:
                    # one message, one event: a stock client would read two messages
                    self._fail("SplitMessage", record=record)
                    return
                self._waiting = length
                return

    def _event(self, name: bytes | None, data: bytes, valid_utf8: bool) -> None:
        if name not in (None, b"", b"message"):  # §18.3: no, an empty or a `message` event field
            self._fail("UnexpectedEvent", event=name.decode("utf-8", "replace"))
            return
        index = self.message_events
        self.message_events += 1
        # step 3
        if self._waiting < 0:
            self._fail("UnframedEvent", event=index)
            return
        if not valid_utf8:
            # the event's bytes as dispatched: an SSE parser decodes UTF-8 with replacement
            data = data.decode("utf-8", "replace").encode("utf-8")
        queue = self._queue
        run: list[Any] = []
        total = self._waiting
        for what, header, length in queue:
            if what != _DATA:
                break
            run.append((header, length))
            total += length
        if total != len(data):
            self._fail("EventLengthMismatch", declared=total, carried=len(data))
            return
        for _ in run:
            queue.popleft()
        frames = self.frames
        at = self._waiting
        self._waiting = -1
        self._open = True
        frames.carry(data)  # the event's bytes are exactly the payloads of one message
        frames.feed_part(data, 0, at)
        for header, length in run:
            frames.feed_part(header, 0, HEADER_LEN)  # no messages can end here: `feed` not needed
            frames.feed_part(data, at, at + length)
            at += length
        self._flush(self.records - 1)
