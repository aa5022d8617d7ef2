"""The errors of a framed stream, named as SPEC.md names them (§2–§7, §15, §18.5)."""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "CLIENT_KINDS",
    "CONTRACT_ERROR_KINDS",
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

#: Why a contract cannot be used (§11.3, §11.5; the Rust crate's `ContractError::kind`).
CONTRACT_ERROR_KINDS: tuple[str, ...] = (
    "NoContract",
    "SentinelNotRequired",
    "VersionMismatch",
    "UnsupportedChecksum",
    "UnsupportedDigest",
    "NoCommonTransport",
    "InvalidLimit",
    "Malformed",
    "NotADiscoveryResult",
    "Downgrade",
    "NotDiscovered",
)
#: The `kind` names of the outcome report (SPEC.md §11.7) besides the decoder's frame error kinds
#: (`FRAME_ERROR_KINDS`): the mapping errors (a mapping's precise kind is in `detail`), what the
#: client decided itself, and the contract errors. Every kind a report carries is one of these or
#: a frame error kind; `tests/test_outcome.py` checks this list against SPEC.md §11.7.
CLIENT_KINDS: tuple[str, ...] = (
    "NotFramed",
    "Sse",
    "Compat",
    "Body",
    "IdleTimeout",
    "Send",
    "HttpStatus",
    "NoFinalResponse",
    "MessageAfterFinalResponse",
    "InvalidUtf8",
    "DuplicateId",
    *CONTRACT_ERROR_KINDS,
    "Resolve",
    "NotARequest",
    "RequestKey",
)


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

    As the Rust crate shows them: NUL as ``\\0``, the Arabic letter mark and the invisible
    operators too.

    >>> escape("\\x00\\u061c\\u2062")
    '\\\\0\\\\u{61c}\\\\u{2062}'
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
        elif ch == "\x00":
            out.append("\\0")
        elif o < 0x20 or 0x7F <= o <= 0x9F or o in _INVISIBLE:
            out.append(f"\\u{{{o:x}}}")
        else:
            out.append(ch)
    return "".join(out)


# Bidirectional marks, overrides and isolates, zero-width characters, invisible operators (§3.1):
# the set the Rust crate escapes.
_INVISIBLE = frozenset(
    [0x061C, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2065), *range(0x2066, 0x206A), 0xFEFF]
)
