//! Property tests: what the encoder writes, the decoder gives back, for random messages (empty ones
//! included), chunkings, frame sizes, limits, keep-alives, request keys and endings.

use crate::support::common;

use bytes::{Bytes, BytesMut};
use futures::SinkExt;
use mcp_framing::{
    Abort, AbortCode, AttemptId, DecodeError, Event, Outgoing, RequestKey, StreamDecoder,
    StreamEncoder, StreamHead,
};
use proptest::prelude::*;
use tokio_util::codec::FramedWrite;

use common::{Outcome, decode_one_shot, decode_pieces, sha256, split_at_offsets};

/// One message as the server produces it.
#[derive(Clone, Debug)]
struct MessagePlan {
    bytes: Vec<u8>,
    /// Sizes of the pieces pushed (cycled); the message is written whole when empty.
    pieces: Vec<usize>,
    /// A KEEPALIVE after the n-th piece (cycled).
    keep_alives: Vec<bool>,
}

#[derive(Clone, Debug)]
enum Ending {
    End,
    /// ABORT after the messages, with `open` bytes pushed into a message that never finishes.
    Abort {
        code: u16,
        reason: String,
        open: Vec<u8>,
    },
}

#[derive(Clone, Debug)]
struct Plan {
    key: Option<[u8; 16]>,
    attempt: [u8; 16],
    frame_size: usize,
    messages: Vec<MessagePlan>,
    keep_alive_between: bool,
    ending: Ending,
}

impl Plan {
    fn head(&self) -> StreamHead {
        StreamHead {
            request_key: self.key.map(RequestKey::from_bytes),
            attempt_id: AttemptId::from_bytes(self.attempt),
        }
    }

    fn largest_message(&self) -> usize {
        let open = match &self.ending {
            Ending::Abort { open, .. } => open.len(),
            Ending::End => 0,
        };
        self.messages
            .iter()
            .map(|m| m.bytes.len())
            .chain([open])
            .max()
            .unwrap_or(0)
    }
}

/// What the stream carries, as the encoder was told.
#[derive(Debug)]
struct Sent {
    wire: Vec<u8>,
    messages: Vec<Vec<u8>>,
    keep_alives: usize,
    abort: Option<Abort>,
}

fn message_plan() -> impl Strategy<Value = MessagePlan> {
    (
        prop_oneof![
            1 => Just(Vec::new()),
            6 => prop::collection::vec(any::<u8>(), 1..700),
            1 => prop::collection::vec(any::<u8>(), 700..3000),
        ],
        prop::collection::vec(1usize..200, 0..6),
        prop::collection::vec(any::<bool>(), 1..4),
    )
        .prop_map(|(bytes, pieces, keep_alives)| MessagePlan {
            bytes,
            pieces,
            keep_alives,
        })
}

fn attempt_id() -> impl Strategy<Value = [u8; 16]> {
    prop_oneof![
        any::<[u8; 16]>(),
        // Start just before the sequence numbers wrap around.
        (0u32..8, any::<[u8; 12]>()).prop_map(|(back, rest)| {
            let mut id = [0u8; 16];
            id[..4].copy_from_slice(&u32::MAX.wrapping_sub(back).to_be_bytes());
            id[4..].copy_from_slice(&rest);
            id
        }),
    ]
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        prop::option::of(any::<[u8; 16]>().prop_filter("non-zero key", |k| *k != [0; 16])),
        attempt_id(),
        prop_oneof![1usize..40, 40usize..2000, Just(16 * 1024)],
        prop::collection::vec(message_plan(), 0..5),
        any::<bool>(),
        prop_oneof![
            3 => Just(Ending::End),
            1 => (any::<u16>(), "[a-zA-Z0-9 äöü€]{0,40}", prop::collection::vec(any::<u8>(), 0..100))
                .prop_map(|(code, reason, open)| Ending::Abort { code, reason, open }),
        ],
    )
        .prop_map(
            |(key, attempt, frame_size, messages, keep_alive_between, ending)| Plan {
                key,
                attempt,
                frame_size,
                messages,
                keep_alive_between,
                ending,
            },
        )
}

fn encode(plan: &Plan) -> Sent {
    let mut enc = StreamEncoder::builder()
        .frame_size(plan.frame_size)
        .build(plan.head());
    let mut wire = BytesMut::new();
    let mut keep_alives = 0;
    for message in &plan.messages {
        if plan.keep_alive_between {
            enc.keep_alive(&mut wire).expect("keep-alive");
            keep_alives += 1;
        }
        if message.pieces.is_empty() {
            enc.message(&message.bytes, &mut wire).expect("message");
            continue;
        }
        let mut rest = &message.bytes[..];
        let mut i = 0;
        while !rest.is_empty() {
            let n = message.pieces[i % message.pieces.len()].min(rest.len());
            enc.push(&rest[..n], &mut wire).expect("push");
            rest = &rest[n..];
            if message.keep_alives[i % message.keep_alives.len()] {
                enc.keep_alive(&mut wire).expect("keep-alive");
                keep_alives += 1;
            }
            i += 1;
        }
        let summary = enc.finish_message(&mut wire).expect("finish");
        assert_eq!(summary.len, message.bytes.len() as u64);
        assert_eq!(summary.sha256, sha256(&message.bytes));
    }
    let abort = match &plan.ending {
        Ending::End => {
            enc.end(&mut wire).expect("end");
            None
        }
        Ending::Abort { code, reason, open } => {
            enc.push(open, &mut wire).expect("push");
            let abort = Abort::new(AbortCode::from(*code), reason.clone());
            enc.abort_with(&abort, &mut wire).expect("abort");
            Some(abort)
        }
    };
    assert!(enc.is_finished());
    Sent {
        wire: wire.to_vec(),
        messages: plan.messages.iter().map(|m| m.bytes.clone()).collect(),
        keep_alives,
        abort,
    }
}

fn decoder(plan: &Plan, assemble: bool) -> StreamDecoder {
    let mut builder = StreamDecoder::builder()
        .max_frame_payload(u32::try_from(plan.frame_size.max(1026)).expect("u32"))
        .max_message_size(plan.largest_message() as u64)
        .assemble_messages(assemble);
    if let Some(key) = plan.key {
        builder = builder.expect_request_key(RequestKey::from_bytes(key));
    }
    builder.build()
}

/// Checks every event of `outcome` against what was sent.
fn check_outcome(plan: &Plan, sent: &Sent, outcome: &Outcome, assembled: bool) {
    let mut events = outcome.events.iter();
    assert_eq!(events.next(), Some(&Event::Opened(plan.head())));
    let mut messages = Vec::new();
    let mut open = Vec::new();
    let mut keep_alives = 0;
    let mut end = None;
    for event in events {
        assert!(end.is_none(), "event after the end: {event:?}");
        match event {
            Event::Chunk(chunk) => {
                assert_eq!(chunk.message_index(), messages.len() as u64);
                assert_eq!(chunk.offset(), open.len() as u64);
                assert!(!chunk.unverified_bytes().is_empty());
                assert!(chunk.unverified_bytes().len() <= plan.frame_size);
                open.extend_from_slice(chunk.unverified_bytes());
            }
            Event::Message(message) => {
                assert!(assembled);
                assert_eq!(message.bytes().as_ref(), &open[..]);
                let summary = message.summary();
                assert_eq!(summary.index, messages.len() as u64);
                assert_eq!(summary.len, open.len() as u64);
                assert_eq!(summary.sha256, sha256(&open));
                messages.push(std::mem::take(&mut open));
            }
            Event::MessageVerified(summary) => {
                assert!(!assembled);
                assert_eq!(summary.index, messages.len() as u64);
                assert_eq!(summary.sha256, sha256(&open));
                messages.push(std::mem::take(&mut open));
            }
            Event::KeepAlive => keep_alives += 1,
            Event::End(summary) => {
                assert_eq!(summary.messages, sent.messages.len() as u64);
                assert_eq!(summary.bytes, sent.wire.len() as u64);
                end = Some(Ok(()));
            }
            Event::Aborted(abort) => end = Some(Err(abort.clone())),
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(messages, sent.messages);
    assert_eq!(keep_alives, sent.keep_alives);
    match &sent.abort {
        None => {
            assert_eq!(end, Some(Ok(())));
            assert_eq!(outcome.end, Ok(()));
        }
        Some(abort) => {
            assert_eq!(end, Some(Err(abort.clone())));
            assert_eq!(outcome.end, Err(DecodeError::PeerAbort(abort.clone())));
            // The open message's chunks may have been handed out, never as a message.
            if let Ending::Abort { open: bytes, .. } = &plan.ending {
                assert_eq!(open, *bytes);
            }
        }
    }
}

proptest! {
    #![proptest_config(common::proptest_config(128))]

    #[test]
    fn decoding_what_the_encoder_wrote_gives_back_every_message(plan in plan()) {
        let sent = encode(&plan);
        let outcome = decode_one_shot(decoder(&plan, true), &sent.wire);
        check_outcome(&plan, &sent, &outcome, true);
    }

    #[test]
    fn a_decoder_that_does_not_assemble_verifies_the_same_messages(plan in plan()) {
        let sent = encode(&plan);
        let outcome = decode_one_shot(decoder(&plan, false), &sent.wire);
        check_outcome(&plan, &sent, &outcome, false);
    }

    #[test]
    fn decoding_in_random_pieces_gives_the_same_events_as_one_read(
        plan in plan(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let sent = encode(&plan);
        let whole = decode_one_shot(decoder(&plan, true), &sent.wire);
        let mut offsets: Vec<usize> = cuts.iter().map(|c| c.index(sent.wire.len() + 1)).collect();
        offsets.sort_unstable();
        let pieces = split_at_offsets(&sent.wire, &offsets);
        prop_assert_eq!(decode_pieces(decoder(&plan, true), pieces), whole);
    }

    #[test]
    fn the_codec_sink_writes_the_same_bytes_as_the_encoder(plan in plan()) {
        let sent = encode(&plan);
        let mut sink = FramedWrite::new(
            Vec::new(),
            StreamEncoder::builder().frame_size(plan.frame_size).build(plan.head()),
        );
        futures::executor::block_on(async {
            for message in &plan.messages {
                if plan.keep_alive_between {
                    sink.send(Outgoing::KeepAlive).await.expect("keep-alive");
                }
                if message.pieces.is_empty() {
                    sink.send(Outgoing::Message(Bytes::from(message.bytes.clone()))).await.expect("message");
                    continue;
                }
                let mut rest = &message.bytes[..];
                let mut i = 0;
                while !rest.is_empty() {
                    let n = message.pieces[i % message.pieces.len()].min(rest.len());
                    sink.send(Outgoing::Chunk(Bytes::copy_from_slice(&rest[..n]))).await.expect("chunk");
                    rest = &rest[n..];
                    if message.keep_alives[i % message.keep_alives.len()] {
                        sink.send(Outgoing::KeepAlive).await.expect("keep-alive");
                    }
                    i += 1;
                }
                sink.send(Outgoing::FinishMessage).await.expect("finish");
            }
            match &plan.ending {
                Ending::End => sink.send(Outgoing::End).await.expect("end"),
                Ending::Abort { code, reason, open } => {
                    sink.send(Outgoing::Chunk(Bytes::from(open.clone()))).await.expect("chunk");
                    sink.send(Outgoing::Abort(Abort::new(AbortCode::from(*code), reason.clone())))
                        .await
                        .expect("abort");
                }
            }
        });
        prop_assert_eq!(sink.into_inner(), sent.wire);
    }

    #[test]
    fn several_streams_back_to_back_each_decode_with_their_own_decoder(
        plans in prop::collection::vec(plan(), 1..4),
    ) {
        // A client reads one response per decoder; concatenated responses must be cut at the
        // sentinel, the rest being the next response (TrailingData for the first decoder).
        let sents: Vec<Sent> = plans.iter().map(encode).collect();
        let mut all = Vec::new();
        for sent in &sents {
            all.extend_from_slice(&sent.wire);
        }
        let mut at = 0;
        for (plan, sent) in plans.iter().zip(&sents) {
            let rest = &all[at..];
            let outcome = decode_one_shot(decoder(plan, true), rest);
            if rest.len() > sent.wire.len() {
                let trailing = rest.len() - sent.wire.len();
                prop_assert_eq!(outcome.end, Err(DecodeError::TrailingData { len: trailing }));
            } else {
                check_outcome(plan, sent, &outcome, true);
            }
            at += sent.wire.len();
        }
    }
}

/// The longest DATA payload in `wire`.
fn largest_data_frame(wire: &[u8]) -> usize {
    common::frame_spans(wire)
        .into_iter()
        .filter(|span| wire[span.start + 3] == 0x02)
        .map(|span| span.len() - 20)
        .max()
        .unwrap_or(0)
}

proptest! {
    #![proptest_config(common::proptest_config(128))]

    #[test]
    fn a_decoder_with_limits_below_the_stream_rejects_it_at_a_header(
        plan in plan(),
        frame_margin in 1u32..64,
        message_margin in 1u64..64,
    ) {
        let sent = encode(&plan);
        let largest_frame = largest_data_frame(&sent.wire) as u32;
        let largest_message = plan.largest_message() as u64;
        // Frame limit below the largest DATA frame (the decoder needs at least 1026).
        if largest_frame > 1026 {
            let max = largest_frame.saturating_sub(frame_margin).max(1026);
            let decoder = StreamDecoder::builder().max_frame_payload(max).build();
            let outcome = decode_one_shot(decoder, &sent.wire);
            prop_assert_eq!(outcome.verdict(), "FrameTooLarge");
        }
        // Message limit below the largest message (the open one of an abort included).
        if largest_message > 0 {
            let max = largest_message.saturating_sub(message_margin);
            let decoder = StreamDecoder::builder().max_message_size(max).build();
            let outcome = decode_one_shot(decoder, &sent.wire);
            prop_assert_eq!(outcome.verdict(), "MessageTooLarge");
            // Only messages within the limit were delivered before.
            prop_assert!(outcome.messages().iter().all(|m| m.len() as u64 <= max));
        }
        // Limits at or above what the stream needs accept it.
        let decoder = StreamDecoder::builder()
            .max_frame_payload(largest_frame.max(1026) + frame_margin)
            .max_message_size(largest_message + message_margin)
            .build();
        let outcome = decode_one_shot(decoder, &sent.wire);
        prop_assert!(matches!(outcome.verdict(), "clean" | "PeerAbort"));
    }
}

#[test]
fn an_empty_message_round_trips_as_an_empty_verified_message() {
    let head = common::head(Some(common::KEY), common::ATTEMPT);
    let mut enc = StreamEncoder::new(head);
    let mut wire = BytesMut::new();
    enc.message(b"", &mut wire).expect("empty");
    enc.push(b"", &mut wire).expect("empty push writes nothing");
    enc.finish_message(&mut wire).expect("empty");
    enc.end(&mut wire).expect("end");
    let stream = StreamDecoder::new().decode_all(&wire).expect("clean");
    assert_eq!(stream.messages.len(), 2);
    assert!(stream.messages.iter().all(|m| m.bytes().is_empty()));
    assert_eq!(stream.messages[1].summary().sha256, sha256(b""));
    // HEAD, 2 x MESSAGE_END, STREAM_END: empty pushes write no frame.
    assert_eq!(stream.summary.frames, 4);
}
