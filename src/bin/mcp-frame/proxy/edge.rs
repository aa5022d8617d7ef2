//! The client side of the sidecar: each request is checked (Host, Origin, size, the concurrency
//! bound), given its forwarding headers, and sent through the one framing stack: `FramingLayer`
//! (with `.dedupe(..)` when on) around the [`Upstream`] service.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use mcp_framing::http::{DedupeBodyError, DedupeService};
use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::{DedupingFramingLayer, FramingLayer, FramingService};
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

use super::config::host_allowed;
use super::health::Health;
use super::upstream::{
    BoxError, EdgeRequest, OutgoingBody, ResponseBody, Upstream, UpstreamBodyError, error_response,
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
    async fn call(&self, request: Request<OutgoingBody>) -> Response<StackBody> {
        match self.clone() {
            Self::Plain(mut service) => match service.call(request).await {
                Ok(response) => response.map(StackBody::Plain),
                Err(never) => match never {},
            },
            Self::Deduped(mut service) => match service.call(request).await {
                Ok(response) => response.map(StackBody::Deduped),
                Err(never) => match never {},
            },
        }
    }
}

/// A response body: the framing stack's (each stack's as it is, not boxed again) or the
/// sidecar's own.
pub(crate) enum StackBody {
    /// From [`Stack::Plain`].
    Plain(UnsyncBoxBody<Bytes, UpstreamBodyError>),
    /// From [`Stack::Deduped`].
    Deduped(UnsyncBoxBody<Bytes, DedupeBodyError>),
    /// The sidecar's own answer (a refusal, the health report).
    Own(ResponseBody),
}

impl Body for StackBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        fn boxed<E: std::error::Error + Send + Sync + 'static>(
            polled: Poll<Option<Result<Frame<Bytes>, E>>>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            polled.map(|frame| frame.map(|frame| frame.map_err(|err| Box::new(err) as BoxError)))
        }
        match self.get_mut() {
            Self::Plain(body) => boxed(Pin::new(body).poll_frame(cx)),
            Self::Deduped(body) => boxed(Pin::new(body).poll_frame(cx)),
            Self::Own(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Plain(body) => body.is_end_stream(),
            Self::Deduped(body) => body.is_end_stream(),
            Self::Own(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Plain(body) => body.size_hint(),
            Self::Deduped(body) => body.size_hint(),
            Self::Own(body) => body.size_hint(),
        }
    }
}

/// The framing layers, put around each worker's own [`Upstream`].
#[derive(Clone, Debug)]
pub(crate) enum Layers {
    /// `FramingLayer`.
    Plain(FramingLayer),
    /// `FramingLayer::dedupe(..)` (its store shared by every worker).
    Deduped(DedupingFramingLayer),
}

impl Layers {
    /// The stack around `upstream`.
    pub(crate) fn around(&self, upstream: Upstream) -> Stack {
        match self {
            Self::Plain(layer) => Stack::Plain(layer.layer(upstream)),
            Self::Deduped(layer) => Stack::Deduped(layer.layer(upstream)),
        }
    }
}

/// Everything a request needs; shared by every connection of a worker (the stack is the
/// worker's, the rest shared by all).
#[derive(Clone, Debug)]
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
    /// Metrics are exported (`--metrics`): without a recorder, a metric's key would be made for
    /// nothing.
    pub(crate) metrics: bool,
}

impl Edge {
    /// Answers one client request of `peer`'s connection.
    pub(crate) async fn handle(
        self: Arc<Self>,
        peer: Arc<Peer>,
        mut request: Request<hyper::body::Incoming>,
    ) -> Response<Answer> {
        let busy = Busy::new(peer);
        let method = request.method().clone();
        // HTTP/2 carries the host in the URI (`:authority`), HTTP/1.1 in `Host` (its URI has
        // an authority only in the rare absolute form).
        if let Some(authority) = request.uri().authority() {
            if !request.headers().contains_key(header::HOST) {
                if let Ok(value) = HeaderValue::from_str(authority.as_str()) {
                    request.headers_mut().insert(header::HOST, value);
                }
            }
        }
        let (response, in_flight) =
            if request.uri().path() == self.health_path && method == Method::GET {
                (self.health.respond().await.map(StackBody::Own), None)
            } else {
                match self.admit(&request) {
                    Err(refusal) => {
                        // Refused before a byte of its body was read: read what the client still
                        // sends (bounded), so that it reads the refusal instead of a reset
                        // connection.
                        drain_later(request.into_body());
                        (refusal.map(StackBody::Own), None)
                    }
                    Ok(permit) => self.forward(&busy.0, request, permit).await,
                }
            };
        if self.metrics {
            metrics::counter!(REQUESTS, "method" => method_label(&method),
                "status" => status_label(response.status()))
            .increment(1);
        }
        response.map(|body| Answer {
            body,
            _in_flight: in_flight,
            _busy: busy,
        })
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

    /// Forwards `request`; with the place in the concurrency bound its response body holds.
    async fn forward(
        &self,
        peer: &Peer,
        request: Request<hyper::body::Incoming>,
        permit: OwnedSemaphorePermit,
    ) -> (Response<StackBody>, Option<InFlight>) {
        let in_flight = InFlight::new(permit, self.metrics);
        let (mut parts, body) = request.into_parts();
        remove_hop_by_hop(&mut parts.headers);
        forwarded_headers(&mut parts.headers, peer);
        if let Some(authority) = &self.rewrite_host {
            parts.headers.insert(header::HOST, authority.clone());
        }
        let mut body = Capped {
            body: Some(body),
            exceeded: false,
            left: self.max_request_bytes,
            max: self.max_request_bytes,
            oversize: None,
        };
        let (body, edge) = if parts.method == Method::POST {
            let peek = tokio::time::timeout(self.idle_timeout, peek(body)).await;
            match peek {
                Err(_) => {
                    let message = format!("no request body byte for {:?}", self.idle_timeout);
                    let refusal = reject(
                        StatusCode::REQUEST_TIMEOUT,
                        "request_body_timeout",
                        &message,
                    );
                    return (refusal.map(StackBody::Own), None);
                }
                Ok(Err(err)) if err.is::<TooLarge>() => {
                    let message = err.to_string();
                    let refusal =
                        reject(StatusCode::PAYLOAD_TOO_LARGE, "request_too_large", &message);
                    return (refusal.map(StackBody::Own), None);
                }
                Ok(Err(err)) => {
                    let message = format!("request body: {err}");
                    let refusal = reject(StatusCode::BAD_REQUEST, "request_body_failed", &message);
                    return (refusal.map(StackBody::Own), None);
                }
                Ok(Ok(Peeked::Whole(bytes))) => {
                    // Read to its end within the bound: it cannot pass it any more.
                    let edge = EdgeRequest {
                        whole: Some(bytes.clone()),
                        oversize: None,
                    };
                    let body = Full::new(bytes)
                        .map_err(|never: Infallible| match never {})
                        .boxed_unsync();
                    (body, edge)
                }
                Ok(Ok(Peeked::Started(read, mut rest))) => {
                    let edge = rest.watched();
                    let read = futures_util::stream::once(std::future::ready(Ok::<_, BoxError>(
                        Frame::data(read),
                    )));
                    let body = StreamBody::new(read.chain(http_body_util::BodyStream::new(rest)))
                        .boxed_unsync();
                    (body, edge)
                }
            }
        } else {
            let edge = body.watched();
            (body.boxed_unsync(), edge)
        };
        let oversize = edge.oversize.clone();
        parts.extensions.insert(edge);
        let response = self.stack.call(Request::from_parts(parts, body)).await;
        if oversize.is_some_and(|flag| flag.load(Ordering::Acquire)) {
            // The body passed the bound while it was read (by the deduplication or the upstream
            // call): whatever answer that made, the client's is a 413.
            let message = format!(
                "request body too large: over {} bytes",
                self.max_request_bytes
            );
            let refusal = reject(StatusCode::PAYLOAD_TOO_LARGE, "request_too_large", &message);
            return (refusal.map(StackBody::Own), None);
        }
        let (mut parts, body) = response.into_parts();
        let content_type = parts.headers.get(header::CONTENT_TYPE);
        let streamed =
            Mapping::from_content_type(content_type.and_then(|v| v.to_str().ok())).is_some();
        if streamed {
            // Streamed bodies are not to be buffered by a proxy in front (nginx honours it).
            // Servers that follow the MCP specification send it already.
            let no = HeaderValue::from_static("no");
            match parts.headers.entry(X_ACCEL_BUFFERING) {
                http::header::Entry::Occupied(mut said) => {
                    if !said.iter().all(|value| value == "no") {
                        said.insert(no);
                    }
                }
                http::header::Entry::Vacant(none) => {
                    none.insert(no);
                }
            }
        }
        (Response::from_parts(parts, body), Some(in_flight))
    }
}

/// A request method as a metric label: the standard ones without an allocation.
fn method_label(method: &Method) -> metrics::SharedString {
    let name = match method.as_str() {
        "POST" => "POST",
        "GET" => "GET",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        other => return metrics::SharedString::from(other.to_owned()),
    };
    metrics::SharedString::const_str(name)
}

/// A response status as a metric label: the common ones without an allocation.
fn status_label(status: StatusCode) -> metrics::SharedString {
    match status.as_u16() {
        200 => metrics::SharedString::const_str("200"),
        202 => metrics::SharedString::const_str("202"),
        400 => metrics::SharedString::const_str("400"),
        404 => metrics::SharedString::const_str("404"),
        _ => metrics::SharedString::from(status.as_str().to_owned()),
    }
}

/// A refusal by the sidecar itself: a JSON-RPC error naming `reason`, counted.
fn reject(status: StatusCode, reason: &'static str, message: &str) -> Response<ResponseBody> {
    metrics::counter!(REJECTIONS, "reason" => reason).increment(1);
    tracing::info!(reason, %status, "{message}");
    error_response(status, Value::Null, message, reason)
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");

/// A client connection's address, written once for the forwarding headers of all its requests.
#[derive(Debug)]
pub(crate) struct Peer {
    /// The IP address, as `X-Forwarded-For` lists it.
    ip: HeaderValue,
    /// The IP address as a `Forwarded` node (RFC 7239: an IPv6 address quoted, in brackets).
    node: String,
    /// The last `Host` this connection's requests named and the `Forwarded` element made for it:
    /// the requests of a connection nearly always name one host.
    last: Mutex<Option<(HeaderValue, HeaderValue)>>,
    /// When the connection was accepted.
    opened: Instant,
    /// Its requests not answered to their body's end.
    busy: AtomicUsize,
    /// When the last of them ended (or the connection opened), in nanoseconds after `opened`.
    ended: AtomicU64,
}

impl Peer {
    pub(crate) fn new(addr: SocketAddr) -> Self {
        let ip = addr.ip();
        let node = match ip {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => format!("\"[{v6}]\""),
        };
        Self {
            ip: HeaderValue::from_str(&ip.to_string()).expect("an IP address is a header value"),
            node,
            last: Mutex::new(None),
            opened: Instant::now(),
            busy: AtomicUsize::new(0),
            ended: AtomicU64::new(0),
        }
    }

    /// Returns once the connection was idle (no request in flight, no response being sent) for
    /// `bound`: HTTP/1.1's wait for the next request head (or the rest of a slow one) and
    /// HTTP/2's for the next stream. One timer a connection, set again only when it fires.
    pub(crate) async fn idle(&self, bound: Duration) {
        let timer = tokio::time::sleep(bound);
        tokio::pin!(timer);
        loop {
            timer.as_mut().await;
            let now = Instant::now();
            if self.busy.load(Ordering::Acquire) > 0 {
                timer.as_mut().reset(now + bound);
                continue;
            }
            let ended = Duration::from_nanos(self.ended.load(Ordering::Acquire));
            let deadline = self.opened + ended + bound;
            if deadline <= now {
                return;
            }
            timer.as_mut().reset(deadline);
        }
    }

    /// This client's `Forwarded` element for a request to `host`:
    /// `for=NODE;proto=http[;host="HOST"]`.
    fn forwarded(&self, host: Option<&HeaderValue>) -> Option<HeaderValue> {
        let mut last = self.last.try_lock().ok();
        if let (Some(Some((named, element))), Some(host)) = (last.as_deref(), host) {
            if named == host {
                return Some(element.clone());
            }
        }
        let mut forwarded = String::with_capacity(64);
        forwarded.push_str("for=");
        forwarded.push_str(&self.node);
        forwarded.push_str(";proto=http");
        let text = host.and_then(|v| v.to_str().ok());
        if let Some(text) = text.filter(|h| h.bytes().all(|b| b.is_ascii_graphic() && b != b'"')) {
            forwarded.push_str(";host=\"");
            forwarded.push_str(text);
            forwarded.push('"');
        }
        let element = HeaderValue::from_str(&forwarded).ok()?;
        if let (Some(last), Some(host)) = (last.as_deref_mut(), host) {
            *last = Some((host.clone(), element.clone()));
        }
        Some(element)
    }
}

/// Appends the client to `X-Forwarded-For` and `Forwarded` (RFC 7239), and sets
/// `X-Forwarded-Proto` and `X-Forwarded-Host` when the client did not.
fn forwarded_headers(headers: &mut http::HeaderMap, peer: &Peer) {
    use http::header::Entry;
    // A Host that is not visible ASCII is not repeated.
    let host = headers
        .get(header::HOST)
        .filter(|v| v.to_str().is_ok())
        .cloned();
    append_listed(headers, X_FORWARDED_FOR, peer.ip.clone());
    headers
        .entry(X_FORWARDED_PROTO)
        .or_insert(HeaderValue::from_static("http"));
    if let Some(host) = &host {
        if let Entry::Vacant(none) = headers.entry(X_FORWARDED_HOST) {
            none.insert(host.clone());
        }
    }
    let Some(element) = peer.forwarded(host.as_ref()) else {
        return;
    };
    append_listed(headers, header::FORWARDED, element);
}

/// Adds `value` to the list header `name` (`X-Forwarded-For`, `Forwarded`): after what the
/// proxies before listed, or alone (also in place of a list that is not visible ASCII).
fn append_listed(headers: &mut http::HeaderMap, name: http::HeaderName, value: HeaderValue) {
    match headers.entry(name) {
        http::header::Entry::Occupied(mut before) => {
            let listed = before.get().to_str().ok().map(str::trim);
            let value = match listed.filter(|b| !b.is_empty()) {
                Some(listed) => {
                    let text = value.to_str().unwrap_or_default();
                    HeaderValue::from_str(&[listed, ", ", text].concat()).ok()
                }
                None => Some(value),
            };
            if let Some(value) = value {
                before.insert(value);
            }
        }
        http::header::Entry::Vacant(none) => {
            none.insert(value);
        }
    }
}

/// A request body read up to [`PEEK`] bytes.
enum Peeked<B> {
    /// The whole body.
    Whole(Bytes),
    /// Its first bytes, and the rest.
    Started(Bytes, B),
}

async fn peek<B>(mut body: B) -> Result<Peeked<B>, B::Error>
where
    B: Body<Data = Bytes> + Unpin,
{
    // Most bodies come in one frame: that frame is then the body, no copy.
    let mut first = None;
    let mut read = BytesMut::new();
    loop {
        let len = first.as_ref().map_or(read.len(), Bytes::len);
        if len >= PEEK {
            break;
        }
        match body.frame().await {
            None => return Ok(Peeked::Whole(first.unwrap_or_else(|| read.freeze()))),
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if read.is_empty() && first.is_none() {
                    first = Some(data);
                } else {
                    if let Some(first) = first.take() {
                        read.extend_from_slice(&first);
                    }
                    read.extend_from_slice(&data);
                }
            }
            Some(Err(err)) => return Err(err),
        }
    }
    Ok(Peeked::Started(
        first.unwrap_or_else(|| read.freeze()),
        body,
    ))
}

/// At most this much of a refused request's body is read and dropped ([`drain_later`]).
const DRAIN_BYTES: usize = 1 << 20;
/// For at most this long.
const DRAIN_TIME: Duration = Duration::from_secs(1);

/// Reads and drops what remains of a refused request's body, up to [`DRAIN_BYTES`] and for up
/// to [`DRAIN_TIME`], beside the refusal. HTTP/1 cannot answer and stop reading on one
/// connection: a server that closes it with request bytes unread resets it, and the reset can
/// destroy the refusal in the client's receive buffer before the client, still sending, reads
/// it. Read to its end, the body leaves the connection reusable; beyond the bounds it is closed.
fn drain_later(mut body: hyper::body::Incoming) {
    if body.is_end_stream() {
        return;
    }
    tokio::spawn(async move {
        let mut left = DRAIN_BYTES;
        let _ = tokio::time::timeout(DRAIN_TIME, async {
            while let Some(Ok(frame)) = body.frame().await {
                let len = frame.data_ref().map_or(0, Bytes::len);
                match left.checked_sub(len) {
                    Some(rest) => left = rest,
                    None => break,
                }
            }
        })
        .await;
    });
}

/// The client's request body, failing with [`TooLarge`] once it passes `max` bytes; dropped
/// after that, its rest is drained ([`drain_later`]).
struct Capped {
    /// `None` once handed to [`drain_later`].
    body: Option<hyper::body::Incoming>,
    /// It passed `max`.
    exceeded: bool,
    left: usize,
    max: usize,
    /// Set when it passes `max`, for whoever watches it ([`Capped::watched`]).
    oversize: Option<Arc<AtomicBool>>,
}

impl Capped {
    /// The upstream call's view of this body, which it reads as it sends it: told when it passes
    /// the bound.
    fn watched(&mut self) -> EdgeRequest {
        let flag = self.oversize.get_or_insert_default().clone();
        EdgeRequest {
            whole: None,
            oversize: Some(flag),
        }
    }
}

/// A request body over the bound.
#[derive(Debug, thiserror::Error)]
#[error("request body too large: over {max} bytes")]
struct TooLarge {
    max: usize,
}

impl Drop for Capped {
    fn drop(&mut self) {
        if self.exceeded {
            if let Some(body) = self.body.take() {
                drain_later(body);
            }
        }
    }
}

impl Body for Capped {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        // Past the bound it fails again however often it is polled: never an end.
        let too_large = |max: usize| Box::new(TooLarge { max }) as BoxError;
        let Some(body) = this.body.as_mut().filter(|_| !this.exceeded) else {
            return Poll::Ready(Some(Err(too_large(this.max))));
        };
        match Pin::new(body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, Bytes::len);
                if len > this.left {
                    this.exceeded = true;
                    if let Some(flag) = &this.oversize {
                        flag.store(true, Ordering::Release);
                    }
                    return Poll::Ready(Some(Err(too_large(this.max))));
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
        !self.exceeded && self.body.as_ref().is_some_and(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.as_ref().map(Body::size_hint).unwrap_or_default()
    }
}

/// A request of a connection, from its head to its response body's end (or its drop): the
/// connection is not idle meanwhile ([`Peer::idle`]).
struct Busy(Arc<Peer>);

impl Busy {
    fn new(peer: Arc<Peer>) -> Self {
        peer.busy.fetch_add(1, Ordering::AcqRel);
        Self(peer)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let peer = &self.0;
        let since = Instant::now().saturating_duration_since(peer.opened);
        let nanos = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
        peer.ended.fetch_max(nanos, Ordering::AcqRel);
        peer.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A request in flight: its place in the concurrency bound, and the gauge (when metrics are
/// exported).
struct InFlight {
    _permit: OwnedSemaphorePermit,
    metrics: bool,
}

impl InFlight {
    fn new(permit: OwnedSemaphorePermit, metrics: bool) -> Self {
        if metrics {
            metrics::gauge!(IN_FLIGHT).increment(1.0);
        }
        Self {
            _permit: permit,
            metrics,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.metrics {
            metrics::gauge!(IN_FLIGHT).decrement(1.0);
        }
    }
}

/// A response body as the client's connection sends it: it holds its request's place in the
/// concurrency bound (a forwarded request's) and keeps the connection busy until it ends.
pub(crate) struct Answer {
    body: StackBody,
    _in_flight: Option<InFlight>,
    _busy: Busy,
}

impl Body for Answer {
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
