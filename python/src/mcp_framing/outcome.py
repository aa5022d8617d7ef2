"""How a response stream ended, as a client decides it (SPEC.md §11.4), and whether to retry it
(§11.6, §3.1). The verdict names are the Rust crate's (`Verdict::name`), which telemetry labels
and the outcome object the SDK receives use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import DecodeError
from .verdict import Received, StreamVerdict

__all__ = [
    "CLASSIFICATIONS",
    "Classification",
    "Outcome",
    "RetryDecision",
    "classify",
    "decide_retry",
]

Classification = Literal[
    "clean",
    "abandoned",
    "aborted",
    "corrupt",
    "spliced",
    "cross_wired",
    "contract_violation",
    "ambiguous",
]
CLASSIFICATIONS: tuple[Classification, ...] = Classification.__args__  # type: ignore[attr-defined]

# Errors whose header passed its CRC, so the lengths and counts are what the server sent: over
# the negotiated limits (§6) or the receiver's per-stream bounds (§6.1).
_OVER_LIMITS = frozenset(
    [
        "FrameTooLarge",
        "MessageTooLarge",
        "StreamTooLarge",
        "TooManyMessages",
        "TooManyKeepAlives",
        "TooManyIgnorableFrames",
    ]
)


@dataclass(frozen=True)
class Outcome:
    """The classification of one attempt's response stream.

    `error` is the decoder's error (None for a clean stream, or when the transport failed before
    a decoder saw a byte); `kind` is its SPEC.md name, or the client's own (`NotFramed`,
    `IdleTimeout`, `TransportError`, `NoFinalResponse`, `InvalidUtf8`, `CarriageReturn`).
    """

    classification: Classification
    regime: Literal["A", "B", "C"]
    kind: str | None
    detail: str
    received: Received
    error: DecodeError | None = None
    #: The status of an HTTP error response (`kind` "HttpStatus").
    http_status: int | None = None
    #: Whether STREAM_END arrived; a clean outcome without it delivered the final response (§7.1).
    sentinel_seen: bool = True

    @property
    def is_clean(self) -> bool:
        """Whether the response is complete."""
        return self.classification == "clean"

    @property
    def truncation_label(self) -> str:
        """Where an abandoned stream stopped, as the Rust crate labels it (`at`)."""
        if self.error is not None and self.error.at is not None:
            return {
                "NoFrame": "no_frame",
                "InHeader": "in_header",
                "InPayload": "in_payload",
                "InMessage": "in_message",
                "BetweenMessages": "between_messages",
            }[self.error.at]
        return "transport"

    @property
    def message(self) -> str:
        """The verdict as the error message says it: ``mcp-framing: response <this>`` (§11.7)."""
        c = self.classification
        if c == "clean":
            return "complete"
        if c == "cross_wired":
            return "cross-wired: the response is for another request"
        if c == "ambiguous":
            return f"completion ambiguous (Regime C): {self.detail}"
        label = {"contract_violation": "framing contract violated"}.get(c, c)
        return f"{label}: {self.detail}"

    @classmethod
    def client_side(
        cls,
        classification: Classification,
        kind: str,
        detail: str,
        received: Received | None = None,
        http_status: int | None = None,
    ) -> Outcome:
        """An outcome the client decided without a decoder's verdict (never clean: §7).

        >>> Outcome.client_side("abandoned", "IdleTimeout", "no frame for 60 s").message
        'abandoned: no frame for 60 s'
        """
        if classification == "clean":
            raise ValueError("only a decoder's verdict is clean (SPEC.md §7)")
        regime: Literal["A", "B", "C"] = "C" if classification == "ambiguous" else "B"
        return cls(classification, regime, kind, detail, received or Received(), http_status=http_status)


def _classify_error(err: DecodeError) -> Classification:
    kind = err.kind
    if kind == "Truncated":
        return "abandoned"
    if kind == "PeerAbort":
        return "aborted"
    if kind == "RequestKeyMismatch":
        return "cross_wired"
    if kind == "ForeignFrame":
        return "spliced"
    if kind in ("BadMagic", "UnsupportedVersion") and err.detail.get("offset") == 0:
        # framing was promised, yet the body is not framed (or speaks another version)
        return "contract_violation"
    if kind in _OVER_LIMITS or err.is_mapping_error:
        return "contract_violation"
    return "corrupt"


def classify(verdict: StreamVerdict) -> Outcome:
    """The outcome of a stream the decoder saw to the end of its input (§11.4).

    >>> from mcp_framing import StreamDecoder
    >>> outcome = classify(StreamDecoder().finish())
    >>> outcome.classification, outcome.regime, outcome.kind, outcome.truncation_label
    ('abandoned', 'B', 'Truncated', 'no_frame')
    """
    if verdict.is_clean:
        if verdict.sentinel_seen:
            return Outcome("clean", "A", None, "complete", verdict.received)
        # §7 row 4: the final response delivered without the sentinel, recorded as such
        return Outcome("clean", "B", None, "complete without the sentinel", verdict.received, sentinel_seen=False)
    err = verdict.error
    assert err is not None
    classification = _classify_error(err)
    regime: Literal["A", "B", "C"] = "A" if classification == "aborted" else "B"
    return Outcome(classification, regime, err.kind, str(err), verdict.received, err)


@dataclass(frozen=True)
class RetryDecision:
    """What to do after a response ended (§11.6): `action` and why (`reason`), as the Rust crate
    names them."""

    action: Literal["retry", "do_not_retry", "surface_to_caller"]
    reason: str

    @property
    def is_retry(self) -> bool:
        """Whether the request is sent again."""
        return self.action == "retry"

    def surfaced(self) -> RetryDecision:
        """The same reason, surfaced to the caller (the attempt budget is spent)."""
        return RetryDecision("surface_to_caller", self.reason)


def decide_retry(outcome: Outcome, *, idempotent: bool, keyed: bool, deduplicated: bool) -> RetryDecision:
    """The retry decision of §11.6 for `outcome`: a request is retried only where repeating it is
    harmless (idempotent, or keyed and the server declares deduplication for its method).

    >>> from mcp_framing import StreamDecoder
    >>> cut = classify(StreamDecoder().finish())
    >>> decide_retry(cut, idempotent=False, keyed=True, deduplicated=True)
    RetryDecision(action='retry', reason='keyed')
    >>> decide_retry(cut, idempotent=False, keyed=True, deduplicated=False)
    RetryDecision(action='surface_to_caller', reason='not_deduplicated')
    """

    def if_safe() -> RetryDecision:
        if idempotent:
            return RetryDecision("retry", "idempotent")
        if keyed and deduplicated:
            return RetryDecision("retry", "keyed")
        if keyed:
            return RetryDecision("surface_to_caller", "not_deduplicated")
        return RetryDecision("surface_to_caller", "outcome_unknown")

    c = outcome.classification
    if c == "clean":
        return RetryDecision("do_not_retry", "complete")
    if c == "aborted":
        code = outcome.error.detail.get("code") if outcome.error is not None else None
        if code in (3, 4):  # overloaded or shutting down, upstream failed (§3.1)
            return if_safe()
        if code in (1, 5):  # internal error, message too large: a retry fails the same way
            return RetryDecision("do_not_retry", "would_repeat")
        if code == 2:
            return RetryDecision("do_not_retry", "cancelled")
        return RetryDecision("surface_to_caller", "unknown_abort")
    if c == "contract_violation":
        return RetryDecision("do_not_retry", "contract_violation")
    if c == "ambiguous":
        return RetryDecision("surface_to_caller", "ambiguous")
    return if_safe()
