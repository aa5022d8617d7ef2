//! `FramingLayer` around a hand-written inner service whose SSE body is scripted: keep-alive
//! comments become KEEPALIVE frames, a failing inner body becomes ABORT, an inner body that ends
//! before the final response becomes ABORT, never a clean sentinel; results up to exactly the
//! message limit pass in both mappings, one byte more is an ABORT with the too-large code. Framing
//! every response in the compatible mapping keeps the inner bytes and never sends a message
//! without its record.

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use mcp_framing::http::{Delivery, ReceiveError, VerifiedResponse};
use mcp_framing::rmcp_http::FramingLayer;
use mcp_framing::{AbortCode, BodyError, DecodeError, Event, RequestKey, StreamDecoder};
use tower_layer::Layer;
use tower_service::Service;

type Piece = Result<Frame<Bytes>, String>;
type ScriptedBody = StreamBody<stream::Iter<std::vec::IntoIter<Piece>>>;

/// An inner service that answers every request with a body of `content_type` made of `pieces`
/// (an `Err` piece makes the body fail there).
#[derive(Clone)]
struct Inner {
    content_type: &'static str,
    pieces: Vec<Result<Bytes, String>>,
}

impl Inner {
    /// An SSE body scripted piece by piece.
    fn scripted(script: Vec<Result<&'static str, &'static str>>) -> Self {
        let pieces = script
            .into_iter()
            .map(|piece| match piece {
                Ok(text) => Ok(Bytes::from_static(text.as_bytes())),
                Err(err) => Err(err.to_owned()),
            })
            .collect();
        Self {
            content_type: "text/event-stream",
            pieces,
        }
    }

    /// `body` in 64 KiB pieces, as a server writes a large response.
    fn chunked(content_type: &'static str, body: Bytes) -> Self {
        let pieces = (0..body.len())
            .step_by(64 * 1024)
            .map(|at| Ok(body.slice(at..(at + 64 * 1024).min(body.len()))))
            .collect();
        Self {
            content_type,
            pieces,
        }
    }
}

// Any request body: the layer hands its inner service the request body wrapped (`RequestBody`).
impl<B> Service<Request<B>> for Inner {
    type Response = Response<ScriptedBody>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<B>) -> Self::Future {
        let pieces: Vec<Piece> = self
            .pieces
            .iter()
            .map(|piece| piece.clone().map(Frame::data))
            .collect();
        let response = Response::builder()
            .header("content-type", self.content_type)
            .body(StreamBody::new(stream::iter(pieces)))
            .unwrap();
        std::future::ready(Ok(response))
    }
}

/// Sends an opted-in request (binary mapping) through the layer; returns the decoded events and
/// the stream's end (`Ok(())` for a clean end).
async fn through_layer(
    script: Vec<Result<&'static str, &'static str>>,
) -> (Vec<Event>, Result<(), DecodeError>) {
    through_layer_from(Inner::scripted(script)).await
}

/// [`through_layer`] with any inner service.
async fn through_layer_from(inner: Inner) -> (Vec<Event>, Result<(), DecodeError>) {
    let key = RequestKey::random();
    let mut request = Request::builder().method("POST").uri("/mcp");
    for (name, value) in &mcp_framing::http::opt_in_headers(key, true) {
        request = request.header(name, value);
    }
    let mut service = FramingLayer::new().layer(inner);
    let response = service
        .call(request.body(String::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        "application/vnd.mcp-framing"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let mut decoder = StreamDecoder::builder().expect_request_key(key).build();
    let mut buf = bytes::BytesMut::from(&body[..]);
    let mut events = Vec::new();
    loop {
        match decoder.decode_eof(&mut buf) {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return (events, Ok(())),
            Err(err) => return (events, Err(err)),
        }
    }
}

/// The messages among `events`.
pub(crate) fn messages(events: &[Event]) -> Vec<Bytes> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Message(m) => Some(m.bytes().clone()),
            _ => None,
        })
        .collect()
}

const NOTIFICATION: &str = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":0.5}}\n\n";
const RESULT: &str = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";

#[tokio::test]
async fn frames_notifications_then_the_result_and_turns_comments_into_keep_alives() {
    let (events, end) = through_layer(vec![
        Ok("id: 0\nretry: 3000\n\n"),
        Ok(": ping\n\n"),
        Ok(NOTIFICATION),
        Ok(": ping\n\n"),
        Ok(RESULT),
    ])
    .await;
    end.unwrap();
    let messages = messages(&events);
    assert_eq!(messages.len(), 2);
    assert!(messages[0].starts_with(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\""));
    assert_eq!(&messages[1][..], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let keep_alives = events
        .iter()
        .filter(|e| matches!(e, Event::KeepAlive))
        .count();
    assert_eq!(keep_alives, 2);
}

#[tokio::test]
async fn data_that_is_not_utf8_is_framed_as_sse_reads_it_wherever_the_inner_body_is_cut() {
    // A notification over two data lines whose bytes that are not UTF-8 include a character cut
    // short, and a final response with some in a string: SSE reads them with replacement
    // characters, so the messages framed are those texts (JSON once read so: a text that is not
    // JSON is never framed), and the final response still ends the stream.
    let body: &[u8] = b"data: {\"jsonrpc\":\"2.0\",\n\
        data: \"method\":\"n\xff\xe2\x82\"}\n\n\
        data: {\"jsonrpc\":\"2.0\",\"id\":1,\n\
        data: \"result\":{\"text\":\"caf\xc3 \xa9 \xe2\x82\"}}\n\n";
    let expected = [
        "{\"jsonrpc\":\"2.0\",\n\"method\":\"n\u{fffd}\u{fffd}\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\n\"result\":{\"text\":\"caf\u{fffd} \u{fffd} \u{fffd}\"}}",
    ];
    for cut in 0..=body.len() {
        let inner = Inner {
            content_type: "text/event-stream",
            pieces: vec![
                Ok(Bytes::copy_from_slice(&body[..cut])),
                Ok(Bytes::copy_from_slice(&body[cut..])),
            ],
        };
        let (events, end) = through_layer_from(inner).await;
        end.unwrap_or_else(|err| panic!("cut at {cut}: {err}"));
        let messages = messages(&events);
        assert_eq!(
            messages,
            expected.map(|t| Bytes::from_static(t.as_bytes())),
            "cut at {cut}"
        );
    }
}

#[tokio::test]
async fn aborts_when_the_inner_body_fails() {
    let (events, end) =
        through_layer(vec![Ok(NOTIFICATION), Err("connection reset by upstream")]).await;
    let Err(DecodeError::PeerAbort(abort)) = end else {
        panic!("expected an abort, got {end:?}");
    };
    assert_eq!(abort.code, AbortCode::UpstreamFailed);
    assert!(
        abort.reason.contains("connection reset by upstream"),
        "{}",
        abort.reason
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::Message(_)))
            .count(),
        1
    );
}

#[tokio::test]
async fn aborts_when_the_inner_body_ends_before_the_final_response() {
    let (_, end) = through_layer(vec![Ok(NOTIFICATION)]).await;
    let Err(DecodeError::PeerAbort(abort)) = end else {
        panic!("expected an abort, got {end:?}");
    };
    assert!(
        abort.reason.contains("before its final response"),
        "{}",
        abort.reason
    );
}

/// A `tools/call` result message of exactly `len` bytes.
fn result_of_len(len: usize) -> String {
    let head = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#;
    let tail = r#""}]}}"#;
    format!("{head}{}{tail}", "x".repeat(len - head.len() - tail.len()))
}

/// The inner answer carrying `message`: an rmcp SSE event, or a JSON body.
fn answer(message: &str, sse: bool) -> Inner {
    if sse {
        let event = format!("id: 0\nretry: 3000\n\nevent: message\ndata: {message}\n\n");
        Inner::chunked("text/event-stream", Bytes::from(event))
    } else {
        Inner::chunked("application/json", Bytes::from(message.to_owned()))
    }
}

/// Sends an opted-in request through `layer` around `inner` and verifies the response as a
/// client does (`VerifiedResponse`, headers first) with `decoder`.
async fn verified_through(
    layer: FramingLayer,
    inner: Inner,
    binary: bool,
    decoder: mcp_framing::DecoderBuilder,
) -> (
    Vec<mcp_framing::VerifiedMessage>,
    Result<(), ReceiveError<String>>,
) {
    verified_with_limits(layer, inner, binary, decoder, None).await
}

/// [`verified_through`], the request announcing `limits` in `Mcp-Framing-Limits` when given.
async fn verified_with_limits(
    layer: FramingLayer,
    inner: Inner,
    binary: bool,
    decoder: mcp_framing::DecoderBuilder,
    limits: Option<&str>,
) -> (
    Vec<mcp_framing::VerifiedMessage>,
    Result<(), ReceiveError<String>>,
) {
    let key = RequestKey::random();
    let mut headers = mcp_framing::http::opt_in_headers(key, binary);
    match limits {
        Some(limits) => headers.insert("mcp-framing-limits", limits.parse().unwrap()),
        // As a client that does not announce its limits.
        None => headers.remove("mcp-framing-limits"),
    };
    let mut request = Request::builder().method("POST").uri("/mcp");
    for (name, value) in &headers {
        request = request.header(name, value);
    }
    let response = layer
        .layer(inner)
        .call(request.body(String::new()).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let mut verified = VerifiedResponse::from_headers(
        body.into_data_stream(),
        &parts.headers,
        decoder.expect_request_key(key).build(),
    )
    .expect("a framed response");
    let mut messages = Vec::new();
    while let Some(item) = verified.next().await {
        match item {
            Ok(Delivery::Message(message)) => messages.push(message),
            Ok(_) => return (messages, Ok(())),
            Err(err) => return (messages, Err(err)),
        }
    }
    panic!("a verified response ends with Complete or an error");
}

#[tokio::test]
async fn large_tool_results_pass_through_the_layer_up_to_exactly_the_message_limit() {
    // Before, the layer parsed rmcp's SSE with a 256 KiB event bound: a 300 KiB result came
    // back as an ABORT "internal error: SSE event data exceeds 262144 bytes", retried for ever.
    let limit = mcp_framing::internals::limits::DEFAULT_MAX_MESSAGE_SIZE as usize;
    for len in [300 * 1024, 4 << 20, limit] {
        let message = result_of_len(len);
        for sse in [true, false] {
            for binary in [true, false] {
                let (messages, end) = verified_through(
                    FramingLayer::new(),
                    answer(&message, sse),
                    binary,
                    StreamDecoder::builder(),
                )
                .await;
                let what = format!("{len} bytes, inner SSE {sse}, binary {binary}");
                end.unwrap_or_else(|err| panic!("{what}: {err}"));
                assert_eq!(messages.len(), 1, "{what}");
                assert_eq!(messages[0].bytes(), message.as_bytes(), "{what}");
            }
        }
    }
}

#[tokio::test]
async fn a_tool_result_one_byte_over_the_message_limit_is_an_abort_with_the_too_large_code() {
    for (limit, layer) in [
        (
            mcp_framing::internals::limits::DEFAULT_MAX_MESSAGE_SIZE,
            FramingLayer::new(),
        ),
        (1 << 20, FramingLayer::new().max_message_size(1 << 20)),
    ] {
        let message = result_of_len(limit as usize + 1);
        for sse in [true, false] {
            for binary in [true, false] {
                let what = format!("limit {limit}, inner SSE {sse}, binary {binary}");
                let (messages, end) = verified_through(
                    layer,
                    answer(&message, sse),
                    binary,
                    StreamDecoder::builder(),
                )
                .await;
                assert!(messages.is_empty(), "{what}");
                let Err(ReceiveError::Invalid(BodyError::Decode(DecodeError::PeerAbort(abort)))) =
                    end
                else {
                    panic!("{what}: expected an ABORT, got {end:?}");
                };
                assert_eq!(abort.code, AbortCode::MessageTooLarge, "{what}: {abort}");
                assert!(abort.reason.contains(&limit.to_string()), "{what}: {abort}");
            }
        }
    }
}

#[tokio::test]
async fn the_client_sse_event_bound_follows_its_frame_limit() {
    // Frames of 1 MiB travel in SSE events of about 1.4 MiB of base64: a client whose decoder
    // accepts such frames accepts their events (before, its event bound was a fixed 256 KiB).
    let message = result_of_len(3 << 20);
    let (messages, end) = verified_through(
        FramingLayer::new().frame_size(1 << 20),
        answer(&message, true),
        false,
        StreamDecoder::builder().max_frame_payload(1 << 20),
    )
    .await;
    end.unwrap();
    assert_eq!(messages[0].bytes(), message.as_bytes());
}

/// Sends a request that did not opt in through a layer framing every response (the compatible
/// mapping, SPEC.md §18.8); returns the response's `Mcp-Framing` header, the body, and the body's
/// verdict (the events, then `Ok(())` for a clean end).
async fn through_compat_layer(
    layer: FramingLayer,
    inner: Inner,
) -> (String, Bytes, Vec<Event>, Result<(), String>) {
    let request = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("accept", "application/json, text/event-stream")
        .body(String::new())
        .unwrap();
    let mut service = layer.frame_all_responses(true).layer(inner);
    let response = service.call(request).await.unwrap();
    let framing = response.headers()["mcp-framing"]
        .to_str()
        .unwrap()
        .to_owned();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let mut compat = mcp_framing::internals::sse_compat::CompatDecoder::new();
    let mut buf = bytes::BytesMut::new();
    let fed = compat.feed(&body, &mut buf);
    compat.finish();
    let mut decoder = StreamDecoder::new();
    let mut events = Vec::new();
    let end = loop {
        let next = if fed.is_ok() {
            decoder.decode_eof(&mut buf)
        } else {
            decoder.decode(&mut buf)
        };
        match next {
            Ok(Some(event)) => events.push(event),
            Ok(None) => break fed.map_err(|err| err.to_string()),
            Err(err) => break Err(err.to_string()),
        }
    };
    (framing, body, events, end)
}

/// `body` without its `:mcp-framing` record lines.
fn without_records(body: &[u8]) -> Vec<u8> {
    body.split_inclusive(|&b| b == b'\n')
        .filter(|line| !line.starts_with(b":mcp-framing "))
        .flatten()
        .copied()
        .collect()
}

#[tokio::test]
async fn every_response_in_the_compatible_mapping_keeps_the_inner_bytes_and_frames_each_message() {
    let inner = [
        "data: \nid: 0\nretry: 3000\n\n",
        ":\n\n",
        "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",",
        "\"params\":{\"progressToken\":1,\"progress\":0.5}}\r\nid: 1\r",
        "\n\r\n",
        "event: message\n: a comment inside the event\n",
        "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nid: 2\n\n",
    ];
    let after = "data: {\"jsonrpc\":\"2.0\",\"method\":\"after/the/result\"}\n\n";
    let script = inner.iter().chain([&after]).map(|s| Ok(*s)).collect();
    let (framing, body, events, end) =
        through_compat_layer(FramingLayer::new(), Inner::scripted(script)).await;
    assert_eq!(framing, "1; mapping=compat");
    end.unwrap();
    // What a stock client reads: the inner bytes up to the final response, unchanged but for
    // the keep-alive comment, which became a record with a KEEPALIVE frame.
    let expected = inner.concat().replacen(":\n", "", 1);
    assert_eq!(without_records(&body), expected.into_bytes());
    assert!(events.iter().any(|e| matches!(e, Event::KeepAlive)));
    let messages = messages(&events);
    assert_eq!(messages.len(), 2);
    assert!(messages[0].ends_with(b"\"progress\":0.5}}"));
    assert_eq!(&messages[1][..], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
}

/// The events an SSE parser reads from `body`: (type, data).
fn sse_events(body: &[u8]) -> Vec<(Option<String>, String)> {
    let mut events = Vec::new();
    mcp_framing::internals::sse::SseParser::with_max_event_data(1 << 20)
        .feed(body, &mut events)
        .unwrap();
    events.into_iter().map(|e| (e.event, e.data)).collect()
}

#[tokio::test]
async fn every_response_in_the_compatible_mapping_passes_large_and_multi_line_events_byte_for_byte()
{
    let notification = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"data\":\"{}\"}}}}",
        "y".repeat(100_000)
    );
    let result = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"text\":\"{}\"}}}}",
        "z".repeat(300_000)
    );
    // A BOM; a large event in one piece; an event of two data lines, one with invalid UTF-8 (SSE
    // reads it with a replacement character) and CRLF line ends; a large final response cut into
    // pieces in the middle of its line.
    let first = format!("\u{feff}data: {notification}\nid: 1\n\n");
    let second: &[u8] = b"data:{\"jsonrpc\":\"2.0\",\r\ndata: \"method\":\"x\xff\"}\r\n\r\n";
    let last = format!("data: {result}\nid: 2\n\n");
    let inner_body = [first.as_bytes(), second, last.as_bytes()].concat();
    let mut pieces = vec![Ok(Bytes::from(first.clone()))];
    let rest = Bytes::from(inner_body[first.len()..].to_vec());
    pieces.extend(
        (0..rest.len())
            .step_by(7_000)
            .map(|at| Ok(rest.slice(at..(at + 7_000).min(rest.len())))),
    );
    let inner = Inner {
        content_type: "text/event-stream",
        pieces,
    };
    let (framing, body, events, end) = through_compat_layer(FramingLayer::new(), inner).await;
    assert_eq!(framing, "1; mapping=compat");
    end.unwrap();
    // What a stock client reads: the inner bytes, the BOM still first in the body.
    let bom = "\u{feff}".len();
    assert!(body[bom..].starts_with(b":mcp-framing "));
    assert!(without_records(&body[bom..]) == inner_body[bom..]);
    assert!(sse_events(&body) == sse_events(&inner_body));
    // What a framing client verifies: the same three messages.
    let messages = messages(&events);
    let data: Vec<_> = sse_events(&inner_body).into_iter().map(|e| e.1).collect();
    assert_eq!(messages, data);
    assert_eq!(
        &messages[1][..],
        "{\"jsonrpc\":\"2.0\",\n\"method\":\"x\u{fffd}\"}".as_bytes()
    );
}

#[tokio::test]
async fn every_response_in_the_compatible_mapping_aborts_rather_than_send_an_unframed_message() {
    let progress = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n";
    let abort_code = |events: &[Event]| {
        events.iter().find_map(|e| match e {
            Event::Aborted(abort) => Some(abort.code),
            _ => None,
        })
    };
    // The inner body ends, or fails, before the final response.
    for script in [
        vec![Ok(progress)],
        vec![Ok(progress), Err("connection reset")],
    ] {
        let (_, body, events, end) =
            through_compat_layer(FramingLayer::new(), Inner::scripted(script)).await;
        assert!(end.unwrap_err().contains("aborted"));
        assert_eq!(abort_code(&events), Some(AbortCode::UpstreamFailed));
        assert!(without_records(&body).starts_with(progress.as_bytes()));
    }
    // A message over the limit: ABORT code 5, and the event is not sent.
    let big = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}\n\n";
    let (_, body, events, _) = through_compat_layer(
        FramingLayer::new().max_message_size(64),
        Inner::scripted(vec![Ok(progress), Ok(big)]),
    )
    .await;
    assert_eq!(abort_code(&events), Some(AbortCode::MessageTooLarge));
    assert_eq!(without_records(&body), progress.as_bytes());
    // A comment line that never ends is bounded too.
    let endless: &'static str = Box::leak(format!(":{}", "x".repeat(70_000)).into_boxed_str());
    let (_, _, events, _) = through_compat_layer(
        FramingLayer::new().max_message_size(1024),
        Inner::scripted(vec![Ok(endless), Ok(endless)]),
    )
    .await;
    assert_eq!(abort_code(&events), Some(AbortCode::MessageTooLarge));
}

#[tokio::test]
async fn every_response_in_the_compatible_mapping_turns_a_json_answer_into_one_event() {
    let json = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#);
    let (framing, body, events, end) = through_compat_layer(
        FramingLayer::new(),
        Inner::chunked("application/json", json.clone()),
    )
    .await;
    assert_eq!(framing, "1; mapping=compat");
    end.unwrap();
    assert_eq!(
        without_records(&body),
        [&b"data: "[..], &json, b"\n\n"].concat()
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Message(m) if m.bytes() == &json))
    );
}

#[tokio::test]
async fn a_json_answer_an_event_cannot_carry_reaches_a_client_that_did_not_opt_in_unchanged() {
    // Pretty-printed with CRLF: an SSE event would turn the CR into a line break.
    let json = Bytes::from_static(b"{\r\n  \"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {}\r\n}");
    let request = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("accept", "application/json, text/event-stream")
        .body(String::new())
        .unwrap();
    let mut service = FramingLayer::new()
        .frame_all_responses(true)
        .layer(Inner::chunked("application/json", json.clone()));
    let response = service.call(request).await.unwrap();
    assert!(response.headers().get("mcp-framing").is_none());
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(
        response.into_body().collect().await.unwrap().to_bytes(),
        json
    );
}

#[tokio::test]
async fn the_layer_frames_within_the_limits_the_client_sent() {
    // SPEC.md §11.3, §16: a client that decodes with frames of at most 4 KiB and messages of at
    // most 64 KiB says so; the layer (16 KiB frames, 16 MiB messages of its own) honours the
    // smaller limits. Before, the client was never told: it got 16 KiB frames and blamed the
    // server (`FrameTooLarge`, a contract violation), and a message over its limit was its own
    // `MessageTooLarge` instead of the server's ABORT.
    let client = || {
        StreamDecoder::builder()
            .max_frame_payload(4096)
            .max_message_size(64 * 1024)
    };
    let limits = Some("frame=4096, message=65536");
    for sse in [true, false] {
        for binary in [true, false] {
            for len in [64 * 1024, 64 * 1024 + 1] {
                let what = format!("{len} bytes, inner SSE {sse}, binary {binary}");
                let message = result_of_len(len);
                let inner = answer(&message, sse);
                let (messages, end) =
                    verified_with_limits(FramingLayer::new(), inner, binary, client(), limits)
                        .await;
                if len == 64 * 1024 {
                    end.unwrap_or_else(|err| panic!("{what}: {err}"));
                    assert_eq!(messages[0].bytes(), message.as_bytes(), "{what}");
                    continue;
                }
                let Err(ReceiveError::Invalid(BodyError::Decode(DecodeError::PeerAbort(abort)))) =
                    end
                else {
                    panic!("{what}: expected the server's ABORT, got {end:?}");
                };
                assert_eq!(abort.code, AbortCode::MessageTooLarge, "{what}: {abort}");
            }
        }
    }
}

#[tokio::test]
async fn a_malformed_limits_header_is_a_bad_request() {
    for limits in [
        "frame=100",
        "frame=4096, frame=4096",
        "frame=lots",
        "message=-1",
        "frame",
    ] {
        let mut headers = mcp_framing::http::opt_in_headers(RequestKey::random(), true);
        headers.insert("mcp-framing-limits", limits.parse().unwrap());
        let mut request = Request::builder().method("POST").uri("/mcp");
        for (name, value) in &headers {
            request = request.header(name, value);
        }
        let request = request.body(String::new()).unwrap();
        let response = FramingLayer::new()
            .layer(answer("{}", false))
            .call(request)
            .await
            .unwrap();
        assert_eq!(response.status(), http::StatusCode::BAD_REQUEST, "{limits}");
    }
}
