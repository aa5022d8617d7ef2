//! Outcomes of real decoded streams: the decoder's own end-of-stream results feed the table.

use crate::support::outcome_support;

use bytes::BytesMut;
#[cfg(feature = "codec")]
use futures::TryStreamExt;
use mcp_framing::FrameKind;
use mcp_framing::{
    Abort, AbortCode, DecodeError, Event, RequestKey, StreamDecoder, StreamEncoder, StreamHead,
    Truncation,
    outcome::{Outcome, Regime, Verdict},
};
use outcome_support::{complete_stream, framed_policy};
#[cfg(feature = "codec")]
use tokio_util::codec::FramedRead;

fn outcome_of(decoder: &mut StreamDecoder, input: &[u8]) -> Outcome {
    outcome_support::outcome_of(decoder, input)
}

#[test]
fn complete_stream_is_clean_in_regime_a_with_what_was_received() {
    let key = RequestKey::random();
    let (head, wire) = complete_stream(Some(key));
    let mut decoder = framed_policy().decoder(key).unwrap();
    let outcome = outcome_of(&mut decoder, &wire);
    assert_eq!(outcome.verdict, Verdict::Clean);
    assert_eq!(outcome.regime, Regime::A);
    assert_eq!(outcome.received.frames, 7);
    assert_eq!(outcome.received.bytes, wire.len() as u64);
    assert_eq!(outcome.received.messages, 2);
    assert_eq!(
        outcome.received.last_sequence,
        Some(head.initial_sequence().wrapping_add(6))
    );
    assert_eq!(outcome.head, Some(head));
}

#[test]
fn stream_cut_at_every_byte_is_abandoned_never_clean() {
    let (head, wire) = complete_stream(None);
    let mut kinds = std::collections::BTreeSet::new();
    for cut in 0..wire.len() {
        let mut decoder = StreamDecoder::new();
        let outcome = outcome_of(&mut decoder, &wire[..cut]);
        let Verdict::Abandoned { at: Some(at) } = outcome.verdict else {
            panic!("cut at {cut}: {:?}", outcome.verdict);
        };
        assert_eq!(outcome.regime, Regime::B, "cut at {cut}");
        assert_eq!(outcome.received.bytes, cut as u64, "cut at {cut}");
        if cut >= 52 {
            assert_eq!(outcome.head, Some(head), "cut at {cut}");
        }
        kinds.insert(match at {
            Truncation::NoFrame => "no frame",
            Truncation::InHeader { .. } => "in header",
            Truncation::InPayload { .. } => "in payload",
            Truncation::InMessage { .. } => "in message",
            Truncation::BetweenMessages { .. } => "between messages",
            _ => "other",
        });
    }
    let expected = [
        "between messages",
        "in header",
        "in message",
        "in payload",
        "no frame",
    ];
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), expected);
}

/// Offsets of each frame start in `complete_stream`, from the frame lengths.
fn frame_starts(wire: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at < wire.len() {
        starts.push(at);
        let len = u32::from_be_bytes(wire[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 20 + len;
    }
    starts
}

#[test]
fn stream_cut_inside_a_message_reports_frames_sequence_and_message_bytes() {
    let (head, wire) = complete_stream(None);
    let starts = frame_starts(&wire);
    // Cut after HEAD and the first DATA frame: inside the first message.
    let mut decoder = StreamDecoder::new();
    let outcome = outcome_of(&mut decoder, &wire[..starts[2]]);
    let first_chunk = br#"{"jsonrpc":"2.0","method":"notifications/progress","#.len() as u64;
    assert_eq!(
        outcome.verdict,
        Verdict::Abandoned {
            at: Some(Truncation::InMessage {
                message_bytes: first_chunk
            })
        }
    );
    assert_eq!(outcome.received.frames, 2);
    assert_eq!(
        outcome.received.last_sequence,
        Some(head.initial_sequence().wrapping_add(1))
    );
    assert_eq!(outcome.received.open_message_bytes, first_chunk);
    assert_eq!(outcome.received.messages, 0);
}

#[test]
fn stream_cut_between_messages_keeps_the_count_of_verified_messages() {
    let (_, wire) = complete_stream(None);
    let starts = frame_starts(&wire);
    // Everything but STREAM_END: both messages verified, the sentinel missing.
    let mut decoder = StreamDecoder::new();
    let outcome = outcome_of(&mut decoder, &wire[..starts[6]]);
    assert_eq!(
        outcome.verdict,
        Verdict::Abandoned {
            at: Some(Truncation::BetweenMessages { messages: 2 })
        }
    );
    assert_eq!((outcome.received.frames, outcome.received.messages), (6, 2));
    assert!(!outcome.is_clean());
}

#[test]
fn stream_cut_inside_a_payload_names_the_frame_kind() {
    let (_, wire) = complete_stream(None);
    let starts = frame_starts(&wire);
    let mut decoder = StreamDecoder::new();
    let outcome = outcome_of(&mut decoder, &wire[..starts[3] + 25]);
    assert_eq!(
        outcome.verdict,
        Verdict::Abandoned {
            at: Some(Truncation::InPayload {
                kind: FrameKind::MessageEnd,
                received: 5,
                declared: 40
            })
        }
    );
}

#[test]
fn empty_body_where_framing_was_promised_is_abandoned_before_any_frame() {
    let mut decoder = framed_policy().decoder(RequestKey::random()).unwrap();
    let outcome = outcome_of(&mut decoder, b"");
    assert_eq!(
        outcome.verdict,
        Verdict::Abandoned {
            at: Some(Truncation::NoFrame)
        }
    );
}

#[test]
fn aborted_stream_is_its_own_outcome_with_code_and_reason() {
    let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    let mut wire = BytesMut::new();
    enc.push(b"{\"partial\":", &mut wire).unwrap();
    enc.abort(AbortCode::Overloaded, "draining", &mut wire)
        .unwrap();
    let mut decoder = StreamDecoder::new();
    let outcome = outcome_of(&mut decoder, &wire);
    assert_eq!(
        outcome.verdict,
        Verdict::Aborted(Abort::new(AbortCode::Overloaded, "draining"))
    );
    assert_eq!(outcome.regime, Regime::A);
    assert_eq!(outcome.received.frames, 3);
    // The Aborted event itself (before end of input) gives the same verdict.
    let mut decoder = StreamDecoder::new();
    let mut buf = wire.clone();
    while !matches!(decoder.decode(&mut buf), Ok(Some(Event::Aborted(_)))) {}
    assert_eq!(decoder.outcome().verdict, outcome.verdict);
}

#[test]
fn unframed_json_body_where_framing_was_promised_is_a_contract_violation() {
    let mut decoder = framed_policy().decoder(RequestKey::random()).unwrap();
    let outcome = outcome_of(&mut decoder, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    assert!(
        matches!(
            &outcome.verdict,
            Verdict::ContractViolation(DecodeError::BadMagic { offset: 0, .. })
        ),
        "{:?}",
        outcome.verdict
    );
}

#[test]
fn unframed_sse_body_where_framing_was_promised_is_a_contract_violation() {
    let body = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
    let mut decoder = framed_policy().decoder(RequestKey::random()).unwrap();
    let outcome = outcome_of(&mut decoder, body);
    assert_eq!(outcome.verdict.name(), "contract_violation");
}

#[test]
fn response_echoing_another_request_key_is_cross_wired() {
    let mine = RequestKey::random();
    let theirs = RequestKey::random();
    let (_, wire) = complete_stream(Some(theirs));
    let mut decoder = framed_policy().decoder(mine).unwrap();
    let outcome = outcome_of(&mut decoder, &wire);
    assert_eq!(
        outcome.verdict,
        Verdict::CrossWired {
            expected: mine,
            found: Some(theirs)
        }
    );
}

#[test]
fn response_echoing_no_request_key_is_cross_wired() {
    let mine = RequestKey::random();
    let (_, wire) = complete_stream(None);
    let mut decoder = framed_policy().decoder(mine).unwrap();
    let outcome = outcome_of(&mut decoder, &wire);
    assert_eq!(
        outcome.verdict,
        Verdict::CrossWired {
            expected: mine,
            found: None
        }
    );
}

#[test]
fn retry_attempt_with_the_same_key_from_another_backend_is_clean() {
    let key = RequestKey::random();
    let policy = framed_policy();
    let (first, _) = complete_stream(Some(key));
    let (second, wire) = complete_stream(Some(key));
    assert_ne!(first.attempt_id, second.attempt_id);
    let mut decoder = policy.decoder(key).unwrap();
    let outcome = outcome_of(&mut decoder, &wire);
    assert!(outcome.is_clean());
    assert_eq!(outcome.head.unwrap().attempt_id, second.attempt_id);
}

#[test]
fn stream_spliced_from_two_attempts_is_spliced() {
    let key = RequestKey::random();
    let (_, a) = complete_stream(Some(key));
    let (_, b) = complete_stream(Some(key));
    let starts = frame_starts(&a);
    // The first attempt up to its first message, then the second attempt's rest.
    let mut spliced = a[..starts[4]].to_vec();
    spliced.extend_from_slice(&b[starts[4]..]);
    let mut decoder = StreamDecoder::builder().expect_request_key(key).build();
    let outcome = outcome_of(&mut decoder, &spliced);
    assert!(
        matches!(
            outcome.verdict,
            Verdict::Spliced(DecodeError::ForeignFrame { .. })
        ),
        "{:?}",
        outcome.verdict
    );
    assert_eq!(outcome.received.messages, 1);
}

#[test]
fn flipped_payload_bit_is_corrupt() {
    let (_, mut wire) = complete_stream(None);
    let starts = frame_starts(&wire);
    wire[starts[1] + 25] ^= 0x10;
    let mut decoder = StreamDecoder::new();
    let outcome = outcome_of(&mut decoder, &wire);
    assert!(
        matches!(
            outcome.verdict,
            Verdict::Corrupt(DecodeError::PayloadChecksumMismatch { .. })
        ),
        "{:?}",
        outcome.verdict
    );
    assert_eq!(outcome.regime, Regime::B);
}

#[test]
fn bytes_after_the_sentinel_are_corrupt_not_clean() {
    let (_, mut wire) = complete_stream(None);
    wire.extend_from_slice(b"\n");
    let mut decoder = StreamDecoder::new();
    let outcome = outcome_of(&mut decoder, &wire);
    assert!(matches!(
        outcome.verdict,
        Verdict::Corrupt(DecodeError::TrailingData { .. })
    ));
}

#[test]
fn frame_over_the_negotiated_limit_is_a_contract_violation() {
    let key = RequestKey::random();
    let policy = mcp_framing::internals::contract::ClientPolicy::builder()
        .build(&outcome_support::discovery(
            "discover_framed_small_limits.json",
        ))
        .unwrap();
    let mut enc = StreamEncoder::builder()
        .frame_size(20_000)
        .build(StreamHead::for_request(Some(key)));
    let mut wire = BytesMut::new();
    enc.message(&vec![b'x'; 20_000], &mut wire).unwrap();
    enc.end(&mut wire).unwrap();
    let mut decoder = policy.decoder(key).unwrap();
    let outcome = outcome_of(&mut decoder, &wire);
    assert!(
        matches!(
            outcome.verdict,
            Verdict::ContractViolation(DecodeError::FrameTooLarge {
                len: 20_000,
                max: 16_384
            })
        ),
        "{:?}",
        outcome.verdict
    );
}

#[test]
fn reader_that_stops_before_the_end_is_abandoned_not_clean() {
    let (_, wire) = complete_stream(None);
    let mut decoder = StreamDecoder::new();
    let mut buf = BytesMut::from(&wire[..]);
    let _first = decoder.decode(&mut buf);
    let outcome = decoder.outcome();
    assert_eq!(outcome.verdict, Verdict::Abandoned { at: None });
}

#[cfg(feature = "codec")]
#[test]
fn truncated_body_read_through_framed_read_is_abandoned_with_its_truncation_point() {
    let (_, wire) = complete_stream(None);
    let cut = &wire[..wire.len() - 28]; // no STREAM_END
    let outcome = tokio_test::block_on(async {
        let mut frames = FramedRead::new(cut, StreamDecoder::new());
        while let Ok(Some(_)) = frames.try_next().await {}
        frames.decoder().outcome()
    });
    assert_eq!(
        outcome.verdict,
        Verdict::Abandoned {
            at: Some(Truncation::BetweenMessages { messages: 2 })
        }
    );
}

#[cfg(feature = "codec")]
#[test]
fn transport_error_mid_stream_is_abandoned_with_what_was_received() {
    let (_, wire) = complete_stream(None);
    let starts = frame_starts(&wire);
    let reader = tokio_test::io::Builder::new()
        .read(&wire[..starts[4]])
        .read_error(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "reset",
        ))
        .build();
    let outcome = tokio_test::block_on(async {
        let mut frames = FramedRead::new(reader, StreamDecoder::new());
        while let Ok(Some(_)) = frames.try_next().await {}
        frames.decoder().outcome()
    });
    assert_eq!(outcome.verdict, Verdict::Abandoned { at: None });
    assert_eq!((outcome.received.frames, outcome.received.messages), (4, 1));
}

#[test]
fn short_unframed_body_is_a_contract_violation_not_a_truncation() {
    use mcp_framing::{DecodeError, StreamDecoder};
    for body in [&br#"{"jsonrpc":"2.0"}"#[..], b"Bad Gateway", b"\x9fM\x07"] {
        let err = StreamDecoder::new().decode_all(body).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::BadMagic { offset: 0, .. }
                    | DecodeError::UnsupportedVersion { offset: 0, .. }
            ),
            "{body:?}: {err:?}"
        );
    }
    // A real framed prefix shorter than a header is still a truncation.
    let err = StreamDecoder::new()
        .decode_all(b"\x9fM\x01\x01")
        .unwrap_err();
    assert!(matches!(err, DecodeError::Truncated { .. }), "{err:?}");
}
