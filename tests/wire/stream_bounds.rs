//! Per-stream bounds (SPEC.md §6.1, §15): a peer cannot hold a stream open for ever with frames
//! or lines that carry nothing, nor make one stream carry unbounded messages or bytes. Each bound
//! has a documented default, is checked at a header before its payload, and is a contract
//! violation.

use crate::support::common;

use bytes::BytesMut;
use common::{ATTEMPT, KEY, OK_MESSAGE, Raw};
use mcp_framing::{DecodeError, Event, Limits, StreamDecoder, internals::outcome::VerdictKind};

/// The documented defaults, which a decoder built without limits applies.
const DEFAULTS: Limits = Limits::DEFAULT;

/// Feeds `frames` one after the other (each a whole frame) and returns the first error with the
/// number of frames accepted before it.
fn first_error(
    mut decoder: StreamDecoder,
    frames: impl IntoIterator<Item = Vec<u8>>,
) -> Option<(u64, DecodeError)> {
    let mut buf = BytesMut::new();
    for (accepted, frame) in (0u64..).zip(frames) {
        buf.extend_from_slice(&frame);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(err) => {
                    assert_eq!(
                        decoder.outcome().verdict.kind(),
                        VerdictKind::ContractViolation,
                        "{err}"
                    );
                    return Some((accepted, err));
                }
            }
        }
    }
    None
}

/// The frames of a stream written by `build` on a [`Raw`] after HEAD, one `Vec` per frame.
fn frames_after_head(build: impl FnOnce(&mut Raw)) -> Vec<Vec<u8>> {
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    let head_len = raw.bytes.len();
    build(&mut raw);
    let bytes = raw.build();
    let mut frames = vec![bytes[..head_len].to_vec()];
    frames.extend(
        common::frame_spans(&bytes[head_len..])
            .into_iter()
            .map(|span| bytes[head_len + span.start..head_len + span.end].to_vec()),
    );
    frames
}

#[test]
fn a_peer_sending_only_keepalives_is_stopped_at_the_default_bound() {
    // Endless keep-alives: before this bound the decoder accepted them for ever.
    let frames = frames_after_head(|raw| {
        for _ in 0..10_000 {
            raw.keep_alive();
        }
    });
    let (accepted, err) = first_error(StreamDecoder::new(), frames).expect("stopped");
    assert_eq!(
        err,
        DecodeError::TooManyKeepAlives {
            max: DEFAULTS.max_keepalives_in_a_row
        }
    );
    assert_eq!(accepted, 1 + u64::from(DEFAULTS.max_keepalives_in_a_row)); // HEAD, then the run
}

#[test]
fn keepalives_between_messages_start_the_count_again() {
    let max = 3;
    let limits = Limits::default().max_keepalives_in_a_row(max);
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    for _ in 0..5 {
        for _ in 0..max {
            raw.keep_alive();
        }
        raw.message(OK_MESSAGE);
    }
    raw.stream_end(5);
    let stream = StreamDecoder::builder()
        .limits(limits)
        .build()
        .decode_all(&raw.build())
        .expect("runs of 3 pass a bound of 3");
    assert_eq!(stream.messages.len(), 5);
    // Inside a message, a DATA frame starts the count again too.
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    for piece in OK_MESSAGE.chunks(2) {
        raw.data(piece).keep_alive().keep_alive().keep_alive();
    }
    raw.message_end(OK_MESSAGE).stream_end(1);
    assert!(
        StreamDecoder::builder()
            .limits(limits)
            .build()
            .decode_all(&raw.build())
            .is_ok()
    );
}

#[test]
fn a_run_of_ignorable_frames_is_stopped_and_keepalives_do_not_break_it() {
    let frames = frames_after_head(|raw| {
        for i in 0..2 * DEFAULTS.max_ignorable_in_a_row {
            raw.frame(0x80, b"ext");
            if i % 100 == 0 {
                raw.keep_alive();
            }
        }
    });
    let (_, err) = first_error(StreamDecoder::new(), frames).expect("stopped");
    assert_eq!(
        err,
        DecodeError::TooManyIgnorableFrames {
            max: DEFAULTS.max_ignorable_in_a_row
        }
    );
}

#[test]
fn a_stream_of_more_messages_than_the_default_bound_is_refused_at_the_extra_message_end() {
    let count = DEFAULTS.max_messages + 1;
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    for _ in 0..count {
        raw.message(b"");
    }
    raw.stream_end(count);
    let wire = raw.build();
    let mut decoder = StreamDecoder::new();
    let mut buf = BytesMut::from(&wire[..]);
    let mut verified = 0u64;
    let err = loop {
        match decoder.decode_eof(&mut buf) {
            Ok(Some(Event::Message(_))) => verified += 1,
            Ok(Some(_)) => {}
            Ok(None) => panic!("{count} messages accepted"),
            Err(err) => break err,
        }
    };
    assert_eq!(
        err,
        DecodeError::TooManyMessages {
            max: DEFAULTS.max_messages
        }
    );
    assert_eq!(verified, DEFAULTS.max_messages);
    // One message fewer is a clean stream.
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    for _ in 0..DEFAULTS.max_messages {
        raw.message(b"");
    }
    raw.stream_end(DEFAULTS.max_messages);
    assert!(StreamDecoder::new().decode_all(&raw.build()).is_ok());
}

#[test]
fn the_stream_byte_bound_is_checked_at_the_header_before_its_payload_arrives() {
    assert_eq!(DEFAULTS.max_stream_bytes, 16 << 30);
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(&[b'x'; 1000]);
    let wire = raw.build();
    let limits = Limits::default().max_stream_bytes(1000);
    let mut decoder = StreamDecoder::builder().limits(limits).build();
    // HEAD (52 bytes) and the DATA header alone: the payload has not arrived.
    let mut buf = BytesMut::from(&wire[..52 + 20]);
    assert!(matches!(
        decoder.decode(&mut buf),
        Ok(Some(Event::Opened(_)))
    ));
    assert_eq!(
        decoder.decode(&mut buf),
        Err(DecodeError::StreamTooLarge {
            len: 52 + 20 + 1000,
            max: 1000
        })
    );
}

#[test]
fn a_client_policy_decoder_enforces_the_clients_own_bounds() {
    let discovery =
        mcp_framing::internals::contract::ServerDiscovery::from_initialize(&serde_json::json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"experimental": {"io.github.mcp-framing/framing":
                mcp_framing::contract::FramingContract::v1()}}
        }))
        .unwrap();
    let policy = mcp_framing::internals::contract::ClientPolicy::builder()
        .limits(Limits::default().max_keepalives_in_a_row(1))
        .build(&discovery)
        .unwrap();
    let frames = frames_after_head(|raw| {
        raw.keep_alive().keep_alive();
    });
    let (_, err) = first_error(policy.decoder(KEY).unwrap(), frames).expect("stopped");
    assert_eq!(err, DecodeError::TooManyKeepAlives { max: 1 });
}

#[cfg(feature = "sse")]
#[test]
fn an_sse_body_of_endless_comments_is_stopped_at_the_default_bound() {
    use mcp_framing::mapping::SseError;
    use mcp_framing::{BodyDecoder, BodyError, mapping::Mapping};
    let mut body = BodyDecoder::new(Mapping::Sse, StreamDecoder::new());
    // Keep-alive comments only, fed in reads of 100 lines, as a server that never answers.
    let mut fed = 0;
    let err = loop {
        body.feed(": keep-alive\n".repeat(100).as_bytes());
        fed += 100;
        match body.next_event() {
            Ok(None) => assert!(fed <= 10_000, "{fed} comment lines accepted"),
            Ok(Some(event)) => panic!("{event:?}"),
            Err(err) => break err,
        }
    };
    assert_eq!(
        err,
        BodyError::Sse(SseError::TooManyComments {
            max: DEFAULTS.max_sse_comments_in_a_row
        })
    );
    assert_eq!(
        body.outcome().verdict.kind(),
        VerdictKind::ContractViolation
    );
}

#[cfg(feature = "sse")]
#[test]
fn sse_comments_between_frame_events_start_the_count_again() {
    use mcp_framing::internals::sse::SseFrameEncoder;
    use mcp_framing::{BodyDecoder, mapping::Mapping};
    let wire = common::vectors::single_message();
    let events = SseFrameEncoder::new().to_events(&wire);
    // Between every two events, 4,000 comments: each run stays under the bound.
    let comments = ": keep-alive\n".repeat(4000);
    let text = std::str::from_utf8(&events).unwrap();
    let body = text.replace("\n\nevent:", &format!("\n\n{comments}event:"));
    let mut decoder = BodyDecoder::new(Mapping::Sse, StreamDecoder::new());
    decoder.feed(body.as_bytes());
    decoder.finish();
    while let Some(_event) = decoder.next_event().unwrap() {}
    assert!(decoder.outcome().is_clean());
    assert_eq!(decoder.sse_comments(), 3 * 4000);
}
