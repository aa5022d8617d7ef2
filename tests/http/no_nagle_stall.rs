//! A short framed response leaves the server in one write (issue 14), served by `axum::serve` as
//! is (TCP_NODELAY off: Nagle's algorithm on), through `FramingLayer` around rmcp and through a
//! handler answering with `FramedBody`, in both mappings.
//!
//! With Nagle's algorithm on, a small segment waits until the segment before it is acknowledged,
//! and clients delay that ACK by up to 40 ms: before, the HEAD frame left alone and the rest of a
//! short response waited behind it, and every other call took about 43 ms instead of a fraction
//! of one. What prevents it is checked here, without a clock: every write the server makes is
//! logged, and a response is one write (HTTP head, HEAD frame, message, sentinel and the end of
//! the chunked body together), so no segment of it waits on the ACK of another. The latency this saves
//! is measured where timings belong, in `benches/e2e.rs` (its `nagle` configurations at 1 KiB):
//! an assertion on elapsed time flakes on a loaded machine (issue 18).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::HeaderMap;
use axum::routing::post;
use futures_util::{StreamExt, stream};
use mcp_framing::http::{Delivery, FramedBody, OptIn, response_headers};
use mcp_framing::rmcp_http::FramingLayer;
use mcp_framing::{Outgoing, StreamEncoder, StreamHead};
use tower_layer::Layer;

use crate::support::http_support;
use crate::support::rmcp_support;

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

/// The writes a server made, in order: the bytes of each.
type Writes = Arc<Mutex<Vec<Vec<u8>>>>;

/// A socket that logs the writes the server makes on it.
struct CountedIo {
    io: tokio::net::TcpStream,
    writes: Writes,
}

impl CountedIo {
    /// Logs `bytes` before the write (so that a client that got them finds them logged), then
    /// keeps what was written of them.
    fn logged(
        &mut self,
        bytes: Vec<u8>,
        write: impl FnOnce(Pin<&mut tokio::net::TcpStream>) -> Poll<std::io::Result<usize>>,
    ) -> Poll<std::io::Result<usize>> {
        let at = {
            let mut writes = self.writes.lock().unwrap();
            writes.push(bytes);
            writes.len() - 1
        };
        let result = write(Pin::new(&mut self.io));
        let mut writes = self.writes.lock().unwrap();
        // Nothing written (pending, failed): an empty entry, where it stood.
        let written = match &result {
            Poll::Ready(Ok(n)) => *n,
            _ => 0,
        };
        writes[at].truncate(written);
        result
    }
}

impl tokio::io::AsyncRead for CountedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for CountedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.logged(buf.to_vec(), |io| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let bytes = bufs.iter().flat_map(|buf| buf.iter().copied()).collect();
        self.logged(bytes, |io| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A loopback listener as `axum::serve` takes it (TCP_NODELAY left off), logging writes.
struct CountingListener {
    listener: tokio::net::TcpListener,
    writes: Writes,
}

impl axum::serve::Listener for CountingListener {
    type Io = CountedIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (CountedIo, SocketAddr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.listener).await;
        let writes = self.writes.clone();
        (CountedIo { io, writes }, addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

async fn server() -> (SocketAddr, Writes) {
    // The head waits for the first message (`FramingLayer::head_wait`): here as long as a loaded
    // machine may take to answer, so that what is checked does not depend on how fast the tool
    // is; the default wait's timing is the bench's to measure.
    let framed = FramingLayer::new()
        .frame_size(16 * 1024)
        .head_wait(Duration::from_secs(60))
        .layer(rmcp_support::unframed_service());
    let app = Router::new()
        .nest_service("/mcp", framed)
        .route("/plain", post(plain));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let writes = Writes::default();
    let listener = CountingListener {
        listener,
        writes: writes.clone(),
    };
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, writes)
}

/// The writes the server made for each of `CALLS` framed calls in a row, on one kept-alive
/// connection.
async fn writes_per_call(url: &str, binary: bool, writes: &Writes) -> Vec<Vec<Vec<u8>>> {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut per_call = Vec::new();
    for _ in 0..CALLS {
        let before = writes.lock().unwrap().len();
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
        // The whole response arrived: every write the server made for it is logged, and none
        // for the next request, not sent yet.
        let logged = writes.lock().unwrap()[before..].to_vec();
        per_call.push(logged.into_iter().filter(|w| !w.is_empty()).collect());
        assert!(
            (900..4096).contains(&result),
            "{url}: a result of {result} bytes"
        );
    }
    per_call
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_framed_response_leaves_the_server_in_one_write_with_nagle_on() {
    let (addr, writes) = server().await;
    for path in ["mcp", "plain"] {
        for binary in [true, false] {
            let per_call = writes_per_call(&format!("http://{addr}/{path}"), binary, &writes).await;
            for writes in per_call {
                let sizes: Vec<usize> = writes.iter().map(Vec::len).collect();
                let what = format!("/{path}, binary {binary}: writes of {sizes:?} bytes");
                let [response] = &writes[..] else {
                    panic!("{what}: a response in more than one write");
                };
                assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"), "{what}");
                assert!(
                    response.ends_with(b"\r\n0\r\n\r\n"),
                    "{what}: not the whole body"
                );
            }
        }
    }
}
