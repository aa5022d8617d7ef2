//! The client side of the sidecar: each request is checked (Host, Origin, size, the concurrency
//! bound), given its forwarding headers, and sent through the one framing stack: `FramingLayer`
//! (with `.dedupe(..)` when on) around the [`Upstream`] service.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use mcp_framing::http::DedupeService;
use mcp_framing::rmcp_http::FramingService;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;
use tower_service::Service;

use super::config::host_allowed;
use super::health::Health;
use super::upstream::{
    BoxError, OutgoingBody, Oversize, RequestId, ResponseBody, Upstream, error_response,
    remove_hop_by_hop,
};

/// The request body bytes read before the upstream call starts, so that an error answer can
/// echo the request's JSON-RPC id: an MCP request is one JSON-RPC message, rarely this large.
/// A larger body streams on after them.
const PEEK: usize = 64 * 1024;

/// The counter of requests answered, by `method` and `status`.
pub(crate) const REQUESTS: &str = "mcp_framing.proxy.requests";
/// The counter of requests refused by the sidecar itself, by `reason`.
pub(crate) const REJECTIONS: &str = "mcp_framing.proxy.rejections";
/// The gauge of requests forwarded and not finished (their response bodies included).
pub(crate) const IN_FLIGHT: &str = "mcp_framing.proxy.in_flight";

/// The framing stack around the upstream: one path whether deduplication is on or off.
#[derive(Clone, Debug)]
pub(crate) enum Stack {
    /// `FramingLayer` around the upstream.
    Plain(FramingService<Upstream>),
    /// `FramingLayer::dedupe(..)` around the upstream.
    Deduped(FramingService<DedupeService<Upstream>>),
}

impl Stack {
    async fn call(&self, request: Request<OutgoingBody>) -> Response<ResponseBody> {
        fn boxed<E: std::error::Error + Send + Sync + 'static>(
            response: Response<UnsyncBoxBody<Bytes, E>>,
        ) -> Response<ResponseBody> {
            response.map(|body| body.map_err(|err| Box::new(err) as BoxError).boxed_unsync())
        }
        match self.clone() {
            Self::Plain(mut service) => match service.call(request).await {
                Ok(response) => boxed(response),
                Err(never) => match never {},
            },
            Self::Deduped(mut service) => match service.call(request).await {
                Ok(response) => boxed(response),
                Err(never) => match never {},
            },
        }
    }
}

/// Everything a request needs; shared by every connection.
#[derive(Debug)]
pub(crate) struct Edge {
    pub(crate) stack: Stack,
    pub(crate) health: Health,
    pub(crate) health_path: String,
    pub(crate) limit: Arc<tokio::sync::Semaphore>,
    pub(crate) max_request_bytes: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) allowed_hosts: Vec<String>,
    pub(crate) allowed_origins: Vec<String>,
    /// `Some(upstream authority)` with `--rewrite-host`.
    pub(crate) rewrite_host: Option<HeaderValue>,
}

impl Edge {
    /// Answers one client request.
    pub(crate) async fn handle(
        self: Arc<Self>,
        peer: SocketAddr,
        mut request: Request<hyper::body::Incoming>,
    ) -> Response<ResponseBody> {
        let method = request.method().clone();
        // HTTP/2 carries the host in the URI (`:authority`), HTTP/1.1 in `Host`.
        if !request.headers().contains_key(header::HOST) {
            if let Some(authority) = request.uri().authority() {
                if let Ok(value) = HeaderValue::from_str(authority.as_str()) {
                    request.headers_mut().insert(header::HOST, value);
                }
            }
        }
        if request.uri().path() == self.health_path && method == Method::GET {
            return self.health.respond().await;
        }
        let response = match self.admit(&request) {
            Err(refusal) => *refusal,
            Ok(permit) => self.forward(peer, request, permit).await,
        };
        metrics::counter!(REQUESTS, "method" => method.to_string(),
            "status" => response.status().as_str().to_owned())
        .increment(1);
        response
    }

    /// The sidecar's own checks: Host, Origin, declared size, the concurrency bound.
    fn admit<B>(
        &self,
        request: &Request<B>,
    ) -> Result<OwnedSemaphorePermit, Box<Response<ResponseBody>>> {
        let headers = request.headers();
        if !self.allowed_hosts.is_empty() {
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
            if !host.is_some_and(|host| host_allowed(host, &self.allowed_hosts)) {
                return Err(Box::new(reject(
                    StatusCode::MISDIRECTED_REQUEST,
                    "host_not_allowed",
                    &format!("Host {:?} is not allowed", host.unwrap_or_default()),
                )));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if !self.allowed_origins.is_empty()
                && !self
                    .allowed_origins
                    .iter()
                    .any(|allowed| allowed.trim().eq_ignore_ascii_case(origin.trim()))
            {
                return Err(Box::new(reject(
                    StatusCode::FORBIDDEN,
                    "origin_not_allowed",
                    &format!("Origin {origin:?} is not allowed"),
                )));
            }
        }
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|len| len > self.max_request_bytes as u64) {
            return Err(Box::new(reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                &format!(
                    "request body too large: {} bytes, over {}",
                    declared.unwrap_or_default(),
                    self.max_request_bytes
                ),
            )));
        }
        match self.limit.clone().try_acquire_owned() {
            Ok(permit) => Ok(permit),
            Err(_) => {
                let mut response = reject(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "overloaded",
                    "too many requests in flight: try again",
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                Err(Box::new(response))
            }
        }
    }

    async fn forward(
        &self,
        peer: SocketAddr,
        request: Request<hyper::body::Incoming>,
        permit: OwnedSemaphorePermit,
    ) -> Response<ResponseBody> {
        let in_flight = InFlight::new(permit);
        let (mut parts, body) = request.into_parts();
        remove_hop_by_hop(&mut parts.headers);
        forwarded_headers(&mut parts.headers, peer);
        if let Some(authority) = &self.rewrite_host {
            parts.headers.insert(header::HOST, authority.clone());
        }
        let oversize = Oversize::default();
        let body = Capped {
            body,
            left: self.max_request_bytes,
            max: self.max_request_bytes,
            oversize: oversize.0.clone(),
        };
        let body = if parts.method == Method::POST {
            let peek = tokio::time::timeout(self.idle_timeout, peek(body)).await;
            match peek {
                Err(_) => {
                    return reject(
                        StatusCode::REQUEST_TIMEOUT,
                        "request_body_timeout",
                        &format!("no request body byte for {:?}", self.idle_timeout),
                    );
                }
                Ok(Err(err)) if oversize.0.load(Ordering::Acquire) => {
                    return reject(StatusCode::PAYLOAD_TOO_LARGE, "request_too_large", &err);
                }
                Ok(Err(err)) => {
                    return reject(
                        StatusCode::BAD_REQUEST,
                        "request_body_failed",
                        &format!("request body: {err}"),
                    );
                }
                Ok(Ok(Peeked::Whole(bytes))) => {
                    if let Some(id) = request_id(&bytes) {
                        parts.extensions.insert(RequestId(id));
                    }
                    Full::new(bytes)
                        .map_err(|never: Infallible| match never {})
                        .boxed_unsync()
                }
                Ok(Ok(Peeked::Started(read, rest))) => {
                    let read = futures_util::stream::once(std::future::ready(Ok::<_, BoxError>(
                        Frame::data(read),
                    )));
                    StreamBody::new(read.chain(http_body_util::BodyStream::new(rest)))
                        .boxed_unsync()
                }
            }
        } else {
            body.boxed_unsync()
        };
        parts.extensions.insert(oversize.clone());
        let response = self.stack.call(Request::from_parts(parts, body)).await;
        if oversize.0.load(Ordering::Acquire) {
            // The body passed the bound while it was read (by the deduplication or the upstream
            // call): whatever answer that made, the client's is a 413.
            return reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                &format!(
                    "request body too large: over {} bytes",
                    self.max_request_bytes
                ),
            );
        }
        let (mut parts, body) = response.into_parts();
        let streamed = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| {
                let essence = ct.split(';').next().unwrap_or_default().trim();
                essence.eq_ignore_ascii_case("text/event-stream")
                    || essence.eq_ignore_ascii_case("application/vnd.mcp-framing")
            });
        if streamed {
            // Streamed bodies are not to be buffered by a proxy in front (nginx honours it).
            parts
                .headers
                .insert("x-accel-buffering", HeaderValue::from_static("no"));
        }
        let body = Tracked {
            body,
            _in_flight: in_flight,
        };
        Response::from_parts(parts, body.boxed_unsync())
    }
}

/// A refusal by the sidecar itself: a JSON-RPC error naming `reason`, counted.
fn reject(status: StatusCode, reason: &'static str, message: &str) -> Response<ResponseBody> {
    metrics::counter!(REJECTIONS, "reason" => reason).increment(1);
    tracing::info!(reason, %status, "{message}");
    error_response(status, Value::Null, message, reason)
}

/// Appends the client to `X-Forwarded-For` and `Forwarded` (RFC 7239), and sets
/// `X-Forwarded-Proto` and `X-Forwarded-Host` when the client did not.
fn forwarded_headers(headers: &mut http::HeaderMap, peer: SocketAddr) {
    let ip = peer.ip();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let xff = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(before) if !before.trim().is_empty() => format!("{before}, {ip}"),
        _ => ip.to_string(),
    };
    if let Ok(value) = HeaderValue::from_str(&xff) {
        headers.insert("x-forwarded-for", value);
    }
    if !headers.contains_key("x-forwarded-proto") {
        headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
    }
    if let Some(host) = &host {
        if !headers.contains_key("x-forwarded-host") {
            if let Ok(value) = HeaderValue::from_str(host) {
                headers.insert("x-forwarded-host", value);
            }
        }
    }
    let node = match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("\"[{v6}]\""),
    };
    let mut element = format!("for={node};proto=http");
    if let Some(host) = host.filter(|h| h.bytes().all(|b| b.is_ascii_graphic() && b != b'"')) {
        element.push_str(&format!(";host=\"{host}\""));
    }
    let forwarded = match headers.get(header::FORWARDED).and_then(|v| v.to_str().ok()) {
        Some(before) if !before.trim().is_empty() => format!("{before}, {element}"),
        _ => element,
    };
    if let Ok(value) = HeaderValue::from_str(&forwarded) {
        headers.insert(header::FORWARDED, value);
    }
}

/// A request body read up to [`PEEK`] bytes.
enum Peeked<B> {
    /// The whole body.
    Whole(Bytes),
    /// Its first bytes, and the rest.
    Started(Bytes, B),
}

async fn peek<B>(mut body: B) -> Result<Peeked<B>, String>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut read = BytesMut::new();
    while read.len() < PEEK {
        match body.frame().await {
            None => return Ok(Peeked::Whole(read.freeze())),
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    read.extend_from_slice(data);
                }
            }
            Some(Err(err)) => return Err(err.to_string()),
        }
    }
    Ok(Peeked::Started(read.freeze(), body))
}

/// The `id` of a JSON-RPC request body (`None` if it is not one JSON-RPC object with an id).
fn request_id(body: &[u8]) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct Head {
        id: Option<Value>,
    }
    let head: Head = serde_json::from_slice(body).ok()?;
    head.id
        .filter(|id| matches!(id, Value::String(_) | Value::Number(_)))
}

/// The client's request body, failing once it passes `max` bytes.
struct Capped<B> {
    body: B,
    left: usize,
    max: usize,
    oversize: Arc<AtomicBool>,
}

impl<B> Body for Capped<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, Bytes::len);
                if len > this.left {
                    this.oversize.store(true, Ordering::Release);
                    return Poll::Ready(Some(Err(format!(
                        "request body too large: over {} bytes",
                        this.max
                    )
                    .into())));
                }
                this.left -= len;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(err.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request in flight: its place in the concurrency bound, and the gauge.
struct InFlight {
    _permit: OwnedSemaphorePermit,
}

impl InFlight {
    fn new(permit: OwnedSemaphorePermit) -> Self {
        metrics::gauge!(IN_FLIGHT).increment(1.0);
        Self { _permit: permit }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics::gauge!(IN_FLIGHT).decrement(1.0);
    }
}

/// A response body that holds its request's place in the concurrency bound until it ends.
struct Tracked {
    body: ResponseBody,
    _in_flight: InFlight,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
