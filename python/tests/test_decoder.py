"""Properties of the decoders: the verdict never depends on how the input is split, no damaged
stream is clean, and memory stays bounded by the message (SPEC.md §6), not by what the peer sends
around it."""

from __future__ import annotations

import io
import json
import random
import tracemalloc

import pytest

from mcp_framing import StreamDecoder, body_decoder
from mcp_framing.conformance import decode, main
from support import KEY, Writer, frame

MESSAGES = [
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}',
    b"",
    '{"text":"caf\u00e9 \u2713 \u20ac"}'.encode(),
    b'{\n  "pretty": true\n}',
    json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"x": "y" * 5000}}).encode(),
]


def bodies() -> list[tuple[str, bytes]]:
    out = []
    for frame_size in (5, 1024, 16384):
        out.append(("binary", Writer(frame_size=frame_size).binary(MESSAGES)))
        # the compatible mapping carries no empty message (an SSE event cannot)
        out.append(("compat", Writer(frame_size=frame_size).compat([m for m in MESSAGES if m])))
    return out


@pytest.mark.parametrize(("mapping", "body"), bodies(), ids=lambda v: v if isinstance(v, str) else len(v))
def test_the_verdict_does_not_depend_on_how_the_body_is_split(mapping: str, body: bytes) -> None:
    whole = decode(body, mapping, None).to_manifest()
    assert whole["verdict"] == "clean"
    rng = random.Random(len(body))
    for _ in range(40):
        cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randrange(1, 12))))
        assert decode(body, mapping, None, cuts).to_manifest() == whole, cuts


def test_no_bit_flip_of_a_stream_is_clean() -> None:
    body = Writer(frame_size=7).binary(MESSAGES[:3])
    for at in range(len(body)):
        for bit in range(8):
            flipped = bytearray(body)
            flipped[at] ^= 1 << bit
            assert not decode(bytes(flipped), "binary", None).is_clean, (at, bit)


def test_messages_are_handed_out_the_moment_their_message_end_verifies() -> None:
    body = Writer(frame_size=4).binary(MESSAGES[:1] + MESSAGES[2:3])
    decoder = StreamDecoder(request_key=KEY)
    delivered = []
    for i in range(len(body)):
        delivered += decoder.feed(body[i : i + 1])
        assert delivered == decoder.messages
    assert delivered == [MESSAGES[0], MESSAGES[2]]
    assert decoder.sentinel_seen
    assert decoder.finish().is_clean


def test_memory_is_bounded_by_the_message_not_by_the_frames_around_it() -> None:
    # A message of 1-byte DATA frames, each read together with a 60 KiB ignorable frame: a decoder
    # that kept views of every read would hold all 6 MB.
    w = Writer()
    head = w.pending[0]
    tracemalloc.start()
    decoder = StreamDecoder()
    decoder.feed(head)
    for _ in range(100):
        data = frame(2, w.seq, b"x")
        ignorable = frame(0x80, w.seq + 1, bytes(60_000))
        w.seq += 2
        decoder.feed(data + ignorable)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert decoder.error is None
    assert current < 1_000_000, current


def test_feeding_after_the_end_of_input_is_a_usage_error() -> None:
    decoder = body_decoder("binary")
    decoder.finish()
    with pytest.raises(RuntimeError):
        decoder.feed(b"\x9f")


def test_the_batch_entry_point_speaks_the_reference_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    body = Writer().binary([b"{}"])
    jobs = [{"hex": body.hex(), "mapping": "binary", "decoder": {"request_key": KEY.hex()}, "splits": [[], [5]]}]
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(jobs)))
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    assert main(["--batch"]) == 0
    answers = json.loads(out.getvalue())
    assert [a["verdict"] for a in answers[0]] == ["clean", "clean"]
    assert answers[0][0]["messages"][0]["utf8"] == "{}"


def test_a_keyless_head_fails_a_client_that_sent_a_key() -> None:
    decoder = StreamDecoder(request_key=KEY)
    decoder.feed(Writer(key=bytes(16)).binary([]))
    assert decoder.finish().error.kind == "RequestKeyMismatch"
