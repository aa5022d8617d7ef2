//! Every truncation point (SPEC.md §7): a strict prefix of a valid stream is never a clean end
//! with the sentinel, never yields a message whose MESSAGE_END is missing, and ends in
//! `Truncated` saying where, unless it ends after the stream's verified final response for a
//! decoder that expects the request key (delivered, §7 row 4).

use crate::support::common;

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, TryStreamExt};
use mcp_framing::FrameKind;
use mcp_framing::internals::frame::HEADER_LEN;
use mcp_framing::{DecodeError, Event, StreamDecoder, Truncation};
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

use common::vectors::{self, Vector, single_message};
use common::{ReadStep, ScriptedReader, decode_framed, decode_one_shot, frame_spans};

/// What SPEC.md §7 says a cut at `cut` must report, worked out from the frame layout alone.
fn expected_truncation(bytes: &[u8], cut: usize) -> (Truncation, u64, usize) {
    let mut messages = 0u64;
    let mut open: Option<u64> = None;
    let mut frames = 0usize;
    for span in frame_spans(bytes) {
        if cut == span.start {
            break;
        }
        if cut < span.end {
            let received = cut - span.start;
            let at = if received < HEADER_LEN {
                Truncation::InHeader { received }
            } else {
                let header: [u8; HEADER_LEN] = bytes[span.start..span.start + HEADER_LEN]
                    .try_into()
                    .expect("20 bytes");
                // The encoder's own frames: the fields as written.
                let header = mcp_framing::internals::frame::FrameHeader::read(&header);
                Truncation::InPayload {
                    kind: FrameKind::from_byte(header.kind).expect("kind"),
                    received: received - HEADER_LEN,
                    declared: header.len,
                }
            };
            return (at, messages, frames);
        }
        frames += 1;
        let payload = &bytes[span.start + HEADER_LEN..span.end];
        match bytes[span.start + 3] {
            0x02 => *open.get_or_insert(0) += payload.len() as u64,
            0x03 => {
                messages += 1;
                open = None;
            }
            _ => {}
        }
    }
    let at = match (cut, open) {
        (0, _) => Truncation::NoFrame,
        (_, Some(message_bytes)) => Truncation::InMessage { message_bytes },
        (_, None) => Truncation::BetweenMessages { messages },
    };
    (at, messages, frames)
}

fn valid_vectors() -> Vec<Vector> {
    vectors::all()
        .into_iter()
        .filter(Vector::is_valid)
        .collect()
}

/// The vector's decoder without its request-key check: §7 row 4 does not apply (SPEC.md §7.1).
fn keyless(vector: &Vector) -> StreamDecoder {
    StreamDecoder::builder()
        .limits(*vector.decoder().limits())
        .build()
}

#[test]
fn every_strict_prefix_of_every_valid_vector_is_truncated_where_it_was_cut() {
    for vector in valid_vectors() {
        let full = decode_one_shot(vector.decoder(), &vector.bytes);
        let full_messages = full.messages();
        // Which prefixes the keyed decoder delivers, from the frame layout (the generator's
        // rule, SPEC.md §7.1); the whole vector's own verdict is checked elsewhere.
        let delivered = vectors::frame_prefix_verdicts(
            &vector.bytes,
            vector.request_key.is_some(),
            vectors::PrefixVerdict::Clean,
        );
        for cut in std::iter::once(0).chain(common::cut_points(&vector.bytes)) {
            let (at, messages, frames) = expected_truncation(&vector.bytes, cut);
            let context = format!("{} cut at {cut}", vector.file);
            let keyed = decode_one_shot(vector.decoder(), &vector.bytes[..cut]);
            let outcome = decode_one_shot(keyless(&vector), &vector.bytes[..cut]);
            if delivered[cut] == vectors::PrefixVerdict::Delivered {
                // The final response and the messages before it, then the end.
                let Some(Event::End(end)) = keyed.events.last() else {
                    panic!("{context}: not delivered: {:?}", keyed.end);
                };
                assert!(keyed.is_clean() && !end.sentinel_seen, "{context}");
                assert_eq!(keyed.messages(), outcome.messages(), "{context}");
                assert_eq!(
                    (end.messages, end.bytes),
                    (messages, cut as u64),
                    "{context}"
                );
            } else {
                assert_eq!(
                    (&keyed.end, keyed.messages()),
                    (&outcome.end, outcome.messages()),
                    "{context}: the key changes a truncation"
                );
            }
            let Err(DecodeError::Truncated {
                at: found,
                progress,
            }) = &outcome.end
            else {
                panic!("{context}: {:?}", outcome.end);
            };
            assert_eq!(*found, at, "{context}");
            assert_eq!(progress.bytes, cut as u64, "{context}");
            assert_eq!(progress.frames, frames as u64, "{context}");
            assert_eq!(progress.messages, messages, "{context}");
            // Only messages whose MESSAGE_END arrived are delivered, and they are the stream's.
            let delivered = outcome.messages();
            assert_eq!(delivered.len() as u64, messages, "{context}");
            assert_eq!(delivered[..], full_messages[..delivered.len()], "{context}");
            assert!(
                !outcome
                    .events
                    .iter()
                    .any(|e| matches!(e, Event::End(_) | Event::Aborted(_))),
                "{context}: terminal event in a strict prefix"
            );
        }
    }
}

#[test]
fn every_strict_prefix_read_through_framed_read_with_pending_is_truncated_the_same_way() {
    for vector in valid_vectors().iter().filter(|v| v.bytes.len() <= 4096) {
        for cut in 0..vector.bytes.len() {
            let prefix = vector.bytes[..cut].to_vec();
            let one_shot = decode_one_shot(vector.decoder(), &prefix);
            let script = vec![ReadStep::Bytes(7), ReadStep::Pending, ReadStep::Bytes(13)];
            let framed = decode_framed(vector.decoder(), ScriptedReader::new(prefix, script));
            assert_eq!(framed, one_shot, "{} cut at {cut}", vector.file);
        }
    }
}

#[test]
fn a_stream_cut_right_after_a_complete_header_is_truncated_in_payload() {
    let wire = single_message();
    // HEAD (52 bytes), then the DATA frame's complete 20-byte header, no payload byte.
    let cut = &wire[..72];
    let err = StreamDecoder::new().decode_all(cut).unwrap_err();
    assert!(
        matches!(
            err,
            DecodeError::Truncated {
                at: Truncation::InPayload {
                    kind: FrameKind::Data,
                    received: 0,
                    declared: 11
                },
                ..
            }
        ),
        "{err:?}"
    );
    // The same through FramedRead: the codec's decode_eof does not turn it into a clean end.
    let outcome = decode_framed(StreamDecoder::new(), cut);
    assert_eq!(outcome.end, Err(err));
    assert!(matches!(outcome.events[..], [Event::Opened(_)]));
}

#[test]
fn length_delimited_codec_ends_cleanly_where_ours_reports_truncation() {
    // tokio-util's LengthDelimitedCodec: one frame announced, cut right after its 4-byte header.
    let mut sink = FramedWrite::new(Vec::new(), LengthDelimitedCodec::new());
    futures::executor::block_on(sink.send(Bytes::from_static(br#"{"ok":true}"#))).expect("send");
    let ldc_wire = sink.into_inner();
    let ldc_cut = &ldc_wire[..4];
    let ldc: Result<Vec<BytesMut>, _> = futures::executor::block_on(
        FramedRead::new(ldc_cut, LengthDelimitedCodec::new()).try_collect(),
    );
    // The peer codec reports a clean end with no frame: the cut is invisible.
    assert!(ldc.expect("clean end").is_empty());

    // Ours, cut at the same place (after the header of the frame carrying the message):
    let wire = single_message();
    let outcome = decode_framed(StreamDecoder::new(), &wire[..72]);
    assert!(matches!(
        outcome.end,
        Err(DecodeError::Truncated {
            at: Truncation::InPayload { .. },
            ..
        })
    ));
}

#[test]
fn a_cut_between_messages_still_delivers_the_verified_messages_and_reports_truncation() {
    let wire = single_message();
    let outcome = decode_one_shot(StreamDecoder::new(), &wire[..143]);
    assert_eq!(outcome.messages(), [Bytes::from_static(br#"{"ok":true}"#)]);
    assert!(matches!(
        outcome.end,
        Err(DecodeError::Truncated {
            at: Truncation::BetweenMessages { messages: 1 },
            ..
        })
    ));
}

#[test]
fn end_of_input_is_reported_again_after_a_truncation() {
    let wire = single_message();
    let mut decoder = StreamDecoder::new();
    let mut buf = BytesMut::from(&wire[..100]);
    while decoder.decode(&mut buf).expect("valid prefix").is_some() {}
    let first = decoder.decode_eof(&mut buf).unwrap_err();
    assert!(matches!(first, DecodeError::Truncated { .. }));
    assert!(!decoder.is_complete());
    // More bytes after the verdict do not revive the stream.
    buf.extend_from_slice(&wire[100..]);
    assert_eq!(decoder.decode(&mut buf), Err(first.clone()));
    assert_eq!(decoder.decode_eof(&mut buf), Err(first));
}
