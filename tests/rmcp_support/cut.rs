//! A test proxy in front of an MCP server: cuts response bodies after a number of bytes (as a
//! proxy idle timeout or a load balancer does, with a normal HTTP ending), or strips SSE comment
//! lines (as a gateway that normalizes event streams might).
// Each includer uses a part of it.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
}

impl Cut {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            limit: AtomicUsize::new(usize::MAX),
            seen: Arc::default(),
            strip_comments: AtomicBool::new(false),
        })
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
    let response = next.run(request).await;
    let limit = cut.limit.load(Ordering::SeqCst);
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
        Ok::<_, std::io::Error>(piece.slice(..take))
    });
    let stream =
        stream.take_while(|piece| std::future::ready(piece.as_ref().is_ok_and(|p| !p.is_empty())));
    (parts, Body::from_stream(stream)).into_response()
}
