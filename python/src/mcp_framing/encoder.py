"""The sender's side of the wire format, sans-I/O: `StreamEncoder` writes the frames of one
response stream (SPEC.md §2–§5), `MappingEncoder` writes them in one of the three mappings
(binary §16, SSE §15, compatible SSE §18). Every method returns the bytes to send; nothing here
touches a socket. It shares its frame constants with the decoder (`frames.py`).

>>> enc = StreamEncoder(request_key=None, attempt_id=bytes(range(16)))
>>> body = enc.message(b'{"jsonrpc":"2.0","id":1,"result":{}}') + enc.end()
>>> from mcp_framing import StreamDecoder
>>> dec = StreamDecoder()
>>> [m[:10] for m in dec.feed(body)], dec.finish().verdict
([b'{"jsonrpc"'], 'clean')
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import zlib
from typing import Literal

from .frames import ABORT, DATA, HEAD, KEEPALIVE, MAGIC, MESSAGE_END, STREAM_END, VERSION
from .limits import DEFAULT_MAX_MESSAGE_SIZE, MAX_ABORT_TEXT
from .sse import utf8_error

__all__ = [
    "ABORT_CANCELLED",
    "ABORT_INTERNAL_ERROR",
    "ABORT_MESSAGE_TOO_LARGE",
    "ABORT_OVERLOADED",
    "ABORT_UNSPECIFIED",
    "ABORT_UPSTREAM_FAILED",
    "DEFAULT_FRAME_SIZE",
    "EncodeError",
    "MappingEncoder",
    "StreamEncoder",
    "fit_reason",
]

#: §6: a sender's default DATA frame size, a quarter of a receiver's default limit.
DEFAULT_FRAME_SIZE = 16 * 1024
#: §3.1: the ABORT reason codes.
ABORT_UNSPECIFIED = 0
ABORT_INTERNAL_ERROR = 1
ABORT_CANCELLED = 2
ABORT_OVERLOADED = 3
ABORT_UPSTREAM_FAILED = 4
ABORT_MESSAGE_TOO_LARGE = 5

_SEQUENCE_SPACE = 1 << 32
_CRC_PART = struct.Struct(">2sBBIII")  # the header bytes before the payload CRC
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_CODE = struct.Struct(">H")
_RECORD_PREFIX = b":mcp-framing "  # §18.2
_EVENT_PREFIX = b"event: mcp-frame\ndata: "  # §15

_FRESH, _BETWEEN, _IN_MESSAGE, _FINISHED = range(4)

Mapping = Literal["binary", "sse", "compat"]


class EncodeError(Exception):
    """What a sender cannot write, by the Rust crate's name (`kind`): `StreamFinished`,
    `MessageOpen`, `MessageTooLarge`, `AbortReasonTooLong`, `SequenceExhausted`, and for the
    compatible mapping (§18.3) `NotUtf8`, `CarriageReturn`, `EmptyMessage`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def abort_code(self) -> int:
        """The ABORT code a sender ends its stream with for this error (§3.1)."""
        return ABORT_MESSAGE_TOO_LARGE if self.kind == "MessageTooLarge" else ABORT_INTERNAL_ERROR


def _too_large(length: int, maximum: int) -> EncodeError:
    return EncodeError("MessageTooLarge", f"message of at least {length} bytes exceeds the limit of {maximum}")


def fit_reason(reason: str) -> bytes:
    """An ABORT reason cut to 1024 bytes of UTF-8 at a character boundary (§3).

    >>> len(fit_reason("é" * 600))
    1024
    """
    data = reason.encode("utf-8", "replace")
    if len(data) <= MAX_ABORT_TEXT:
        return data
    return data[:MAX_ABORT_TEXT].decode("utf-8", "ignore").encode("utf-8")


def _frame(kind: int, sequence: int, payload: bytes | memoryview) -> bytes:
    crc = zlib.crc32(payload) if payload else 0
    head = _CRC_PART.pack(MAGIC, VERSION, kind, sequence, len(payload), crc)
    return head + zlib.crc32(head).to_bytes(4, "big") + payload


class StreamEncoder:
    """The frames of one response stream (§2–§5): HEAD (written before the first other frame),
    DATA frames of at most `frame_size` bytes, MESSAGE_END with the message's length and SHA-256,
    KEEPALIVE, and the terminal STREAM_END or ABORT. Sequence numbers start at the attempt id's
    first four bytes (§4); the attempt id is drawn from the OS's CSPRNG unless given.

    >>> enc = StreamEncoder(attempt_id=bytes(16), frame_size=4, max_message_size=8)
    >>> len(enc.message(b"12345"))  # HEAD 52, two DATA frames 24 + 21, MESSAGE_END 60
    157
    >>> enc.message(b"123456789")
    Traceback (most recent call last):
    ...
    mcp_framing.encoder.EncodeError: message of at least 9 bytes exceeds the limit of 8
    """

    __slots__ = (
        "_frames",
        "_hash",
        "_message_len",
        "_messages",
        "_next",
        "_state",
        "attempt_id",
        "frame_size",
        "max_message_size",
        "request_key",
    )

    def __init__(
        self,
        request_key: bytes | None = None,
        attempt_id: bytes | None = None,
        frame_size: int = DEFAULT_FRAME_SIZE,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ) -> None:
        if not 0 < frame_size <= 0xFFFFFFFF:
            raise ValueError(f"frame_size must be in 1..=4294967295, got {frame_size}")
        if request_key is not None and (len(request_key) != 16 or request_key == bytes(16)):
            raise ValueError("a request key is 16 bytes, not all zero (SPEC.md §10)")
        attempt = os.urandom(16) if attempt_id is None else attempt_id
        if len(attempt) != 16:
            raise ValueError("an attempt id is 16 bytes")
        self.request_key = request_key
        self.attempt_id = attempt
        self.frame_size = frame_size
        self.max_message_size = max_message_size
        self._next = int.from_bytes(attempt[:4], "big")
        self._frames = 0
        self._state = _FRESH
        self._message_len = 0
        self._hash = hashlib.sha256()
        self._messages = 0

    @property
    def messages(self) -> int:
        """Messages finished so far."""
        return self._messages

    @property
    def finished(self) -> bool:
        """Whether STREAM_END or ABORT was written."""
        return self._state == _FINISHED

    @property
    def in_message(self) -> bool:
        """Whether a message is open (DATA written, no MESSAGE_END yet)."""
        return self._state == _IN_MESSAGE

    def _take(self) -> int:
        sequence = self._next
        self._next = (sequence + 1) & 0xFFFFFFFF
        self._frames += 1
        return sequence

    def _prepare(self, frames: int, out: list[bytes]) -> None:
        if self._state == _FINISHED:
            raise EncodeError("StreamFinished", "the stream already ended")
        head = self._state == _FRESH
        if self._frames + head + frames > _SEQUENCE_SPACE:
            raise EncodeError("SequenceExhausted", "the stream used all 2^32 sequence numbers")
        if head:
            payload = (self.request_key or bytes(16)) + self.attempt_id
            out.append(_frame(HEAD, self._take(), payload))
            self._state = _BETWEEN

    def open(self) -> bytes:
        """The HEAD frame if not written yet (b"" otherwise)."""
        out: list[bytes] = []
        self._prepare(0, out)
        return b"".join(out)

    def check_message(self, length: int) -> None:
        """Raises the `EncodeError` that `message` would raise for a message of `length` bytes."""
        if self._state == _IN_MESSAGE:
            raise EncodeError("MessageOpen", "a message is still open: finish it before ending the stream")
        if self._state == _FINISHED:
            raise EncodeError("StreamFinished", "the stream already ended")
        if length > self.max_message_size:
            raise _too_large(length, self.max_message_size)
        frames = -(-length // self.frame_size) + 1
        if self._frames + (self._state == _FRESH) + frames > _SEQUENCE_SPACE:
            raise EncodeError("SequenceExhausted", "the stream used all 2^32 sequence numbers")

    def _data(self, chunk: bytes | memoryview, out: list[bytes], payloads: bool) -> None:
        if not chunk:
            if self._state == _FINISHED:
                raise EncodeError("StreamFinished", "the stream already ended")
            return
        size = self.frame_size
        n = len(chunk)
        total = self._message_len + n
        if total > self.max_message_size:
            if self._state == _FINISHED:
                raise EncodeError("StreamFinished", "the stream already ended")
            raise _too_large(total, self.max_message_size)
        self._prepare(-(-n // size), out)
        self._hash.update(chunk)
        view = memoryview(chunk)
        append, pack, crc32, u32 = out.append, _CRC_PART.pack, zlib.crc32, _U32.pack
        sequence = self._next
        # Per frame: the payload CRC, the header and its CRC (§2); names bound once, the
        # sequence numbers counted here (a large message is many frames).
        for at in range(0, n, size):
            piece = view[at : at + size]
            head = pack(MAGIC, VERSION, DATA, sequence, len(piece), crc32(piece))
            append(head + u32(crc32(head)))
            if payloads:
                append(piece)  # type: ignore[arg-type]
            sequence = (sequence + 1) & 0xFFFFFFFF
        self._next = sequence
        self._frames += -(-n // size)
        self._message_len = total
        self._state = _IN_MESSAGE

    def push(self, chunk: bytes | memoryview) -> bytes:
        """DATA frames of the next bytes of the current message (opening it)."""
        out: list[bytes] = []
        self._data(chunk, out, True)
        return b"".join(out)

    def _finish(self, out: list[bytes]) -> None:
        self._prepare(1, out)
        payload = _U64.pack(self._message_len) + self._hash.digest()
        out.append(_frame(MESSAGE_END, self._take(), payload))
        self._messages += 1
        self._message_len = 0
        self._hash = hashlib.sha256()
        self._state = _BETWEEN

    def finish_message(self) -> bytes:
        """MESSAGE_END of the current message (an empty message if none is open)."""
        out: list[bytes] = []
        self._finish(out)
        return b"".join(out)

    def message_frames(self, message: bytes | memoryview, payloads: bool = True) -> list[bytes]:
        """The frames of one whole message as a list of pieces (no join: a large message is not
        copied); without `payloads` the DATA frames are their headers alone (§18.2)."""
        self.check_message(len(message))
        out: list[bytes] = []
        self._data(message, out, payloads)
        self._finish(out)
        return out

    def message(self, message: bytes | memoryview) -> bytes:
        """The frames of one whole message: DATA frames and MESSAGE_END."""
        return b"".join(self.message_frames(message))

    def keep_alive(self) -> bytes:
        """A KEEPALIVE frame."""
        out: list[bytes] = []
        self._prepare(1, out)
        out.append(_frame(KEEPALIVE, self._take(), b""))
        return b"".join(out)

    def end(self) -> bytes:
        """The STREAM_END sentinel with the message count (§3)."""
        if self._state == _IN_MESSAGE:
            raise EncodeError("MessageOpen", "a message is still open: finish it before ending the stream")
        out: list[bytes] = []
        self._prepare(1, out)
        out.append(_frame(STREAM_END, self._take(), _U64.pack(self._messages)))
        self._state = _FINISHED
        return b"".join(out)

    def abort(self, code: int, reason: str | bytes = b"") -> bytes:
        """An ABORT frame (§3, §3.1): `code` from the registry, `reason` at most 1024 bytes."""
        text = reason.encode("utf-8") if isinstance(reason, str) else reason
        if len(text) > MAX_ABORT_TEXT:
            raise EncodeError("AbortReasonTooLong", f"abort reason of {len(text)} bytes exceeds 1024")
        out: list[bytes] = []
        self._prepare(1, out)
        out.append(_frame(ABORT, self._take(), _CODE.pack(code) + text))
        self._state = _FINISHED
        return b"".join(out)


def _frame_events(frames: bytes) -> bytes:
    """§15: one `mcp-frame` event per frame, the frame in base64."""
    out = []
    at, n = 0, len(frames)
    while at < n:
        end = min(n, at + 20 + int.from_bytes(frames[at + 8 : at + 12], "big"))
        out.append(_EVENT_PREFIX + base64.b64encode(frames[at:end]) + b"\n\n")
        at = end
    return b"".join(out)


def record(frames: bytes) -> bytes:
    """§18.2: a `:mcp-framing` comment record carrying `frames`."""
    return _RECORD_PREFIX + base64.b64encode(frames) + b"\n"


def check_event_data(message: bytes | memoryview) -> None:
    """§18.3: raises `EncodeError` unless an SSE event carries `message` unchanged (UTF-8, no CR,
    not empty)."""
    if not message:
        raise EncodeError("EmptyMessage", "an empty message cannot be carried by an SSE event")
    data = bytes(message) if isinstance(message, memoryview) else message
    valid = utf8_error(data)
    if valid is not None:
        raise EncodeError("NotUtf8", f"message is not UTF-8 (valid up to byte {valid}): an SSE event cannot carry it")
    at = data.find(b"\r")
    if at >= 0:
        raise EncodeError(
            "CarriageReturn", f"message contains a carriage return at byte {at}: an SSE event cannot carry it"
        )


def message_event(message: bytes) -> bytes:
    """§18.4: the SSE event carrying `message`: one `data: ` line per LF-separated piece.

    >>> message_event(b'{"id":1}'), message_event(b'{\\n "id": 1\\n}')
    (b'data: {"id":1}\\n\\n', b'data: {\\ndata:  "id": 1\\ndata: }\\n\\n')
    """
    return b"".join(_event_pieces(message))


def _event_pieces(message: bytes) -> list[bytes]:
    # Each LF of the message ends a data line and starts the next: one `replace` in C, however
    # many lines (a pretty-printed message has one a line; a compact one, none, and no copy).
    if b"\n" not in message:
        return [b"data: ", message, b"\n\n"]
    return [b"data: ", message.replace(b"\n", b"\ndata: "), b"\n\n"]


class MappingEncoder:
    """A `StreamEncoder` writing one mapping's body: `binary` (the frames, §16), `sse` (one
    `mcp-frame` event per frame, §15) or `compat` (each message a plain `message` event after a
    `:mcp-framing` record of its frames, §18.4).

    `message(data, final=True)` writes the stream's last message with its STREAM_END in the same
    piece (in the compatible mapping: in the record before its event).

    >>> enc = MappingEncoder("compat", StreamEncoder(attempt_id=bytes(16)))
    >>> body = enc.message(b'{"id":1,"result":{}}', final=True)
    >>> body.splitlines()[1]
    b'data: {"id":1,"result":{}}'
    """

    __slots__ = ("encoder", "mapping")

    def __init__(self, mapping: Mapping, encoder: StreamEncoder) -> None:
        if mapping not in ("binary", "sse", "compat"):
            raise ValueError(f"unknown mapping {mapping!r}")
        self.mapping: Mapping = mapping
        self.encoder = encoder

    @property
    def finished(self) -> bool:
        """Whether the stream ended (STREAM_END or ABORT)."""
        return self.encoder.finished

    def _wrap(self, frames: bytes) -> bytes:
        if not frames:
            return b""
        if self.mapping == "binary":
            return frames
        if self.mapping == "sse":
            return _frame_events(frames)
        return record(frames)

    def open(self) -> bytes:
        """HEAD, if not written yet, in the binary and §15 mappings (the compatible mapping writes
        it in the first record)."""
        return b"" if self.mapping == "compat" else self._wrap(self.encoder.open())

    def message(self, message: bytes, final: bool = False) -> bytes:
        """One whole message, and with `final` the STREAM_END after it."""
        enc = self.encoder
        if self.mapping == "compat":
            check_event_data(message)
            frames = enc.message_frames(message, payloads=False)
            if final:
                frames.append(enc.end())
            return b"".join([record(b"".join(frames)), *_event_pieces(message)])
        pieces = enc.message_frames(message)
        if final:
            pieces.append(enc.end())
        if self.mapping == "binary":
            return b"".join(pieces)
        return _frame_events(b"".join(pieces))

    def push(self, chunk: bytes | memoryview) -> bytes:
        """Binary and §15 mappings: DATA frames of the next bytes of the current message (a
        message produced piece by piece; the compatible mapping carries a message in one event,
        so it takes whole messages only)."""
        if self.mapping == "compat":
            raise ValueError("the compatible mapping takes whole messages (message)")
        return self._wrap(self.encoder.push(chunk))

    def finish_message(self) -> bytes:
        """Binary and §15 mappings: the MESSAGE_END of the message `push` wrote."""
        if self.mapping == "compat":
            raise ValueError("the compatible mapping takes whole messages (message)")
        return self._wrap(self.encoder.finish_message())

    def message_record(self, message: bytes, final: bool = False) -> bytes:
        """Compatible mapping: the record of a message whose event the caller sends unchanged
        right after it (a re-framing server passing its inner server's event through, §18.8)."""
        if self.mapping != "compat":
            raise ValueError("message_record is the compatible mapping's")
        check_event_data(message)
        frames = self.encoder.message_frames(message, payloads=False)
        if final:
            frames.append(self.encoder.end())
        return record(b"".join(frames))

    def keep_alive(self) -> bytes:
        """A KEEPALIVE frame (in the compatible mapping, in a record of its own)."""
        return self._wrap(self.encoder.keep_alive())

    def end(self) -> bytes:
        """STREAM_END."""
        return self._wrap(self.encoder.end())

    def abort(self, code: int, reason: str) -> bytes:
        """ABORT with `reason` cut to fit (§3); b"" if the stream already ended."""
        if self.encoder.finished:
            return b""
        return self._wrap(self.encoder.abort(code, fit_reason(reason)))

    def fail(self, err: EncodeError) -> bytes:
        """The ABORT an encoding error calls for (code 5 for a message over the limit, else 1)."""
        return self.abort(err.abort_code, str(err))
