//! `MappingEncoder`, the one server-side writer of a framed body in any mapping (issue 18):
//! whatever the mapping and whoever writes through it (the encoder itself, `FramedBody`), the
//! messages decode as they were given, a message over the limit ends the stream with ABORT code
//! 5 and an ABORT reason is cut to its frame at a character boundary.

use bytes::{Bytes, BytesMut};
use futures::{StreamExt, stream};
use super::MappingEncoder;
use crate::http::FramedBody;
use crate::{
    Abort, AbortCode, BodyDecoder, BodyError, DecodeError, Event, Outgoing, StreamDecoder,
    StreamEncoder, StreamHead, mapping::Mapping,
};
use proptest::prelude::*;

#[test]
fn an_encoder_reports_its_mapping_and_head() {
    let head = StreamHead::for_request(None);
    let enc = MappingEncoder::new(Mapping::Compat, StreamEncoder::new(head));
    assert_eq!((enc.mapping(), enc.head()), (Mapping::Compat, head));
}

#[test]
fn a_compatible_message_given_in_pieces_is_open_until_finished_then_held_for_the_sentinel() {
    let head = StreamHead::for_request(None);
    let mut enc = MappingEncoder::new(Mapping::Compat, StreamEncoder::new(head));
    let mut body = BytesMut::new();
    enc.push(b"{}", &mut body).unwrap();
    assert!(enc.in_message() && body.is_empty()); // an event carries a whole message
    enc.finish_message(&mut body).unwrap();
    assert!(!enc.in_message() && body.is_empty()); // held: the sentinel may join its record
    enc.flush(&mut body).unwrap();
    assert!(body.ends_with(b"data: {}\n\n"));
}

#[test]
fn an_abort_given_as_a_value_finishes_the_stream() {
    let head = StreamHead::for_request(None);
    let mut enc = MappingEncoder::new(Mapping::Compat, StreamEncoder::new(head));
    assert!(!enc.is_finished());
    enc.abort_with(&Abort::new(AbortCode::Cancelled, ""), &mut BytesMut::new())
        .unwrap();
    assert!(enc.is_finished());
}

/// Decodes `body` in `mapping`: the messages, then the end (`Ok` for a clean one).
fn decode(mapping: Mapping, body: &[u8]) -> (Vec<Bytes>, Result<(), BodyError>) {
    let mut decoder = BodyDecoder::new(mapping, StreamDecoder::new());
    decoder.feed(body);
    decoder.finish();
    let mut messages = Vec::new();
    loop {
        match decoder.next_event() {
            Ok(Some(Event::Message(message))) => messages.push(message.bytes().clone()),
            Ok(Some(_)) => {}
            Ok(None) => return (messages, Ok(())),
            Err(err) => return (messages, Err(err)),
        }
    }
}

fn abort_of(end: Result<(), BodyError>) -> Abort {
    match end {
        Err(BodyError::Decode(DecodeError::PeerAbort(abort))) => abort,
        other => panic!("expected an ABORT, got {other:?}"),
    }
}

fn encoder(max_message_size: u64) -> StreamEncoder {
    StreamEncoder::builder()
        .frame_size(64)
        .max_message_size(max_message_size)
        .build(StreamHead::for_request(None))
}

/// What a producer hands over: a message whole or in pieces, or a keep-alive.
#[derive(Clone, Debug)]
enum Step {
    Message(String),
    Pieces(Vec<String>),
    KeepAlive,
}

fn step() -> impl Strategy<Value = Step> {
    // Messages an SSE event carries unchanged (no CR, not empty), multi-line ones included.
    let text = "[a-z{}\":, \n\u{e9}]{1,150}";
    prop_oneof![
        text.prop_map(Step::Message),
        proptest::collection::vec("[a-z{}\": \n]{1,40}", 1..4).prop_map(Step::Pieces),
        Just(Step::KeepAlive),
    ]
}

proptest! {
    #[test]
    fn every_mapping_decodes_to_the_messages_given_clean(steps in proptest::collection::vec(step(), 0..8)) {
        let expected: Vec<Bytes> = steps
            .iter()
            .filter_map(|step| match step {
                Step::Message(text) => Some(Bytes::from(text.clone())),
                Step::Pieces(pieces) => Some(Bytes::from(pieces.concat())),
                Step::KeepAlive => None,
            })
            .collect();
        for mapping in Mapping::ALL {
            let mut enc = MappingEncoder::new(mapping, encoder(1 << 20));
            let mut body = BytesMut::new();
            for step in &steps {
                match step {
                    Step::Message(text) => enc.message(text.as_bytes(), &mut body).unwrap(),
                    Step::Pieces(pieces) => {
                        for piece in pieces {
                            enc.push(piece.as_bytes(), &mut body).unwrap();
                        }
                        enc.finish_message(&mut body).unwrap();
                    }
                    Step::KeepAlive => enc.keep_alive(&mut body).unwrap(),
                }
            }
            enc.end(&mut body).unwrap();
            let (messages, end) = decode(mapping, &body);
            prop_assert_eq!(end, Ok(()), "{:?}", mapping);
            prop_assert_eq!(&messages, &expected, "{:?}", mapping);
        }
    }
}

#[tokio::test]
async fn a_message_over_the_limit_is_abort_code_5_in_every_mapping() {
    let big = Bytes::from(vec![b'x'; 101]);
    for mapping in Mapping::ALL {
        // Written with the encoder: refused whole, or past the limit in pieces.
        let mut enc = MappingEncoder::new(mapping, encoder(100));
        let mut body = BytesMut::new();
        enc.message(b"{}", &mut body).unwrap();
        let err = enc.message(&big, &mut body).unwrap_err();
        assert_eq!(enc.fail(&err, &mut body), Some(AbortCode::MessageTooLarge));
        let (messages, end) = decode(mapping, &body);
        assert_eq!(messages, [Bytes::from_static(b"{}")], "{mapping:?}");
        let abort = abort_of(end);
        assert_eq!(abort.code, AbortCode::MessageTooLarge, "{mapping:?}");
        assert_eq!(
            abort.reason,
            "message of at least 101 bytes exceeds the limit of 100"
        );

        // Through `FramedBody`, whole and in pieces.
        for items in [
            vec![Outgoing::Message(big.clone())],
            vec![
                Outgoing::Chunk(big.slice(..60)),
                Outgoing::Chunk(big.slice(60..)),
                Outgoing::FinishMessage,
            ],
        ] {
            let source = stream::iter(items.into_iter().map(Ok::<_, std::io::Error>));
            let chunks: Vec<Bytes> = FramedBody::new(source, encoder(100), mapping)
                .map(|chunk| chunk.unwrap())
                .collect()
                .await;
            let (messages, end) = decode(mapping, &chunks.concat());
            assert!(messages.is_empty(), "{mapping:?}");
            assert_eq!(
                abort_of(end).code,
                AbortCode::MessageTooLarge,
                "{mapping:?}"
            );
        }
    }
}

#[tokio::test]
async fn an_abort_reason_is_cut_to_its_frame_at_a_character_boundary_in_every_mapping() {
    // 1023 bytes of ASCII, then two-byte characters: the limit of 1024 falls inside the first.
    let reason = format!("{}{}", "r".repeat(1023), "é".repeat(10));
    for mapping in Mapping::ALL {
        let mut enc = MappingEncoder::new(mapping, encoder(1 << 20));
        let mut body = BytesMut::new();
        enc.abort(AbortCode::UpstreamFailed, &reason, &mut body)
            .unwrap();
        let abort = abort_of(decode(mapping, &body).1);
        assert_eq!(abort.reason, "r".repeat(1023), "{mapping:?}");

        // A source that fails with such a text, through `FramedBody`: the same cut.
        let failing = stream::iter([Err::<Outgoing, _>(std::io::Error::other(reason.clone()))]);
        let chunks: Vec<Bytes> = FramedBody::new(failing, encoder(1 << 20), mapping)
            .map(|chunk| chunk.unwrap())
            .collect()
            .await;
        let abort = abort_of(decode(mapping, &chunks.concat()).1);
        assert_eq!(
            (abort.code, abort.reason.len()),
            (AbortCode::InternalError, 1023),
            "{mapping:?}"
        );
    }
}

#[test]
fn a_message_an_event_cannot_carry_is_refused_in_the_compatible_mapping_alone() {
    for message in [&b"{\r}"[..], b"\xff", b""] {
        for mapping in Mapping::ALL {
            let mut enc = MappingEncoder::new(mapping, encoder(1 << 20));
            let mut body = BytesMut::new();
            let written = enc
                .message(message, &mut body)
                .and_then(|()| enc.end(&mut body));
            match (mapping, written) {
                (Mapping::Compat, Err(err)) => {
                    // Nothing of it was written; the stream ends with an ABORT (code 1).
                    assert_eq!(enc.fail(&err, &mut body), Some(AbortCode::InternalError));
                    let (messages, end) = decode(mapping, &body);
                    assert!(messages.is_empty());
                    assert_eq!(abort_of(end).code, AbortCode::InternalError);
                }
                (Mapping::Compat, Ok(())) => {
                    panic!("{message:?} written in the compatible mapping")
                }
                (_, written) => {
                    written.unwrap();
                    let (messages, end) = decode(mapping, &body);
                    assert_eq!(
                        (messages, end),
                        (vec![Bytes::copy_from_slice(message)], Ok(()))
                    );
                }
            }
        }
    }
}

#[test]
fn a_compatible_body_is_the_compatible_encoders_call_for_call_keep_alives_and_abort_included() {
    use crate::mapping::compat::CompatEncoder;
    let frames = || {
        let head = StreamHead {
            request_key: None,
            attempt_id: crate::AttemptId::from_bytes([7; 16]),
        };
        StreamEncoder::builder().frame_size(16).build(head)
    };
    let notification = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#;
    let response = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
    for abort in [false, true] {
        let mut body = BytesMut::new();
        let mut mapping = MappingEncoder::new(Mapping::Compat, frames());
        mapping.keep_alive(&mut body).unwrap();
        mapping.message(notification, &mut body).unwrap();
        mapping.message(response, &mut body).unwrap();
        mapping.keep_alive(&mut body).unwrap();
        let mut expected = BytesMut::new();
        let mut compat = CompatEncoder::new(frames());
        compat.keep_alive(&mut expected).unwrap();
        compat.message(notification, &mut expected).unwrap();
        compat.message(response, &mut expected).unwrap();
        compat.keep_alive(&mut expected).unwrap();
        if abort {
            mapping.abort(AbortCode::Cancelled, "gone", &mut body).unwrap();
            compat.abort(AbortCode::Cancelled, "gone", &mut expected).unwrap();
        } else {
            mapping.end(&mut body).unwrap();
            compat.end(&mut expected).unwrap();
        }
        assert_eq!(body, expected, "abort: {abort}");
    }
}
