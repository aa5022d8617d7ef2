"""Sans-I/O re-framing of an inner server's response body, chunk by chunk as the app sends it:
`SseRelay` reads an SSE body (any line endings, split anywhere) and writes it framed (binary and
§15 mappings: each message event's data becomes a framed message; compatible mapping, §18.8: the
inner bytes pass unchanged with a record before each message event) or unframed with only the
contract declared; `JsonRelay` reads a JSON body whole within the message limit."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..encoder import ABORT_INTERNAL_ERROR, ABORT_UPSTREAM_FAILED, EncodeError, MappingEncoder, fit_reason
from ..jsonrpc import response_head, top_level
from ..limits import DEFAULT_COMPAT_EVENT_MARGIN
from .declare import Declaration

__all__ = ["ENDED_EARLY", "JsonRelay", "SseRelay", "is_response"]

#: The ABORT reason when the inner body ends before its final response.
ENDED_EARLY = "the upstream response stream ended before its final response"
_BOM = "\ufeff".encode()
#: §15: lines in a row that carry no data, past which the inner stream is given up.
_MAX_LINES_WITHOUT_DATA = 4096


def line_ends(chunk: bytes) -> Iterator[tuple[int, int]]:
    """Where each line of `chunk` ends: (start, end) of each CRLF, CR or LF, in order (SSE's line
    endings), found with `bytes.find` (a regular expression scans a large event byte by byte).

    >>> list(line_ends(b"a\\r\\nb\\rc\\nd\\r"))
    [(1, 3), (4, 5), (6, 7), (8, 9)]
    """
    n = len(chunk)
    cr = chunk.find(b"\r")
    lf = chunk.find(b"\n")
    while cr >= 0 or lf >= 0:
        if cr >= 0 and (lf < 0 or cr < lf):
            end = cr + 2 if cr + 1 < n and chunk[cr + 1] == 0x0A else cr + 1
            yield cr, end
            if end == cr + 2:
                lf = chunk.find(b"\n", end)
            cr = chunk.find(b"\r", end)
        else:
            yield lf, lf + 1
            lf = chunk.find(b"\n", lf + 1)


def is_response(message: bytes) -> bool:
    """§7.1: whether `message` is a JSON-RPC response (a top-level `id` and `result` or `error`).

    >>> is_response(b'{"jsonrpc":"2.0","id":1,"result":{}}'), is_response(b'{"method":"x"}')
    (True, False)
    """
    head = response_head(message)
    if head is not None:
        return head.is_response
    try:
        return top_level(message.decode("utf-8")).is_response
    except (ValueError, RecursionError):
        return False


class SseRelay:
    """An inner SSE body, re-framed as it arrives.

    `encoder` None: unframed, the contract declared in the final response's event (`declare`).
    Otherwise framed in `encoder.mapping`. `feed` returns the bytes to send now; `done` is set
    once the stream ended (the final response or an ABORT written): what the inner body sends
    after it is not for this request; `end` is the inner body's end.
    """

    def __init__(
        self,
        encoder: MappingEncoder | None,
        max_message: int,
        declare: Declaration | None = None,
        on_message: Callable[[bytes, bool], None] | None = None,
    ) -> None:
        self.encoder = encoder
        self.on_message = on_message
        self.compat = encoder is not None and encoder.mapping == "compat"
        self.declare = declare
        self.max_message = max_message
        self.max_held = max_message + DEFAULT_COMPAT_EVENT_MARGIN
        self.done = False
        #: The final event's blank line ended in a CR at the end of a chunk: its LF is to come.
        self.awaiting_lf = False
        self._transparent = False  # unframed: after the final response, or given up
        self._pending: list[bytes] = []  # the start of a line not ended yet
        self._pending_len = 0
        self._cr = False  # the last line ended in CR: an LF first in the next chunk belongs to it
        self._at_start = True
        self._block: list[bytes] = []  # the raw lines of the event being read
        self._block_len = 0
        self._data: list[bytes] = []  # its data values
        self._data_len = 0
        self._event: bytes | None = None
        self._data_lines: list[int] = []  # indexes in _block of its data lines
        self._without_data = 0
        self._out: list[bytes] = []
        self._dest = "out"  # where the last line went: "out", "block" (held) or "drop"

    # -- output
    def _emit(self, data: bytes) -> None:
        if data:
            self._out.append(data)

    def _take(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        return out

    def _give_up(self, code: int, reason: str) -> None:
        """Framed: the stream ends with an ABORT (the held event dropped). Unframed: what is
        held goes on as it came, and the rest passes through."""
        if self.encoder is not None:
            self._emit(self.encoder.abort(code, fit_reason(reason).decode("utf-8")))
            self.done = True
        else:
            if self.declare is not None:
                self.declare.not_declared(reason)
            self._emit(b"".join(self._block))
            self._reset_event()
            self._transparent = True

    def fail(self, code: int, reason: str) -> bytes:
        """The ABORT that ends a framed stream the inner app could not finish (nothing if the
        stream already ended or is unframed)."""
        if self.encoder is None or self.done:
            return b""
        self._give_up(code, reason)
        return self._take()

    # -- input
    def feed(self, chunk: bytes) -> bytes:
        """One chunk of the inner body: the bytes to send now."""
        if not chunk:
            return b""  # nothing, not even the end of a CR's wait for its LF
        if self.done:
            if self.awaiting_lf:
                self.awaiting_lf = False
                return b"\n" if chunk[:1] == b"\n" else b""
            return b""
        if self._transparent:
            return chunk
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":
                # The LF of a CRLF split between chunks: it goes where its line went.
                if self._dest == "block" and self._block:
                    self._block[-1] += b"\n"
                    self._block_len += 1
                elif self._dest == "out":
                    self._emit(b"\n")
                chunk = chunk[1:]
        # Only the new bytes are scanned for line ends; a line's start waits in `_pending`.
        at = 0
        for start, end in line_ends(chunk):
            line = chunk[at:start]
            if self._pending:
                line = b"".join([*self._pending, line])
                self._pending = []
                self._pending_len = 0
            at = end
            ending = chunk[start:end]
            self._line(line, ending)
            if self.done or self._transparent:
                if self.done and ending == b"\r" and at == len(chunk) and self._dest == "out":
                    self.awaiting_lf = True  # the CRLF's LF goes with the final event
                break
        if self.done:
            self._pending = []
            self._pending_len = 0
            return self._take()
        if self._transparent:
            self._emit(b"".join([*self._pending, chunk[at:]]))
            self._pending = []
            self._pending_len = 0
            return self._take()
        if at and chunk[at - 1 : at] == b"\r":
            self._cr = True
        if at < len(chunk):
            self._pending.append(chunk[at:])
            self._pending_len += len(chunk) - at
        if self._pending_len + self._block_len > self.max_held:
            self._give_up(*self._too_large(self._pending_len + self._block_len, self.max_held))
            if self._transparent:
                self._emit(b"".join(self._pending))
                self._pending = []
                self._pending_len = 0
        return self._take()

    def end(self) -> bytes:
        """The inner body ended: framed, an ABORT unless the final response went; unframed, what
        is held goes on as it came."""
        if self.done or self._transparent:
            self.done = True
            return self._take()
        if self.encoder is not None:
            # Cleanly or not, an end before the final response is a failure of the app (code 4,
            # upstream failed, SPEC.md §3.1), never a clean end.
            self._give_up(ABORT_UPSTREAM_FAILED, ENDED_EARLY)
        else:
            self._emit(b"".join([*self._block, *self._pending]))
            self._pending = []
        self.done = True
        return self._take()

    def _too_large(self, length: int, maximum: int) -> tuple[int, str]:
        err = EncodeError("MessageTooLarge", f"message of at least {length} bytes exceeds the limit of {maximum}")
        return err.abort_code, str(err)

    def _reset_event(self) -> None:
        self._block = []
        self._block_len = 0
        self._data = []
        self._data_len = 0
        self._data_lines = []
        self._event = None

    def _line(self, content: bytes, ending: bytes) -> None:
        if self._at_start:
            self._at_start = False
            if content.startswith(_BOM):
                if self.encoder is None or self.compat:
                    self._emit(_BOM)  # first in the body, before any record, where SSE skips it
                content = content[len(_BOM) :]
        self._dest = "block"
        if not content:
            self._without_data += 1
            self._block.append(ending)
            self._dest = "out" if self.encoder is None or self.compat else "drop"
            self._dispatch()
            return
        if content[:1] == b":":
            self._without_data += 1
            if self._without_data > _MAX_LINES_WITHOUT_DATA:
                self._give_up(ABORT_INTERNAL_ERROR, "the response stream: too many lines without data")
                return
            if not self._block:
                # A keep-alive between events: a KEEPALIVE frame (in a record, §18.4).
                if self.encoder is not None:
                    self._emit(self.encoder.keep_alive())
                    self._dest = "drop"
                else:
                    self._emit(content + ending)
                    self._dest = "out"
                return
            self._hold(content + ending)
            return
        # The field's value sliced once (a message event's line is the whole message).
        colon = content.find(b":")
        if colon < 0:
            name, value = content, b""
        else:
            name = content[:colon]
            value = content[colon + 2 if content[colon + 1 : colon + 2] == b" " else colon + 1 :]
        if name == b"data":
            if value:
                self._without_data = 0
            else:
                self._without_data += 1
            self._data_len += len(value) + (1 if self._data else 0)
            self._data.append(value)
            self._data_lines.append(len(self._block))
            if self._data_len > self.max_message:
                self._hold(content + ending)
                self._give_up(*self._too_large(self._data_len, self.max_message))
                return
        else:
            self._without_data += 1
            if name == b"event":
                self._event = value
        if self._without_data > _MAX_LINES_WITHOUT_DATA:
            self._hold(content + ending)
            self._give_up(ABORT_INTERNAL_ERROR, "the response stream: too many lines without data")
            return
        self._hold(content + ending)

    def _hold(self, line: bytes) -> None:
        self._block.append(line)
        self._block_len += len(line)

    def _dispatch(self) -> None:
        block, data, name, data_lines = self._block, self._data, self._event, self._data_lines
        data_len = self._data_len
        self._reset_event()
        if not (data_len > 0 and (name is None or name in (b"", b"message"))):
            # A priming event (`id` only), an event of another type, a lone blank line.
            if self.encoder is None or self.compat:
                self._emit(b"".join(block))
            return
        message = data[0] if len(data) == 1 else b"\n".join(data)
        final = is_response(message)
        if self.on_message is not None:
            self.on_message(message, final)
        if final and self.declare is not None:
            declared = self.declare.apply_bytes(message)
            self.declare = None
            if declared is not None:
                message = declared
                lines = b"".join(b"data: " + piece + b"\n" for piece in declared.split(b"\n"))
                first = data_lines[0]
                block = [line for i, line in enumerate(block) if i not in data_lines or i == first]
                block[first] = lines
        if self.encoder is None:
            self._emit(b"".join(block))
            self._transparent = final  # after the final response: nothing more to declare
            return
        try:
            if self.compat:
                self._emit(self.encoder.message_record(message, final))
                self._out += block
            else:
                self._emit(self.encoder.message(message, final))
        except EncodeError as err:
            # The event is dropped: no message without its record.
            self._emit(self.encoder.fail(err))
            self.done = True
            return
        self.done = final


class JsonRelay:
    """An inner JSON body, gathered whole within `max_message` bytes (the response head waits
    for it): `feed` returns False once the body passed the limit (`read` is then what was read)."""

    def __init__(self, max_message: int) -> None:
        self.max_message = max_message
        self.read: list[bytes] = []
        self.length = 0
        self.too_large = False

    def feed(self, chunk: bytes) -> bool:
        """Takes a chunk; False once the body is over the limit."""
        self.read.append(chunk)
        self.length += len(chunk)
        if self.length > self.max_message:
            self.too_large = True
        return not self.too_large

    def body(self) -> bytes:
        """What was read, joined."""
        return b"".join(self.read)
