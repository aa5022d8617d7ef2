#!/usr/bin/env python3
"""Independent reference decoder for the mcp-framing wire format, version 1.

Written from SPEC.md alone (standard library only: zlib.crc32, hashlib.sha256), as a second
implementation that the Rust crate is checked against. Section numbers (§) cite SPEC.md.

All three transport mappings: the binary one (the frames are the body), SSE (§15: `mcp-frame`
events carrying base64 of whole frames, `SseDecoder`) and the compatible SSE mapping (§18: the
messages as plain `message` events, the frames in `:mcp-framing` comment records,
`CompatDecoder`).

Library use:

    dec = Decoder(max_frame_payload=65536, max_message_size=16777216, request_key=None)
    # or SseDecoder(max_event_data=262144, **the same options) for a text/event-stream body,
    # or CompatDecoder(max_event_data=16842752, **the same options) for the compatible mapping
    for chunk in chunks:
        dec.feed(chunk)          # never raises: an error is recorded and sticks
    verdict = dec.finish()       # end of input (§7)
    verdict.to_json()            # {"verdict", "sentinel_seen", "regime", "messages", "abort",
                                 #  "error", "truncation"}

Command line:

    mcp_framing_ref.py FILE [--mapping binary|sse|compat] [--split 5,17] [--chunk N] [--max-frame-payload N]
                            [--max-message-size N] [--request-key HEX]
        prints the verdict of FILE as JSON (the manifest's "expect" shape, plus "detail").
    mcp_framing_ref.py --batch < jobs.json
        jobs: [{"file": PATH | "hex": HEX, "mapping": "binary" | "sse" | "compat", "decoder": {...},
                "splits": [[i, j, ...], ...], "chunks": [n, ...]}, ...]
        prints, per job, the verdicts for each split list, then for each chunk size (input fed
        n bytes at a time), as JSON: [[verdict, ...], ...]. One process for a whole suite.
"""

import base64
import binascii
import hashlib
import json
import sys
import zlib

MAGIC = b"\x9f\x4d"
VERSION = 0x01
HEADER_LEN = 20

HEAD = 0x01
DATA = 0x02
MESSAGE_END = 0x03
STREAM_END = 0x04
ABORT = 0x05
KEEPALIVE = 0x06

KIND_NAMES = {
    HEAD: "HEAD",
    DATA: "DATA",
    MESSAGE_END: "MESSAGE_END",
    STREAM_END: "STREAM_END",
    ABORT: "ABORT",
    KEEPALIVE: "KEEPALIVE",
}

DEFAULT_MAX_FRAME_PAYLOAD = 65536  # §6
DEFAULT_MAX_MESSAGE_SIZE = 16777216  # §6
DEFAULT_MAX_STREAM_BYTES = 16 << 30  # §6.1
DEFAULT_MAX_MESSAGES = 65536  # §6.1
DEFAULT_MAX_KEEPALIVES_IN_A_ROW = 4096  # §6.1
DEFAULT_MAX_IGNORABLE_IN_A_ROW = 1024  # §6.1
DEFAULT_MAX_SSE_COMMENTS_IN_A_ROW = 4096  # §15
MAX_ABORT_TEXT = 1024  # §3
MIN_MAX_FRAME_PAYLOAD = 2 + MAX_ABORT_TEXT  # §6: every control frame fits
SEQ_WINDOW = 1 << 20  # §4


def kind_name(kind):
    if kind in KIND_NAMES:
        return KIND_NAMES[kind]
    if kind >= 0x80:
        return "IGNORABLE(0x%02x)" % kind
    return "UNKNOWN(0x%02x)" % kind


def crc32(data):
    """CRC-32 ISO-HDLC (§2.1)."""
    return zlib.crc32(data) & 0xFFFFFFFF


class DecodeError(Exception):
    """A fatal stream error. `name` is the SPEC error kind name."""

    def __init__(self, name, **detail):
        super().__init__(name)
        self.name = name
        self.detail = detail


def _no_constant(name):
    raise ValueError("not JSON: %s" % name)


def is_response(message):
    """§7.1: a JSON-RPC response: UTF-8, one JSON text (RFC 8259) whose value is an object with
    a top-level `id` and a top-level `result` or `error`, whatever their values."""
    try:
        # parse_constant: NaN and Infinity are not JSON (RFC 8259), though Python reads them.
        value = json.loads(message.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(value, dict) and "id" in value and ("result" in value or "error" in value)


class Verdict:
    """The outcome of a stream at end of input (§7)."""

    def __init__(
        self,
        verdict,
        messages,
        abort=None,
        error=None,
        truncation=None,
        detail=None,
        sentinel_seen=False,
    ):
        self.verdict = verdict  # "clean" | "aborted" | "error"
        # §11.4: a clean verdict with STREAM_END (§7 row 2) or a delivered final response without
        # it (row 4)
        self.sentinel_seen = sentinel_seen
        # §9, §11.4: the sentinel or ABORT decided (A), or the framing's own checks (B)
        self.regime = "A" if sentinel_seen or verdict == "aborted" else "B"
        self.messages = messages  # list of bytes, every one verified
        self.abort = abort  # (code, reason) when aborted
        self.error = error  # SPEC error kind name; "PeerAbort" when aborted (§7)
        self.truncation = truncation  # truncation point name when error == "Truncated"
        self.detail = detail or {}

    def to_json(self, with_detail=True):
        msgs = []
        for m in self.messages:
            try:
                text = m.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            msgs.append({"len": len(m), "sha256": hashlib.sha256(m).hexdigest(), "utf8": text})
        out = {
            "verdict": self.verdict,
            "sentinel_seen": self.sentinel_seen,
            "regime": self.regime,
            "messages": msgs,
            "abort": None
            if self.abort is None
            else {"code": self.abort[0], "reason": self.abort[1]},
            "error": self.error,
            "truncation": self.truncation,
        }
        if with_detail:
            out["detail"] = self.detail
        return out


class Decoder:
    """Sans-I/O streaming decoder: feed bytes in any split, then finish()."""

    def __init__(
        self,
        max_frame_payload=DEFAULT_MAX_FRAME_PAYLOAD,
        max_message_size=DEFAULT_MAX_MESSAGE_SIZE,
        request_key=None,
        max_stream_bytes=DEFAULT_MAX_STREAM_BYTES,
        max_messages=DEFAULT_MAX_MESSAGES,
        max_keepalives_in_a_row=DEFAULT_MAX_KEEPALIVES_IN_A_ROW,
        max_ignorable_in_a_row=DEFAULT_MAX_IGNORABLE_IN_A_ROW,
    ):
        if max_frame_payload < MIN_MAX_FRAME_PAYLOAD:
            raise ValueError("max_frame_payload must be at least %d (§6)" % MIN_MAX_FRAME_PAYLOAD)
        self.max_frame_payload = max_frame_payload
        self.max_message_size = max_message_size
        # §6.1: the per-stream bounds, and the frames in a row without a message byte
        self.max_stream_bytes = max_stream_bytes
        self.max_messages = max_messages
        self.max_keepalives_in_a_row = max_keepalives_in_a_row
        self.max_ignorable_in_a_row = max_ignorable_in_a_row
        self.keepalives_in_a_row = 0
        self.ignorable_in_a_row = 0
        self.request_key = request_key  # 16 bytes or None (no check)
        self.buf = bytearray()  # bytes of the frame being read (header, then payload)
        self.header = None  # parsed header while waiting for the payload
        self.offset = 0  # stream offset of the start of self.buf
        self.frames = 0  # whole frames accepted
        self.last_seq = None  # sequence number of the last frame (header accepted)
        self.seen_head = False
        self.in_message = False  # a DATA frame opened a message not yet ended
        self.message = bytearray()  # bytes of the open message (unverified)
        self.message_ends = 0  # MESSAGE_END frames seen (§3 STREAM_END count)
        self.messages = []  # verified messages
        self.terminal = None  # ("clean",) or ("aborted", code, reason)
        self.error = None  # DecodeError, sticky
        # §7.1: the final response, looked for by a decoder that expects a request key (this one
        # always assembles messages): "awaited" until the first JSON-RPC response, "held" while
        # only KEEPALIVE, ignorable or STREAM_END headers followed it, "spent" after any other
        self.answer = "unchecked" if request_key is None else "awaited"

    # -- input -------------------------------------------------------------------------------

    def feed(self, data):
        """Consume the next bytes of the stream; any split is allowed."""
        if self.error is not None:
            return
        try:
            self._feed(memoryview(bytes(data)))
        except DecodeError as e:
            self.error = e

    def _feed(self, data):
        i = 0
        n = len(data)
        while i < n:
            if self.terminal is not None:
                # §3: nothing may follow a terminal frame, also later in the transport.
                raise DecodeError("TrailingData", offset=self.offset)
            if self.header is None:
                take = min(HEADER_LEN - len(self.buf), n - i)
                self.buf += data[i : i + take]
                i += take
                # §2: magic and version are checked as soon as their bytes arrive, so a short
                # unframed body is BadMagic, not a truncation.
                if len(self.buf) >= 2 and self.buf[0:2] != MAGIC:
                    raise DecodeError("BadMagic", offset=self.offset, found=self.buf[0:2].hex())
                if len(self.buf) >= 3 and self.buf[2] != VERSION:
                    raise DecodeError("UnsupportedVersion", offset=self.offset, version=self.buf[2])
                if len(self.buf) == HEADER_LEN:
                    self.header = self._check_header(bytes(self.buf))
                    self.offset += HEADER_LEN
                    self.buf = bytearray()
                    if self.header["length"] == 0:
                        self._frame_complete(b"")
            else:
                need = self.header["length"] - len(self.buf)
                take = min(need, n - i)
                self.buf += data[i : i + take]
                i += take
                if len(self.buf) == self.header["length"]:
                    payload = bytes(self.buf)
                    self.offset += len(payload)
                    self.buf = bytearray()
                    self._frame_complete(payload)

    # -- header (§2 "Header first") ------------------------------------------------------------

    def _check_header(self, h):
        off = self.offset
        # 1. magic and version (§2, §8)
        if h[0:2] != MAGIC:
            raise DecodeError("BadMagic", offset=off, found=h[0:2].hex())
        if h[2] != VERSION:
            raise DecodeError("UnsupportedVersion", offset=off, version=h[2])
        # 2. header CRC over bytes 0..16 (§2)
        stored = int.from_bytes(h[16:20], "big")
        if crc32(h[0:16]) != stored:
            raise DecodeError("HeaderChecksumMismatch", offset=off)
        kind = h[3]
        seq = int.from_bytes(h[4:8], "big")
        length = int.from_bytes(h[8:12], "big")
        pcrc = int.from_bytes(h[12:16], "big")
        # 3. kind (§3)
        if kind == 0x00 or 0x07 <= kind <= 0x7F:
            raise DecodeError("UnknownFrameKind", offset=off, kind=kind)
        # 4. sequence and place (§3, §4). The first frame must be HEAD; its own number is
        # checked against its attempt id once the payload arrived (below). Every later frame's
        # number is the previous one's plus one, and its kind must be allowed where it stands.
        if not self.seen_head:
            if kind != HEAD:
                raise DecodeError("UnexpectedFrame", offset=off, kind=kind_name(kind), state="start")
        else:
            expected = (self.last_seq + 1) & 0xFFFFFFFF
            if seq != expected:
                d = (seq - expected) & 0xFFFFFFFF
                if 1 <= d <= SEQ_WINDOW:
                    name = "SequenceGap"
                elif d >= (1 << 32) - SEQ_WINDOW:
                    name = "SequenceReplay"
                else:
                    name = "ForeignFrame"
                raise DecodeError(name, offset=off, expected=expected, found=seq, distance=d)
            if kind == HEAD:
                raise DecodeError("UnexpectedFrame", offset=off, kind="HEAD", state="after HEAD")
            if kind == STREAM_END and self.in_message:
                raise DecodeError("UnexpectedFrame", offset=off, kind="STREAM_END", state="in message")
        # 5. length against the kind's rule (§3), then the limits (§6)
        ok = {
            HEAD: length == 32,
            DATA: length >= 1,
            MESSAGE_END: length == 40,
            STREAM_END: length == 8,
            ABORT: 2 <= length <= 2 + MAX_ABORT_TEXT,
            KEEPALIVE: length == 0,
        }.get(kind, True)  # ignorable: 0 ..= max frame payload
        if not ok:
            raise DecodeError("InvalidFrameLength", offset=off, kind=kind, length=length)
        if length > self.max_frame_payload:
            raise DecodeError(
                "FrameTooLarge", offset=off, kind=kind, length=length, max=self.max_frame_payload
            )
        # 6. message size (§5, §6): before receiving the payload
        if kind == DATA and len(self.message) + length > self.max_message_size:
            raise DecodeError(
                "MessageTooLarge",
                offset=off,
                received=len(self.message),
                length=length,
                max=self.max_message_size,
            )
        # 7. the per-stream bounds (§6.1): the stream's bytes up to the end of this frame, then
        # what this kind adds to a count
        end = off + HEADER_LEN + length
        if end > self.max_stream_bytes:
            raise DecodeError("StreamTooLarge", offset=off, length=end, max=self.max_stream_bytes)
        if kind == KEEPALIVE and self.keepalives_in_a_row >= self.max_keepalives_in_a_row:
            raise DecodeError("TooManyKeepAlives", offset=off, max=self.max_keepalives_in_a_row)
        if kind >= 0x80 and self.ignorable_in_a_row >= self.max_ignorable_in_a_row:
            raise DecodeError("TooManyIgnorableFrames", offset=off, max=self.max_ignorable_in_a_row)
        if kind == MESSAGE_END and self.message_ends >= self.max_messages:
            raise DecodeError("TooManyMessages", offset=off, max=self.max_messages)
        # §7.1: after the final response, a DATA, MESSAGE_END or ABORT header ends its delivery
        if self.answer == "held" and kind in (DATA, MESSAGE_END, ABORT):
            self.answer = "spent"
        self.last_seq = seq
        return {"kind": kind, "seq": seq, "length": length, "pcrc": pcrc, "offset": off}

    # -- payload --------------------------------------------------------------------------------

    def _frame_complete(self, payload):
        hdr = self.header
        self.header = None
        kind = hdr["kind"]
        # §2: payload CRC before interpreting any payload byte
        if crc32(payload) != hdr["pcrc"]:
            raise DecodeError("PayloadChecksumMismatch", offset=hdr["offset"], kind=kind_name(kind))
        self.frames += 1
        if kind == HEAD:
            key, attempt = payload[0:16], payload[16:32]
            # §4: HEAD's sequence number is the attempt id's first four bytes
            if hdr["seq"] != int.from_bytes(attempt[0:4], "big"):
                raise DecodeError(
                    "ForeignFrame", expected=int.from_bytes(attempt[0:4], "big"), found=hdr["seq"]
                )
            # §3/§10: a client that sent a key rejects a HEAD with another one
            if self.request_key is not None and key != self.request_key:
                raise DecodeError(
                    "RequestKeyMismatch", expected=self.request_key.hex(), found=key.hex()
                )
            self.seen_head = True
        elif kind == DATA:
            self.in_message = True
            self.message += payload
            self.keepalives_in_a_row = self.ignorable_in_a_row = 0
        elif kind == MESSAGE_END:
            declared = int.from_bytes(payload[0:8], "big")
            digest = payload[8:40]
            if declared != len(self.message):
                raise DecodeError("LengthMismatch", declared=declared, received=len(self.message))
            if hashlib.sha256(self.message).digest() != digest:
                raise DecodeError("DigestMismatch", length=declared)
            self.messages.append(bytes(self.message))
            if self.answer == "awaited" and is_response(self.messages[-1]):
                self.answer = "held"  # §7.1: the first JSON-RPC response is the final one
            self.message = bytearray()
            self.in_message = False
            self.message_ends += 1
            self.keepalives_in_a_row = self.ignorable_in_a_row = 0
        elif kind == STREAM_END:
            count = int.from_bytes(payload, "big")
            if count != self.message_ends:
                raise DecodeError("MessageCountMismatch", declared=count, seen=self.message_ends)
            self.terminal = ("clean",)
        elif kind == ABORT:
            code = int.from_bytes(payload[0:2], "big")
            try:
                reason = payload[2:].decode("utf-8")
            except UnicodeDecodeError:
                raise DecodeError("InvalidAbort", code=code) from None
            # §3: an open message is discarded, never delivered
            self.message = bytearray()
            self.in_message = False
            self.terminal = ("aborted", code, reason)
        elif kind == KEEPALIVE:
            self.keepalives_in_a_row += 1  # §6.1
        else:
            self.ignorable_in_a_row += 1  # §6.1; ignorable kinds are checked, then skipped

    # -- end of input (§7) ------------------------------------------------------------------------

    def finish(self):
        """The verdict once the transport ended."""
        base = {"frames": self.frames, "last_sequence": self.last_seq}
        if self.error is not None:
            detail = dict(base)
            detail.update(self.error.detail)
            return Verdict("error", self.messages, error=self.error.name, detail=detail)
        if self.terminal is not None:
            if self.terminal[0] == "clean":
                return Verdict("clean", self.messages, detail=base, sentinel_seen=True)
            return Verdict(
                "aborted",
                self.messages,
                abort=(self.terminal[1], self.terminal[2]),
                error="PeerAbort",
                detail=base,
            )
        if self.answer == "held":
            # §7 row 4: the final response verified, then only filler frames and part of at
            # most one more frame (a header, or a STREAM_END or ignorable payload)
            detail = dict(base)
            detail.update(sentinel="missing", partial_bytes=len(self.buf))
            return Verdict("clean", self.messages, detail=detail)
        detail = dict(base)
        if self.header is not None:
            point = "InPayload"
            detail.update(
                kind=kind_name(self.header["kind"]),
                received=len(self.buf),
                declared=self.header["length"],
            )
        elif self.buf:
            point = "InHeader"
            detail.update(received=len(self.buf))
        elif self.frames == 0:
            point = "NoFrame"
        elif self.in_message:
            point = "InMessage"
            detail.update(message_bytes=len(self.message))
        else:
            point = "BetweenMessages"
            detail.update(messages=len(self.messages))
        return Verdict("error", self.messages, error="Truncated", truncation=point, detail=detail)


# -- SSE mapping (§15) ---------------------------------------------------------------------------

FRAME_EVENT = b"mcp-frame"
DEFAULT_MAX_EVENT_DATA = 256 * 1024  # §15: the least bound on one event's data
BOM = b"\xef\xbb\xbf"


class SseDecoder:
    """The SSE mapping: `mcp-frame` events whose data is base64 of whole frames, fed in event order
    to a binary Decoder. Same interface as Decoder: feed() in any split, then finish()."""

    def __init__(
        self,
        max_event_data=DEFAULT_MAX_EVENT_DATA,
        max_sse_comments_in_a_row=DEFAULT_MAX_SSE_COMMENTS_IN_A_ROW,
        **config
    ):
        self.inner = Decoder(**config)
        self.max_event_data = max_event_data
        self.max_quiet_lines = max_sse_comments_in_a_row
        self.quiet_lines = 0  # lines since the last data line with data (§15)
        self.line = bytearray()  # the line being read
        self.skip_lf = False  # the previous line ended with CR: a following LF belongs to it
        self.first_line = True  # a leading U+FEFF is skipped
        self.event_name = None  # the `event` field, if any
        self.data = None  # the data lines joined with LF, as SSE joins them; None: no data line
        self.events = 0

    def feed(self, chunk):
        for b in bytes(chunk):
            if self.inner.error is not None:
                return
            if self.skip_lf:
                self.skip_lf = False
                if b == 0x0A:
                    continue
            if b == 0x0A or b == 0x0D:
                self.skip_lf = b == 0x0D
                line = bytes(self.line)
                self.line = bytearray()
                self._line(line)
            else:
                self.line.append(b)
                # §15: a line is buffered whole before it is parsed, so every line (a comment
                # too) is bounded: the data limit plus room for a field name.
                if len(self.line) > self.max_event_data + 16:
                    self._fail("EventTooLarge", max=self.max_event_data)

    def _fail(self, name, **detail):
        # The first error in body order wins: an error the frame decoder found in bytes handed
        # over before this one stays (§15, §18.5).
        if self.inner.error is None:
            self.inner.error = DecodeError(name, **detail)

    def _line(self, line):
        if self.first_line:
            self.first_line = False
            if line.startswith(BOM):
                line = line[len(BOM) :]
        field, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        # §15: a peer cannot hold the body open with lines that carry no data (comments, blank
        # lines, other fields); a data line with data starts the count again
        if field == b"data" and value:
            self.quiet_lines = 0
        else:
            self.quiet_lines += 1
            if self.quiet_lines > self.max_quiet_lines:
                self._fail("TooManyComments", max=self.max_quiet_lines)
                return
        if not line:
            self._dispatch()
            return
        if line.startswith(b":"):
            self._comment(line[1:])
            return
        if field == b"event":
            self.event_name = value
        elif field == b"data":
            self.data = value if self.data is None else self.data + b"\n" + value
            # §15: the data as SSE joins it (LF between lines), counted as UTF-8 text
            size = len(self.data.decode("utf-8", "replace").encode("utf-8"))
            if size > self.max_event_data:
                self._fail("EventTooLarge", max=self.max_event_data)
        # id, retry and unknown fields are ignored

    def _comment(self, text):
        pass  # a comment (keep-alive)

    def _dispatch(self):
        name, data = self.event_name, self.data or b""
        self.event_name, self.data = None, None
        if not data:
            # §15: empty data carries nothing (an id-only priming event, a named event without
            # a data line, one empty `data:` line): skipped, whatever the name
            return
        self._event(name, data)

    def _event(self, name, data):
        self.events += 1
        if name != FRAME_EVENT:
            # any other event that carries data, named or not
            label = "message" if name in (None, b"") else name.decode("utf-8", "replace")
            self._fail("UnexpectedEvent", event=label)
            return
        text = data.replace(b"\n", b"")  # the LF between data lines is not base64: dropped
        try:
            frames = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            self._fail("InvalidBase64", event=self.events)
            return
        if base64.b64encode(frames) != text:
            # padded, canonical base64 only (no missing padding, no stray trailing bits)
            self._fail("InvalidBase64", event=self.events)
            return
        self.inner.feed(frames)

    def finish(self):
        # An event still open when the body ends is discarded (§15): the stream lacks its end.
        return self.inner.finish()


# -- compatible SSE mapping (§18) -----------------------------------------------------------------

RECORD_MARK = b"mcp-framing"  # §18.2: a comment whose text starts with it is a record
RECORD_PREFIX = RECORD_MARK + b" "
DEFAULT_COMPAT_MAX_EVENT_DATA = DEFAULT_MAX_MESSAGE_SIZE + 64 * 1024  # §18.7


def header_passes(h):
    """§2 checks 1 and 2 on a 20-byte header: magic, version, header CRC."""
    return (
        len(h) == HEADER_LEN
        and h[0:2] == MAGIC
        and h[2] == VERSION
        and crc32(h[0:16]) == int.from_bytes(h[16:20], "big")
    )


class CompatDecoder(SseDecoder):
    """The compatible SSE mapping (§18.5): records (`:mcp-framing` comments) carry whole frames,
    DATA frames as their header alone; each `message` event carries the payloads of the DATA
    frames waiting for it. The binary stream rebuilt from both is fed to a binary Decoder."""

    def __init__(self, max_event_data=DEFAULT_COMPAT_MAX_EVENT_DATA, **config):
        super().__init__(max_event_data=max_event_data, **config)
        self.queue = []  # ("frame", bytes) | ("data", header, length) | ("broken", bytes)
        self.waiting = None  # payload length of the DATA frame waiting for its event
        self.open_message = False  # an event filled DATA frames; no MESSAGE_END/ABORT moved since
        self.records = 0
        self.message_events = 0

    def _comment(self, text):
        if not text.startswith(RECORD_MARK):
            return  # a keep-alive
        record = self.records
        self.records += 1
        # step 1: no record while a DATA frame waits for its event
        if self.waiting is not None:
            self._fail("EventMissing", record=record)
            return
        b64 = text[len(RECORD_PREFIX) :] if text.startswith(RECORD_PREFIX) else b""
        try:
            data = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            data = b""
        if not data or base64.b64encode(data) != b64:
            # canonical padded base64 of at least one byte (§18.2)
            self._fail("InvalidRecord", record=record)
            return
        # Split into frames; kinds and lengths come only from headers that pass §2 checks 1-2.
        at = 0
        while at < len(data):
            h = data[at : at + HEADER_LEN]
            if not header_passes(h):
                self.queue.append(("broken", data[at:]))
                break
            kind = h[3]
            length = int.from_bytes(h[8:12], "big")
            if kind == DATA:
                self.queue.append(("data", h, length))
                at += HEADER_LEN
                continue
            end = at + HEADER_LEN + length
            if end > len(data):
                self.queue.append(("broken", data[at:]))
                break
            self.queue.append(("frame", data[at:end]))
            at = end
        self._flush(record)

    def _flush(self, record):
        """step 2: move queued items into the binary stream up to a DATA header, which waits."""
        while self.queue:
            item = self.queue.pop(0)
            if item[0] == "frame":
                self.inner.feed(item[1])
                if item[1][3] in (MESSAGE_END, ABORT):
                    self.open_message = False
            elif item[0] == "broken":
                self.inner.feed(item[1])
                self._fail("InvalidRecord", record=record)
                return
            else:
                self.inner.feed(item[1])
                if self.open_message:
                    # one message, one event: a stock client would read two messages
                    self._fail("SplitMessage", record=record)
                    return
                self.waiting = item[2]
                return

    def _event(self, name, data):
        if name not in (None, b"", b"message"):  # an empty event type is `message` (WHATWG)
            label = name.decode("utf-8", "replace")
            self._fail("UnexpectedEvent", event=label)
            return
        index = self.message_events
        self.message_events += 1
        # step 3
        if self.waiting is None:
            self._fail("UnframedEvent", event=index)
            return
        # The event's bytes as dispatched: the data buffer as UTF-8 (SSE decodes the stream as
        # UTF-8, replacing invalid sequences).
        data = data.decode("utf-8", "replace").encode("utf-8")
        run = [self.waiting]
        headers = []
        while len(run) - 1 < len(self.queue) and self.queue[len(run) - 1][0] == "data":
            item = self.queue[len(run) - 1]
            headers.append(item[1])
            run.append(item[2])
        if sum(run) != len(data):
            self._fail("EventLengthMismatch", declared=sum(run), carried=len(data))
            return
        del self.queue[: len(headers)]
        self.waiting = None
        self.open_message = True
        at = 0
        for i, length in enumerate(run):
            if i > 0:
                self.inner.feed(headers[i - 1])
            self.inner.feed(data[at : at + length])
            at += length
        self._flush(self.records - 1)


def decode(data, splits=(), mapping="binary", max_event_data=None, **config):
    """Decode `data` fed in pieces cut at the ascending offsets `splits`; returns a Verdict."""
    if mapping == "sse":
        # §15: the base64 of one whole frame of the max frame payload, at least 256 KiB
        frame = HEADER_LEN + config.get("max_frame_payload", DEFAULT_MAX_FRAME_PAYLOAD)
        bound = max(4 * ((frame + 2) // 3), DEFAULT_MAX_EVENT_DATA)
        dec = SseDecoder(max_event_data=max_event_data or bound, **config)
    elif mapping == "compat":
        # §18.7: one message of the max message size, plus 64 KiB
        bound = config.get("max_message_size", DEFAULT_MAX_MESSAGE_SIZE) + 64 * 1024
        dec = CompatDecoder(max_event_data=max_event_data or bound, **config)
    elif mapping == "binary":
        config.pop("max_sse_comments_in_a_row", None)  # an SSE bound (§15)
        dec = Decoder(**config)
    else:
        raise ValueError("unknown mapping %r" % mapping)
    prev = 0
    for cut in splits:
        dec.feed(data[prev:cut])
        prev = cut
    dec.feed(data[prev:])
    return dec.finish()


def config_from_json(cfg):
    """Decoder keyword arguments from a manifest "decoder" object (all fields optional)."""
    cfg = cfg or {}
    key = cfg.get("request_key")
    out = {
        "max_frame_payload": cfg.get("max_frame_payload", DEFAULT_MAX_FRAME_PAYLOAD),
        "max_message_size": cfg.get("max_message_size", DEFAULT_MAX_MESSAGE_SIZE),
        "request_key": None if key is None else bytes.fromhex(key),
    }
    if "max_event_data" in cfg:
        out["max_event_data"] = cfg["max_event_data"]
    # §6.1, §15: the per-stream bounds a vector sets (the defaults otherwise)
    for bound in (
        "max_stream_bytes",
        "max_messages",
        "max_keepalives_in_a_row",
        "max_ignorable_in_a_row",
        "max_sse_comments_in_a_row",
    ):
        if bound in cfg:
            out[bound] = cfg[bound]
    return out


def _batch():
    jobs = json.load(sys.stdin)
    out = []
    for job in jobs:
        if "hex" in job:
            data = bytes.fromhex(job["hex"])
        else:
            with open(job["file"], "rb") as f:
                data = f.read()
        config = config_from_json(job.get("decoder"))
        config["mapping"] = job.get("mapping", "binary")
        feeds = [sorted(s) for s in job.get("splits", [[]])]
        feeds += [range(n, len(data), n) for n in job.get("chunks", [])]
        out.append([decode(data, s, **config).to_json(with_detail=False) for s in feeds])
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


def main(argv):
    import argparse

    p = argparse.ArgumentParser(description="mcp-framing v1 reference decoder")
    p.add_argument("file", nargs="?", help="framed stream; '-' for stdin")
    p.add_argument("--mapping", choices=["binary", "sse", "compat"], default="binary")
    p.add_argument("--batch", action="store_true", help="read a JSON job list on stdin")
    p.add_argument("--split", default="", help="comma-separated offsets to cut the input at")
    p.add_argument("--chunk", type=int, default=0, help="feed the input N bytes at a time")
    p.add_argument("--max-frame-payload", type=int, default=DEFAULT_MAX_FRAME_PAYLOAD)
    p.add_argument("--max-message-size", type=int, default=DEFAULT_MAX_MESSAGE_SIZE)
    p.add_argument("--request-key", help="expected request key, 32 hex digits")
    a = p.parse_args(argv)
    if a.batch:
        _batch()
        return 0
    if a.file is None:
        p.error("a FILE (or --batch) is required")
    if a.file == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(a.file, "rb") as f:
            data = f.read()
    splits = [int(x) for x in a.split.split(",") if x]
    if a.chunk > 0:
        splits += list(range(a.chunk, len(data), a.chunk))
    v = decode(
        data,
        sorted(set(splits)),
        mapping=a.mapping,
        max_frame_payload=a.max_frame_payload,
        max_message_size=a.max_message_size,
        request_key=None if a.request_key is None else bytes.fromhex(a.request_key),
    )
    json.dump(v.to_json(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
