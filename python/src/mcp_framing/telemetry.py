"""Every attempt logged (`logging`, logger ``mcp_framing``) and counted through the OpenTelemetry
metrics API when it is installed (optional), under the Rust crate's metric names
(`src/telemetry.rs`): a dashboard shows Python, TypeScript and Rust clients side by side.

| metric | kind | attributes |
|---|---|---|
| `mcp.client.operation.duration` | histogram, s | `mcp.method.name`, `gen_ai.tool.name`, `error.type` |
| `mcp_framing.client.responses` | counter | `outcome`, `regime`, `mcp.method.name` |
| `mcp_framing.client.sentinel_missing` | counter | `mcp.method.name` (delivered without STREAM_END, §7.1) |
| `mcp_framing.client.truncations` | counter | `at`, `mcp.method.name` |
| `mcp_framing.client.incomplete_bytes` | counter, By | `outcome` |
| `mcp_framing.client.open_message_bytes` | counter, By | `outcome` |
| `mcp_framing.client.retry_decisions` | counter | `decision`, `reason` |
| `mcp_framing.client.retries` | counter | `reason`, `mcp.method.name` |

Request keys appear only as their fingerprint (`sha256:` + 16 hex digits, §10).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from .outcome import Outcome, RetryDecision

__all__ = [
    "CLIENT_INCOMPLETE_BYTES",
    "CLIENT_OPEN_MESSAGE_BYTES",
    "CLIENT_OPERATION_DURATION",
    "CLIENT_RESPONSES",
    "CLIENT_RETRIES",
    "CLIENT_RETRY_DECISIONS",
    "CLIENT_SENTINEL_MISSING",
    "CLIENT_TRUNCATIONS",
    "Attempt",
    "fingerprint",
]

CLIENT_OPERATION_DURATION = "mcp.client.operation.duration"
CLIENT_RESPONSES = "mcp_framing.client.responses"
CLIENT_TRUNCATIONS = "mcp_framing.client.truncations"
CLIENT_INCOMPLETE_BYTES = "mcp_framing.client.incomplete_bytes"
CLIENT_OPEN_MESSAGE_BYTES = "mcp_framing.client.open_message_bytes"
CLIENT_RETRY_DECISIONS = "mcp_framing.client.retry_decisions"
CLIENT_RETRIES = "mcp_framing.client.retries"
CLIENT_SENTINEL_MISSING = "mcp_framing.client.sentinel_missing"

logger = logging.getLogger("mcp_framing")


def fingerprint(key: bytes) -> str:
    """§10: a key's fingerprint, never the key, in logs and errors.

    >>> fingerprint(bytes.fromhex("00112233445566778899aabbccddeeff"))
    'sha256:a8faed6abbf35c12'
    """
    return "sha256:" + hashlib.sha256(key).hexdigest()[:16]


class _Instruments:
    """The OpenTelemetry instruments, or nothing when `opentelemetry` is not installed."""

    def __init__(self) -> None:
        try:
            from opentelemetry import metrics
        except ImportError:  # the metrics API is optional
            self.meter: Any = None
            return
        meter = metrics.get_meter("mcp_framing")
        self.meter = meter
        self.duration = meter.create_histogram(
            CLIENT_OPERATION_DURATION,
            unit="s",
            description="Duration of an MCP request from sending until its final result, retries included",
        )
        self.responses = meter.create_counter(CLIENT_RESPONSES, description="Framed response streams, by verdict")
        self.truncations = meter.create_counter(
            CLIENT_TRUNCATIONS, description="Response streams abandoned before their sentinel, by where they stopped"
        )
        self.incomplete = meter.create_counter(
            CLIENT_INCOMPLETE_BYTES, unit="By", description="Bytes received by response streams that did not complete"
        )
        self.open_bytes = meter.create_counter(
            CLIENT_OPEN_MESSAGE_BYTES,
            unit="By",
            description="Bytes of messages left open by response streams that did not complete",
        )
        self.decisions = meter.create_counter(
            CLIENT_RETRY_DECISIONS, description="Retry decisions after a response stream ended"
        )
        self.retries = meter.create_counter(
            CLIENT_RETRIES, description="Requests sent again after a response that did not complete"
        )
        self.sentinel_missing = meter.create_counter(
            CLIENT_SENTINEL_MISSING,
            description="Final responses delivered although the stream's sentinel was cut (clean, Regime B)",
        )


_instruments: _Instruments | None = None


def _metrics() -> _Instruments:
    global _instruments
    if _instruments is None:
        _instruments = _Instruments()
    return _instruments


@dataclass(frozen=True)
class Attempt:
    """What telemetry knows of one attempt besides its outcome."""

    method: str
    request_key: bytes
    endpoint: str
    attempt: int
    tool: str | None = None

    def fields(self) -> dict[str, Any]:
        """The structured fields of a log record (`extra`)."""
        return {
            "method": self.method,
            "request_key": fingerprint(self.request_key),
            "endpoint": self.endpoint,
            "attempt": self.attempt,
        }

    def record_outcome(self, outcome: Outcome) -> None:
        """One response stream: a WARNING for every outcome that is not clean and for a final
        response delivered without its sentinel (DEBUG otherwise), and its counters."""
        received = outcome.received
        attempt_id = received.attempt_id.hex() if received.attempt_id else None
        extra = dict(
            self.fields(),
            outcome=outcome.classification,
            regime=outcome.regime,
            frames=received.frames,
            bytes=received.bytes,
            messages=received.messages,
            message_bytes=received.open_message_bytes,
            attempt_id=attempt_id,
            sentinel_seen=outcome.sentinel_seen,
        )
        missing = outcome.is_clean and not outcome.sentinel_seen
        level = logging.DEBUG if outcome.is_clean and not missing else logging.WARNING
        if logger.isEnabledFor(level):
            logger.log(
                level,
                "%s: attempt %d of %s (request key %s) via %s: outcome=%s regime=%s frames=%d bytes=%d messages=%d: %s",
                (
                    "final response delivered without its sentinel (a cut after it)"
                    if missing
                    else "framed stream complete"
                    if outcome.is_clean
                    else "response stream did not complete cleanly"
                ),
                self.attempt,
                self.method,
                extra["request_key"],
                self.endpoint,
                outcome.classification,
                outcome.regime,
                received.frames,
                received.bytes,
                received.messages,
                outcome.detail,
                extra={"mcp_framing": extra},
            )
        m = _metrics()
        if m.meter is None:
            return
        m.responses.add(
            1, {"outcome": outcome.classification, "regime": outcome.regime, "mcp.method.name": self.method}
        )
        if missing:
            m.sentinel_missing.add(1, {"mcp.method.name": self.method})
        if not outcome.is_clean:
            if outcome.classification == "abandoned":
                m.truncations.add(1, {"at": outcome.truncation_label, "mcp.method.name": self.method})
            m.incomplete.add(received.bytes, {"outcome": outcome.classification})
            m.open_bytes.add(received.open_message_bytes, {"outcome": outcome.classification})

    def record_decision(self, decision: RetryDecision) -> None:
        """A retry decision, and, for a retry, the request about to be sent again."""
        logger.info(
            "retry decision for attempt %d of %s (request key %s): %s (%s)",
            self.attempt,
            self.method,
            fingerprint(self.request_key),
            decision.action,
            decision.reason,
            extra={"mcp_framing": dict(self.fields(), decision=decision.action, reason=decision.reason)},
        )
        m = _metrics()
        if m.meter is None:
            return
        m.decisions.add(1, {"decision": decision.action, "reason": decision.reason})
        if decision.is_retry:
            m.retries.add(1, {"reason": decision.reason, "mcp.method.name": self.method})

    def record_operation(self, seconds: float, error_type: str | None) -> None:
        """A logical request's duration (OpenTelemetry's MCP semantic conventions)."""
        m = _metrics()
        if m.meter is None:
            return
        attributes = {
            "mcp.method.name": self.method,
            "network.transport": "tcp",
            "network.protocol.name": "http",
        }
        if self.tool is not None:
            attributes["gen_ai.tool.name"] = self.tool
        if error_type is not None:
            attributes["error.type"] = error_type
        m.duration.record(seconds, attributes)
