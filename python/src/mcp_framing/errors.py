"""The errors of a framed stream, named as SPEC.md names them (§2–§7, §15, §18.5)."""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "FRAME_ERROR_KINDS",
    "MAPPING_ERROR_KINDS",
    "TRUNCATION_POINTS",
    "DecodeError",
    "ErrorKind",
    "TruncationPoint",
]

#: Where a stream was cut (§7 rows 4 to 8).
TruncationPoint = Literal["NoFrame", "InHeader", "InPayload", "InMessage", "BetweenMessages"]
TRUNCATION_POINTS: tuple[TruncationPoint, ...] = (
    "NoFrame",
    "InHeader",
    "InPayload",
    "InMessage",
    "BetweenMessages",
)

ErrorKind = Literal[
    # frames (§2–§7)
    "BadMagic",
    "UnsupportedVersion",
    "HeaderChecksumMismatch",
    "UnknownFrameKind",
    "UnexpectedFrame",
    "SequenceGap",
    "SequenceReplay",
    "ForeignFrame",
    "InvalidFrameLength",
    "FrameTooLarge",
    "MessageTooLarge",
    "StreamTooLarge",
    "TooManyKeepAlives",
    "TooManyIgnorableFrames",
    "TooManyMessages",
    "PayloadChecksumMismatch",
    "RequestKeyMismatch",
    "LengthMismatch",
    "DigestMismatch",
    "MessageCountMismatch",
    "InvalidAbort",
    "TrailingData",
    "Truncated",
    "PeerAbort",
    # the SSE mappings (§15, §18.5)
    "UnexpectedEvent",
    "InvalidBase64",
    "EventTooLarge",
    "TooManyComments",
    "InvalidRecord",
    "UnframedEvent",
    "EventMissing",
    "SplitMessage",
    "EventLengthMismatch",
]

#: Every frame-level kind, in the order of the header checks of §2 where they are header checks.
FRAME_ERROR_KINDS: tuple[str, ...] = ErrorKind.__args__[:24]  # type: ignore[attr-defined]
#: The kinds of the SSE mappings (§15, §18.5): contract violations, never truncations.
MAPPING_ERROR_KINDS: tuple[str, ...] = ErrorKind.__args__[24:]  # type: ignore[attr-defined]


class DecodeError(Exception):
    """The first rule a stream broke (§2.2: exactly one error per stream, final).

    `kind` is SPEC.md's name for it; `at` is the truncation point when `kind` is ``"Truncated"``;
    `detail` holds what the check saw (offsets, lengths, sequence numbers).

    >>> err = DecodeError("Truncated", at="InHeader", received=3)
    >>> err.kind, err.at, err.detail["received"]
    ('Truncated', 'InHeader', 3)
    >>> str(err)
    'truncated inside a frame header (3 bytes received)'
    """

    kind: ErrorKind
    at: TruncationPoint | None
    detail: dict[str, Any]

    def __init__(self, kind: ErrorKind, /, *, at: TruncationPoint | None = None, **detail: Any) -> None:
        self.kind = kind
        self.at = at
        self.detail = detail
        super().__init__(describe(kind, at, detail))

    @property
    def is_mapping_error(self) -> bool:
        """Whether the SSE mapping broke (§15, §18.5), not a frame rule.

        >>> DecodeError("UnframedEvent").is_mapping_error
        True
        """
        return self.kind in MAPPING_ERROR_KINDS


_TRUNCATIONS = {
    "NoFrame": "truncated before any frame",
    "InHeader": "truncated inside a frame header",
    "InPayload": "truncated inside the payload of a {kind} frame",
    "InMessage": "truncated inside a message",
    "BetweenMessages": "truncated between messages",
}


def describe(kind: str, at: str | None, detail: dict[str, Any]) -> str:
    """A lowercase one-line description of an error (for messages and logs)."""
    if kind == "Truncated" and at is not None:
        text = _TRUNCATIONS[at].format(kind=detail.get("frame", "?"))
        if at == "InHeader":
            text += f" ({detail.get('received', 0)} bytes received)"
        elif at == "InPayload":
            text += f" ({detail.get('received', 0)} of {detail.get('declared', 0)} bytes received)"
        elif at == "InMessage":
            text += f" ({detail.get('message_bytes', 0)} message bytes received)"
        elif at == "BetweenMessages":
            text += f" ({detail.get('messages', 0)} messages complete)"
        return text
    if kind == "PeerAbort":
        return f"aborted by the server: code {detail.get('code')}: {escape(str(detail.get('reason', '')))}"
    words = "".join(" " + c.lower() if c.isupper() else c for c in kind).strip()
    shown = ", ".join(f"{k} {v}" for k, v in detail.items())
    return f"{words} ({shown})" if shown else words


def escape(text: str) -> str:
    """§3.1: the peer's text with control and invisible format characters escaped.

    >>> escape("a\\nb\\u202e")
    'a\\\\nb\\\\u{202e}'
    """
    out = []
    for ch in text:
        o = ord(ch)
        if ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20 or 0x7F <= o <= 0x9F or o in _INVISIBLE:
            out.append(f"\\u{{{o:x}}}")
        else:
            out.append(ch)
    return "".join(out)


# Bidirectional overrides and isolates, zero-width characters (§3.1).
_INVISIBLE = frozenset(
    [0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2060, 0xFEFF, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
)
