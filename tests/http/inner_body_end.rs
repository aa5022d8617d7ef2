//! `FramingLayer` reads its inner body to the end once the final response went out, in every
//! mapping, so that an inner body that comes over HTTP (a proxy's upstream client) leaves its
//! connection reusable; before the final response, a client that goes away drops the inner body
//! unread, which is how the inner server learns that the request is cancelled.
//!
//! Before, the framed body ended at the final response and dropped the inner body there: the end
//! of the upstream's chunked body (sent a moment later, behind Nagle's algorithm) was never read,
//! so the upstream client closed the connection and `mcp-frame proxy` opened a new one for every
//! framed call (the cost is measured by `bash scripts/bench-proxy`).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::support::http_support::opt_in_headers_asking;
use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::FramingLayer;
use mcp_framing::{BodyDecoder, Event, RequestKey, StreamDecoder};
use tokio::sync::{mpsc, oneshot};
use tower_service::Service;

const FINAL: &str = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
const PROGRESS: &str = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n";

/// An inner SSE body fed through a channel, which says whether it was read to its end (`Ok`) or
/// dropped before (`Err`, its sender gone).
struct Watched {
    pieces: mpsc::UnboundedReceiver<Bytes>,
    ended: Option<oneshot::Sender<()>>,
}

impl Body for Watched {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.pieces.poll_recv(cx) {
            Poll::Ready(Some(piece)) => Poll::Ready(Some(Ok(Frame::data(piece)))),
            Poll::Ready(None) => {
                if let Some(ended) = self.ended.take() {
                    let _ = ended.send(());
                }
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// An inner service answering one request with its [`Watched`] body.
#[derive(Clone)]
struct Inner(Arc<Mutex<Option<Watched>>>);

impl<B> Service<Request<B>> for Inner {
    type Response = Response<Watched>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<B>) -> Self::Future {
        let body = self.0.lock().unwrap().take().expect("one request");
        let response = Response::builder()
            .header("content-type", "text/event-stream")
            .body(body)
            .unwrap();
        std::future::ready(Ok(response))
    }
}

/// How the request asks: opted in to a mapping, or not at all (the layer frames every response).
#[derive(Clone, Copy, Debug)]
enum Asked {
    OptIn(Mapping),
    Unsolicited,
}

const EVERY_WAY: [Asked; 4] = [
    Asked::OptIn(Mapping::Binary),
    Asked::OptIn(Mapping::Sse),
    Asked::OptIn(Mapping::Compat),
    Asked::Unsolicited,
];

/// A `tools/call` through the layer around an inner body that already holds `first`: the
/// layer's response body, the sender of the inner body's next pieces, and whether the inner
/// body was read to its end.
async fn call(
    asked: Asked,
    first: &str,
) -> (
    Response<mcp_framing::rmcp_http::FramingBody<Infallible>>,
    RequestKey,
    mpsc::UnboundedSender<Bytes>,
    oneshot::Receiver<()>,
) {
    let (send, pieces) = mpsc::unbounded_channel();
    let (ended, read_to_end) = oneshot::channel();
    send.send(Bytes::copy_from_slice(first.as_bytes())).unwrap();
    let inner = Inner(Arc::new(Mutex::new(Some(Watched {
        pieces,
        ended: Some(ended),
    }))));
    let key = RequestKey::random();
    let mut request = Request::post("/mcp");
    let layer = match asked {
        Asked::OptIn(mapping) => {
            for (name, value) in &opt_in_headers_asking(key, mapping) {
                request = request.header(name, value);
            }
            FramingLayer::new()
        }
        Asked::Unsolicited => {
            request = request.header("accept", "application/json, text/event-stream");
            FramingLayer::new().frame_all_responses(true)
        }
    };
    let response = crate::tool_call_through(layer, inner, request).await;
    (response, key, send, read_to_end)
}

/// Whether the inner body was read to its end (`true`) or dropped before (`false`); the bound
/// only fails the test, it synchronises nothing.
async fn read_to_end(signal: oneshot::Receiver<()>) -> bool {
    tokio::time::timeout(Duration::from_secs(30), signal)
        .await
        .expect("the inner body is read to its end or dropped")
        .is_ok()
}

#[tokio::test]
async fn after_the_final_response_the_inner_body_is_read_to_its_end_in_every_mapping() {
    for asked in EVERY_WAY {
        let (response, key, send, ended) = call(asked, FINAL).await;
        // The client has the whole framed response (its sentinel and the HTTP body's end) while
        // the inner body has not ended yet.
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let mapping = match asked {
            Asked::OptIn(mapping) => mapping,
            Asked::Unsolicited => Mapping::Compat,
        };
        let expected = match asked {
            Asked::OptIn(_) => StreamDecoder::builder().expect_request_key(key).build(),
            Asked::Unsolicited => StreamDecoder::new(),
        };
        let mut decoder = BodyDecoder::new(mapping, expected);
        decoder.feed(&body);
        decoder.finish();
        let mut messages = 0;
        while let Some(event) = decoder.next_event().unwrap() {
            messages += usize::from(matches!(event, Event::Message(_)));
        }
        assert_eq!(messages, 1, "{asked:?}");
        // Then the inner server ends its stream (the last chunk of a chunked body): the layer
        // reads it.
        send.send(Bytes::from_static(b": done\n\n")).unwrap();
        drop(send);
        assert!(
            read_to_end(ended).await,
            "{asked:?}: the inner body was dropped unread"
        );
    }
}

#[tokio::test]
async fn a_client_gone_before_the_final_response_drops_the_inner_body_unread() {
    for asked in EVERY_WAY {
        let (response, _key, send, ended) = call(asked, PROGRESS).await;
        let mut body = response.into_body();
        // The progress notification (and the head) reached the client, which then goes away.
        body.frame().await.unwrap().unwrap();
        drop(body);
        assert!(
            !read_to_end(ended).await,
            "{asked:?}: the inner body was read on"
        );
        drop(send);
    }
}
