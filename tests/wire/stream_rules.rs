//! The stream rules of SPEC.md §3, §4 and §7, one by one, through the public API.

use crate::support::common;

use bytes::BytesMut;
use mcp_framing::FrameKind;
use mcp_framing::internals::frame::HEADER_LEN;
use mcp_framing::{
    Abort, AbortCode, AttemptId, DecodeError, Event, StreamDecoder, StreamEncoder, StreamState,
};

use common::vectors::single_message;
use common::{ATTEMPT, KEY, OK_MESSAGE, OTHER_KEY, Outcome, Raw, decode_one_shot, head};

fn decode(bytes: &[u8]) -> Outcome {
    decode_one_shot(StreamDecoder::new(), bytes)
}

/// Feeds `first`, drains the events, then feeds `second` and drains again.
fn decode_two_reads(first: &[u8], second: &[u8]) -> (Vec<Event>, DecodeError) {
    let mut decoder = StreamDecoder::new();
    let mut buf = BytesMut::from(first);
    let mut events = Vec::new();
    while let Some(event) = decoder.decode(&mut buf).expect("first read is valid") {
        events.push(event);
    }
    assert!(buf.is_empty());
    buf.extend_from_slice(second);
    let err = decoder.decode(&mut buf).unwrap_err();
    assert_eq!(decoder.decode_eof(&mut buf), Err(err.clone()));
    (events, err)
}

fn aborted_stream() -> Vec<u8> {
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(b"{\"partial\":").abort(4, b"upstream failed");
    raw.build()
}

#[test]
fn bytes_after_stream_end_in_the_same_read_are_trailing_data() {
    let mut wire = single_message();
    wire.extend_from_slice(b"xyz");
    let outcome = decode(&wire);
    assert!(matches!(outcome.events.last(), Some(Event::End(_))));
    assert_eq!(outcome.end, Err(DecodeError::TrailingData { len: 3 }));
}

#[test]
fn bytes_after_stream_end_in_a_later_read_are_trailing_data() {
    let (events, err) = decode_two_reads(&single_message(), b"\n");
    assert!(matches!(events.last(), Some(Event::End(_))));
    assert_eq!(err, DecodeError::TrailingData { len: 1 });
}

#[test]
fn bytes_after_abort_in_the_same_read_are_trailing_data() {
    let mut wire = aborted_stream();
    wire.extend_from_slice(&[0x9f, 0x4d]);
    let outcome = decode(&wire);
    assert!(matches!(outcome.events.last(), Some(Event::Aborted(_))));
    assert_eq!(outcome.end, Err(DecodeError::TrailingData { len: 2 }));
}

#[test]
fn bytes_after_abort_in_a_later_read_are_trailing_data() {
    let (events, err) = decode_two_reads(&aborted_stream(), b"late");
    assert!(matches!(events.last(), Some(Event::Aborted(_))));
    assert_eq!(err, DecodeError::TrailingData { len: 4 });
}

#[test]
fn a_peer_abort_is_an_event_then_a_peer_abort_error_at_end_of_input() {
    let outcome = decode(&aborted_stream());
    let abort = Abort::new(AbortCode::UpstreamFailed, "upstream failed");
    assert!(
        matches!(&outcome.events[..], [Event::Opened(_), Event::Chunk(_), Event::Aborted(a)] if *a == abort)
    );
    assert_eq!(outcome.end, Err(DecodeError::PeerAbort(abort)));
    assert!(
        outcome.messages().is_empty(),
        "the open message is discarded"
    );
}

#[test]
fn every_unknown_kind_is_rejected_at_its_header() {
    for kind in (0x00..=0x00).chain(0x07..=0x7f) {
        let mut raw = Raw::head(Some(KEY), ATTEMPT);
        let offset = raw.bytes.len() as u64;
        raw.header_claiming(kind, 5, &[]); // no payload: rejected before waiting for it
        let outcome = decode(&raw.bytes);
        assert_eq!(
            outcome.end,
            Err(DecodeError::UnknownFrameKind { kind, offset }),
            "kind {kind:#x}"
        );
    }
}

#[test]
fn every_ignorable_kind_is_checked_counted_and_skipped() {
    for kind in 0x80..=0xffu8 {
        let mut raw = Raw::head(Some(KEY), ATTEMPT);
        raw.frame(kind, &[kind; 3])
            .data(OK_MESSAGE)
            .frame(kind, &[])
            .message_end(OK_MESSAGE)
            .stream_end(1);
        let outcome = decode(&raw.bytes);
        assert_eq!(outcome.end, Ok(()), "kind {kind:#x}");
        assert_eq!(outcome.messages(), [OK_MESSAGE]);
        // Skipped: no event of their own; counted: in the frames and the sequence.
        assert_eq!(outcome.events.len(), 4);
        let Some(Event::End(summary)) = outcome.events.last() else {
            panic!("no end");
        };
        assert_eq!(summary.frames, 6);
    }
}

#[test]
fn an_ignorable_frame_is_checked_like_any_frame() {
    // Wrong payload CRC.
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.frame(0x90, b"ext");
    let at = raw.bytes.len() - 1;
    raw.bytes[at] ^= 0x20;
    assert_eq!(decode(&raw.bytes).verdict(), "PayloadChecksumMismatch");
    // Wrong sequence number.
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    let seq = raw.seq;
    raw.frame_with_seq(0x90, seq + 1, b"ext");
    assert_eq!(
        decode(&raw.bytes).end,
        Err(DecodeError::SequenceGap {
            expected: seq,
            found: seq + 1
        })
    );
    // Over the frame limit.
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.header_claiming(0xfe, 65_537, &[]);
    assert_eq!(
        decode(&raw.bytes).end,
        Err(DecodeError::FrameTooLarge {
            len: 65_537,
            max: 65_536
        })
    );
}

#[test]
fn control_frames_with_a_wrong_length_are_rejected_at_their_header() {
    let cases: [(u8, FrameKind, Vec<u32>); 6] = [
        (0x01, FrameKind::Head, vec![0, 16, 31, 33, 64, u32::MAX]),
        (0x02, FrameKind::Data, vec![0]),
        (0x03, FrameKind::MessageEnd, vec![0, 8, 39, 41, 1000]),
        (0x04, FrameKind::StreamEnd, vec![0, 4, 7, 9, 16]),
        (0x05, FrameKind::Abort, vec![0, 1, 1027, 65_536]),
        (0x06, FrameKind::KeepAlive, vec![1, 20, u32::MAX]),
    ];
    for (byte, kind, lens) in cases {
        for len in lens {
            // HEAD is checked as the first frame, the others after a valid HEAD.
            let mut raw = if byte == 0x01 {
                Raw::empty(ATTEMPT.initial_sequence())
            } else {
                Raw::head(Some(KEY), ATTEMPT)
            };
            raw.header_claiming(byte, len, &[]);
            assert_eq!(
                decode(&raw.bytes).end,
                Err(DecodeError::InvalidFrameLength { kind, len }),
                "{kind} of {len} bytes"
            );
        }
    }
}

#[test]
fn a_first_frame_other_than_head_is_unexpected() {
    for kind in [0x02u8, 0x03, 0x04, 0x05, 0x06, 0x80, 0xff] {
        let mut raw = Raw::empty(ATTEMPT.initial_sequence());
        raw.header_claiming(kind, 8, &[]);
        let outcome = decode(&raw.bytes);
        assert!(
            matches!(
                outcome.end,
                Err(DecodeError::UnexpectedFrame {
                    state: StreamState::AwaitingHead,
                    ..
                })
            ),
            "kind {kind:#x}: {:?}",
            outcome.end
        );
    }
}

#[test]
fn a_second_head_is_unexpected_between_and_inside_messages() {
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.frame(0x01, &common::head_payload(Some(KEY), ATTEMPT));
    assert_eq!(
        decode(&raw.bytes).end,
        Err(DecodeError::UnexpectedFrame {
            kind: FrameKind::Head,
            state: StreamState::BetweenMessages
        })
    );
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(b"{")
        .frame(0x01, &common::head_payload(Some(KEY), ATTEMPT));
    assert_eq!(
        decode(&raw.bytes).end,
        Err(DecodeError::UnexpectedFrame {
            kind: FrameKind::Head,
            state: StreamState::InMessage
        })
    );
}

#[test]
fn stream_end_inside_a_message_is_unexpected() {
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(OK_MESSAGE).data(b"{").stream_end(1);
    let outcome = decode(&raw.bytes);
    assert_eq!(outcome.messages(), [OK_MESSAGE]);
    assert_eq!(
        outcome.end,
        Err(DecodeError::UnexpectedFrame {
            kind: FrameKind::StreamEnd,
            state: StreamState::InMessage
        })
    );
}

#[test]
fn a_wrong_message_count_is_a_message_count_mismatch() {
    for declared in [0u64, 2, 3, u64::MAX] {
        let mut raw = Raw::head(Some(KEY), ATTEMPT);
        raw.message(OK_MESSAGE).stream_end(declared);
        assert_eq!(
            decode(&raw.bytes).end,
            Err(DecodeError::MessageCountMismatch {
                declared,
                received: 1
            })
        );
    }
}

#[test]
fn a_head_for_another_request_or_for_none_is_a_request_key_mismatch() {
    for (key, found) in [(Some(OTHER_KEY), Some(OTHER_KEY)), (None, None)] {
        let mut raw = Raw::head(key, ATTEMPT);
        raw.message(OK_MESSAGE).stream_end(1);
        let decoder = StreamDecoder::builder().expect_request_key(KEY).build();
        let outcome = decode_one_shot(decoder, &raw.bytes);
        assert!(
            outcome.events.is_empty(),
            "no Opened event for a foreign head"
        );
        assert_eq!(
            outcome.end,
            Err(DecodeError::RequestKeyMismatch {
                expected: KEY,
                found
            })
        );
    }
    // Without an expected key, any key (or none) is accepted and reported.
    let mut raw = Raw::head(Some(OTHER_KEY), ATTEMPT);
    raw.stream_end(0);
    let outcome = decode(&raw.bytes);
    assert_eq!(
        outcome.events[0],
        Event::Opened(head(Some(OTHER_KEY), ATTEMPT))
    );
}

#[test]
fn an_abort_reason_that_is_not_utf8_is_an_invalid_abort() {
    for reason in [&b"\xff"[..], b"ok then \xc3", b"\xed\xa0\x80 surrogate"] {
        let mut raw = Raw::head(Some(KEY), ATTEMPT);
        raw.abort(1, reason);
        let outcome = decode(&raw.bytes);
        assert_eq!(outcome.end, Err(DecodeError::InvalidAbort));
        assert!(
            !outcome
                .events
                .iter()
                .any(|e| matches!(e, Event::Aborted(_)))
        );
    }
}

#[test]
fn an_empty_abort_reason_and_every_reserved_code_are_reported_as_sent() {
    for code in [0u16, 5, 6, 700, u16::MAX] {
        let mut raw = Raw::head(Some(KEY), ATTEMPT);
        raw.abort(code, b"");
        let outcome = decode(&raw.bytes);
        let abort = Abort::new(AbortCode::from(code), "");
        assert_eq!(u16::from(abort.code), code);
        assert_eq!(outcome.end, Err(DecodeError::PeerAbort(abort)));
    }
}

#[test]
fn sequence_numbers_wrap_from_0xffffffff_to_0() {
    let mut id = [0x77u8; 16];
    id[..4].copy_from_slice(&u32::MAX.to_be_bytes());
    let attempt = AttemptId::from_bytes(id);
    let mut enc = StreamEncoder::builder()
        .frame_size(3)
        .build(head(Some(KEY), attempt));
    let mut wire = BytesMut::new();
    enc.message(OK_MESSAGE, &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    let seqs: Vec<u32> = common::frame_spans(&wire)
        .iter()
        .map(|s| u32::from_be_bytes(wire[s.start + 4..s.start + 8].try_into().unwrap()))
        .collect();
    assert_eq!(seqs, [u32::MAX, 0, 1, 2, 3, 4, 5]);
    let outcome = decode(&wire);
    assert_eq!(outcome.end, Ok(()));
    assert_eq!(outcome.messages(), [OK_MESSAGE]);

    // Across the wrap, a skipped frame is still a gap and a repeated one a replay.
    let mut raw = Raw::head(None, attempt);
    raw.frame_with_seq(0x06, 1, &[]);
    assert_eq!(
        decode(&raw.bytes).end,
        Err(DecodeError::SequenceGap {
            expected: 0,
            found: 1
        })
    );
    let mut raw = Raw::head(None, attempt);
    raw.frame_with_seq(0x06, u32::MAX, &[]);
    assert_eq!(
        decode(&raw.bytes).end,
        Err(DecodeError::SequenceReplay {
            expected: 0,
            found: u32::MAX
        })
    );
}

#[test]
fn sequence_distances_are_classified_as_in_the_spec_table() {
    // SPEC.md §4: d = found - expected (mod 2^32); 1..=2^20 gap, 2^32-2^20..=2^32-1 replay,
    // anything else foreign.
    let window = 1u32 << 20;
    let expected = ATTEMPT.initial_sequence().wrapping_add(1);
    for (distance, kind) in [
        (1, "SequenceGap"),
        (2, "SequenceGap"),
        (window, "SequenceGap"),
        (window + 1, "ForeignFrame"),
        (1 << 31, "ForeignFrame"),
        (window.wrapping_neg() - 1, "ForeignFrame"),
        (window.wrapping_neg(), "SequenceReplay"),
        (u32::MAX - 1, "SequenceReplay"),
        (u32::MAX, "SequenceReplay"),
    ] {
        let mut raw = Raw::head(Some(KEY), ATTEMPT);
        let found = expected.wrapping_add(distance);
        raw.frame_with_seq(0x06, found, &[]);
        let err = decode(&raw.bytes).end.unwrap_err();
        assert_eq!(err.kind(), kind, "distance {distance:#x}");
        match err {
            DecodeError::SequenceGap {
                expected: e,
                found: f,
            }
            | DecodeError::SequenceReplay {
                expected: e,
                found: f,
            }
            | DecodeError::ForeignFrame {
                expected: e,
                found: f,
            } => assert_eq!((e, f), (expected, found)),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_head_whose_sequence_is_not_its_attempt_id_prefix_is_a_foreign_frame() {
    let mut raw = Raw::empty(0x1234_5678);
    raw.frame(0x01, &common::head_payload(Some(KEY), ATTEMPT))
        .stream_end(0);
    assert_eq!(
        decode(&raw.bytes).end,
        Err(DecodeError::ForeignFrame {
            expected: ATTEMPT.initial_sequence(),
            found: 0x1234_5678
        })
    );
}

#[test]
fn unframed_json_and_sse_text_are_rejected_at_the_first_byte() {
    for body in [
        &br#"{"jsonrpc":"2.0","id":1,"result":{}}"#[..],
        b"event: message\ndata: {\"jsonrpc\":\"2.0\"}\n\n",
        b": keep-alive comment line\n\n",
    ] {
        let outcome = decode(body);
        assert_eq!(
            outcome.end,
            Err(DecodeError::BadMagic {
                found: [body[0], body[1]],
                offset: 0
            })
        );
    }
}

#[test]
fn a_frame_of_another_version_is_rejected_also_mid_stream() {
    let mut wire = single_message();
    let at = 52;
    wire[at + 2] = 0x02;
    common::fix_header_crc(&mut wire, at);
    assert_eq!(
        decode(&wire).end,
        Err(DecodeError::UnsupportedVersion {
            version: 2,
            offset: at as u64
        })
    );
}

#[test]
fn checksum_errors_name_the_frame_and_both_crcs() {
    let wire = single_message();
    let mut corrupt = wire.clone();
    corrupt[72] ^= 0x01; // first DATA payload byte
    let Err(DecodeError::PayloadChecksumMismatch {
        kind,
        stored,
        computed,
        offset,
    }) = decode(&corrupt).end
    else {
        panic!("not a payload checksum error");
    };
    assert_eq!((kind, offset), (FrameKind::Data, 52));
    assert_eq!(stored, crc32fast::hash(&wire[72..83]));
    assert_eq!(computed, crc32fast::hash(&corrupt[72..83]));

    let mut corrupt = wire.clone();
    corrupt[52 + 9] ^= 0x80; // DATA length field
    let Err(DecodeError::HeaderChecksumMismatch {
        stored,
        computed,
        offset,
    }) = decode(&corrupt).end
    else {
        panic!("not a header checksum error");
    };
    assert_eq!(offset, 52);
    assert_eq!(stored, crc32fast::hash(&wire[52..68]));
    assert_eq!(computed, crc32fast::hash(&corrupt[52..68]));
    // A corrupted length is refused at the header: nothing waits for a payload.
    assert_eq!(
        decode(&corrupt[..52 + HEADER_LEN]).verdict(),
        "HeaderChecksumMismatch"
    );
}

#[test]
fn length_and_digest_are_checked_at_message_end() {
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(OK_MESSAGE)
        .message_end_raw(10, common::sha256(OK_MESSAGE));
    assert_eq!(
        decode(&raw.bytes).end,
        Err(DecodeError::LengthMismatch {
            index: 0,
            declared: 10,
            received: 11
        })
    );
    let other = common::sha256(b"{\"ok\":fals}");
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(b"[]")
        .data(OK_MESSAGE)
        .message_end_raw(11, other);
    let outcome = decode(&raw.bytes);
    assert_eq!(outcome.messages(), [&b"[]"[..]]);
    assert_eq!(
        outcome.end,
        Err(DecodeError::DigestMismatch {
            index: 1,
            declared: other,
            computed: common::sha256(OK_MESSAGE)
        })
    );
}
