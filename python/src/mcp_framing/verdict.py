"""What a decoder saw when its input ended (SPEC.md §7), in the conformance manifest's shape (§14)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import DecodeError

__all__ = ["Abort", "Received", "StreamVerdict"]


@dataclass(frozen=True)
class Abort:
    """An ABORT frame: its reason code (§3.1) and the peer's reason text (escape it to show it)."""

    code: int
    reason: str


@dataclass(frozen=True)
class Received:
    """What arrived (§7: truncation reports carry it, for telemetry).

    `bytes` counts the frame bytes the decoder consumed; `open_message_bytes` the bytes of the
    message left open (received, never delivered).
    """

    frames: int = 0
    bytes: int = 0
    messages: int = 0
    open_message_bytes: int = 0
    last_sequence: int | None = None
    request_key: bytes | None = None
    attempt_id: bytes | None = None


@dataclass(frozen=True)
class StreamVerdict:
    """The end-of-input verdict of one stream: clean, aborted (`PeerAbort`) or an error.

    `messages` are the messages verified before the end (for an aborted or failed stream too,
    §9: each was verified by its MESSAGE_END). A clean stream either saw its sentinel (§7 row 2,
    Regime A) or ended right after its verified final response (row 4: delivered, Regime B,
    `sentinel_seen` False).
    """

    verdict: Literal["clean", "aborted", "error"]
    messages: tuple[bytes, ...]
    abort: Abort | None = None
    error: DecodeError | None = None
    received: Received = field(default_factory=Received)
    sentinel_seen: bool = False

    @property
    def regime(self) -> Literal["A", "B"]:
        """§9, §11.4: the sentinel or an ABORT decided (A), or the framing's own checks (B)."""
        return "A" if self.sentinel_seen or self.verdict == "aborted" else "B"

    @property
    def is_clean(self) -> bool:
        """Whether the stream is complete: STREAM_END, then the end of input (§7 row 2)."""
        return self.verdict == "clean"

    def to_manifest(self) -> dict[str, Any]:
        """The verdict as `tests/vectors/manifest.json` writes `expect` (§14)."""
        messages = []
        for m in self.messages:
            try:
                text: str | None = m.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            messages.append({"len": len(m), "sha256": hashlib.sha256(m).hexdigest(), "utf8": text})
        error = self.error
        return {
            "verdict": self.verdict,
            "sentinel_seen": self.sentinel_seen,
            "regime": self.regime,
            "messages": messages,
            "abort": None if self.abort is None else {"code": self.abort.code, "reason": self.abort.reason},
            "error": None if error is None else error.kind,
            "truncation": None if error is None else error.at,
        }
