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
use mcp_framing::http::DedupeLayer;
use mcp_framing::internals::http::DEDUPE_HEADER;
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

// ---------------------------------------------------------------------------------------------
// Hostile requests (SPEC.md §17.10).

/// A request body that counts the bytes it hands out, in 1 KiB frames, `total` bytes in all;
/// its size hint is exact when `declared`, else unknown.
struct CountingBody {
    total: usize,
    handed: Arc<AtomicUsize>,
    declared: bool,
}

impl http_body::Body for CountingBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let handed = self.handed.load(Ordering::SeqCst);
        if handed >= self.total {
            return Poll::Ready(None);
        }
        let n = (self.total - handed).min(1024);
        self.handed.fetch_add(n, Ordering::SeqCst);
        Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from(vec![b' '; n])))))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        if self.declared {
            http_body::SizeHint::with_exact(self.total as u64)
        } else {
            http_body::SizeHint::default()
        }
    }
}

fn counting_tool() -> (SlowTool, Arc<AtomicUsize>) {
    let executions = Arc::new(AtomicUsize::new(0));
    let tool = SlowTool {
        executions: executions.clone(),
        sse: false,
    };
    (tool, executions)
}

#[tokio::test(start_paused = true)]
async fn a_body_over_the_bound_is_answered_413_without_reading_past_it() {
    let (tool, executions) = counting_tool();
    let mut service = DedupeLayer::new(Deduplicator::new(MemoryStore::new()))
        .max_request_bytes(10 * 1024)
        .layer(tool);
    for declared in [true, false] {
        let handed = Arc::new(AtomicUsize::new(0));
        let body = CountingBody {
            total: 1 << 30, // a gigabyte, never read
            handed: handed.clone(),
            declared,
        };
        let response = service
            .call(http::Request::post("/mcp").body(body).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), 413, "declared: {declared}");
        let read = handed.load(Ordering::SeqCst);
        if declared {
            // Content-Length over the bound: refused before a byte is read.
            assert_eq!(read, 0);
        } else {
            // Read up to the frame that passes the bound, no further.
            assert_eq!(read, 11 * 1024);
        }
    }
    assert_eq!(executions.load(Ordering::SeqCst), 0);
}

/// Posts `body` through a deduplicating layer; returns the status, the JSON-RPC error code (if
/// the body is one) and the tool's executions.
async fn post(body: Vec<u8>, headers: &[(&str, String)]) -> (u16, Option<i64>, usize) {
    let (tool, executions) = counting_tool();
    let mut service = DedupeLayer::new(Deduplicator::new(MemoryStore::new())).layer(tool);
    let mut request = http::Request::post("/mcp");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = service
        .call(request.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let code = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["error"]["code"].as_i64());
    (status, code, executions.load(Ordering::SeqCst))
}

fn keyed_request(key: RequestKey, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"slow","arguments":{arguments},"_meta":{{"io.github.mcp-framing/requestKey":"{key}"}}}}}}"#
    )
}

#[tokio::test(start_paused = true)]
async fn deeply_nested_json_is_answered_with_a_json_rpc_parse_error_and_nothing_runs() {
    let key = RequestKey::random();
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let body = keyed_request(key, &format!(r#"{{"x":{deep}}}"#));
    assert_eq!(post(body.into_bytes(), &[]).await, (400, Some(-32700), 0));
    // Just inside the bound: identified and executed.
    let nested = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let body = keyed_request(key, &format!(r#"{{"x":{nested}}}"#));
    assert_eq!(post(body.into_bytes(), &[]).await, (200, None, 1));
}

#[tokio::test(start_paused = true)]
async fn a_body_that_is_not_utf8_or_not_json_is_answered_with_a_json_rpc_parse_error() {
    let key = RequestKey::random();
    let mut not_utf8 = keyed_request(key, r#"{"to":"XX"}"#).into_bytes();
    let at = not_utf8.windows(2).position(|w| w == b"XX").unwrap();
    not_utf8[at] = 0xff;
    for body in [not_utf8, b"{\"jsonrpc\":\"2.0\",".to_vec(), b"".to_vec()] {
        assert_eq!(post(body, &[]).await, (400, Some(-32700), 0));
    }
}

#[tokio::test(start_paused = true)]
async fn duplicate_member_names_at_any_depth_are_refused_as_a_parse_error() {
    let key = RequestKey::random();
    // In the arguments (which one would the tool read?), in params, at the top level.
    let bodies = [
        keyed_request(key, r#"{"to":"bob","to":"eve"}"#),
        keyed_request(key, r#"{"to":"bob"}"#).replace(r#""name":"slow","#, r#""name":"slow","name":"other","#),
        keyed_request(key, "{}").replace(r#""id":1,"#, r#""id":1,"id":2,"#),
        // Unkeyed requests too: the layer reads every POST body the same way.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"a":1,"a":1}}}"#.to_owned(),
    ];
    for body in bodies {
        assert_eq!(
            post(body.clone().into_bytes(), &[]).await,
            (400, Some(-32700), 0),
            "{body}"
        );
    }
    // The same names in different objects are not duplicates.
    let body = keyed_request(key, r#"{"to":{"to":"bob"},"cc":{"to":"eve"}}"#);
    assert_eq!(post(body.into_bytes(), &[]).await, (200, None, 1));
}

#[tokio::test(start_paused = true)]
async fn a_header_key_that_differs_from_the_meta_key_is_answered_400_and_nothing_runs() {
    let body = keyed_request(RequestKey::random(), "{}");
    let other = RequestKey::random().to_string();
    let (status, _, executions) = post(
        body.clone().into_bytes(),
        &[("mcp-framing-request-key", other)],
    )
    .await;
    assert_eq!((status, executions), (400, 0));
}

/// An inner service that answers `204` to anything (it never reads the body).
#[derive(Clone)]
struct NoContent;

impl Service<http::Request<Full<Bytes>>> for NoContent {
    type Response = http::Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<Full<Bytes>>) -> Self::Future {
        let response = http::Response::builder().status(204).body(Full::default());
        std::future::ready(Ok(response.unwrap()))
    }
}

#[tokio::test(start_paused = true)]
async fn requests_that_are_not_posts_pass_through_with_their_empty_bodies() {
    let mut service = DedupeLayer::new(Deduplicator::new(MemoryStore::new())).layer(NoContent);
    for method in [http::Method::GET, http::Method::DELETE] {
        let request = http::Request::builder()
            .method(method.clone())
            .uri("/mcp")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = service.call(request).await.unwrap();
        assert_eq!(response.status(), 204, "{method} reaches the inner service");
    }
    // A POST with the same empty body is not one JSON text.
    let request = http::Request::post("/mcp")
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(service.call(request).await.unwrap().status(), 400);
}
