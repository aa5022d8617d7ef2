//! `http::DedupeLayer` over tower services, without HTTP I/O (SPEC.md §17.10): a completion is
//! recorded even when the client goes away before, or while, the response is sent.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use mcp_framing::RequestKey;
use mcp_framing::dedupe::{Deduplicator, MemoryStore};
use mcp_framing::http::{DEDUPE_HEADER, DedupeLayer};
use tower_layer::Layer;
use tower_service::Service;

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

/// A tool that takes 150 ms and counts its executions; answers JSON or SSE.
#[derive(Clone)]
struct SlowTool {
    executions: Arc<AtomicUsize>,
    sse: bool,
}

impl Service<http::Request<Full<Bytes>>> for SlowTool {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Full<Bytes>>) -> Self::Future {
        let executions = self.executions.clone();
        let sse = self.sse;
        Box::pin(async move {
            let body = request.into_body().collect().await.unwrap().to_bytes();
            let id = serde_json::from_slice::<serde_json::Value>(&body).unwrap()["id"].clone();
            let result = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"done":true}}}}"#);
            if !sse {
                // The tool runs before the JSON response exists.
                tokio::time::sleep(Duration::from_millis(150)).await;
                executions.fetch_add(1, Ordering::SeqCst);
                return Ok(http::Response::builder()
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(result)).boxed_unsync())
                    .unwrap());
            }
            // SSE: headers at once, a notification, then the result once the tool finished.
            let events = futures::stream::unfold(0, move |step| {
                let (executions, result) = (executions.clone(), result.clone());
                async move {
                    let event = match step {
                        0 => "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n".to_owned(),
                        1 => {
                            tokio::time::sleep(Duration::from_millis(150)).await;
                            executions.fetch_add(1, Ordering::SeqCst);
                            format!("event: message\ndata: {result}\n\n")
                        }
                        _ => return None,
                    };
                    Some((
                        Ok::<_, Infallible>(http_body::Frame::data(Bytes::from(event))),
                        step + 1,
                    ))
                }
            });
            Ok(http::Response::builder()
                .header("content-type", "text/event-stream")
                .body(StreamBody::new(events).boxed_unsync())
                .unwrap())
        })
    }
}

fn request(key: RequestKey, id: u64) -> http::Request<Full<Bytes>> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow","arguments":{{}},"_meta":{{"io.github.mcp-framing/requestKey":"{key}"}}}}}}"#
    );
    http::Request::post("/mcp")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

async fn completion_survives_a_client_that_goes_away(sse: bool, read_headers: bool) {
    let executions = Arc::new(AtomicUsize::new(0));
    let dedup = Deduplicator::new(MemoryStore::new()).wait(Duration::ZERO);
    let mut service = DedupeLayer::new(dedup.clone()).layer(SlowTool {
        executions: executions.clone(),
        sse,
    });
    let key = RequestKey::random();
    // The client goes away: before the response head, or right after it (body never read).
    let first = service.call(request(key, 1));
    if read_headers {
        let response = first.await.unwrap();
        assert_eq!(response.headers()[DEDUPE_HEADER], "execute");
        drop(response);
    } else {
        let _ = tokio::time::timeout(Duration::from_millis(30), first).await;
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        executions.load(Ordering::SeqCst),
        1,
        "the tool ran to its end"
    );
    assert_eq!(
        dedup.stats().snapshot().completed,
        1,
        "and its result was recorded"
    );
    // The retry is replayed, not executed.
    let response = service.call(request(key, 2)).await.unwrap();
    assert_eq!(response.headers()[DEDUPE_HEADER], "replay");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        &body[..],
        br#"{"jsonrpc":"2.0","id":2,"result":{"done":true}}"#
    );
    assert_eq!(executions.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_json_response_is_recorded_when_the_client_leaves_before_the_headers() {
    completion_survives_a_client_that_goes_away(false, false).await;
}

#[tokio::test(start_paused = true)]
async fn an_sse_response_is_recorded_when_the_client_leaves_after_the_headers() {
    completion_survives_a_client_that_goes_away(true, true).await;
}

#[tokio::test(start_paused = true)]
async fn an_sse_response_is_recorded_when_the_client_leaves_before_the_headers() {
    completion_survives_a_client_that_goes_away(true, false).await;
}

#[tokio::test(start_paused = true)]
async fn requests_without_a_key_or_of_other_methods_pass_through() {
    let executions = Arc::new(AtomicUsize::new(0));
    let mut service = DedupeLayer::new(Deduplicator::new(MemoryStore::new())).layer(SlowTool {
        executions: executions.clone(),
        sse: false,
    });
    let unkeyed = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}"#;
    for _ in 0..2 {
        let request = http::Request::post("/mcp")
            .body(Full::new(Bytes::from(unkeyed)))
            .unwrap();
        let response = service.call(request).await.unwrap();
        assert!(response.headers().get(DEDUPE_HEADER).is_none());
        response.into_body().collect().await.unwrap();
    }
    assert_eq!(
        executions.load(Ordering::SeqCst),
        2,
        "unkeyed: executed every time"
    );
    // A malformed key header is rejected before anything runs.
    let request = http::Request::post("/mcp")
        .header("mcp-framing-request-key", "nope")
        .body(Full::new(Bytes::from(unkeyed)))
        .unwrap();
    assert_eq!(service.call(request).await.unwrap().status(), 400);
    assert_eq!(executions.load(Ordering::SeqCst), 2);
}
