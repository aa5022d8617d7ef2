//! The upstream: a tower service that forwards a request to the MCP server over a pooled
//! hyper-util client and hands its response back streamed, or answers a JSON-RPC error naming why
//! it could not (502 unreachable, 504 no head in time).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{
    HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, Uri, Version, header,
};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
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

/// The request body, when the edge read it whole (a request extension): error bodies echo its
/// JSON-RPC id, read from it only then (most calls need no error body).
#[derive(Clone, Debug)]
pub(crate) struct WholeRequest(pub(crate) Bytes);

impl WholeRequest {
    /// The `id` of the JSON-RPC request (`null` if it is not one JSON-RPC object with an id).
    pub(crate) fn id(&self) -> Value {
        #[derive(serde::Deserialize)]
        struct Head {
            id: Option<Value>,
        }
        serde_json::from_slice::<Head>(&self.0)
            .ok()
            .and_then(|head| head.id)
            .filter(|id| matches!(id, Value::String(_) | Value::Number(_)))
            .unwrap_or(Value::Null)
    }
}

/// Set when the client's request body passed the size limit while it was being sent (a
/// request extension): the upstream call's failure is then the client's, a 413.
#[derive(Clone, Debug, Default)]
pub(crate) struct Oversize(pub(crate) Arc<AtomicBool>);

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

/// The forwarding service. Cheap to clone: the connection pool is shared.
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    client: Client<HttpConnector, OutgoingBody>,
    config: Arc<UpstreamConfig>,
}

impl Upstream {
    /// A service with its own connection pool (HTTP/1.1, `TCP_NODELAY`, idle connections kept
    /// for 90 s).
    pub(crate) fn new(config: UpstreamConfig) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(config.connect_timeout));
        connector.set_nodelay(true);
        connector.enforce_http(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        Self {
            client,
            config: Arc::new(config),
        }
    }

    async fn forward(self, request: Request<OutgoingBody>) -> Response<UpstreamBody> {
        let (mut parts, body) = request.into_parts();
        let whole = parts.extensions.remove::<WholeRequest>();
        // The id an error body echoes, read only for an error body.
        let id = || whole.as_ref().map_or(Value::Null, WholeRequest::id);
        let oversize = parts.extensions.get::<Oversize>().cloned();
        let path = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| self.config.target.path.clone());
        parts.uri = Uri::builder()
            .scheme("http")
            .authority(self.config.target.authority.clone())
            .path_and_query(path)
            .build()
            .expect("an http URI of a checked authority and a request's path");
        parts.version = Version::HTTP_11;
        // The edge removed the client's hop-by-hop headers before adding its own.
        let method = parts.method.clone();
        let call = self.client.request(Request::from_parts(parts, body));
        let response = match tokio::time::timeout(self.config.head_timeout, call).await {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => {
                if oversize.is_some_and(|flag| flag.0.load(Ordering::Acquire)) {
                    return too_large(id());
                }
                let failure = Failure::of(&err);
                let detail = chain(&err);
                metrics::counter!(UPSTREAM_FAILURES, "cause" => failure.cause()).increment(1);
                tracing::warn!(upstream = %self.config.target.url, %method,
                    cause = failure.cause(), "{detail}");
                return failure.response(&self.config.target, id(), &detail);
            }
            Err(_) => {
                let failure = Failure::HeadTimeout(self.config.head_timeout);
                metrics::counter!(UPSTREAM_FAILURES, "cause" => failure.cause()).increment(1);
                tracing::warn!(upstream = %self.config.target.url, %method,
                    "no response head from the upstream within {:?}", self.config.head_timeout);
                return failure.response(&self.config.target, id(), "");
            }
        };
        let (mut parts, body) = response.into_parts();
        remove_hop_by_hop(&mut parts.headers);
        let body = IdleBody {
            body,
            idle: self.config.idle_timeout,
            timer: None,
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
    fn of(err: &hyper_util::client::legacy::Error) -> Self {
        if err.is_connect() {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
            while let Some(cause) = source {
                if let Some(io) = cause.downcast_ref::<std::io::Error>() {
                    if io.kind() == std::io::ErrorKind::TimedOut {
                        return Self::ConnectTimeout;
                    }
                }
                source = cause.source();
            }
            return Self::Connect;
        }
        Self::Protocol
    }

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
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap) {
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
    const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
    const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");
    for name in [
        header::CONNECTION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
        KEEP_ALIVE,
        PROXY_CONNECTION,
    ] {
        headers.remove(name);
    }
}

/// An upstream response body that fails when no byte comes for the idle bound: a body that
/// never ends holds nothing past it.
///
/// The timer is not moved at each frame (a timer-wheel update a frame): a frame only notes the
/// time, and the timer, when it fires, is set again from the last frame if one came since.
struct IdleBody {
    body: hyper::body::Incoming,
    idle: Duration,
    /// Created at the first wait for a frame.
    timer: Option<Pin<Box<Sleep>>>,
    /// When the last frame came (or the body started).
    last: Instant,
    done: bool,
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
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.last = Instant::now();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => {
                this.done = true;
                Poll::Ready(Some(Err(UpstreamBodyError::Failed(err))))
            }
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => {
                let (last, idle) = (this.last, this.idle);
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(last + idle)));
                loop {
                    match timer.as_mut().poll(cx) {
                        Poll::Pending => break Poll::Pending,
                        // Frames came since it was set: it waits for the last one's bound.
                        Poll::Ready(()) if timer.deadline() < last + idle => {
                            timer.as_mut().reset(last + idle);
                        }
                        Poll::Ready(()) => {
                            this.done = true;
                            break Poll::Ready(Some(Err(UpstreamBodyError::Idle(idle))));
                        }
                    }
                }
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
