"""The sans-I/O frame decoder (SPEC.md §2–§7): feed it the frame bytes in any split, then finish.

Each byte is examined once. A header is checked as soon as its bytes are there (the magic at its
second byte, the version at its third, the rest at its twentieth) and before any byte of its
payload is awaited; nothing is reserved from a declared length. A payload's CRC-32 and a
message's SHA-256 are computed as the bytes arrive, so a message is verified the moment its
MESSAGE_END is complete, and handed out only then.

>>> stream = bytes.fromhex(
...     "9f4d0101a1a2a3a4000000209306db06fe94f35600112233445566778899aabbccddeeff"
...     "a1a2a3a4b1b2b3b4c1c2c3c4d1d2d3d4"  # HEAD (SPEC.md §13)
...     "9f4d0102a1a2a3a50000000ba7d45f9055f370587b226f6b223a747275657d"  # DATA {"ok":true}
...     "9f4d0103a1a2a3a600000028a5ca92d66ad3cb9b000000000000000b4062edaf750fb8074e7e83e0"
...     "c9028c94e32468a8b6f1614774328ef045150f93"  # MESSAGE_END
...     "9f4d0104a1a2a3a7000000081225efff3b2288ed0000000000000001"  # STREAM_END
... )
>>> dec = StreamDecoder()
>>> dec.feed(stream[:100]), dec.feed(stream[100:])
([], [b'{"ok":true}'])
>>> dec.finish().verdict
'clean'
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

from .errors import DecodeError
from .frames import (
    ABORT,
    DATA,
    HEAD,
    HEADER,
    HEADER_LEN,
    KEEPALIVE,
    MAGIC,
    MESSAGE_END,
    STREAM_END,
    VERSION,
    kind_name,
)
from .jsonrpc import TopLevel, response_head, top_level
from .limits import MAX_ABORT_TEXT, Limits
from .verdict import Abort, Received, StreamVerdict

__all__ = ["StreamDecoder"]

_SEQ_WINDOW = 1 << 20  # §4
_EMPTY_SHA256 = hashlib.sha256(b"").digest()
_NO_MESSAGES: list[bytes] = []
# The payload length each fixed-length kind must have (§3).
_FIXED = {HEAD: 32, MESSAGE_END: 40, STREAM_END: 8, KEEPALIVE: 0}
# Bytes of input a message may keep referenced beyond its own (see `_keep`).
_PIN_SLACK = 65_536
# §7.1: the final response, looked for by a decoder that expects a request key. _CANDIDATE: a
# message whose head shows a response, not read whole yet (see `StreamDecoder`).
_UNCHECKED, _AWAITED, _CANDIDATE, _HELD, _SPENT = 0, 1, 2, 3, 4


def json_rpc_response(message: bytes) -> Any:
    """§7.1: the parsed value of `message` if it is a JSON-RPC response (UTF-8, one JSON text,
    an object with a top-level `id` and a top-level `result` or `error`), else None.

    >>> json_rpc_response(b'{"jsonrpc":"2.0","id":null,"error":{}}')
    {'jsonrpc': '2.0', 'id': None, 'error': {}}
    >>> json_rpc_response(b'{"method":"x","params":{"id":1,"result":2}}') is None
    True
    """
    found = examine(message)[1]
    return None if found is None else found.members


def examine(message: bytes) -> tuple[bool, TopLevel | None]:
    """§7.1 on `message` in one decoding: whether it is UTF-8, and its top level if it is a
    JSON-RPC response (else None). The decoding is the UTF-8 validation (not done twice).

    >>> examine(b'{"id":1,"result":{}}'), examine(b"caf\\xc3")
    ((True, TopLevel(members={'id': 1, 'result': {}}, id_spans=[(6, 7)], complete=True)), (False, None))
    """
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        return False, None
    try:
        found = top_level(text, len(message))
    except (ValueError, RecursionError):
        return True, None
    return True, found if found.is_response else None


class StreamDecoder:
    """Decodes one framed stream (SPEC.md §2–§7).

    `feed` takes the next bytes (any split) and returns the messages whose MESSAGE_END verified
    in them; it never raises on peer input: the first error is recorded (`error`) and sticks.
    `finish` is the end of input: it returns the verdict (§7), the only place a stream becomes
    clean.

    A decoder that expects a request key looks for the final response (§7.1) lazily, with the
    verdicts of the whole reading: at each MESSAGE_END until it is found, a long message whose
    first 4 KiB show a top-level `id` and `result` or `error` is the candidate, its head read
    (`jsonrpc.response_head`) and the rest not; any other message is read whole at once. The
    candidate is read whole only where that decides something: when an accepted DATA,
    MESSAGE_END or ABORT header follows it (it was the final response, and the stream goes on
    after it; or it was not one, and the next message is looked at), when the input ends without
    a terminal frame (§7 row 4), or when `final_response` or `final_id_spans` is asked for.
    `response_index` and `response_head` tell what is known without reading further.

    >>> dec = StreamDecoder(request_key=bytes.fromhex("00112233445566778899aabbccddeeff"))
    >>> dec.feed(b"{}")  # unframed JSON: rejected at the second byte (§2)
    []
    >>> dec.error.kind
    'BadMagic'
    >>> StreamDecoder().finish().error.at
    'NoFrame'
    """

    __slots__ = (
        "_answer",
        "_crc",
        "_error",
        "_found",
        "_frames",
        "_hbuf",
        "_head",
        "_ignorables",
        "_in_message",
        "_keepalives",
        "_kept",
        "_key",
        "_kind",
        "_last_seq",
        "_limits",
        "_max_frame",
        "_max_message",
        "_message_ends",
        "_messages",
        "_msg_len",
        "_need",
        "_offset",
        "_pbuf",
        "_pcrc",
        "_pieces",
        "_pin_obj",
        "_pinned",
        "_plen",
        "_sha",
        "_span",
        "_terminal",
        "_verdict",
    )

    def __init__(self, limits: Limits | None = None, request_key: bytes | None = None) -> None:
        """A decoder with `limits` (SPEC.md defaults) expecting `request_key` in HEAD.

        With `request_key` None nothing is compared: any key, or none, is accepted (§2.2); a client
        that sent a key passes it, and a HEAD with another key or none is `RequestKeyMismatch`.
        """
        self._limits = limits if limits is not None else Limits()
        self._max_frame = self._limits.max_frame_payload
        self._max_message = self._limits.max_message_size
        if request_key is not None and len(request_key) != 16:
            raise ValueError("a request key is 16 bytes")
        self._key = request_key
        self._hbuf = bytearray()
        self._kind = -1  # the kind whose payload is awaited; -1 while reading a header
        self._need = 0
        self._plen = 0
        self._pcrc = 0
        self._crc = 0
        self._pbuf = bytearray()  # payload of a control frame
        self._offset = 0  # stream bytes of whole headers and payloads consumed
        self._frames = 0
        self._last_seq: int | None = None
        self._head: tuple[bytes, bytes] | None = None
        self._in_message = False
        self._sha: Any = None
        self._pieces: list[Any] = []  # the open message's bytes (views or copies), unverified
        self._msg_len = 0  # bytes of the open message in whole DATA frames
        self._kept = 0  # bytes of the open message held in `_pieces`
        self._pinned = 0  # bytes of input objects the pieces reference
        self._pin_obj: Any = None
        self._span: Any = None  # (input, start, end): the pieces as one run; False: they are not
        self._message_ends = 0
        self._keepalives = 0
        self._ignorables = 0
        self._messages: list[bytes] = []
        self._terminal: Abort | bool | None = None  # True: STREAM_END; Abort: ABORT
        self._error: DecodeError | None = None
        self._verdict: StreamVerdict | None = None
        # §7.1: a decoder that expects a key looks for the final response among the messages
        self._answer = _UNCHECKED if request_key is None else _AWAITED
        # (index in `messages`, top level): the candidate's head (_CANDIDATE) or the final
        # response read whole (_HELD, _SPENT)
        self._found: tuple[int, TopLevel] | None = None

    # -- state -------------------------------------------------------------------------------

    @property
    def limits(self) -> Limits:
        """The limits this decoder enforces."""
        return self._limits

    @property
    def error(self) -> DecodeError | None:
        """The first error found, if any (final, §2.2)."""
        return self._error

    @property
    def sentinel_seen(self) -> bool:
        """Whether STREAM_END arrived with nothing after it so far (the stream is complete once the
        input ends now, §7 row 2)."""
        return self._terminal is True and self._error is None

    @property
    def terminated(self) -> bool:
        """Whether a terminal frame (STREAM_END or ABORT) arrived and no error followed."""
        return self._terminal is not None and self._error is None

    @property
    def messages(self) -> list[bytes]:
        """Every message verified so far, in order."""
        return self._messages

    @property
    def final_response(self) -> tuple[int, Any] | None:
        """§7.1: the stream's final response, once verified: its index in `messages` and its
        parsed JSON value (only a decoder that expects a request key looks for it). Reads the
        candidate whole if it was not yet."""
        self._read_candidate()
        found = self._found
        return None if found is None else (found[0], found[1].members)

    @property
    def final_id_spans(self) -> list[tuple[int, int]]:
        """Where the final response's top-level `id` values lie in its bytes, as the §7.1 reading
        found them (`jsonrpc.put_id` edits the id there, §17.13); reads the candidate whole."""
        self._read_candidate()
        return [] if self._found is None else self._found[1].id_spans

    @property
    def response_index(self) -> int | None:
        """The index in `messages` of the final response or of the candidate for it (§7.1),
        without reading further. Every message before it is no response; a message after it
        comes once the candidate was read whole: after the final response, or the candidate
        was none and this is looked at in turn."""
        return None if self._found is None else self._found[0]

    @property
    def response_head(self) -> TopLevel | None:
        """What is known of the message at `response_index` without reading further: its head
        (`complete` False, `jsonrpc.response_head`) or its top level read whole."""
        return None if self._found is None else self._found[1]

    def _read_candidate(self) -> None:
        """Reads the candidate whole (§7.1): the final response, or no response (the next
        message is looked at)."""
        if self._answer != _CANDIDATE:
            return
        index = self._found[0]  # type: ignore[index]
        found = examine(self._messages[index])[1]
        if found is None:
            self._answer = _AWAITED
            self._found = None
        else:
            self._answer = _HELD
            self._found = (index, found)

    @property
    def head(self) -> tuple[bytes, bytes] | None:
        """The verified HEAD: (request key, attempt id)."""
        return self._head

    @property
    def frames_decoded(self) -> int:
        """Whole frames accepted so far (an idle timeout restarts at each, §12)."""
        return self._frames

    @property
    def in_message(self) -> bool:
        """Whether a DATA frame opened a message that no MESSAGE_END closed yet (§1)."""
        return self._in_message

    def received(self) -> Received:
        """What arrived so far."""
        head = self._head
        return Received(
            frames=self._frames,
            bytes=self._offset + len(self._hbuf) + (self._plen - self._need if self._kind >= 0 else 0),
            messages=len(self._messages),
            open_message_bytes=self._msg_len,
            last_sequence=self._last_seq,
            request_key=None if head is None else head[0],
            attempt_id=None if head is None else head[1],
        )

    # -- input -------------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Consumes the next bytes of the stream; returns the messages verified in them.

        Never raises on peer input: an error is recorded in `error` and every later byte ignored.

        >>> StreamDecoder().feed(b"")
        []
        """
        if self._verdict is not None:
            raise RuntimeError("feed after finish: the input already ended")
        if self._error is not None or not data:
            return _NO_MESSAGES
        if type(data) is not bytes:
            data = bytes(data)  # the caller may reuse its buffer; message pieces reference ours
        before = len(self._messages)
        try:
            self._feed(data)
        except DecodeError as err:
            self._error = err
        if len(self._messages) == before:
            return _NO_MESSAGES
        return self._messages[before:]

    def feed_part(self, data: bytes, start: int, end: int) -> None:
        """As `feed` for ``data[start:end]``, without copying it (the SSE mappings hand over
        the payloads an event carries this way)."""
        if self._error is not None or start >= end:
            return
        try:
            self._feed(data, start, end)
        except DecodeError as err:
            self._error = err

    def carry(self, data: bytes) -> None:
        """Lets the next message keep references to `data` rather than copies of its pieces:
        the caller vouches that every byte of it is payload of that one message, handed over
        next with `feed_part` (an event of the compatible mapping carries exactly the payloads
        of one message, §18.5). The message is then `data` itself, neither copied nor joined,
        and memory stays bounded by the message (§6)."""
        self._pin_obj = data
        self._pinned += len(data)

    def fail(self, error: DecodeError) -> None:
        """Records an error of the layer above (a transport mapping, §15, §18.5) unless the frames
        already broke a rule: the first error in body order stands (§2.2)."""
        if self._error is None:
            self._error = error

    def _feed(self, data: bytes, i: int = 0, n: int = -1) -> None:
        mv = memoryview(data)
        if n < 0:
            n = len(data)
        while i < n:
            if self._terminal is not None:
                # §3: nothing may follow a terminal frame, also later in the transport.
                raise DecodeError("TrailingData", offset=self._offset)
            if self._kind < 0:
                hb = self._hbuf
                if not hb and n - i >= HEADER_LEN:
                    header = data[i : i + HEADER_LEN]
                    i += HEADER_LEN
                else:
                    take = min(HEADER_LEN - len(hb), n - i)
                    hb += mv[i : i + take]
                    i += take
                    # §2: the magic at the second byte, the version at the third, so a short
                    # unframed body is BadMagic, not a truncation.
                    if len(hb) >= 2 and hb[0:2] != MAGIC:
                        raise DecodeError("BadMagic", offset=self._offset, found=bytes(hb[0:2]).hex())
                    if len(hb) >= 3 and hb[2] != VERSION:
                        raise DecodeError("UnsupportedVersion", offset=self._offset, version=hb[2])
                    if len(hb) < HEADER_LEN:
                        continue
                    header = bytes(hb)
                    hb.clear()
                self._header(header)
            else:
                need = self._need
                take = need if need <= n - i else n - i
                piece = mv[i : i + take]
                i += take
                self._crc = zlib.crc32(piece, self._crc)
                kind = self._kind
                if kind == DATA:
                    self._sha.update(piece)
                    self._keep(piece, data, i - take)
                elif kind < 0x80:
                    self._pbuf += piece
                self._need = need - take
                if self._need == 0:
                    self._complete()

    def _keep(self, piece: memoryview, data: bytes, start: int) -> None:
        """Keeps a piece of the open message. A view of the input is kept while the input objects
        the message references stay within twice its bytes (plus 64 KiB), else a copy: memory is
        bounded by the message (§6), whatever the reads and the frames around the message.
        While the pieces are one contiguous run of one input object (an SSE event carries a
        whole message), `_span` says so, and the message is taken from it without a join."""
        size = len(piece)
        self._kept += size
        if data is self._pin_obj:
            pinned = True
        elif self._pinned + len(data) <= 2 * self._kept + _PIN_SLACK:
            self._pin_obj = data
            self._pinned += len(data)
            pinned = True
        else:
            pinned = False
        span = self._span
        if not pinned:
            self._pieces.append(bytes(piece))
            self._span = False
            return
        self._pieces.append(piece)
        if span is None:
            self._span = (data, start, start + size) if len(self._pieces) == 1 else False
        elif span is not False and span[0] is data and span[2] == start:
            self._span = (data, span[1], start + size)
        else:
            self._span = False

    # -- header (§2 "Header first") --------------------------------------------------------------

    def _header(self, h: bytes) -> None:
        off = self._offset
        magic, version, kind, seq, length, pcrc, hcrc = HEADER.unpack(h)
        # 1. magic and version (§2, §8)
        if magic != MAGIC:
            raise DecodeError("BadMagic", offset=off, found=magic.hex())
        if version != VERSION:
            raise DecodeError("UnsupportedVersion", offset=off, version=version)
        # 2. header CRC over bytes 0..16
        if zlib.crc32(memoryview(h)[:16]) != hcrc:
            raise DecodeError("HeaderChecksumMismatch", offset=off)
        # 3. kind (§3)
        if kind == 0 or 0x07 <= kind <= 0x7F:
            raise DecodeError("UnknownFrameKind", offset=off, kind=kind)
        # 4. place in the stream, sequence (§3, §4)
        if self._head is None:
            if kind != HEAD:
                raise DecodeError("UnexpectedFrame", offset=off, frame=kind_name(kind), state="start")
        else:
            expected = (self._last_seq + 1) & 0xFFFFFFFF  # type: ignore[operator]
            if seq != expected:
                d = (seq - expected) & 0xFFFFFFFF
                if d <= _SEQ_WINDOW:
                    name = "SequenceGap"
                elif d >= (1 << 32) - _SEQ_WINDOW:
                    name = "SequenceReplay"
                else:
                    name = "ForeignFrame"
                raise DecodeError(name, offset=off, expected=expected, found=seq, distance=d)  # type: ignore[arg-type]
            if kind == HEAD:
                raise DecodeError("UnexpectedFrame", offset=off, frame="HEAD", state="after HEAD")
            if kind == STREAM_END and self._in_message:
                raise DecodeError("UnexpectedFrame", offset=off, frame="STREAM_END", state="in message")
        # 5. the kind's length rule (§3), the frame limit, the message limit (§6)
        fixed = _FIXED.get(kind)
        if fixed is not None:
            ok = length == fixed
        elif kind == DATA:
            ok = length >= 1
        elif kind == ABORT:
            ok = 2 <= length <= 2 + MAX_ABORT_TEXT
        else:
            ok = True  # ignorable: 0 ..= max frame payload
        if not ok:
            raise DecodeError("InvalidFrameLength", offset=off, frame=kind_name(kind), length=length)
        if length > self._max_frame:
            raise DecodeError("FrameTooLarge", offset=off, length=length, max=self._max_frame)
        if kind == DATA and self._msg_len + length > self._max_message:
            raise DecodeError(
                "MessageTooLarge", offset=off, received=self._msg_len, length=length, max=self._max_message
            )
        # 6. the per-stream bounds (§6.1)
        limits = self._limits
        if off + HEADER_LEN + length > limits.max_stream_bytes:
            raise DecodeError("StreamTooLarge", offset=off, max=limits.max_stream_bytes)
        if kind == KEEPALIVE and self._keepalives >= limits.max_keepalives_in_a_row:
            raise DecodeError("TooManyKeepAlives", offset=off, max=limits.max_keepalives_in_a_row)
        if kind >= 0x80 and self._ignorables >= limits.max_ignorable_in_a_row:
            raise DecodeError("TooManyIgnorableFrames", offset=off, max=limits.max_ignorable_in_a_row)
        if kind == MESSAGE_END and self._message_ends >= limits.max_messages:
            raise DecodeError("TooManyMessages", offset=off, max=limits.max_messages)
        # §7.1: after the final response, a DATA, MESSAGE_END or ABORT header ends its delivery
        # (so a candidate is read whole here: was it the final response?)
        if self._answer >= _CANDIDATE and kind in (DATA, MESSAGE_END, ABORT):
            self._read_candidate()
            if self._answer == _HELD:
                self._answer = _SPENT
        self._last_seq = seq
        self._offset = off + HEADER_LEN
        self._kind = kind
        self._need = self._plen = length
        self._pcrc = pcrc
        self._crc = 0
        if kind == DATA and self._sha is None:
            self._sha = hashlib.sha256()
        if length == 0:
            self._complete()

    # -- payload -------------------------------------------------------------------------------

    def _complete(self) -> None:
        kind = self._kind
        self._kind = -1
        length = self._plen
        self._offset += length
        # §2: the payload CRC before any payload byte is interpreted or delivered
        if self._crc != self._pcrc:
            raise DecodeError("PayloadChecksumMismatch", offset=self._offset - length, frame=kind_name(kind))
        self._frames += 1
        if kind == DATA:
            self._in_message = True
            self._msg_len += length
            self._keepalives = self._ignorables = 0
            return
        if kind >= 0x80:
            self._ignorables += 1  # §6.1; ignorable kinds are checked, then skipped
            return
        if kind == KEEPALIVE:
            self._keepalives += 1  # §6.1
            return
        payload = bytes(self._pbuf)
        self._pbuf.clear()
        if kind == MESSAGE_END:
            declared = int.from_bytes(payload[0:8], "big")
            if declared != self._msg_len:
                raise DecodeError("LengthMismatch", declared=declared, received=self._msg_len)
            digest = self._sha.digest() if self._sha is not None else _EMPTY_SHA256
            if digest != payload[8:40]:
                raise DecodeError("DigestMismatch", length=declared)
            message = self._take_message()
            self._messages.append(message)
            if self._answer == _AWAITED:
                index = len(self._messages) - 1
                head = response_head(message)
                if head is not None:  # read whole where that decides (see the class docs)
                    self._answer = _CANDIDATE
                    self._found = (index, head)
                else:
                    value = examine(message)[1]
                    if value is not None:  # the first JSON-RPC response is the final one
                        self._answer = _HELD
                        self._found = (index, value)
            self._message_ends += 1
            self._keepalives = self._ignorables = 0
        elif kind == HEAD:
            key, attempt = payload[0:16], payload[16:32]
            # §4: HEAD's sequence number is its attempt id's first four bytes
            first = int.from_bytes(attempt[0:4], "big")
            if self._last_seq != first:
                raise DecodeError("ForeignFrame", expected=first, found=self._last_seq)
            # §3, §10: a client that sent a key rejects a HEAD with another one, or none
            if self._key is not None and key != self._key:
                raise DecodeError("RequestKeyMismatch", expected=self._key.hex(), found=key.hex())
            self._head = (key, attempt)
        elif kind == STREAM_END:
            count = int.from_bytes(payload, "big")
            if count != self._message_ends:
                raise DecodeError("MessageCountMismatch", declared=count, seen=self._message_ends)
            self._terminal = True
        else:  # ABORT
            code = int.from_bytes(payload[0:2], "big")
            try:
                reason = payload[2:].decode("utf-8")
            except UnicodeDecodeError:
                raise DecodeError("InvalidAbort", code=code) from None
            # §3: an open message is discarded, never delivered
            self._take_message()
            self._terminal = Abort(code, reason)

    def _take_message(self) -> bytes:
        pieces = self._pieces
        span = self._span
        if span:
            # One contiguous run of one input object (an event of the SSE mappings carries a
            # whole message): the object itself, or one slice of it.
            obj, start, end = span
            message = obj if start == 0 and end == len(obj) else obj[start:end]
        else:
            message = b"".join(pieces)
        self._pieces = []
        self._span = None
        self._sha = None
        self._msg_len = self._kept = self._pinned = 0
        self._pin_obj = None
        self._in_message = False
        return message

    # -- end of input (§7) -----------------------------------------------------------------------

    def finish(self) -> StreamVerdict:
        """The input ended: the verdict (§7). Calling it again returns the same verdict.

        >>> v = StreamDecoder().finish()
        >>> (v.verdict, v.error.kind, v.error.at)
        ('error', 'Truncated', 'NoFrame')
        """
        if self._verdict is None:
            self._verdict = self._conclude()
        return self._verdict

    def _conclude(self) -> StreamVerdict:
        received = self.received()
        messages = tuple(self._messages)
        if self._error is not None:
            return StreamVerdict("error", messages, error=self._error, received=received)
        terminal = self._terminal
        if terminal is True:
            return StreamVerdict("clean", messages, received=received, sentinel_seen=True)
        if isinstance(terminal, Abort):
            err = DecodeError("PeerAbort", code=terminal.code, reason=terminal.reason)
            return StreamVerdict("aborted", messages, abort=terminal, error=err, received=received)
        self._read_candidate()  # row 4 is decided by the whole reading
        if self._answer == _HELD:
            # §7 row 4: the final response verified, then only filler frames and part of at most
            # one more frame (a header, or a STREAM_END or ignorable payload): delivered
            return StreamVerdict("clean", messages, received=received, sentinel_seen=False)
        if self._kind >= 0:
            err = DecodeError(
                "Truncated",
                at="InPayload",
                frame=kind_name(self._kind),
                received=self._plen - self._need,
                declared=self._plen,
            )
        elif self._hbuf:
            err = DecodeError("Truncated", at="InHeader", received=len(self._hbuf))
        elif self._frames == 0:
            err = DecodeError("Truncated", at="NoFrame")
        elif self._in_message:
            err = DecodeError("Truncated", at="InMessage", message_bytes=self._msg_len)
        else:
            err = DecodeError("Truncated", at="BetweenMessages", messages=len(self._messages))
        self._error = err
        return StreamVerdict("error", messages, error=err, received=received)
