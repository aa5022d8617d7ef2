//! A test proxy in front of an MCP server: cuts response bodies after a number of bytes (as a
//! proxy idle timeout or a load balancer does, with a normal HTTP ending), or strips SSE comment
//! lines (as a gateway that normalizes event streams might).
// Each includer uses a part of it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

/// What the proxy does to the next responses.
pub(crate) struct Cut {
    /// Bytes forwarded before the body ends (`usize::MAX`: never cut).
    pub(crate) limit: AtomicUsize,
    /// Bytes forwarded since the counter was reset.
    pub(crate) seen: Arc<AtomicUsize>,
    /// Drop every SSE comment line (`:` ...) of the bodies.
    pub(crate) strip_comments: AtomicBool,
    /// When set, only the responses to JSON-RPC requests of this method are cut, each at the
    /// next offset of `schedule` (whole once it is empty), and `limit` is not used.
    pub(crate) method: Mutex<Option<String>>,
    /// The cuts of the next responses to `method`, in order.
    pub(crate) schedule: Mutex<VecDeque<usize>>,
    /// The bytes forwarded of each response to `method`, in order.
    pub(crate) forwarded: Arc<Mutex<Vec<usize>>>,
}

impl Cut {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            limit: AtomicUsize::new(usize::MAX),
            seen: Arc::default(),
            strip_comments: AtomicBool::new(false),
            method: Mutex::new(None),
            schedule: Mutex::default(),
            forwarded: Arc::default(),
        })
    }

    /// Cuts the responses to `method` requests at `cuts`, in order (then forwards them whole).
    pub(crate) fn cut_method(&self, method: &str, cuts: impl IntoIterator<Item = usize>) {
        *self.method.lock().unwrap() = Some(method.to_owned());
        self.schedule.lock().unwrap().extend(cuts);
    }
}

/// Calls a tool over `transport` with a fresh rmcp client; the proxy cuts the tool call's
/// response (only) at `limit`. Returns the result and the bytes the proxy forwarded for the call.
pub(crate) async fn call_cut<T, E, A>(
    transport: T,
    cut: &Cut,
    limit: usize,
    request: rmcp::model::CallToolRequestParams,
) -> (
    Result<rmcp::model::CallToolResult, rmcp::ServiceError>,
    usize,
)
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    use rmcp::ServiceExt;
    let peer = ().serve(transport).await.expect("the handshake is not cut");
    cut.seen.store(0, Ordering::SeqCst);
    cut.limit.store(limit, Ordering::SeqCst);
    let result = peer.call_tool(request).await;
    cut.limit.store(usize::MAX, Ordering::SeqCst);
    let seen = cut.seen.load(Ordering::SeqCst);
    let _ = peer.cancel().await;
    (result, seen)
}

/// The proxy, as an axum middleware: `.layer(axum::middleware::from_fn_with_state(cut, cutting_proxy))`.
pub(crate) async fn cutting_proxy(
    State(cut): State<Arc<Cut>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    let method = cut.method.lock().unwrap().clone();
    let Some(method) = method else {
        let limit = cut.limit.load(Ordering::SeqCst);
        return cut_response(&cut, next.run(request).await, limit, None).await;
    };
    // Only the responses to `method`: the request body says which method it is.
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 20)
        .await
        .expect("loopback request body");
    let matches = serde_json::from_slice::<serde_json::Value>(&bytes)
        .is_ok_and(|message| message["method"] == method.as_str());
    let request = Request::from_parts(parts, Body::from(bytes));
    let response = next.run(request).await;
    if !matches {
        return response;
    }
    let limit = cut
        .schedule
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(usize::MAX);
    let forwarded = cut.forwarded.clone();
    let index = {
        let mut forwarded = forwarded.lock().unwrap();
        forwarded.push(0);
        forwarded.len() - 1
    };
    cut_response(&cut, response, limit, Some((forwarded, index))).await
}

/// Forwards `response` until `limit` bytes, then ends it normally (or strips its comments).
async fn cut_response(
    cut: &Cut,
    response: Response,
    limit: usize,
    count: Option<(Arc<Mutex<Vec<usize>>>, usize)>,
) -> Response {
    let strip = cut.strip_comments.load(Ordering::SeqCst);
    let seen = cut.seen.clone();
    let (parts, body) = response.into_parts();
    if strip {
        // Whole body, then every line that starts with `:` removed (the test bodies use LF).
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect("loopback body");
        let kept: Vec<u8> = bytes
            .split_inclusive(|&b| b == b'\n')
            .filter(|line| !line.starts_with(b":"))
            .flatten()
            .copied()
            .collect();
        return (parts, Body::from(kept)).into_response();
    }
    // Forward the body until `limit` bytes, then end it normally (a proxy idle timeout).
    let mut sent = 0usize;
    let stream = body.into_data_stream().map(move |piece| {
        let piece = piece.expect("loopback body");
        let take = piece.len().min(limit.saturating_sub(sent));
        sent += take;
        seen.fetch_add(take, Ordering::SeqCst);
        if let Some((forwarded, index)) = &count {
            forwarded.lock().unwrap()[*index] += take;
        }
        Ok::<_, std::io::Error>(piece.slice(..take))
    });
    let stream =
        stream.take_while(|piece| std::future::ready(piece.as_ref().is_ok_and(|p| !p.is_empty())));
    (parts, Body::from_stream(stream)).into_response()
}

/// A reverse proxy to `upstream` (a server in another process) with `cut` in front of it, served
/// on `runtime`; its URL. Headers pass both ways, except the hop-by-hop ones.
pub(crate) fn serve_proxy(
    runtime: &tokio::runtime::Runtime,
    upstream: &str,
    cut: Arc<Cut>,
) -> String {
    let state = Arc::new((upstream.to_owned(), reqwest::Client::new()));
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(cut, cutting_proxy));
    let listener = runtime.block_on(async {
        tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind")
    });
    let addr = listener.local_addr().expect("addr");
    runtime.spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/mcp")
}

async fn forward(
    State(upstream): State<Arc<(String, reqwest::Client)>>,
    request: Request,
) -> Response {
    let (url, http) = &*upstream;
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 64 << 20)
        .await
        .expect("request body");
    let mut sent = http.request(parts.method, url);
    for (name, value) in &parts.headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection") {
            sent = sent.header(name, value);
        }
    }
    let answer = sent.body(body).send().await.expect("upstream");
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .expect("a response")
}
