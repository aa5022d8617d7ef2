"""Every attempt logged (`logging`, logger ``mcp_framing``) and counted through the OpenTelemetry
metrics API when it is installed (optional), under the Rust crate's metric names
(`src/telemetry/`): a dashboard shows Python, TypeScript and Rust clients and servers side by
side. The client's:

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

The server's deduplication (`mcp_framing.server.Deduplicator`, behind `FramingMiddleware`),
SPEC.md §17.15, with no credential, key or tool name in an attribute:

| metric | kind | attributes |
|---|---|---|
| `mcp_framing.dedupe.decisions` | counter | `decision`, `reason`, `mcp.method.name` |
| `mcp_framing.dedupe.waits` | counter | `decision` (what the wait ended in) |
| `mcp_framing.dedupe.wait.duration` | histogram, s | `decision` |
| `mcp_framing.dedupe.completions` | counter | `recorded` |
| `mcp_framing.dedupe.leases_lost` | counter | `detected` (`heartbeat`, `completion`) |
| `mcp_framing.dedupe.evictions` | counter | `record` (`completed`, `expired_claim`) |
| `mcp_framing.dedupe.store.duration` | histogram, s | `operation`, `outcome` |
| `mcp.server.operation.duration` | histogram, s | `mcp.method.name`, `mcp_framing.dedupe.decision`, |
| | | `error.type`, `rpc.response.status_code` |

`decision` is `execute`, `replay` or `refused` (then `reason` is the refusal's, else empty; a
wait's `decision` is the refusal's reason); `recorded` is `stored`, `not_stored`, `lease_lost` or
`store_error`; `operation` is `claim`, `renew`, `complete` or `release`, its `outcome` `ok` or the
`StoreError`'s `kind`; `error.type` is a JSON-RPC error code (also in
`rpc.response.status_code`), `tool_error`, `no_final_response` or `released`.

`instrument(meter)` sends them to a meter of the caller's choosing (anything with OpenTelemetry's
`create_counter` / `create_histogram`); by default they go to `opentelemetry.metrics.get_meter`
when the API is installed, nowhere otherwise. Request keys appear only as their fingerprint
(`sha256:` + 16 hex digits, §10).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
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
    "DEDUPE_COMPLETIONS",
    "DEDUPE_DECISIONS",
    "DEDUPE_EVICTIONS",
    "DEDUPE_LEASES_LOST",
    "DEDUPE_STORE_DURATION",
    "DEDUPE_WAITS",
    "DEDUPE_WAIT_DURATION",
    "SERVER_OPERATION_DURATION",
    "Attempt",
    "fingerprint",
    "instrument",
]

CLIENT_OPERATION_DURATION = "mcp.client.operation.duration"
CLIENT_RESPONSES = "mcp_framing.client.responses"
CLIENT_TRUNCATIONS = "mcp_framing.client.truncations"
CLIENT_INCOMPLETE_BYTES = "mcp_framing.client.incomplete_bytes"
CLIENT_OPEN_MESSAGE_BYTES = "mcp_framing.client.open_message_bytes"
CLIENT_RETRY_DECISIONS = "mcp_framing.client.retry_decisions"
CLIENT_RETRIES = "mcp_framing.client.retries"
CLIENT_SENTINEL_MISSING = "mcp_framing.client.sentinel_missing"
DEDUPE_DECISIONS = "mcp_framing.dedupe.decisions"
DEDUPE_WAITS = "mcp_framing.dedupe.waits"
DEDUPE_WAIT_DURATION = "mcp_framing.dedupe.wait.duration"
DEDUPE_COMPLETIONS = "mcp_framing.dedupe.completions"
DEDUPE_LEASES_LOST = "mcp_framing.dedupe.leases_lost"
DEDUPE_EVICTIONS = "mcp_framing.dedupe.evictions"
DEDUPE_STORE_DURATION = "mcp_framing.dedupe.store.duration"
SERVER_OPERATION_DURATION = "mcp.server.operation.duration"

logger = logging.getLogger("mcp_framing")


def fingerprint(key: bytes) -> str:
    """§10: a key's fingerprint, never the key, in logs and errors.

    >>> fingerprint(bytes.fromhex("00112233445566778899aabbccddeeff"))
    'sha256:a8faed6abbf35c12'
    """
    return "sha256:" + hashlib.sha256(key).hexdigest()[:16]


class _Instruments:
    """The instruments of `meter` (default: OpenTelemetry's, or nothing when `opentelemetry` is
    not installed)."""

    def __init__(self, meter: Any = None) -> None:
        if meter is None:
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
        # The server's deduplication (SPEC.md §17.15), with the Rust crate's descriptions.
        self.dedupe_decisions = meter.create_counter(
            DEDUPE_DECISIONS, description="Keyed calls decided, by decision and reason"
        )
        self.dedupe_waits = meter.create_counter(
            DEDUPE_WAITS, description="Duplicates that waited for an attempt in flight, by what the wait ended in"
        )
        self.dedupe_wait_duration = meter.create_histogram(
            DEDUPE_WAIT_DURATION, unit="s", description="Time duplicates waited for an attempt in flight"
        )
        self.dedupe_completions = meter.create_counter(
            DEDUPE_COMPLETIONS, description="Results of executed keyed calls, by whether they were recorded"
        )
        self.dedupe_leases_lost = meter.create_counter(
            DEDUPE_LEASES_LOST,
            description="Claims taken over while their holder still ran (the call may have executed twice)",
        )
        self.dedupe_evictions = meter.create_counter(
            DEDUPE_EVICTIONS,
            description="Records removed before their retention to make room (their retries execute again)",
        )
        self.dedupe_store_duration = meter.create_histogram(
            DEDUPE_STORE_DURATION, unit="s", description="Deduplication store operations, by operation and outcome"
        )
        self.server_duration = meter.create_histogram(
            SERVER_OPERATION_DURATION,
            unit="s",
            description=(
                "Duration of a keyed MCP request on the server, from its deduplication decision until its result"
            ),
        )


_instruments: _Instruments | None = None


def _metrics() -> _Instruments:
    global _instruments
    if _instruments is None:
        _instruments = _Instruments()
    return _instruments


def instrument(meter: Any) -> None:
    """Sends every metric of this package, client and server, to `meter` (an OpenTelemetry
    `Meter`, or anything with its `create_counter` and `create_histogram`); None goes back to
    the default (OpenTelemetry's global meter provider, when the API is installed)."""
    global _instruments
    _instruments = _Instruments(meter)


# -- the server's deduplication (SPEC.md §17.15); mcp_framing.server.dedupe records through these


def dedupe_decision(decision: str, reason: str, method: str, waited: float | None) -> None:
    """One keyed call decided (`decision`: `execute`, `replay` or `refused` with its `reason`);
    `waited`: seconds a duplicate waited for an attempt in flight, None if it did not wait."""
    m = _metrics()
    if m.meter is None:
        return
    m.dedupe_decisions.add(1, {"decision": decision, "reason": reason, "mcp.method.name": method})
    if waited is not None:
        name = reason if decision == "refused" else decision
        m.dedupe_waits.add(1, {"decision": name})
        m.dedupe_wait_duration.record(waited, {"decision": name})


def dedupe_store_operation(operation: str, seconds: float, outcome: str) -> None:
    """One store operation (`claim`, `renew`, `complete`, `release`) as the engine waited for it;
    `outcome` is `ok` or the failure's kind."""
    m = _metrics()
    if m.meter is not None:
        m.dedupe_store_duration.record(seconds, {"operation": operation, "outcome": outcome})


def dedupe_completion(recorded: str) -> None:
    """An executed call's result: `stored`, `not_stored`, `lease_lost` or `store_error`."""
    m = _metrics()
    if m.meter is not None:
        m.dedupe_completions.add(1, {"recorded": recorded})


def dedupe_lease_lost(detected: str) -> None:
    """A claim taken over while its holder ran, `detected` at a `heartbeat` or the `completion`."""
    m = _metrics()
    if m.meter is not None:
        m.dedupe_leases_lost.add(1, {"detected": detected})


def dedupe_eviction(record: str) -> None:
    """A record a bounded store removed before its window: `completed` or `expired_claim`."""
    m = _metrics()
    if m.meter is not None:
        m.dedupe_evictions.add(1, {"record": record})


def server_operation(
    method: str, decision: str, seconds: float, ended: Callable[[], tuple[str | None, int | None]]
) -> None:
    """A keyed call from its decision until its result (`mcp.server.operation.duration`):
    `ended()` gives its error type (None when it succeeded) and, for a JSON-RPC error, its code
    (then the error type too); called only when metrics are on (it may read the result)."""
    m = _metrics()
    if m.meter is None:
        return
    error_type, code = ended()
    attributes: dict[str, Any] = {"mcp.method.name": method, "mcp_framing.dedupe.decision": decision}
    if code is not None:
        attributes["error.type"] = str(code)
        attributes["rpc.response.status_code"] = str(code)
    elif error_type is not None:
        attributes["error.type"] = error_type
    m.server_duration.record(seconds, attributes)


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
