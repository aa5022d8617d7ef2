//! A test proxy in front of an MCP server: cuts response bodies after a number of bytes (as a
//! proxy idle timeout or a load balancer does, with a normal HTTP ending), or strips SSE comment
//! lines (as a gateway that normalizes event streams might). The same forwarding serves a front
//! that answers `server/discover` itself and routes the other requests ([`serve_front`]).
// Each includer uses a part of it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::Value;

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
    let upstream = upstream.to_owned();
    let forwarding = Forwarding::new(move |_| upstream.clone());
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(Arc::new(forwarding))
        .layer(axum::middleware::from_fn_with_state(cut, cutting_proxy));
    serve(runtime, app)
}

/// What a [`serve_front`] does before it answers a `server/discover` request (a test notes the
/// time, or holds a retry back until the tool it repeats has finished).
pub(crate) type OnDiscover = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// A front on loopback, served on `runtime` (its URL), for a `DiscoveringResolver` in front of
/// servers that do not answer `server/discover` themselves (the TypeScript SDK's v1 server), or
/// whose discovery a test scripts: it answers each `server/discover` request itself with
/// `discovery` as its result (once `on_discover` is done), and forwards every other request to
/// the upstream `route` picks from its headers, both bodies streamed, never buffered.
pub(crate) fn serve_front(
    runtime: &tokio::runtime::Runtime,
    discovery: Value,
    on_discover: OnDiscover,
    route: impl Fn(&HeaderMap) -> String + Send + Sync + 'static,
) -> String {
    let front = Arc::new(Front {
        discovery,
        on_discover,
        forwarding: Forwarding::new(route),
    });
    let app = axum::Router::new()
        .fallback(answer_or_forward)
        .with_state(front);
    serve(runtime, app)
}

/// Serves `app` on a loopback port on `runtime`: its `/mcp` URL. Bound here, without blocking on
/// `runtime` (a test may call it from a task of its own).
fn serve(runtime: &tokio::runtime::Runtime, app: axum::Router) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let addr = listener.local_addr().expect("addr");
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
        axum::serve(listener, app).await
    });
    format!("http://{addr}/mcp")
}

/// Where requests are forwarded: the upstream URL of each, from its headers.
struct Forwarding {
    route: Box<dyn Fn(&HeaderMap) -> String + Send + Sync>,
    http: reqwest::Client,
}

impl Forwarding {
    fn new(route: impl Fn(&HeaderMap) -> String + Send + Sync + 'static) -> Self {
        Self {
            route: Box::new(route),
            http: reqwest::Client::new(),
        }
    }
}

struct Front {
    discovery: Value,
    on_discover: OnDiscover,
    forwarding: Forwarding,
}

/// The most bytes of a `server/discover` request the front reads (it answers it itself).
const MAX_DISCOVER_REQUEST: usize = 64 * 1024;

async fn answer_or_forward(State(front): State<Arc<Front>>, request: Request) -> Response {
    // A 2026-07-28 request names its method in a header too (`DiscoveringResolver` sends it).
    let discover = request
        .headers()
        .get("mcp-method")
        .is_some_and(|method| method == "server/discover");
    if !discover {
        return forward_with(&front.forwarding, request).await;
    }
    let body = axum::body::to_bytes(request.into_body(), MAX_DISCOVER_REQUEST)
        .await
        .expect("a server/discover request");
    let request: Value = serde_json::from_slice(&body).expect("a JSON-RPC request");
    (front.on_discover)().await;
    let response = serde_json::json!({"jsonrpc": "2.0", "id": request["id"],
        "result": front.discovery});
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        response.to_string(),
    )
        .into_response()
}

async fn forward(State(forwarding): State<Arc<Forwarding>>, request: Request) -> Response {
    forward_with(&forwarding, request).await
}

/// Forwards `request` to the upstream its route picks, both bodies streamed.
async fn forward_with(forwarding: &Forwarding, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let url = (forwarding.route)(&parts.headers);
    let mut sent = forwarding.http.request(parts.method, url);
    for (name, value) in &parts.headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection") {
            sent = sent.header(name, value);
        }
    }
    let body = reqwest::Body::wrap_stream(body.into_data_stream());
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
