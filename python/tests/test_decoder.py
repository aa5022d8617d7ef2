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


def multi_line_bodies() -> list[tuple[str, bytes]]:
    """Compatible-mapping bodies whose message event spans hundreds of data lines (a
    pretty-printed message), and the same with one change where the lines are read: bytes that
    are not UTF-8 inside a line and at a line's end, a line without the space after the colon,
    an empty data line, a comment and an `id` between data lines, CR and CRLF line ends."""
    lines = ["caf\u00e9 \u2713"] * 300
    message = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"lines": lines}}, indent=1, ensure_ascii=False)
    body = Writer(frame_size=1024).compat([message.encode()])
    check = "\u2713".encode()
    return [
        ("as written", body),
        ("not UTF-8 in a line", body.replace(check, b"\xe2\x9c", 1)),
        ("a sequence cut by a line end", body.replace(check + b'",\n', b"\xe2\x9c\n", 1)),
        ("no space after the colon", body.replace(b'\ndata:  "id"', b'\ndata: "id"', 1)),
        ("an empty data line", body.replace(b"\ndata: ", b"\ndata: \ndata: ", 1)),
        ("a comment between", body.replace(b"\ndata: ", b"\n: c\ndata: ", 1)),
        ("an id between", body.replace(b"\ndata: ", b"\nid: 1\ndata: ", 1)),
        ("a CRLF line end", body.replace(b'",\ndata: ', b'",\r\ndata: ', 1)),
        ("CR line ends", body.replace(b"\n", b"\r")),
    ]


@pytest.mark.parametrize(("name", "body"), multi_line_bodies(), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("bound", [None, 2000])
def test_a_multi_line_event_reads_the_same_whole_and_byte_by_byte(name: str, body: bytes, bound: int | None) -> None:
    # Fed whole, the data lines of a read are taken together; fed a byte at a time, one by one.
    cfg = None if bound is None else {"max_event_data": bound}
    whole = decode(body, "compat", cfg).to_manifest()
    assert decode(body, "compat", cfg, range(1, len(body))).to_manifest() == whole
    rng = random.Random(len(body))
    for _ in range(10):
        cuts = sorted(rng.sample(range(1, len(body)), rng.randrange(1, 30)))
        assert decode(body, "compat", cfg, cuts).to_manifest() == whole, cuts
    if bound is not None:
        assert whole["error"] == "EventTooLarge"
    elif "UTF-8" in name or "cut" in name or "space" in name or "empty" in name:
        assert whole["verdict"] == "error"  # the data as SSE dispatches it is not the framed message
    else:
        assert whole["verdict"] == "clean"  # comments, other fields and line ends change no data


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
