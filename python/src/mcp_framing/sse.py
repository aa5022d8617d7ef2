"""Event-stream parsing (WHATWG, as SPEC.md §15 and §18.5 read it) and the base64 SSE mapping (§15).

The parser works on whole reads: it finds line ends with `bytes.find` (each byte is looked at
by C code once), keeps a line cut by a read as views of the reads until its end arrives, and
copies a line's value once. Every line is bounded as it is buffered (the event bound plus 16
bytes, §15), and the lines in a row that carry no data are counted (`TooManyComments`).
Events are handled in body order: the frames of the events before a line that fails are decoded
first (§15).
"""

from __future__ import annotations

import base64
import binascii
import codecs
from typing import Any

from .decoder import StreamDecoder
from .errors import DecodeError
from .jsonrpc import TopLevel
from .limits import Limits
from .verdict import Received, StreamVerdict

__all__ = ["SseDecoder"]

_BOM = b"\xef\xbb\xbf"
_HEAD = 32  # bytes of a line looked at to find its field name
_NO_MESSAGES: list[bytes] = []


#: Bytes decoded at a time by `utf8_error`: the str of one slice stays in the CPU's cache (a
#: str of the whole of a large message with text above U+00FF costs twice the decoding itself).
_UTF8_SLICE = 64 * 1024


def utf8_error(value: bytes | memoryview) -> int | None:
    """Where `value` stops being UTF-8, None if it is UTF-8: CPython's decoder (C), a slice at a
    time, a sequence cut by a slice's end carried over to the next; ASCII skipped at once. The
    one UTF-8 check of the package (the decoder's §18.3 check, the encoder's).

    >>> utf8_error("café ✓".encode()), utf8_error(b"caf\\xc3"), utf8_error(b"\\xe2\\x9c" + b"\\x93" * 2)
    (None, 3, 3)
    >>> utf8_error("é".encode() * 40_000 + b"\\xff")
    80000
    """
    if value.isascii() if isinstance(value, bytes) else bytes(value).isascii():
        return None
    view = memoryview(value)
    n = len(view)
    decode = codecs.utf_8_decode
    at = 0
    while at < n:
        end = at + _UTF8_SLICE
        try:
            _, used = decode(view[at:end], "strict", end >= n)
        except UnicodeDecodeError as err:
            return at + err.start
        at += used  # at least the slice but its last 3 bytes: a cut sequence goes again
    return None


def is_utf8(value: bytes) -> bool:
    """Whether `value` is valid UTF-8 (`utf8_error`).

    >>> is_utf8("café ✓".encode()), is_utf8(b"caf\\xc3"), is_utf8(b"\\xe2\\x9c" + b"\\x93" * 2)
    (True, False, False)
    """
    return utf8_error(value) is None


def dispatched_length(value: bytes) -> tuple[int, bool]:
    """The length of `value` as an SSE parser dispatches it (decoded as UTF-8 with replacement,
    encoded again, §18.3), and whether it is valid UTF-8 (then it is dispatched unchanged)."""
    if is_utf8(value):
        return len(value), True
    return len(value.decode("utf-8", "replace").encode("utf-8")), False


def _prefix(pieces: list[Any], n: int) -> bytes:
    """The first `n` bytes (or fewer) of the concatenation of `pieces`."""
    first = pieces[0] if pieces else b""
    if len(first) >= n or len(pieces) <= 1:
        return bytes(first[:n])
    out = bytearray()
    for piece in pieces:
        out += piece[: n - len(out)]
        if len(out) >= n:
            break
    return bytes(out)


def _join(pieces: list[Any], skip: int) -> bytes:
    """The concatenation of `pieces` without its first `skip` bytes, copied once."""
    if skip:
        out = []
        for piece in pieces:
            if skip >= len(piece):
                skip -= len(piece)
                continue
            out.append(piece[skip:] if skip else piece)
            skip = 0
        pieces = out
    if len(pieces) == 1:
        return bytes(pieces[0])
    return b"".join(pieces)


class EventStreamDecoder:
    """The line and event rules shared by both SSE mappings, over a frame decoder.

    Subclasses handle comments (`_comment`) and dispatched events (`_event`) and feed frame
    bytes to `self.frames`. Same interface as `StreamDecoder`: `feed` in any split, `finish`.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        request_key: bytes | None = None,
        max_event_data: int | None = None,
    ) -> None:
        """A body decoder with `limits`, expecting `request_key` in HEAD; `max_event_data`
        overrides the event bound the limits imply (`_event_bound`)."""
        frames = StreamDecoder(limits, request_key)
        if max_event_data is None:
            max_event_data = self._event_bound(frames.limits)
        self.frames = frames
        self.max_event_data = max_event_data
        self._line_max = max_event_data + 16
        self._max_quiet = frames.limits.max_sse_comments_in_a_row
        self._quiet = 0  # lines since the last data line with data
        self._parts: list[Any] = []  # the line being read, as views of the reads
        self._part_len = 0
        self._skip_lf = False  # the last line ended with CR: a following LF belongs to it
        self._first_line = True
        self._name: bytes | None = None  # the `event` field, if any
        self._data: list[bytes] | None = None  # the data lines' values; None: no data line
        self._data_size = 0  # their length as dispatched, LFs between them included
        self._data_valid = True  # every value is valid UTF-8 (so the data is dispatched as it is)
        self.events = 0

    # -- the frame decoder's state ----------------------------------------------------------

    @property
    def error(self) -> DecodeError | None:
        """The first error in body order (the frames' or the mapping's)."""
        return self.frames.error

    @property
    def messages(self) -> list[bytes]:
        """Every message verified so far."""
        return self.frames.messages

    @property
    def sentinel_seen(self) -> bool:
        """Whether STREAM_END has been decoded with nothing after it so far."""
        return self.frames.sentinel_seen

    @property
    def final_id_spans(self) -> list[tuple[int, int]]:
        """Where the final response's top-level `id` values lie (`StreamDecoder.final_id_spans`)."""
        return self.frames.final_id_spans

    @property
    def response_index(self) -> int | None:
        """The final response's or its candidate's index (`StreamDecoder.response_index`)."""
        return self.frames.response_index

    @property
    def response_head(self) -> TopLevel | None:
        """What is known of it without reading further (`StreamDecoder.response_head`)."""
        return self.frames.response_head

    @property
    def frames_decoded(self) -> int:
        """Whole frames the frame decoder accepted so far."""
        return self.frames.frames_decoded

    @property
    def final_response(self) -> tuple[int, Any] | None:
        """The stream's final response once verified (§7.1): its index and parsed value (reads
        the candidate whole, `StreamDecoder.final_response`)."""
        return self.frames.final_response

    def received(self) -> Received:
        """What the frame decoder received so far."""
        return self.frames.received()

    def _fail(self, kind: Any, **detail: Any) -> None:
        # The first error in body order wins: an error the frame decoder found in bytes handed
        # over before this line stays (§15, §18.5).
        self.frames.fail(DecodeError(kind, **detail))

    # -- input -------------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Consumes the next bytes of the body; returns the messages verified in them."""
        frames = self.frames
        if frames.error is not None or not data:
            return _NO_MESSAGES
        if type(data) is not bytes:
            data = bytes(data)
        before = len(frames.messages)
        self._feed(data)
        if len(frames.messages) == before:
            return _NO_MESSAGES
        return frames.messages[before:]

    def _feed(self, data: bytes) -> None:
        frames = self.frames
        n = len(data)
        pos = 0
        if self._skip_lf:
            self._skip_lf = False
            if data[0] == 0x0A:
                pos = 1
        mv = memoryview(data)
        lf = cr = -1
        run: list[bytes] = []  # the values of whole `data: ` lines in a row, not taken yet
        while pos < n:
            if lf < pos:
                lf = data.find(b"\n", pos)
                if lf < 0:
                    lf = n
            if cr < pos:
                cr = data.find(b"\r", pos)
                if cr < 0:
                    cr = n
            end = lf if lf < cr else cr
            length = self._part_len + end - pos
            if length > self._line_max:
                # §15: a line is buffered whole before it is parsed, so every line is bounded.
                self._fail("EventTooLarge", max=self.max_event_data)
                return
            if end == n:
                if run:
                    self._data_run(run)
                    if frames.error is not None:
                        return
                self._parts.append(mv[pos:])
                self._part_len = length
                return
            if (
                end == lf
                and length > 6
                and not self._parts
                and not self._first_line
                and data.startswith(b"data: ", pos)
            ):
                # A whole data line with a value, ended by LF (one of a multi-line message's
                # lines, or a whole message's): its value kept, the run taken by `_data_run`.
                run.append(data[pos + 6 : end])
                pos = end + 1
                continue
            if run:
                self._data_run(run)
                run = []
                if frames.error is not None:
                    return
            parts = self._parts
            if end > pos:
                parts.append(mv[pos:end])
            self._parts = []
            self._part_len = 0
            if end == cr:
                if end + 1 < n:
                    pos = end + 2 if data[end + 1] == 0x0A else end + 1
                else:
                    self._skip_lf = True
                    pos = n
            else:
                pos = end + 1
            self._line(parts, length)
            if frames.error is not None:
                return
        if run:
            self._data_run(run)

    def _data_run(self, values: list[bytes]) -> None:
        """Data lines in a row, each with a value (`_line` takes them so one by one): their
        values joined as SSE joins them, checked as UTF-8 once (a sequence cannot span the LF
        between two lines, so the join is valid exactly when every value is, and its dispatched
        length is theirs with the LFs, §15, §18.3)."""
        self._quiet = 0
        self._add_data(values[0] if len(values) == 1 else b"\n".join(values))

    def _add_data(self, value: bytes) -> None:
        """The next piece of the event's data: a data line's value, or the values of data lines
        in a row joined with LF."""
        size, valid = dispatched_length(value)
        if not valid:
            self._data_valid = False
        if self._data is None:
            self._data = [value]
            self._data_size = size
        else:
            self._data.append(value)
            self._data_size += 1 + size
        # §15: the data as SSE joins it (LF between lines), counted as UTF-8 text
        if self._data_size > self.max_event_data:
            self._fail("EventTooLarge", max=self.max_event_data)

    def _line(self, parts: list[Any], length: int) -> None:
        skip = 0
        head = _prefix(parts, _HEAD + 4)
        if self._first_line:
            self._first_line = False
            if head.startswith(_BOM):
                skip = 3
                head = head[3:]
                length -= 3
        if length == 0 or head[0] == 0x3A:  # a blank line or a comment
            field, value_at = b"", 1
        else:
            colon = head.find(b":", 0, _HEAD)
            if colon < 0 and length > _HEAD:  # a long field name: look at the whole line
                head = _join(parts, skip)
                colon = head.find(b":")
            if colon < 0:
                field, value_at = head[:length], length
            else:
                field = head[:colon]
                value_at = colon + 1
                if value_at < length and head[value_at] == 0x20:
                    value_at += 1
        has_value = value_at < length
        # §15: lines that carry no data (comments, blank lines, other fields) are counted; a
        # data line with a value starts the count again.
        if field == b"data" and has_value:
            self._quiet = 0
        else:
            self._quiet += 1
            if self._quiet > self._max_quiet:
                self._fail("TooManyComments", max=self._max_quiet)
                return
        if length == 0:
            self._dispatch()
        elif head[0] == 0x3A:
            self._comment(_join(parts, skip + 1))
        elif field == b"event":
            self._name = _join(parts, skip + value_at) if has_value else b""
        elif field == b"data":
            self._add_data(_join(parts, skip + value_at) if has_value else b"")
        # id, retry and unknown fields are ignored (§15: never used to resume a framed stream)

    def _dispatch(self) -> None:
        name, values = self._name, self._data
        valid = self._data_valid
        self._name = None
        self._data = None
        self._data_size = 0
        self._data_valid = True
        if not values:
            return
        data = values[0] if len(values) == 1 else b"\n".join(values)
        if not data:
            # §15: empty data carries nothing (an id-only priming event, a named event without
            # a data line, one empty `data:` line): skipped, whatever the name
            return
        self.events += 1
        self._event(name, data, valid)

    @staticmethod
    def _event_bound(limits: Limits) -> int:
        """The default bound on one event's data: one message (§18.7)."""
        return limits.compat_event_bound()

    def _comment(self, text: bytes) -> None:
        """A comment line (the text after the colon)."""

    def _event(self, name: bytes | None, data: bytes, valid_utf8: bool) -> None:
        """A dispatched event carrying data: its raw bytes, and `valid_utf8` whether they are
        UTF-8."""
        raise NotImplementedError

    def finish(self) -> StreamVerdict:
        """The body ended: an event left open is discarded (§15), and the frames decide (§7)."""
        return self.frames.finish()


class SseDecoder(EventStreamDecoder):
    """The base64 SSE mapping (§15): `mcp-frame` events carrying the base64 of whole frames.

    >>> dec = SseDecoder()
    >>> dec.feed(b"data: {}\\n\\n")
    []
    >>> dec.error.kind
    'UnexpectedEvent'
    """

    @staticmethod
    def _event_bound(limits: Limits) -> int:
        """§15: the base64 of one whole frame, at least 256 KiB."""
        return limits.sse_event_bound()

    def _event(self, name: bytes | None, data: bytes, valid_utf8: bool) -> None:
        if name != b"mcp-frame":
            label = "message" if name is None else name.decode("utf-8", "replace")
            self._fail("UnexpectedEvent", event=label)
            return
        text = data.replace(b"\n", b"")  # the LF between data lines is not base64: dropped
        try:
            frames = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            self._fail("InvalidBase64", event=self.events)
            return
        if base64.b64encode(frames) != text:
            # padded, canonical base64 only (§15)
            self._fail("InvalidBase64", event=self.events)
            return
        self.frames.feed(frames)
