//! `FramingLayer` around a hand-written inner service whose SSE body is scripted: keep-alive
//! comments become KEEPALIVE frames, a failing inner body becomes ABORT, an inner body that ends
//! before the final response becomes ABORT, never a clean sentinel.

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::stream;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use mcp_framing::rmcp_http::FramingLayer;
use mcp_framing::{AbortCode, DecodeError, Event, RequestKey, StreamDecoder};
use tower_layer::Layer;
use tower_service::Service;

type Piece = Result<Frame<Bytes>, String>;
type ScriptedBody = StreamBody<stream::Iter<std::vec::IntoIter<Piece>>>;

/// An inner service that answers every request with the scripted SSE body.
#[derive(Clone)]
struct Scripted(Vec<Result<&'static str, &'static str>>);

impl Service<Request<String>> for Scripted {
    type Response = Response<ScriptedBody>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        let pieces: Vec<Piece> = self
            .0
            .iter()
            .map(|piece| match piece {
                Ok(text) => Ok(Frame::data(Bytes::from_static(text.as_bytes()))),
                Err(err) => Err((*err).to_owned()),
            })
            .collect();
        let response = Response::builder()
            .header("content-type", "text/event-stream")
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
    let key = RequestKey::random();
    let mut request = Request::builder().method("POST").uri("/mcp");
    for (name, value) in &mcp_framing::http::opt_in_headers(key, true) {
        request = request.header(name, value);
    }
    let mut service = FramingLayer::new().layer(Scripted(script));
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
    let messages: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Message(m) => Some(m.bytes().clone()),
            _ => None,
        })
        .collect();
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
async fn aborts_when_the_inner_body_fails() {
    let (events, end) =
        through_layer(vec![Ok(NOTIFICATION), Err("connection reset by upstream")]).await;
    let Err(DecodeError::PeerAbort(abort)) = end else {
        panic!("expected an abort, got {end:?}");
    };
    assert_eq!(abort.code, AbortCode::InternalError);
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
