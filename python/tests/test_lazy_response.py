"""SPEC.md §7.1 read lazily (`jsonrpc.response_head`, `StreamDecoder`): a long message whose head
shows a response is read whole only where that decides something, and every verdict is the one
the whole reading gives. The oracle is the reference decoder (tests/reference/), which reads
every message whole as it is verified, and was written from SPEC.md alone."""

from __future__ import annotations

import importlib.util
import json
import random
from typing import Any

import pytest

from mcp_framing.body import body_decoder
from mcp_framing.conformance import decode
from mcp_framing.jsonrpc import HEAD_BYTES, UNREAD, response_head
from mcp_framing.transport import _Verifier
from support import KEY, REPO, Writer

_spec = importlib.util.spec_from_file_location("mcp_framing_ref", REPO / "tests" / "reference" / "mcp_framing_ref.py")
assert _spec is not None and _spec.loader is not None
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)

LONG = 'a line of text caf\u00e9 \u2713 with "quotes" and a back\\slash\n' * 160  # > HEAD_BYTES as JSON
assert len(json.dumps(LONG)) > 2 * HEAD_BYTES


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


# A response whose head decides (id, then result: the candidate, read whole only where it decides).
HEAD_FIRST = dumps({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": LONG}]}})
# A response whose id comes after its long result: the head does not decide, read whole at once.
ID_AFTER = dumps({"jsonrpc": "2.0", "result": {"content": [{"type": "text", "text": LONG}]}, "id": 7})
# An error response with a long member after its error: the head stops at the comma after `error`.
ERROR_HEAD = dumps({"jsonrpc": "2.0", "id": 7, "error": {"code": -32000, "message": "no"}, "detail": LONG})
# Response-looking heads that are no response read whole: not one JSON text (bytes after it, or cut).
TRAILING = HEAD_FIRST + b" {}"
UNCLOSED = HEAD_FIRST[:-1]
# A notification with `id` and `result` nested: the head reaches its long params, read at once.
NESTED = dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": LONG, "id": 1, "result": 2}})

STREAMS = {
    "a long response": [HEAD_FIRST],
    "a response whose id comes after a long result": [ID_AFTER],
    "a long error response": [ERROR_HEAD],
    "a response-looking message with bytes after its JSON text": [TRAILING],
    "a response-looking message that is cut JSON": [UNCLOSED],
    "a response-looking message, then the response": [TRAILING, HEAD_FIRST],
    "a message after the long response": [HEAD_FIRST, NESTED],
    "a nested lookalike, then the response whose id comes last": [NESTED, ID_AFTER],
}


def reference_verdict(body: bytes, mapping: str, key: bytes | None) -> dict:
    out = ref.decode(body, mapping=mapping, **ref.config_from_json({"request_key": None if key is None else key.hex()}))
    return out.to_json(with_detail=False)  # type: ignore[no-any-return]


def prefixes(body: bytes) -> list[int]:
    # every offset within 64 bytes of either end of a frame-sized stretch, and a stride between
    points = set(range(0, len(body) + 1, 97)) | {len(body)}
    for at in range(0, len(body) + 1, 1024):
        points |= set(range(max(0, at - 24), min(len(body), at + 24) + 1))
    points |= set(range(max(0, len(body) - 80), len(body) + 1))
    return sorted(points)


def test_the_head_decides_only_long_messages_and_stops_before_the_long_value() -> None:
    head = response_head(HEAD_FIRST)
    assert head is not None and not head.complete
    assert head.members == {"jsonrpc": "2.0", "id": 7, "result": UNREAD}
    assert HEAD_FIRST[slice(*head.id_spans[0])] == b"7"
    error = response_head(ERROR_HEAD)
    assert error is not None and error.members["error"] == {"code": -32000, "message": "no"}
    assert response_head(ID_AFTER) is None  # the long result comes before id: read whole
    assert response_head(NESTED) is None
    assert response_head(b'{"jsonrpc":"2.0","id":7,"result":{}}') is None  # short: read whole


@pytest.mark.parametrize("mapping", ["binary", "compat"])
@pytest.mark.parametrize("name", list(STREAMS))
def test_every_prefix_of_a_stream_with_long_messages_gets_the_verdict_of_the_whole_reading(
    name: str, mapping: str
) -> None:
    messages = STREAMS[name]
    writer = Writer(frame_size=1024)
    body = writer.binary(messages) if mapping == "binary" else writer.compat(messages)
    cfg = {"request_key": KEY.hex()}
    for end in prefixes(body):
        got = decode(body[:end], mapping, cfg).to_manifest()  # type: ignore[arg-type]
        assert got == reference_verdict(body[:end], mapping, KEY), f"prefix of {end} bytes"
    rng = random.Random(name)
    whole = decode(body, mapping, cfg).to_manifest()  # type: ignore[arg-type]
    assert whole == reference_verdict(body, mapping, KEY)
    for _ in range(10):
        cuts = sorted(rng.sample(range(1, len(body)), 12))
        assert decode(body, mapping, cfg, cuts).to_manifest() == whole, cuts  # type: ignore[arg-type]


def test_a_cut_after_a_response_looking_message_is_truncated_not_delivered() -> None:
    for lookalike in (TRAILING, UNCLOSED):
        body = Writer().binary([lookalike], end="none")
        verdict = decode(body, "binary", {"request_key": KEY.hex()})
        assert (verdict.verdict, verdict.error and verdict.error.at) == ("error", "BetweenMessages")
        assert decode(Writer().binary([HEAD_FIRST], end="none"), "binary", {"request_key": KEY.hex()}).is_clean


def test_a_cut_after_a_message_that_follows_the_long_response_is_truncated() -> None:
    body = Writer().binary([HEAD_FIRST, NESTED], end="none")
    verdict = decode(body, "binary", {"request_key": KEY.hex()})
    assert (verdict.verdict, verdict.error and verdict.error.at) == ("error", "BetweenMessages")


def test_a_response_whose_id_comes_after_a_long_result_is_delivered_when_its_sentinel_is_cut() -> None:
    verdict = decode(Writer().binary([ID_AFTER], end="none"), "binary", {"request_key": KEY.hex()})
    assert verdict.is_clean and not verdict.sentinel_seen and verdict.messages == (ID_AFTER,)


def verify(messages: list[bytes], end: str = "stream_end", whole: bool = False) -> tuple[list[Any], Any, Any]:
    """The events `_Verifier` hands the SDK, its outcome, and its final response, fed in 4 KiB reads."""
    body = Writer().binary(messages, end=end)
    verifier = _Verifier(body_decoder("binary", request_key=KEY))
    events: list[Any] = []
    for at in range(0, len(body), 4096):
        events += verifier.feed(body[at : at + 4096])
    outcome = verifier.finish(whole=whole)
    return events + verifier.late, outcome, verifier


def event(message: bytes) -> tuple[bytes, ...]:
    return (b"data: ", message, b"\n\n")  # the message's bytes as verified, not copied


def test_the_transport_reads_a_long_final_response_no_further_than_its_head() -> None:
    events, outcome, verifier = verify([NESTED, HEAD_FIRST])
    assert outcome.is_clean and events == [event(NESTED)] and verifier.final == HEAD_FIRST
    assert verifier.final_value == {"jsonrpc": "2.0", "id": 7, "result": UNREAD}
    assert verifier.decoder.response_head.complete is False  # nothing read past the head
    _, outcome, verifier = verify([HEAD_FIRST], whole=True)  # a handshake, a retry: read whole
    assert outcome.is_clean and verifier.final_value["result"]["content"][0]["text"] == LONG


def test_the_transport_hands_on_a_lookalike_once_a_later_message_shows_it_was_no_response() -> None:
    events, outcome, verifier = verify([TRAILING, HEAD_FIRST])
    assert outcome.is_clean and events == [event(TRAILING)] and verifier.final == HEAD_FIRST


def test_the_transport_fails_a_message_after_the_long_final_response() -> None:
    events, outcome, _ = verify([HEAD_FIRST, NESTED])
    assert (outcome.kind, events) == ("MessageAfterFinalResponse", [])


def test_a_cut_after_a_lookalike_hands_it_on_and_fails_the_attempt() -> None:
    events, outcome, verifier = verify([TRAILING], end="none")
    assert (outcome.kind, events, verifier.final) == ("Truncated", [event(TRAILING)], None)
    events, outcome, _ = verify([TRAILING], whole=True)  # read whole, the sentinel seen: no response
    assert (outcome.kind, events) == ("NoFinalResponse", [event(TRAILING)])
