//! SPEC.md §15: in the SSE mapping errors come in body order, and the verdict does not depend on
//! how the body is split into reads. Through the public API: `SseFrameDecoder` and
//! `VerifiedResponse`, with fixed regressions and a property over valid and mutated bodies
//! (flipped bits, oversized lines, unframed events, cuts, stray bytes).

use bytes::{Bytes, BytesMut};
use futures::{StreamExt, executor::block_on, stream};
use mcp_framing::internals::frame::HEADER_LEN;
use mcp_framing::{
    BodyError, DecodeError, StreamDecoder,
    mapping::MappingViolation,
    outcome::{Outcome, Verdict},
};
use mcp_framing::{
    http::{Delivery, ReceiveError, VerifiedResponse},
    mapping::Mapping,
};
use mcp_framing::{
    internals::limits::DEFAULT_MAX_EVENT_DATA,
    internals::sse::{SseFrameDecoder, SseFrameEncoder},
    mapping::SseError,
};
use proptest::prelude::*;

use crate::support::common;

use common::{encode_messages as binary, frame_spans};

/// The HEAD frame and a DATA frame whose payload no longer matches its CRC, as SSE events,
/// followed by a 300 KiB comment line (over the default line bound), and the frame bytes the
/// events carry.
fn corrupt_frame_then_oversized_comment() -> (Vec<u8>, Vec<u8>) {
    let wire = binary(&[br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec()], 64);
    let spans = frame_spans(&wire);
    let mut frames = wire[..spans[1].end].to_vec();
    frames[spans[1].start + HEADER_LEN] ^= 0x01; // first payload byte of the DATA frame
    let mut body = SseFrameEncoder::new().to_events(&frames).to_vec();
    body.push(b':');
    body.extend(std::iter::repeat_n(b'x', 300 * 1024));
    body.push(b'\n');
    (body, frames)
}

/// Splits `body` into pieces whose sizes cycle through `sizes` (each at least 1).
fn pieces(body: &[u8], sizes: &[usize]) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        out.push(Bytes::copy_from_slice(&rest[..n]));
        rest = &rest[n..];
        i += 1;
    }
    out
}

/// What an SSE decoder makes of `reads`: the frame bytes it handed over and its error.
fn sse_verdict(reads: &[Bytes]) -> (Vec<u8>, Result<(), SseError>) {
    let mut dec = SseFrameDecoder::new();
    let mut frames = BytesMut::new();
    for read in reads {
        if let Err(err) = dec.feed(read, &mut frames) {
            return (frames.to_vec(), Err(err));
        }
    }
    dec.finish();
    (frames.to_vec(), Ok(()))
}

/// Everything a `VerifiedResponse` yields for `reads` (messages, `Complete` or the error, as
/// text since `ReceiveError` is not comparable), and its outcome.
fn response_verdict(reads: Vec<Bytes>) -> (Vec<String>, Option<Outcome>) {
    block_on(async {
        let body = stream::iter(reads.into_iter().map(Ok::<_, std::io::Error>));
        let mut response = VerifiedResponse::new(body, Mapping::Sse, StreamDecoder::new());
        let mut items = Vec::new();
        while let Some(item) = response.next().await {
            items.push(match item {
                Ok(Delivery::Message(message)) => format!("message {:?}", message.bytes()),
                Ok(Delivery::Complete(summary)) => format!("complete {summary:?}"),
                Ok(other) => format!("other {other:?}"),
                Err(err) => format!("error {}: {err}", err.kind()),
            });
        }
        (items, response.outcome().cloned())
    })
}

#[test]
fn sse_decoder_hands_over_frames_completed_before_an_oversized_line_in_the_same_read() {
    let (body, frames) = corrupt_frame_then_oversized_comment();
    let split_at = body.iter().position(|&b| b == b':').unwrap();
    let one_read = sse_verdict(&[Bytes::from(body.clone())]);
    let two_reads = sse_verdict(&[
        Bytes::copy_from_slice(&body[..split_at]),
        Bytes::copy_from_slice(&body[split_at..]),
    ]);
    let too_large = Err(SseError::EventTooLarge {
        max: DEFAULT_MAX_EVENT_DATA,
    });
    assert_eq!(one_read, (frames.clone(), too_large.clone()));
    assert_eq!(two_reads, (frames.clone(), too_large));
    // The frames handed over come first in the body, and their error is the verdict.
    let err = StreamDecoder::new().decode_all(&frames).unwrap_err();
    assert!(
        matches!(err, DecodeError::PayloadChecksumMismatch { .. }),
        "{err}"
    );
}

#[test]
fn verified_response_reports_a_corrupt_frame_before_a_later_oversized_line_in_the_same_read() {
    let (body, _) = corrupt_frame_then_oversized_comment();
    let split_at = body.iter().position(|&b| b == b':').unwrap();
    for reads in [
        vec![Bytes::from(body.clone())],
        vec![
            Bytes::copy_from_slice(&body[..split_at]),
            Bytes::copy_from_slice(&body[split_at..]),
        ],
    ] {
        let n = reads.len();
        let (items, outcome) = response_verdict(reads);
        assert_eq!(items.len(), 1, "{n} reads: {items:?}");
        assert!(
            items[0].starts_with("error PayloadChecksumMismatch"),
            "{n} reads: {items:?}"
        );
        let outcome = outcome.unwrap();
        assert!(
            matches!(
                outcome.verdict,
                Verdict::Corrupt(DecodeError::PayloadChecksumMismatch { .. })
            ),
            "{n} reads: {outcome:?}"
        );
    }
}

#[test]
fn verified_response_delivers_messages_decoded_before_an_sse_error_in_the_same_read() {
    let message = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec();
    let wire = binary(std::slice::from_ref(&message), 16);
    let spans = frame_spans(&wire);
    // Everything but STREAM_END, then an unframed event: one read.
    let stream_end = spans.last().unwrap().start;
    let mut body = SseFrameEncoder::new()
        .to_events(&wire[..stream_end])
        .to_vec();
    body.extend_from_slice(b"event: message\ndata: {}\n\n");
    let mut response = VerifiedResponse::new(
        stream::iter([Ok::<_, std::io::Error>(Bytes::from(body))]),
        Mapping::Sse,
        StreamDecoder::new(),
    );
    block_on(async {
        let Some(Ok(Delivery::Message(got))) = response.next().await else {
            panic!("the verified message comes first")
        };
        assert_eq!(got.bytes(), &message[..]);
        let Some(Err(ReceiveError::Invalid(BodyError::Sse(err)))) = response.next().await else {
            panic!("then the SSE error")
        };
        assert_eq!(
            err,
            SseError::UnexpectedEvent {
                name: "message".into()
            }
        );
        assert!(response.next().await.is_none());
    });
    let outcome = response.outcome().expect("an SSE error has an outcome");
    assert_eq!(
        outcome.verdict,
        Verdict::MappingViolation(MappingViolation::Sse(SseError::UnexpectedEvent {
            name: "message".into()
        }))
    );
    assert_eq!(outcome.received.messages, 1);
    assert_eq!(outcome.received.frames, spans.len() as u64 - 1);
    assert!(outcome.head.is_some());
}

/// A change to an SSE body, at a position taken modulo its length.
#[derive(Clone, Debug)]
enum Mutation {
    /// Flip one bit (a base64 character, a line ending, a field name).
    FlipBit(usize, u8),
    /// Insert a line: a comment or a `data` line of the given length around the bounds.
    Line(usize, LongLine),
    /// Insert an unframed event.
    UnexpectedEvent(usize),
    /// Insert stray bytes (possibly mid-line).
    Bytes(usize, Vec<u8>),
    /// Cut the body there.
    Cut(usize),
}

#[derive(Clone, Copy, Debug)]
enum LongLine {
    /// A comment of exactly the line bound (admitted).
    LongestComment,
    /// A comment one byte over the line bound.
    OversizedComment,
    /// An `mcp-frame` event whose data is one byte over the event bound (the line is admitted).
    OversizedData,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit(at, bit)),
        1 => (any::<usize>(), prop_oneof![
            Just(LongLine::LongestComment),
            Just(LongLine::OversizedComment),
            Just(LongLine::OversizedData),
        ])
            .prop_map(|(at, line)| Mutation::Line(at, line)),
        1 => any::<usize>().prop_map(Mutation::UnexpectedEvent),
        1 => (any::<usize>(), prop::collection::vec(
            prop::sample::select(b"\r\n:= AZaz09+/\xff".to_vec()), 1..6))
            .prop_map(|(at, bytes)| Mutation::Bytes(at, bytes)),
        1 => any::<usize>().prop_map(Mutation::Cut),
    ]
}

fn apply(body: &mut Vec<u8>, mutation: &Mutation) {
    let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
    match mutation {
        Mutation::FlipBit(i, bit) if !body.is_empty() => {
            let i = i % body.len();
            body[i] ^= 1 << bit;
        }
        Mutation::FlipBit(..) => {}
        Mutation::Line(i, line) => {
            // The line bound is the event bound plus 16 bytes; the line ending is not counted.
            let text = match line {
                LongLine::LongestComment => {
                    format!("\n:{}\n", "k".repeat(DEFAULT_MAX_EVENT_DATA + 15))
                }
                LongLine::OversizedComment => {
                    format!("\n:{}\n", "k".repeat(DEFAULT_MAX_EVENT_DATA + 16))
                }
                LongLine::OversizedData => format!(
                    "\nevent: mcp-frame\ndata: {}\n\n",
                    "A".repeat(DEFAULT_MAX_EVENT_DATA + 1)
                ),
            };
            let i = at(*i, body.len());
            body.splice(i..i, text.into_bytes());
        }
        Mutation::UnexpectedEvent(i) => {
            let i = at(*i, body.len());
            body.splice(i..i, b"\n\nevent: message\ndata: {}\n\n".iter().copied());
        }
        Mutation::Bytes(i, bytes) => {
            let i = at(*i, body.len());
            body.splice(i..i, bytes.iter().copied());
        }
        Mutation::Cut(i) => {
            let i = at(*i, body.len());
            body.truncate(i);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn verdict_of_an_sse_body_does_not_depend_on_how_it_is_split_into_reads(
        messages in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..3),
        frame_size in 1usize..64,
        comments in any::<bool>(),
        mutations in prop::collection::vec(mutation(), 0..3),
        sizes in prop::collection::vec(1usize..64, 1..6),
    ) {
        let wire = binary(&messages, frame_size);
        let mut body = SseFrameEncoder::new().to_events(&wire).to_vec();
        if comments {
            body = String::from_utf8(body)
                .unwrap()
                .replace("\n\n", "\n\n: keep-alive\n\n")
                .into_bytes();
        }
        for mutation in &mutations {
            apply(&mut body, mutation);
        }

        let one_shot = vec![Bytes::from(body.clone())];
        let byte_by_byte = pieces(&body, &[1]);
        let random = pieces(&body, &sizes);

        let sse = sse_verdict(&one_shot);
        prop_assert_eq!(&sse_verdict(&byte_by_byte), &sse, "byte by byte");
        prop_assert_eq!(&sse_verdict(&random), &sse, "split {:?}", sizes);

        let response = response_verdict(one_shot);
        prop_assert!(response.1.is_some(), "every verdict has an outcome: {:?}", response.0);
        prop_assert_eq!(&response_verdict(byte_by_byte), &response, "byte by byte");
        prop_assert_eq!(&response_verdict(random), &response, "split {:?}", sizes);
        if mutations.is_empty() {
            prop_assert!(response.1.as_ref().unwrap().is_clean(), "{:?}", response.0);
        }
    }
}
