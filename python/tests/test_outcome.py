"""Verdicts to outcomes (SPEC.md §11.4), retry decisions (§11.6), and the telemetry of every
attempt: a `logging` record and the OpenTelemetry counters under the Rust crate's names."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcp_framing import DecodeError, StreamDecoder, classify, decide_retry, telemetry
from mcp_framing.outcome import Outcome
from mcp_framing.verdict import Received
from support import KEY, Writer


def outcome_of(data: bytes, key: bytes | None = None) -> Outcome:
    decoder = StreamDecoder(request_key=key)
    decoder.feed(data)
    return classify(decoder.finish())


WHOLE = Writer().binary([b'{"jsonrpc":"2.0","id":1,"result":{}}'])


@pytest.mark.parametrize(
    ("data", "key", "classification", "regime"),
    [
        (WHOLE, KEY, "clean", "A"),
        (WHOLE[:-1], KEY, "clean", "B"),  # §7 row 4: the final response delivered, sentinel cut
        (WHOLE[:-1], None, "abandoned", "B"),  # a receiver without a key skips row 4
        (WHOLE[:80], KEY, "abandoned", "B"),
        (WHOLE, bytes(range(16)), "cross_wired", "B"),
        (b'{"jsonrpc":"2.0"}', None, "contract_violation", "B"),
        (WHOLE[:30] + bytes([WHOLE[30] ^ 1]) + WHOLE[31:], None, "corrupt", "B"),
        (Writer().binary([b"{}"], end="abort3"), None, "aborted", "A"),
        (WHOLE[:52] + Writer().binary([b"{}"])[52:], None, "spliced", "B"),
    ],
)
def test_every_verdict_is_classified_as_the_rust_crate_names_it(
    data: bytes, key: bytes | None, classification: str, regime: str
) -> None:
    outcome = outcome_of(data, key)
    assert (outcome.classification, outcome.regime) == (classification, regime)


@pytest.mark.parametrize(
    ("code", "action", "reason"),
    [
        (1, "do_not_retry", "would_repeat"),
        (2, "do_not_retry", "cancelled"),
        (3, "retry", "keyed"),
        (4, "retry", "keyed"),
        (5, "do_not_retry", "would_repeat"),
        (0, "surface_to_caller", "unknown_abort"),
        (700, "surface_to_caller", "unknown_abort"),
    ],
)
def test_an_abort_is_retried_by_its_code(code: int, action: str, reason: str) -> None:
    aborted = outcome_of(Writer().binary([], end=f"abort{code}"))
    decision = decide_retry(aborted, idempotent=False, keyed=True, deduplicated=True)
    assert (decision.action, decision.reason) == (action, reason)


def test_a_cut_is_retried_only_where_repeating_it_is_harmless() -> None:
    cut = outcome_of(WHOLE[:40])
    assert decide_retry(cut, idempotent=True, keyed=False, deduplicated=False).reason == "idempotent"
    assert decide_retry(cut, idempotent=False, keyed=True, deduplicated=True).action == "retry"
    assert decide_retry(cut, idempotent=False, keyed=True, deduplicated=False).reason == "not_deduplicated"
    assert decide_retry(cut, idempotent=False, keyed=False, deduplicated=False).reason == "outcome_unknown"
    violation = outcome_of(b"<html>")
    assert decide_retry(violation, idempotent=True, keyed=True, deduplicated=True).action == "do_not_retry"
    ambiguous = Outcome.client_side("ambiguous", "NoContract", "no contract")
    assert decide_retry(ambiguous, idempotent=True, keyed=True, deduplicated=True).reason == "ambiguous"


def test_a_client_side_outcome_is_never_clean() -> None:
    with pytest.raises(ValueError):
        Outcome.client_side("clean", "x", "y")  # type: ignore[arg-type]


def test_a_truncation_is_labelled_where_it_stopped() -> None:
    labels = {outcome_of(WHOLE[:n]).truncation_label for n in (0, 5, 30, 52)}
    assert labels == {"no_frame", "in_header", "in_payload", "between_messages"}
    inside = outcome_of(WHOLE[: 52 + 20 + 3])
    assert isinstance(inside.error, DecodeError) and inside.error.at == "InPayload"


class _Instrument:
    def __init__(self, name: str, seen: list) -> None:
        self.name, self.seen = name, seen

    def add(self, amount: float, attributes: dict[str, Any] | None = None) -> None:
        self.seen.append((self.name, amount, attributes))

    record = add


class _Meter:
    def __init__(self, seen: list) -> None:
        self.seen = seen

    def create_counter(self, name: str, **_: Any) -> _Instrument:
        return _Instrument(name, self.seen)

    create_histogram = create_counter


def test_every_attempt_is_logged_and_counted_under_the_crate_metric_names(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list = []
    instruments = telemetry._Instruments.__new__(telemetry._Instruments)
    meter = _Meter(seen)
    instruments.meter = meter
    for attribute, name in [
        ("duration", telemetry.CLIENT_OPERATION_DURATION),
        ("responses", telemetry.CLIENT_RESPONSES),
        ("truncations", telemetry.CLIENT_TRUNCATIONS),
        ("incomplete", telemetry.CLIENT_INCOMPLETE_BYTES),
        ("open_bytes", telemetry.CLIENT_OPEN_MESSAGE_BYTES),
        ("decisions", telemetry.CLIENT_RETRY_DECISIONS),
        ("retries", telemetry.CLIENT_RETRIES),
    ]:
        setattr(instruments, attribute, meter.create_counter(name))
    monkeypatch.setattr(telemetry, "_instruments", instruments)
    attempt = telemetry.Attempt("tools/call", KEY, "http://127.0.0.1/mcp", 1, "charge")
    cut = outcome_of(WHOLE[:-3])
    with caplog.at_level(logging.DEBUG, logger="mcp_framing"):
        attempt.record_outcome(cut)
        attempt.record_decision(decide_retry(cut, idempotent=False, keyed=True, deduplicated=True))
        attempt.record_operation(0.5, None)
    names = [name for name, _, _ in seen]
    assert names == [
        "mcp_framing.client.responses",
        "mcp_framing.client.truncations",
        "mcp_framing.client.incomplete_bytes",
        "mcp_framing.client.open_message_bytes",
        "mcp_framing.client.retry_decisions",
        "mcp_framing.client.retries",
        "mcp.client.operation.duration",
    ]
    assert seen[0][2] == {"outcome": "abandoned", "regime": "B", "mcp.method.name": "tools/call"}
    assert seen[1][2] == {"at": "in_payload", "mcp.method.name": "tools/call"}
    warning = next(r for r in caplog.records if r.levelno == logging.WARNING)
    assert "outcome=abandoned" in warning.getMessage()
    assert KEY.hex() not in warning.getMessage()  # only the key's fingerprint (§10)
    assert telemetry.fingerprint(KEY) in warning.getMessage()


def test_received_counts_what_arrived() -> None:
    decoder = StreamDecoder()
    decoder.feed(WHOLE[:60])
    assert decoder.received() == Received(
        frames=1,
        bytes=60,
        messages=0,
        open_message_bytes=0,
        last_sequence=decoder.received().last_sequence,
        request_key=KEY,
        attempt_id=decoder.head[1] if decoder.head else None,
    )
