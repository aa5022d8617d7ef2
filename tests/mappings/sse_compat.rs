//! The compatible SSE mapping (SPEC.md §18) through the public API, without a network: the
//! binary stream rebuilt byte for byte whatever the chunking, line endings and keep-alives; a
//! stock SSE parser sees exactly the messages; every strict prefix a truncation; every bit flip
//! in a record or an event detected; stripped, dropped, duplicated and spliced pieces never clean.

use bytes::{Bytes, BytesMut};
use mcp_framing::internals::sse::SseParser;
use mcp_framing::{AbortCode, DecodeError, Event, StreamDecoder, StreamEncoder};
use mcp_framing::{
    internals::sse_compat::{CompatDecoder, CompatEncoder},
    mapping::CompatError,
};
use proptest::prelude::*;

use crate::support::common;

use common::{ATTEMPT, KEY, OK_MESSAGE, RETRY, head, proptest_config, truncation_name};

/// How a body ended, as a framing client sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum End {
    /// The STREAM_END sentinel arrived.
    Clean,
    /// The frame decoder's error (`Truncated`, `PeerAbort`, a checksum, ...).
    Frame(DecodeError),
    /// The mapping's error, after the frames handed over before it decoded cleanly.
    Mapping(CompatError),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Decoded {
    /// The binary stream the compat decoder rebuilt.
    frames: Vec<u8>,
    /// The verified messages.
    messages: Vec<Bytes>,
    end: End,
}

/// Decodes `body` fed in `pieces` (SPEC.md §18.5), the frame decoder running after every piece.
fn decode_pieces<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Decoded {
    let mut compat = CompatDecoder::new();
    let mut decoder = StreamDecoder::builder().expect_request_key(KEY).build();
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut messages = Vec::new();
    let mut take = |event: Event| {
        if let Event::Message(message) = event {
            messages.push(message.bytes().clone());
        }
    };
    let mut mapping = None;
    for piece in pieces {
        let before = buf.len();
        let fed = compat.feed(piece, &mut buf);
        frames.extend_from_slice(&buf[before..]);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(event)) => take(event),
                Ok(None) => break,
                Err(err) => {
                    return Decoded {
                        frames,
                        messages,
                        end: End::Frame(err),
                    };
                }
            }
        }
        if let Err(err) = fed {
            mapping = Some(err);
            break;
        }
    }
    if let Some(err) = mapping {
        return Decoded {
            frames,
            messages,
            end: End::Mapping(err),
        };
    }
    compat.finish();
    let end = loop {
        match decoder.decode_eof(&mut buf) {
            Ok(Some(event)) => take(event),
            Ok(None) => break End::Clean,
            Err(err) => break End::Frame(err),
        }
    };
    Decoded {
        frames,
        messages,
        end,
    }
}

fn decode(body: &[u8]) -> Decoded {
    decode_pieces([body])
}

/// Feeds `body` in pieces whose sizes cycle through `sizes`.
fn decode_chunked(body: &[u8], sizes: &[usize]) -> Decoded {
    let mut pieces = Vec::new();
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        pieces.push(&rest[..n]);
        rest = &rest[n..];
        i += 1;
    }
    decode_pieces(pieces)
}

fn encoder(attempt: mcp_framing::AttemptId, frame_size: usize) -> StreamEncoder {
    StreamEncoder::builder()
        .frame_size(frame_size)
        .build(head(Some(KEY), attempt))
}

/// How a generated response ends.
#[derive(Clone, Copy, Debug)]
enum Ending {
    End,
    FinalMessage,
    Abort,
}

/// The same response in the compatible mapping and in the binary mapping.
fn encode_both(
    messages: &[String],
    frame_size: usize,
    ending: Ending,
    attempt: mcp_framing::AttemptId,
) -> (Vec<u8>, Vec<u8>) {
    let mut compat = CompatEncoder::new(encoder(attempt, frame_size));
    let mut binary = encoder(attempt, frame_size);
    let mut body = BytesMut::new();
    let mut wire = BytesMut::new();
    let last = messages.len().wrapping_sub(1);
    for (i, message) in messages.iter().enumerate() {
        binary.message(message.as_bytes(), &mut wire).unwrap();
        if i == last && matches!(ending, Ending::FinalMessage) {
            compat.final_message(message.as_bytes(), &mut body).unwrap();
            binary.end(&mut wire).unwrap();
        } else {
            compat.message(message.as_bytes(), &mut body).unwrap();
        }
    }
    match ending {
        Ending::End => {
            compat.end(&mut body).unwrap();
            binary.end(&mut wire).unwrap();
        }
        Ending::FinalMessage if messages.is_empty() => {
            compat.end(&mut body).unwrap();
            binary.end(&mut wire).unwrap();
        }
        Ending::FinalMessage => {}
        Ending::Abort => {
            compat
                .abort(AbortCode::Cancelled, "client went away", &mut body)
                .unwrap();
            binary
                .abort(AbortCode::Cancelled, "client went away", &mut wire)
                .unwrap();
        }
    }
    // Finished: a further end is refused.
    assert!(compat.end(&mut BytesMut::new()).is_err());
    (body.to_vec(), wire.to_vec())
}

/// Messages an SSE event carries unchanged: UTF-8 (multi-byte too), LFs, no CR, not empty.
fn message_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[ -~\n]{1,80}",
        1 => "[a-zé€😀\n\":{}]{1,40}",
        1 => (1usize..3000).prop_map(|n| format!("{{\"data\":\"{}\"}}", "x".repeat(n))),
    ]
}

fn ending_strategy() -> impl Strategy<Value = Ending> {
    prop::sample::select(vec![Ending::End, Ending::FinalMessage, Ending::Abort])
}

/// The data of every event a stock SSE parser dispatches (what an unframed client reads).
fn stock_view(body: &[u8]) -> Vec<String> {
    let mut events = Vec::new();
    let mut parser = SseParser::with_max_event_data(1 << 24);
    parser.feed(body, &mut events).unwrap();
    events
        .into_iter()
        .filter(|e| !e.data.is_empty())
        .map(|e| {
            assert_eq!(e.event, None, "the mapping writes no event types");
            e.data
        })
        .collect()
}

/// The byte ranges of the body's lines, terminators included.
fn lines(body: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    for (at, &b) in body.iter().enumerate() {
        if b == b'\n' {
            ranges.push(start..at + 1);
            start = at + 1;
        }
    }
    if start < body.len() {
        ranges.push(start..body.len());
    }
    ranges
}

proptest! {
    #![proptest_config(proptest_config(128))]

    #[test]
    fn the_binary_stream_is_rebuilt_byte_for_byte_whatever_the_chunking(
        messages in prop::collection::vec(message_strategy(), 0..5),
        frame_size in 1usize..200,
        ending in ending_strategy(),
        sizes in prop::collection::vec(1usize..50, 1..6),
    ) {
        let (body, wire) = encode_both(&messages, frame_size, ending, ATTEMPT);
        let decoded = decode_chunked(&body, &sizes);
        prop_assert_eq!(&decoded.frames, &wire);
        let expected: Vec<Bytes> = messages.iter().map(|m| Bytes::from(m.clone())).collect();
        prop_assert_eq!(&decoded.messages, &expected);
        match ending {
            Ending::Abort => prop_assert!(matches!(decoded.end, End::Frame(DecodeError::PeerAbort(_)))),
            _ => prop_assert_eq!(decoded.end, End::Clean),
        }
    }

    #[test]
    fn a_stock_sse_parser_reads_exactly_the_messages(
        messages in prop::collection::vec(message_strategy(), 0..5),
        frame_size in 1usize..200,
        ending in ending_strategy(),
    ) {
        let (body, _) = encode_both(&messages, frame_size, ending, ATTEMPT);
        prop_assert_eq!(stock_view(&body), messages);
    }

    #[test]
    fn line_endings_and_keep_alive_comments_anywhere_change_nothing(
        messages in prop::collection::vec(message_strategy(), 1..4),
        frame_size in 1usize..200,
        ending in prop::sample::select(vec!["\n", "\r\n", "\r"]),
        keep_alives in prop::collection::vec(any::<bool>(), 1..8),
    ) {
        let (body, wire) = encode_both(&messages, frame_size, Ending::FinalMessage, ATTEMPT);
        let mut edited = Vec::new();
        for (i, line) in lines(&body).into_iter().enumerate() {
            if keep_alives[i % keep_alives.len()] {
                // rmcp's empty comment, a named one, and a comment that only looks like a record
                edited.extend_from_slice(b":\n: keep-alive\n: mcp-framing\n");
            }
            edited.extend_from_slice(&body[line]);
        }
        let edited = String::from_utf8(edited).unwrap().replace('\n', ending).into_bytes();
        let decoded = decode(&edited);
        prop_assert_eq!(&decoded.frames, &wire);
        prop_assert_eq!(decoded.end, End::Clean);
    }

    #[test]
    fn every_strict_prefix_is_truncated_and_never_clean(
        messages in prop::collection::vec(message_strategy(), 0..4),
        frame_size in 1usize..200,
        ending in ending_strategy(),
    ) {
        let (body, _) = encode_both(&messages, frame_size, ending, ATTEMPT);
        let step = (body.len() / 400).max(1);
        for cut in (0..body.len()).step_by(step).chain([body.len() - 1]) {
            let decoded = decode(&body[..cut]);
            let truncated = matches!(&decoded.end, End::Frame(DecodeError::Truncated { .. }));
            prop_assert!(truncated, "cut at {} of {}: {:?}", cut, body.len(), decoded.end);
        }
    }

    #[test]
    fn splitting_the_body_in_two_anywhere_changes_nothing(
        messages in prop::collection::vec(message_strategy(), 1..4),
        frame_size in 1usize..200,
        flip in any::<prop::sample::Index>(),
    ) {
        let (mut body, _) = encode_both(&messages, frame_size, Ending::FinalMessage, ATTEMPT);
        // Also for a broken body: the error must not depend on the split either.
        let at = flip.index(body.len());
        body[at] ^= 0x04;
        let whole = decode(&body);
        let step = (body.len() / 300).max(1);
        for cut in (1..body.len()).step_by(step) {
            let split = decode_pieces([&body[..cut], &body[cut..]]);
            // (After an error, how many frames were handed over depends on the reads.)
            prop_assert_eq!((&split.messages, &split.end), (&whole.messages, &whole.end), "split at {}", cut);
        }
    }

    #[test]
    fn a_bit_flip_in_any_record_or_event_is_never_clean(
        messages in prop::collection::vec(message_strategy(), 1..4),
        frame_size in 1usize..200,
        ending in ending_strategy(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..40),
    ) {
        let (body, _) = encode_both(&messages, frame_size, ending, ATTEMPT);
        let intact = decode(&body).end;
        for (at, bit) in flips {
            let mut flipped = body.clone();
            let at = at.index(body.len());
            flipped[at] ^= 1 << bit;
            let end = decode(&flipped).end;
            prop_assert!(end != End::Clean && end != intact, "flip of bit {} at {}: {:?}", bit, at, end);
        }
    }

    #[test]
    fn a_splice_of_two_attempts_is_clean_only_if_it_carries_the_first_attempts_bytes(
        messages in prop::collection::vec(message_strategy(), 1..4),
        frame_size in 1usize..200,
        same_content in any::<bool>(),
    ) {
        // A retry on another backend: another attempt id, and content that may differ.
        let retried: Vec<String> = if same_content {
            messages.clone()
        } else {
            messages.iter().map(|m| format!("{m}!")).collect()
        };
        let (first, _) = encode_both(&messages, frame_size, Ending::FinalMessage, ATTEMPT);
        let (retry, _) = encode_both(&retried, frame_size, Ending::FinalMessage, RETRY);
        let cuts = |body: &[u8]| lines(body).into_iter().map(|l| l.end).collect::<Vec<_>>();
        let expected: Vec<Bytes> = messages.iter().map(|m| Bytes::from(m.clone())).collect();
        for &i in &cuts(&first)[..cuts(&first).len() - 1] {
            for j in std::iter::once(0).chain(cuts(&retry)) {
                if j == retry.len() {
                    continue;
                }
                let spliced = [&first[..i], &retry[j..]].concat();
                let decoded = decode(&spliced);
                if decoded.end == End::Clean {
                    // Only if the retry's bytes from the cut on are the very bytes the first
                    // attempt's records announced (the same event, or the same final blank
                    // line): the first attempt's response, complete and verified.
                    prop_assert_eq!(&decoded.messages, &expected, "first[..{}] + retry[{}..]", i, j);
                    prop_assert!(same_content || spliced == first, "first[..{}] + retry[{}..]", i, j);
                }
            }
        }
    }
}

#[test]
fn every_bit_flip_of_the_worked_example_is_detected() {
    let body = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors/valid_compat_single_message.sse"),
    )
    .unwrap();
    assert_eq!(decode(&body).end, End::Clean);
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for at in 0..body.len() {
        for bit in 0..8 {
            let mut flipped = body.clone();
            flipped[at] ^= 1 << bit;
            let decoded = decode(&flipped);
            let name = match &decoded.end {
                End::Clean => panic!("flip of bit {bit} at {at} decodes clean"),
                End::Frame(err) => err.kind().to_owned(),
                End::Mapping(err) => err.kind().to_owned(),
            };
            // A message verified before the error is the intact one, never altered content.
            assert!(
                decoded.messages.iter().all(|m| m == OK_MESSAGE),
                "flip at {at}"
            );
            *kinds.entry(name).or_default() += 1;
        }
    }
    // The record's CRCs and base64, the event's length and payload CRC all take their share.
    for kind in [
        "InvalidRecord",
        "HeaderChecksumMismatch",
        "PayloadChecksumMismatch",
        "EventLengthMismatch",
        "UnframedEvent",
        "Truncated",
    ] {
        assert!(kinds.contains_key(kind), "{kind}: {kinds:?}");
    }
}

#[test]
fn stripping_the_comments_is_a_mapping_violation_at_the_first_event() {
    let messages = ["{\"a\":1}".to_owned(), "{\"b\":2}".to_owned()];
    let (body, _) = encode_both(&messages, 16, Ending::FinalMessage, ATTEMPT);
    let stripped: Vec<u8> = lines(&body)
        .into_iter()
        .filter(|line| body[line.start] != b':')
        .flat_map(|line| body[line].to_vec())
        .collect();
    assert_eq!(stock_view(&stripped), messages);
    let decoded = decode(&stripped);
    assert_eq!(
        decoded.end,
        End::Mapping(CompatError::UnframedEvent { event: 0 })
    );
    assert!(decoded.frames.is_empty() && decoded.messages.is_empty());
}

#[test]
fn dropped_duplicated_and_reordered_events_are_never_clean() {
    let messages: Vec<String> = (0..4).map(|i| format!("{{\"n\":{i}}}")).collect();
    let (body, _) = encode_both(&messages, 4, Ending::FinalMessage, ATTEMPT);
    // Pieces: record, event, record, event, ...
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    for line in lines(&body) {
        let line = &body[line];
        match pieces.last_mut() {
            Some(last) if line[0] != b':' && last[0] != b':' => last.extend_from_slice(line),
            _ => pieces.push(line.to_vec()),
        }
    }
    assert_eq!(pieces.len(), 8);
    for event in (1..8).step_by(2) {
        let mut dropped = pieces.clone();
        dropped.remove(event);
        let end = decode(&dropped.concat()).end;
        let expected = if event == 7 {
            matches!(&end, End::Frame(err) if truncation_name(err).as_deref() == Some("InPayload"))
        } else {
            matches!(end, End::Mapping(CompatError::EventMissing { .. }))
        };
        assert!(expected, "event {event} dropped: {end:?}");

        let mut duplicated = pieces.clone();
        duplicated.insert(event, pieces[event].clone());
        let end = decode(&duplicated.concat()).end;
        assert!(
            matches!(end, End::Mapping(CompatError::UnframedEvent { .. })),
            "event {event} duplicated: {end:?}"
        );
    }
    let mut swapped = pieces.clone();
    swapped.swap(1, 3);
    let end = decode(&swapped.concat()).end;
    assert!(
        matches!(end, End::Frame(DecodeError::PayloadChecksumMismatch { .. })),
        "{end:?}"
    );
}

#[test]
fn a_message_is_delivered_only_once_its_event_is_dispatched() {
    let mut body = BytesMut::new();
    let mut enc = CompatEncoder::new(encoder(ATTEMPT, 4));
    enc.final_message(OK_MESSAGE, &mut body).unwrap();
    let blank_line = body.len() - 1;
    let mut compat = CompatDecoder::new();
    let mut decoder = StreamDecoder::new();
    let mut buf = BytesMut::new();
    let mut events = Vec::new();
    for (at, byte) in body.iter().enumerate() {
        compat.feed(&[*byte], &mut buf).unwrap();
        while let Some(event) = decoder.decode(&mut buf).unwrap() {
            events.push((at, event));
        }
    }
    let delivered: Vec<usize> = events
        .iter()
        .filter(|(_, e)| matches!(e, Event::Message(_) | Event::End(_)))
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(delivered, [blank_line, blank_line]);
    // The DATA payloads, unverified, also wait for the whole event.
    assert!(
        events
            .iter()
            .filter(|(_, e)| matches!(e, Event::Chunk(_)))
            .all(|(at, _)| *at == blank_line)
    );
}

#[test]
fn the_encoder_writes_the_committed_vectors() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let read = |file: &str| std::fs::read(dir.join(file)).unwrap();
    let pretty =
        b"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"result\": {\n    \"content\": []\n  }\n}";
    let large = common::vectors::json_of_len(70_000);
    for (file, message) in [
        ("valid_compat_single_message.sse", OK_MESSAGE),
        ("valid_compat_multi_line_data.sse", &pretty[..]),
        ("valid_compat_large_message.sse", &large[..]),
    ] {
        let mut enc = CompatEncoder::new(encoder(ATTEMPT, 16 * 1024));
        let mut body = BytesMut::new();
        enc.final_message(message, &mut body).unwrap();
        assert_eq!(&body[..], read(file), "{file}");
    }
    let mut enc = CompatEncoder::new(encoder(ATTEMPT, 16 * 1024));
    let mut body = BytesMut::new();
    enc.end(&mut body).unwrap();
    assert_eq!(&body[..], read("valid_compat_no_messages.sse"));

    let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":0.5,"total":1}}"#;
    let mut enc = CompatEncoder::new(encoder(ATTEMPT, 16 * 1024));
    let mut body = BytesMut::new();
    enc.message(progress, &mut body).unwrap();
    enc.abort(
        AbortCode::UpstreamFailed,
        "model backend timed out",
        &mut body,
    )
    .unwrap();
    assert_eq!(&body[..], read("valid_compat_aborted.sse"));
}

#[test]
fn the_record_of_a_one_frame_message_costs_230_bytes_with_head_and_sentinel() {
    // SPEC.md §18.6: HEAD 52 + DATA header 20 + MESSAGE_END 60 + STREAM_END 28 = 160 bytes.
    for len in [1usize, 100, 1024, 16 * 1024] {
        let message = "x".repeat(len);
        let mut enc = CompatEncoder::new(encoder(ATTEMPT, 16 * 1024));
        let mut body = BytesMut::new();
        enc.final_message(message.as_bytes(), &mut body).unwrap();
        let unframed = 6 + len + 2;
        assert_eq!(body.len() - unframed, 230, "len {len}");
    }
}

#[test]
fn a_record_line_over_the_bound_fails_before_it_is_buffered_whole() {
    let mut dec = CompatDecoder::with_max_event_data(64);
    let mut frames = BytesMut::new();
    let line = format!(":mcp-framing {}", "A".repeat(100));
    let err = dec.feed(line.as_bytes(), &mut frames).unwrap_err();
    assert_eq!(err.kind(), "EventTooLarge");
    assert_eq!(dec.feed(b"\n", &mut frames), Err(err)); // errors are final
}

#[test]
fn an_error_in_frames_handed_over_comes_before_the_mapping_error() {
    // A record whose DATA header fails its CRC: the frame decoder names it, not InvalidRecord.
    let body = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors/invalid_compat_record_header_checksum.sse"),
    )
    .unwrap();
    let mut compat = CompatDecoder::new();
    let mut frames = BytesMut::new();
    assert_eq!(
        compat.feed(&body, &mut frames),
        Err(CompatError::InvalidRecord { record: 0 })
    );
    let err = StreamDecoder::new().decode_all(&frames).unwrap_err();
    assert!(matches!(
        err,
        DecodeError::HeaderChecksumMismatch { offset: 52, .. }
    ));
}

#[test]
fn the_binary_stream_is_the_same_whether_or_not_the_frames_are_taken_between_reads() {
    // Multi-frame messages whose data lines span reads: the decoder lays a message's frames out
    // in the buffer of its data line when the frame decoder took what came before, and copies
    // them otherwise (here the frames pile up past the bytes it moves instead of copying).
    let messages: Vec<String> = (0..6)
        .map(|i| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{{"i":{i},"t":"{}"}}}}"#,
                "x".repeat(if i % 2 == 1 {
                    17_000 + 700 * i
                } else {
                    2500 + 700 * i
                })
            )
        })
        .collect();
    let (body, wire) = encode_both(&messages, 1026, Ending::FinalMessage, ATTEMPT);
    for piece in [1, 7, 333, 1000, 4096, body.len()] {
        let mut compat = CompatDecoder::new();
        let mut frames = BytesMut::new();
        for read in body.chunks(piece) {
            compat.feed(read, &mut frames).unwrap();
        }
        compat.finish();
        assert_eq!(
            &frames[..],
            &wire[..],
            "reads of {piece} bytes, frames kept"
        );
        assert_eq!(
            decode_chunked(&body, &[piece]).frames,
            wire,
            "reads of {piece} bytes, frames taken"
        );
    }
    let stream = StreamDecoder::new().decode_all(&wire).unwrap();
    assert_eq!(stream.messages.len(), messages.len());
}

/// What a `BodyDecoder` makes of a compatible body fed in `pieces`: the verified messages, the
/// last result of `next_event` and the outcome.
fn body_decode<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> (
    Vec<Bytes>,
    Result<(), mcp_framing::BodyError>,
    mcp_framing::outcome::Outcome,
) {
    let decoder = StreamDecoder::builder().expect_request_key(KEY).build();
    let mut body = mcp_framing::BodyDecoder::new(mcp_framing::mapping::Mapping::Compat, decoder);
    let mut messages = Vec::new();
    let mut drain = |body: &mut mcp_framing::BodyDecoder| loop {
        match body.next_event() {
            Ok(Some(Event::Message(message))) => messages.push(message.bytes().clone()),
            Ok(Some(_)) => {}
            Ok(None) => return Ok(()),
            Err(err) => return Err(err),
        }
    };
    let mut result = Ok(());
    for piece in pieces {
        body.feed(piece);
        result = drain(&mut body);
        if result.is_err() {
            break;
        }
    }
    if result.is_ok() {
        body.finish();
        result = drain(&mut body);
    }
    let outcome = body.outcome();
    (messages, result, outcome)
}

#[test]
fn a_message_event_verified_as_its_data_arrives_decides_as_one_verified_whole() {
    // Issue 21: fed in pieces, the compatible decoder hashes a long data line as it arrives;
    // fed whole, it hashes the event's data once dispatched; either way the frame decoder
    // compares those checks and takes the payloads from the data. Both must decide the same on the body as sent, on every byte of the event altered
    // (a payload checksum, or a length or a UTF-8 SSE replaces), and on every cut.
    let message = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"text":"{}"}}}}"#,
        "a quick brown fox é ".repeat(300)
    );
    let mut enc = CompatEncoder::new(encoder(ATTEMPT, 1024));
    let mut body = BytesMut::new();
    enc.message(
        br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
        &mut body,
    )
    .unwrap();
    enc.final_message(message.as_bytes(), &mut body).unwrap();
    let body = body.to_vec();
    let event = body.len() - message.len() - 8..body.len();
    let mut bodies = vec![body.clone()];
    for at in event.clone().step_by(7) {
        for replacement in [b'b', 0xff, b'"'] {
            let mut altered = body.clone();
            altered[at] = replacement;
            bodies.push(altered);
        }
        let mut shorter = body.clone();
        shorter.remove(at);
        bodies.push(shorter);
    }
    for cut in (event.start - 200..body.len()).step_by(13) {
        bodies.push(body[..cut].to_vec());
    }
    for (i, body) in bodies.iter().enumerate() {
        let whole = body_decode([&body[..]]);
        for piece in [100, 1000, 4096] {
            let pieces = body_decode(body.chunks(piece));
            assert_eq!(pieces, whole, "body {i}, pieces of {piece}");
        }
        if i == 0 {
            assert_eq!(whole.0.last().map(|m| &m[..]), Some(message.as_bytes()));
            assert!(whole.1.is_ok() && whole.2.is_clean());
        }
    }
}

#[test]
fn a_long_event_fed_in_one_byte_and_odd_sized_reads_decides_as_when_fed_whole() {
    // Issue 21: a long data line is checked as UTF-8 and hashed as it arrives, a character cut
    // by a read carried to the next, and its payloads handed to the frame decoder as slices of
    // the data, not copied. Reads of one byte cut every character and every line ending; odd
    // sizes cut frames, records and characters anywhere. With CRLF and CR line endings too, and
    // with a byte of the data altered (invalid UTF-8 that SSE replaces, in the middle and at
    // the end of a character, or a changed byte): the same messages and verdict as whole.
    let text = "ascii é ü € 𝄞 ".repeat(6000);
    let message = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"text":"{text}"}}}}"#);
    assert!(message.len() > 7 * 16_384);
    let (body, _) = encode_both(
        &[
            r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#.to_string(),
            message.clone(),
        ],
        16_384,
        Ending::FinalMessage,
        ATTEMPT,
    );
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let event = find(&body, message.as_bytes()).unwrap();
    let event = event..event + message.len();
    // A four-byte character in the seventh frame.
    let clef = event.start + 6 * 16_384;
    let clef = clef + find(&body[clef..], "𝄞".as_bytes()).unwrap();
    let mut bodies = vec![("as sent", body.clone())];
    for (name, at, byte) in [
        ("a continuation byte replaced", clef + 2, b'x'),
        ("the last byte of a character replaced", clef + 3, 0xff),
        ("a lead byte replaced", clef, 0xc0),
        ("an ASCII byte changed", event.end - 40, b'y'),
    ] {
        let mut altered = body.clone();
        altered[at] = byte;
        bodies.push((name, altered));
    }
    let crlf = body
        .iter()
        .flat_map(|&b| {
            if b == b'\n' {
                vec![b'\r', b'\n']
            } else {
                vec![b]
            }
        })
        .collect::<Vec<u8>>();
    let cr = body
        .iter()
        .map(|&b| if b == b'\n' { b'\r' } else { b })
        .collect::<Vec<u8>>();
    bodies.push(("CRLF line endings", crlf));
    bodies.push(("CR line endings", cr));
    for (name, body) in &bodies {
        let whole = body_decode([&body[..]]);
        let unhashed = decode(body);
        assert_eq!(whole.0, unhashed.messages, "{name}");
        assert_eq!(whole.1.is_ok(), unhashed.end == End::Clean, "{name}");
        if name.contains("as sent") || name.contains("line endings") {
            assert_eq!(whole.0.last().map(|m| &m[..]), Some(message.as_bytes()));
            assert!(whole.1.is_ok() && whole.2.is_clean(), "{name}");
        } else {
            assert_eq!(whole.0.len(), 1, "{name}: only the notification");
            assert!(whole.1.is_err(), "{name}");
        }
        for sizes in [
            &[1][..],
            &[3],
            &[4093],
            &[16_385],
            &[1, 2, 5, 7, 11, 4099, 65_537],
        ] {
            let mut pieces = Vec::new();
            let mut rest = &body[..];
            for &size in sizes.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (piece, after) = rest.split_at(size.min(rest.len()));
                pieces.push(piece);
                rest = after;
            }
            assert_eq!(body_decode(pieces), whole, "{name}, reads of {sizes:?}");
        }
    }
}
