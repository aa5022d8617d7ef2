//! The upstream: a tower service that forwards a request to the MCP server over a pooled HTTP/1.1
//! connection and hands its response back streamed, or answers a JSON-RPC error naming why it
//! could not (502 unreachable, 504 no head in time).
//!
//! The connections are the worker's own (hyper's `client::conn::http1`), and each is driven by
//! the task that uses it: while the request waits for its head, by that call; then by its response
//! body as it is read (by the client's connection, or by the deduplication's task when the client
//! went away). No task of its own, no hand-off per frame; back in the pool once the body ended.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, Version, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::time::{Instant, Sleep};

use super::config::UpstreamUrl;

/// Any error, boxed (the bodies' common error type).
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The request body the upstream client sends.
pub(crate) type OutgoingBody = UnsyncBoxBody<Bytes, BoxError>;

/// The response body the sidecar sends its clients.
pub(crate) type ResponseBody = UnsyncBoxBody<Bytes, BoxError>;

/// The response body of [`Upstream`].
pub(crate) type UpstreamBody = UnsyncBoxBody<Bytes, UpstreamBodyError>;

/// What the edge knows of a request that the upstream call needs (one request extension).
#[derive(Clone, Debug, Default)]
pub(crate) struct EdgeRequest {
    /// The request body, when the edge read it whole: error bodies echo its JSON-RPC id, read
    /// from it only then (most calls need no error body).
    pub(crate) whole: Option<Bytes>,
    /// For a body still being read (not `whole`): set when it passes the size limit while it is
    /// sent, and the upstream call's failure is then the client's, a 413.
    pub(crate) oversize: Option<Arc<AtomicBool>>,
}

impl EdgeRequest {
    /// The `id` of the JSON-RPC request (`null` if the body was not read whole, or is not one
    /// JSON-RPC object with an id).
    pub(crate) fn id(&self) -> Value {
        #[derive(serde::Deserialize)]
        struct Head {
            id: Option<Value>,
        }
        self.whole
            .as_ref()
            .and_then(|whole| serde_json::from_slice::<Head>(whole).ok())
            .and_then(|head| head.id)
            .filter(|id| matches!(id, Value::String(_) | Value::Number(_)))
            .unwrap_or(Value::Null)
    }

    /// The body passed the size limit.
    pub(crate) fn oversize(&self) -> bool {
        self.oversize
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Acquire))
    }
}

/// How an upstream response body failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamBodyError {
    /// No byte came for the idle bound.
    #[error("the upstream sent nothing for {0:?}")]
    Idle(Duration),
    /// The connection failed, or closed before the body's end (chunked or a `Content-Length`).
    #[error("{0}")]
    Failed(#[source] hyper::Error),
}

/// The settings of [`Upstream`].
#[derive(Clone, Debug)]
pub(crate) struct UpstreamConfig {
    pub(crate) target: UpstreamUrl,
    pub(crate) connect_timeout: Duration,
    pub(crate) head_timeout: Duration,
    pub(crate) idle_timeout: Duration,
}

/// How long an idle upstream connection is kept.
const IDLE_KEPT: Duration = Duration::from_secs(90);
/// At most this many idle upstream connections a worker keeps.
const IDLE_MAX: usize = 256;

/// An upstream connection: what sends requests on it, and the connection itself, driven by
/// whoever waits on it. The connection (its buffers and state, most of a kilobyte) is boxed: a
/// call moves its `Conn` from the pool to the call, into the response body and back, each move
/// a pointer's.
struct Conn {
    sender: http1::SendRequest<OutgoingBody>,
    connection: Box<http1::Connection<TokioIo<tokio::net::TcpStream>, OutgoingBody>>,
    /// The connection's one timer, for every bound of its calls (the response head's, then
    /// the body's idle one): see [`Conn::poll_due`].
    timer: Pin<Box<Sleep>>,
}

impl Conn {
    /// Drives the connection (reads, writes); `true` while it can serve further requests.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        Pin::new(&mut *self.connection).poll(cx).is_pending()
    }

    /// Ready once `due` passed. The timer is moved only when it would fire after `due`, or
    /// when it fired before it: a call's bounds lie after the last call's, so the timer set
    /// for an earlier bound stays (a timer-wheel update saved a call), and when it fires it is
    /// set again to the bound of the call then in progress.
    fn poll_due(&mut self, due: Instant, cx: &mut Context<'_>) -> Poll<()> {
        if self.timer.deadline() > due {
            self.timer.as_mut().reset(due);
        }
        loop {
            match self.timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if self.timer.deadline() >= due => return Poll::Ready(()),
                Poll::Ready(()) => self.timer.as_mut().reset(due),
            }
        }
    }
}

/// An idle connection in the pool.
struct Idle {
    conn: Conn,
    since: Instant,
}

/// A worker's idle upstream connections, the most recent last.
#[derive(Default)]
struct Pool(Mutex<Vec<Idle>>);

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The most recent idle connection that is still open and ready for a request.
    async fn checkout(&self) -> Option<Conn> {
        loop {
            let mut idle = self.lock().pop()?;
            if idle.since.elapsed() >= IDLE_KEPT {
                // The older ones are older still.
                self.lock().clear();
                return None;
            }
            // Polled once: an upstream that closed it is seen now, and a connection back from
            // its last response turns ready.
            let ready = std::future::poll_fn(|cx| {
                Poll::Ready(idle.conn.drive(cx) && idle.conn.sender.poll_ready(cx).is_ready())
            })
            .await;
            if ready && idle.conn.sender.is_ready() {
                return Some(idle.conn);
            }
        }
    }

    /// A connection whose response ended, for the next request.
    fn checkin(&self, conn: Conn) {
        let mut idle = self.lock();
        if idle.len() < IDLE_MAX {
            idle.push(Idle {
                conn,
                since: Instant::now(),
            });
        }
    }

    /// Drops the connections idle for longer than [`IDLE_KEPT`].
    fn reap(&self) {
        self.lock().retain(|idle| idle.since.elapsed() < IDLE_KEPT);
    }
}

/// Why an upstream call got no response head.
#[derive(Debug)]
enum CallError {
    /// No connection could be made.
    Connect(std::io::Error),
    /// No connection within the bound.
    ConnectTimeout,
    /// The connection failed or the upstream did not answer HTTP.
    Http(hyper::Error),
    /// No response head by its bound.
    HeadTimeout,
}

/// The forwarding service. Cheap to clone: the connection pool is shared (by one worker).
#[derive(Clone)]
pub(crate) struct Upstream {
    pool: Arc<Pool>,
    config: Arc<UpstreamConfig>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// A service with its own connection pool (HTTP/1.1, `TCP_NODELAY`, idle connections kept
    /// for 90 s): one a worker, made on the worker's runtime (which reaps the pool).
    pub(crate) fn new(config: UpstreamConfig) -> Self {
        let pool = Arc::new(Pool::default());
        let weak: Weak<Pool> = Arc::downgrade(&pool);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(IDLE_KEPT / 3);
            loop {
                every.tick().await;
                match weak.upgrade() {
                    Some(pool) => pool.reap(),
                    None => return,
                }
            }
        });
        Self {
            pool,
            config: Arc::new(config),
        }
    }

    /// A new connection to the upstream, its timer set to `due`.
    async fn connect(&self, due: Instant) -> Result<Conn, CallError> {
        let address = self.config.target.host_port();
        let stream = tokio::time::timeout(
            self.config.connect_timeout,
            tokio::net::TcpStream::connect(address.as_str()),
        )
        .await
        .map_err(|_| CallError::ConnectTimeout)?
        .map_err(CallError::Connect)?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(CallError::Http)?;
        Ok(Conn {
            sender,
            connection: Box::new(connection),
            timer: Box::pin(tokio::time::sleep_until(due)),
        })
    }

    /// Sends `request` on a pooled connection (on a new one when the pooled one closed before
    /// the request was sent) and waits for the response head until `due`, driving the
    /// connection.
    async fn call(
        &self,
        mut request: Request<OutgoingBody>,
        due: Instant,
    ) -> Result<(Response<hyper::body::Incoming>, Conn), CallError> {
        loop {
            let (mut conn, pooled) = match self.pool.checkout().await {
                Some(conn) => (conn, true),
                None => match tokio::time::timeout_at(due, self.connect(due)).await {
                    Ok(conn) => (conn?, false),
                    Err(_) => return Err(CallError::HeadTimeout),
                },
            };
            let mut sent = std::pin::pin!(conn.sender.try_send_request(request));
            let mut open = true;
            let outcome = std::future::poll_fn(|cx| {
                if open {
                    open = Pin::new(&mut *conn.connection).poll(cx).is_pending();
                }
                match sent.as_mut().poll(cx) {
                    Poll::Ready(outcome) => Poll::Ready(Some(outcome)),
                    Poll::Pending => conn.poll_due(due, cx).map(|()| None),
                }
            })
            .await;
            let Some(outcome) = outcome else {
                return Err(CallError::HeadTimeout);
            };
            match outcome {
                Ok(response) => return Ok((response, conn)),
                // Closed before a byte of the request was sent: on a new connection.
                Err(mut err) if pooled && err.message().is_some() => {
                    request = err.take_message().expect("the request, not sent");
                }
                Err(err) => return Err(CallError::Http(err.into_error())),
            }
        }
    }

    async fn forward(self, request: Request<OutgoingBody>) -> Response<UpstreamBody> {
        let (mut parts, body) = request.into_parts();
        let edge = parts.extensions.remove::<EdgeRequest>().unwrap_or_default();
        // The id an error body echoes, read only for an error body.
        let id = || edge.id();
        // Origin form on the connection to the upstream (the edge sent the client's `Host`, or
        // the upstream's with --rewrite-host).
        parts.uri = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| self.config.target.path.clone())
            .into();
        if !parts.headers.contains_key(header::HOST) {
            if let Ok(host) = HeaderValue::from_str(self.config.target.authority.as_str()) {
                parts.headers.insert(header::HOST, host);
            }
        }
        parts.version = Version::HTTP_11;
        // The edge removed the client's hop-by-hop headers before adding its own.
        let method = parts.method.clone();
        let due = Instant::now() + self.config.head_timeout;
        let (response, conn) = match self.call(Request::from_parts(parts, body), due).await {
            Ok(answered) => answered,
            Err(err) => {
                if edge.oversize() {
                    return too_large(id());
                }
                let (failure, detail) = match &err {
                    CallError::Connect(io) => (Failure::Connect, chain(io)),
                    CallError::ConnectTimeout => (Failure::ConnectTimeout, String::new()),
                    CallError::Http(http) => (Failure::Protocol, chain(http)),
                    CallError::HeadTimeout => {
                        let bound = self.config.head_timeout;
                        let detail = format!("no response head from the upstream within {bound:?}");
                        (Failure::HeadTimeout(bound), detail)
                    }
                };
                metrics::counter!(UPSTREAM_FAILURES, "cause" => failure.cause()).increment(1);
                tracing::warn!(upstream = %self.config.target.url, %method,
                    cause = failure.cause(), "{detail}");
                let detail = if matches!(failure, Failure::HeadTimeout(_)) {
                    ""
                } else {
                    detail.as_str()
                };
                return failure.response(&self.config.target, id(), detail);
            }
        };
        let (mut parts, body) = response.into_parts();
        remove_hop_by_hop(&mut parts.headers);
        let body = IdleBody {
            body,
            conn: Some(conn),
            open: true,
            pool: self.pool.clone(),
            idle: self.config.idle_timeout,
            last: Instant::now(),
            done: false,
        };
        Response::from_parts(parts, body.boxed_unsync())
    }
}

impl<B> tower_service::Service<Request<B>> for Upstream
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<UpstreamBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The pool makes connections on demand; the edge bounds the requests in flight.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let request = request.map(|body| body.map_err(Into::into).boxed_unsync());
        let this = self.clone();
        Box::pin(async move { Ok(this.forward(request).await) })
    }
}

/// The counter of upstream failures, by `cause`.
pub(crate) const UPSTREAM_FAILURES: &str = "mcp_framing.proxy.upstream_failures";

/// Why the upstream did not answer.
#[derive(Clone, Copy, Debug)]
enum Failure {
    /// The connection could not be made (refused, unreachable, name not found): 502.
    Connect,
    /// The connection was not made in time: 504.
    ConnectTimeout,
    /// No response head within the bound: 504.
    HeadTimeout(Duration),
    /// The connection closed or the upstream sent something that is not an HTTP response: 502.
    Protocol,
}

impl Failure {
    /// The `cause` label and `data.cause` member.
    fn cause(self) -> &'static str {
        match self {
            Self::Connect => "upstream_unreachable",
            Self::ConnectTimeout => "upstream_connect_timeout",
            Self::HeadTimeout(_) => "upstream_head_timeout",
            Self::Protocol => "upstream_protocol_error",
        }
    }

    fn status(self) -> StatusCode {
        match self {
            Self::Connect | Self::Protocol => StatusCode::BAD_GATEWAY,
            Self::ConnectTimeout | Self::HeadTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    fn response(self, target: &UpstreamUrl, id: Value, detail: &str) -> Response<UpstreamBody> {
        let message = match self {
            Self::Connect => format!("upstream unreachable: {}: {detail}", target.url),
            Self::ConnectTimeout => format!("upstream connect timed out: {}", target.url),
            Self::HeadTimeout(bound) => format!(
                "upstream sent no response head within {bound:?}: {}",
                target.url
            ),
            Self::Protocol => format!(
                "upstream closed the connection or sent an invalid response: {}: {detail}",
                target.url
            ),
        };
        let mut response = error_response(self.status(), id, &message, self.cause());
        if matches!(self, Self::Connect | Self::ConnectTimeout) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// An error and its sources, as one line (`client error (Connect): tcp connect error: ...`).
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}

/// `413` with a JSON-RPC error.
fn too_large(id: Value) -> Response<UpstreamBody> {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        id,
        "request body too large",
        "request_too_large",
    )
}

/// A response with a JSON-RPC error body (code -32603, `data.cause` naming the cause) for the
/// request `id` (`null` when it is not known).
pub(crate) fn error_response<E>(
    status: StatusCode,
    id: Value,
    message: &str,
    cause: &str,
) -> Response<UnsyncBoxBody<Bytes, E>> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message, "data": {"cause": cause}},
    });
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(
            Full::new(Bytes::from(body.to_string()))
                .map_err(|never: Infallible| match never {})
                .boxed_unsync(),
        )
        .expect("a valid response")
}

/// Drops the hop-by-hop headers (RFC 9110 §7.6.1): those `Connection` names and the standard
/// ones.
///
/// A message carries few headers and few of these: the names are read in one pass, and only
/// those present are removed (a removal hashes its name).
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap) {
    const HOPS: usize = 8;
    const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
    const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");
    const HOP_BY_HOP: [HeaderName; HOPS] = [
        header::CONNECTION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
        KEEP_ALIVE,
        PROXY_CONNECTION,
    ];
    let mut present = [false; HOPS];
    for name in headers.keys() {
        if let Some(at) = HOP_BY_HOP.iter().position(|hop| hop == name) {
            present[at] = true;
        }
    }
    if present[0] {
        let named: Vec<String> = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(|name| name.trim().to_ascii_lowercase())
            .filter(|name| !name.is_empty())
            .collect();
        for name in named {
            headers.remove(name.as_str());
        }
    }
    for (name, present) in HOP_BY_HOP.into_iter().zip(present) {
        if present {
            headers.remove(name);
        }
    }
}

/// An upstream response body that drives its connection, goes back to the pool with it at its
/// end, and fails when no byte comes for the idle bound: a body that never ends holds nothing
/// past it. Dropped before its end, it closes the connection.
///
/// The timer (the connection's, [`Conn::poll_due`]) is not moved at each frame (a timer-wheel
/// update a frame): a frame only notes the time, and the timer, when it fires, is set again from
/// the last frame if one came since.
struct IdleBody {
    body: hyper::body::Incoming,
    /// The connection it comes on; `None` once back in the pool.
    conn: Option<Conn>,
    /// The connection has not ended.
    open: bool,
    pool: Arc<Pool>,
    idle: Duration,
    /// When the last frame came (or the body started).
    last: Instant,
    done: bool,
}

impl Drop for IdleBody {
    /// Dropped once the upstream's body was read to its end, the connection goes back to the
    /// pool: hyper drops a body at the last byte of a known length without polling it for its
    /// end, so the poll that sees the end is not the only way here.
    fn drop(&mut self) {
        if self.body.is_end_stream() {
            self.give_back();
        }
    }
}

impl IdleBody {
    /// The connection back to the pool, if it can serve another request.
    fn give_back(&mut self) {
        if let Some(conn) = self.conn.take().filter(|_| self.open) {
            self.pool.checkin(conn);
        }
    }
}

impl Body for IdleBody {
    type Data = Bytes;
    type Error = UpstreamBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamBodyError>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if this.open {
            if let Some(conn) = &mut this.conn {
                // The connection reads the socket and hands the body its bytes.
                this.open = conn.drive(cx);
            }
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.last = Instant::now();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => {
                this.done = true;
                // Never back in the pool.
                this.conn = None;
                Poll::Ready(Some(Err(UpstreamBodyError::Failed(err))))
            }
            Poll::Ready(None) => {
                this.done = true;
                this.give_back();
                Poll::Ready(None)
            }
            Poll::Pending => {
                // The connection is given back or dropped only at the body's end.
                let passed = match &mut this.conn {
                    Some(conn) => conn.poll_due(this.last + this.idle, cx).is_ready(),
                    None => true,
                };
                if passed {
                    this.done = true;
                    this.conn = None;
                    return Poll::Ready(Some(Err(UpstreamBodyError::Idle(this.idle))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
