//! A framed 1 KiB response does not wait for a delayed ACK (issue 14), served by `axum::serve`
//! as is (TCP_NODELAY off: Nagle's algorithm on), through `FramingLayer` around rmcp and through
//! a handler answering with `FramedBody`, in both mappings. Before, the HEAD frame left alone and
//! the rest of a short response waited behind it for the client's ACK, delayed by up to 40 ms:
//! every other call took about 43 ms instead of a fraction of one.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::HeaderMap;
use axum::routing::post;
use futures_util::{StreamExt, stream};
use mcp_framing::http::{Delivery, FramedBody, OptIn, response_headers};
use mcp_framing::{Outgoing, StreamEncoder, StreamHead};

mod http_support;
#[path = "rmcp_support/mod.rs"]
mod rmcp_support;

const CALLS: usize = 20;

/// A `tools/call` of about 1 KiB of result.
fn small_call() -> serde_json::Value {
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "render_report",
        "arguments": {"title": "short", "body": "a short line of text\n".repeat(40)}}})
}

/// The non-rmcp path: a 1 KiB result framed with `FramedBody`.
async fn plain(headers: HeaderMap) -> axum::response::Response {
    let opt_in = OptIn::from_headers(&headers).unwrap().unwrap();
    let result = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(1024)
    );
    let source = stream::iter([Ok::<_, std::io::Error>(Outgoing::Message(result.into()))]);
    let body = FramedBody::new(
        source,
        StreamEncoder::new(StreamHead::for_request(opt_in.request_key)),
        opt_in.mapping(),
    );
    let mut response = axum::response::Response::new(Body::from_stream(body));
    response
        .headers_mut()
        .extend(response_headers(opt_in.mapping()));
    response
}

async fn server() -> SocketAddr {
    let app = Router::new()
        .nest_service("/mcp", rmcp_support::framed_service(16 * 1024))
        .route("/plain", post(plain));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // As is: no TCP_NODELAY on accepted sockets.
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// How long each of `CALLS` framed calls in a row took, on one kept-alive connection.
async fn call_times(url: &str, binary: bool) -> Vec<Duration> {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut times = Vec::new();
    for _ in 0..CALLS {
        let start = Instant::now();
        let mut verified = http_support::post_framed(&client, url, small_call(), binary)
            .await
            .unwrap();
        let mut result = 0;
        loop {
            match verified.next().await {
                Some(Ok(Delivery::Message(message))) => result = message.bytes().len(),
                Some(Ok(Delivery::Complete(_))) => break,
                other => panic!("{url}: {other:?}"),
            }
        }
        times.push(start.elapsed());
        assert!(
            (900..4096).contains(&result),
            "{url}: a result of {result} bytes"
        );
    }
    times
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_framed_call_waits_for_a_delayed_ack_with_nagle_on() {
    let addr = server().await;
    for path in ["mcp", "plain"] {
        for binary in [true, false] {
            let times = call_times(&format!("http://{addr}/{path}"), binary).await;
            // A delayed ACK costs 40 ms; a loaded machine may slow a call or two as well.
            let stalled = times
                .iter()
                .filter(|t| **t >= Duration::from_millis(30))
                .count();
            assert!(
                stalled <= 2,
                "/{path}, binary {binary}: {stalled} of {CALLS} calls took 30 ms or more: {times:?}"
            );
        }
    }
}
