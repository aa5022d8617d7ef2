//! `FramingLayer` sends a large inner message on as it arrives (binary and SSE mappings): its
//! DATA frames leave while the inner server is still writing it, its MESSAGE_END after its last
//! byte; a message that turns out not to be framed (not JSON-RPC, another request's answer, over
//! the limit) ends with an ABORT instead, never verified; bytes that are not UTF-8 are framed as
//! an SSE client reads them, as for a message framed whole.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::support::http_support::opt_in_headers_asking;
use bytes::Bytes;
use futures::StreamExt;
use futures::channel::mpsc;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::{FramingBody, FramingLayer};
use mcp_framing::{
    AbortCode, BodyDecoder, BodyError, DecodeError, Event, RequestKey, StreamDecoder,
};
use tower_service::Service;

use crate::http_layer::messages;

/// The mappings whose messages are sent on as they arrive (the compatible mapping writes a
/// message's record, its digest included, before its event: SPEC.md §18.4).
const STREAMED: [Mapping; 2] = [Mapping::Binary, Mapping::Sse];

/// An inner server answering one request (read whole first, as a server does) with a body fed
/// through a channel.
#[derive(Clone)]
struct Inner {
    content_type: &'static str,
    body: Arc<Mutex<Option<mpsc::UnboundedReceiver<Bytes>>>>,
}

impl<B> Service<Request<B>> for Inner
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    type Response = Response<BoxBody<Bytes, Infallible>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let pieces = self.body.lock().unwrap().take().expect("one request");
        let content_type = self.content_type;
        Box::pin(async move {
            // Read, so that the layer knows the request's id.
            let _ = request.into_body().collect().await;
            let body = http_body_util::StreamBody::new(
                pieces.map(|piece| Ok::<_, Infallible>(Frame::data(piece))),
            );
            Ok(Response::builder()
                .header("content-type", content_type)
                .body(BodyExt::boxed(body))
                .unwrap())
        })
    }
}

/// A `tools/call` (id 1) through `layer`, opted in to `mapping`, answered by an inner body of
/// `content_type` that already holds `first` (in those pieces): the framed body, a decoder for
/// it, and the sender of the inner body's next pieces.
async fn call<'a>(
    layer: FramingLayer,
    mapping: Mapping,
    content_type: &'static str,
    first: impl IntoIterator<Item = &'a [u8]>,
) -> (
    FramingBody<Infallible>,
    BodyDecoder,
    mpsc::UnboundedSender<Bytes>,
) {
    let (send, pieces) = mpsc::unbounded();
    for piece in first {
        send.unbounded_send(Bytes::copy_from_slice(piece)).unwrap();
    }
    let inner = Inner {
        content_type,
        body: Arc::new(Mutex::new(Some(pieces))),
    };
    let key = RequestKey::random();
    let mut request = Request::post("/mcp");
    for (name, value) in &opt_in_headers_asking(key, mapping) {
        request = request.header(name, value);
    }
    let response = crate::tool_call_through(layer, inner, request).await;
    let decoder = BodyDecoder::new(
        mapping,
        StreamDecoder::builder().expect_request_key(key).build(),
    );
    (response.into_body(), decoder, send)
}

/// Reads the framed body until the decoder has handed out part of a message (a DATA frame's
/// payload); the events so far. The bound only fails the test: it synchronises nothing.
async fn until_a_chunk(
    body: &mut FramingBody<Infallible>,
    decoder: &mut BodyDecoder,
) -> Vec<Event> {
    let mut events = Vec::new();
    let read = async {
        loop {
            while let Some(event) = decoder.next_event().unwrap() {
                let chunk = matches!(event, Event::Chunk(_));
                events.push(event);
                if chunk {
                    return;
                }
            }
            let frame = body.frame().await.expect("the body goes on").unwrap();
            decoder.feed(&frame.into_data().unwrap());
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("a DATA frame of the message leaves before its end arrives");
    events
}

/// The rest of the framed body, decoded: its events and the verdict.
async fn the_rest(
    body: FramingBody<Infallible>,
    mut decoder: BodyDecoder,
) -> (Vec<Event>, Result<(), BodyError>) {
    let rest = body.collect().await.unwrap().to_bytes();
    decoder.feed(&rest);
    decoder.finish();
    let mut events = Vec::new();
    loop {
        match decoder.next_event() {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return (events, Ok(())),
            Err(err) => return (events, Err(err)),
        }
    }
}

/// A final response for id 1 of about `len` bytes, a text full of `\n` escapes.
fn result(len: usize) -> String {
    let line = "a line of text, as a tool writes it, with an escaped line end\\n";
    let text = line.repeat(len / line.len() + 1);
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
    )
}

/// The inner body of `message` as an SSE event or a JSON body.
fn inner_body(sse: bool, message: &[u8]) -> (&'static str, Vec<u8>) {
    if sse {
        let body = [b"event: message\ndata: ", message, b"\n\n"].concat();
        ("text/event-stream", body)
    } else {
        ("application/json", message.to_vec())
    }
}

#[tokio::test]
async fn the_first_data_frame_of_a_large_message_leaves_before_the_inner_server_sent_its_end() {
    let message = result(200_000);
    for mapping in STREAMED {
        for sse in [true, false] {
            let (content_type, inner) = inner_body(sse, message.as_bytes());
            // All but the message's last 10 bytes.
            let cut = inner.len() - if sse { 12 } else { 10 };
            let (mut body, mut decoder, send) =
                call(FramingLayer::new(), mapping, content_type, [&inner[..cut]]).await;
            let events = until_a_chunk(&mut body, &mut decoder).await;
            assert!(messages(&events).is_empty(), "{mapping:?} sse {sse}");
            // Then the inner server writes the end: the message is verified, the stream clean.
            send.unbounded_send(Bytes::copy_from_slice(&inner[cut..]))
                .unwrap();
            drop(send);
            let (rest, end) = the_rest(body, decoder).await;
            end.unwrap_or_else(|err| panic!("{mapping:?} sse {sse}: {err}"));
            assert_eq!(messages(&rest), [Bytes::from(message.clone())]);
        }
    }
}

#[tokio::test]
async fn a_large_message_that_turns_out_not_to_be_framed_ends_with_an_abort_and_is_never_verified()
{
    let large = 100_000;
    let not_json_rpc = "not a JSON-RPC message, ".repeat(large / 24);
    let another_id = result(large).replacen(r#""id":1"#, r#""id":2"#, 1);
    let cases: [(&str, FramingLayer, String, &str, AbortCode); 4] = [
        (
            "not JSON-RPC",
            FramingLayer::new(),
            not_json_rpc,
            "",
            AbortCode::InternalError,
        ),
        (
            "another id",
            FramingLayer::new(),
            another_id,
            "",
            AbortCode::InternalError,
        ),
        (
            "over the limit",
            FramingLayer::new().max_message_size(64 * 1024),
            result(large),
            "",
            AbortCode::MessageTooLarge,
        ),
        (
            "another event type",
            FramingLayer::new(),
            result(large),
            "event: other\n",
            AbortCode::InternalError,
        ),
    ];
    for (case, layer, message, after, code) in cases {
        for mapping in STREAMED {
            for sse in [true, false] {
                if !after.is_empty() && !sse {
                    continue;
                }
                let (content_type, inner) = if sse {
                    let body = format!("data: {message}\n{after}\n");
                    ("text/event-stream", body.into_bytes())
                } else {
                    inner_body(false, message.as_bytes())
                };
                let (mut body, mut decoder, send) =
                    call(layer, mapping, content_type, [&inner[..40_000]]).await;
                let mut events = until_a_chunk(&mut body, &mut decoder).await;
                send.unbounded_send(Bytes::copy_from_slice(&inner[40_000..]))
                    .unwrap();
                drop(send);
                let (rest, end) = the_rest(body, decoder).await;
                events.extend(rest);
                assert!(
                    messages(&events).is_empty(),
                    "{case}, {mapping:?}, sse {sse}"
                );
                match end {
                    Err(BodyError::Decode(DecodeError::PeerAbort(abort))) => {
                        assert_eq!(abort.code, code, "{case}, {mapping:?}, sse {sse}");
                    }
                    other => panic!("{case}, {mapping:?}, sse {sse}: {other:?}"),
                }
            }
        }
    }
}

/// Large messages as inner bodies, and each as an SSE client reads it: SSE events with every line
/// ending (LF, CRLF, CR; a keep-alive comment before), a JSON body, and both with bytes that are
/// not UTF-8 after the first frame's worth (read with a replacement character, as a message
/// framed whole is).
fn large_bodies() -> Vec<(&'static str, Vec<u8>, String)> {
    let message = result(40_000);
    let mut not_utf8 = message.clone().into_bytes();
    not_utf8.splice(30_000..30_000, *b"\xff\xe2\x82");
    let read_as_sse = String::from_utf8_lossy(&not_utf8).into_owned();
    let sse = "text/event-stream";
    vec![
        (
            sse,
            format!("event: message\ndata: {message}\n\n").into_bytes(),
            message.clone(),
        ),
        (
            sse,
            format!("event: message\r\ndata:{message}\r\n\r\n").into_bytes(),
            message.clone(),
        ),
        (
            sse,
            format!(": keep-alive\rdata: {message}\r\r").into_bytes(),
            message.clone(),
        ),
        (
            sse,
            [b"data: ", &not_utf8[..], b"\n\n"].concat(),
            read_as_sse.clone(),
        ),
        // The body's first line (as rmcp writes a final response) and after a BOM.
        (
            sse,
            format!("data: {message}\n\n").into_bytes(),
            message.clone(),
        ),
        (
            sse,
            format!("\u{feff}data: {message}\n\n").into_bytes(),
            message.clone(),
        ),
        ("application/json", message.clone().into_bytes(), message),
        ("application/json", not_utf8, read_as_sse),
    ]
}

/// `inner` in `pieces` through the layer in `mapping`: clean, and its one message `expected`.
async fn framed_as(
    content_type: &'static str,
    pieces: Vec<&[u8]>,
    mapping: Mapping,
    expected: &str,
    what: &str,
) {
    let (body, decoder, send) = call(FramingLayer::new(), mapping, content_type, pieces).await;
    drop(send);
    let (events, end) = the_rest(body, decoder).await;
    end.unwrap_or_else(|err| panic!("{what}: {err}"));
    assert_eq!(
        messages(&events),
        [Bytes::from(expected.to_owned())],
        "{what}"
    );
}

#[tokio::test]
async fn a_large_message_is_framed_byte_for_byte_as_an_sse_client_reads_it_wherever_it_is_split() {
    for (content_type, inner, expected) in &large_bodies() {
        for piece in [1_000, 16 * 1024 + 1, 29_999, inner.len()] {
            for mapping in STREAMED {
                let what = format!("{content_type}, pieces of {piece}, {mapping:?}");
                framed_as(
                    content_type,
                    inner.chunks(piece).collect(),
                    mapping,
                    expected,
                    &what,
                )
                .await;
            }
        }
    }
}

#[tokio::test]
async fn a_large_message_cut_in_two_near_a_line_end_the_streaming_start_or_bytes_not_utf8_is_framed_byte_for_byte()
 {
    // Every cut in the places where what goes out early changes: the first line and its ending,
    // the first DATA frame's worth, the bytes that are not UTF-8, the last line's ending.
    for (content_type, inner, expected) in &large_bodies() {
        let len = inner.len();
        let cuts = (1..24)
            .chain(16 * 1024 - 4..16 * 1024 + 12)
            .chain(29_998..30_012)
            .chain(len - 12..len);
        for cut in cuts {
            for mapping in STREAMED {
                let what = format!("{content_type}, cut at {cut} of {len}, {mapping:?}");
                let pieces = vec![&inner[..cut], &inner[cut..]];
                framed_as(content_type, pieces, mapping, expected, &what).await;
            }
        }
    }
}

/// The compatible mapping reads a large message's data line as it arrives (its frames' CRC-32,
/// the SHA-256, its JSON-RPC reading), though its record and event leave after its end (SPEC.md
/// §18.4): wherever the inner body is split, the record verifies the event, byte for byte as an
/// SSE client reads it.
#[tokio::test]
async fn a_large_message_in_the_compatible_mapping_is_verified_wherever_it_is_split() {
    // SSE bodies: a JSON body is read whole before the response head (see `http_compat`).
    let bodies = large_bodies();
    let sse = bodies
        .iter()
        .filter(|(content_type, ..)| *content_type == "text/event-stream");
    for (content_type, inner, expected) in sse {
        let len = inner.len();
        for piece in [1_000, 16 * 1024 + 1, 29_999, len] {
            let what = format!("{content_type}, pieces of {piece}, compat");
            let pieces = inner.chunks(piece).collect();
            framed_as(content_type, pieces, Mapping::Compat, expected, &what).await;
        }
        let cuts = (1..24)
            .chain(16 * 1024 - 4..16 * 1024 + 12)
            .chain(29_998..30_012)
            .chain(len - 12..len);
        for cut in cuts {
            let what = format!("{content_type}, cut at {cut} of {len}, compat");
            let pieces = vec![&inner[..cut], &inner[cut..]];
            framed_as(content_type, pieces, Mapping::Compat, expected, &what).await;
        }
    }
}

/// A large message the compatible mapping reads as it arrives and then refuses is never in the
/// stream: the ABORT its refusal calls for, and no message.
#[tokio::test]
async fn a_large_message_in_the_compatible_mapping_that_turns_out_not_to_be_framed_ends_with_an_abort()
 {
    let large = 100_000;
    let not_json_rpc = "not a JSON-RPC message, ".repeat(large / 24);
    let another_id = result(large).replacen(r#""id":1"#, r#""id":2"#, 1);
    let cases: [(&str, FramingLayer, String, AbortCode); 3] = [
        (
            "not JSON-RPC",
            FramingLayer::new(),
            not_json_rpc,
            AbortCode::InternalError,
        ),
        (
            "another id",
            FramingLayer::new(),
            another_id,
            AbortCode::InternalError,
        ),
        (
            "over the limit",
            FramingLayer::new().max_message_size(64 * 1024),
            result(large),
            AbortCode::MessageTooLarge,
        ),
    ];
    for (case, layer, message, code) in cases {
        let inner = format!("data: {message}\n\n").into_bytes();
        let pieces = [&inner[..20_000], &inner[20_000..40_000], &inner[40_000..]];
        let (body, decoder, send) = call(layer, Mapping::Compat, "text/event-stream", pieces).await;
        drop(send);
        let (events, end) = the_rest(body, decoder).await;
        assert!(messages(&events).is_empty(), "{case}");
        match end {
            Err(BodyError::Decode(DecodeError::PeerAbort(abort))) => {
                assert_eq!(abort.code, code, "{case}");
            }
            other => panic!("{case}: {other:?}"),
        }
    }
}
