//! [`DedupeService`]: reads a request (bounded), identifies the call, asks the engine, and
//! executes, replays or refuses (SPEC.md §17.10).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full, Limited};

use super::body::{BoxError, DedupeBody, box_body, full};
use super::capture::capture;
use super::identify::{Config, Identified, identify};
use crate::dedupe::{Decision, RequestJsonError};
use crate::http::REQUEST_KEY_HEADER;

/// Response header a [`DedupeService`] sets on a deduplicated call's response: `execute`,
/// `replay`, `unprotected` or the refusal's reason (for operators and tests; clients rely on
/// the JSON-RPC body).
pub const DEDUPE_HEADER: &str = "mcp-framing-dedupe";

/// The service of [`DedupeLayer`](super::DedupeLayer). Its inner service receives requests with a
/// `Full<Bytes>` body (the body was read to identify the call).
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
/// use mcp_framing::http::{DedupeLayer, DedupeService};
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
/// # fn main() {
/// # tokio_test::block_on(async {
/// let tool = Tool::new("{}");
/// let mut service: DedupeService<Tool> = DedupeLayer::new(Deduplicator::new(MemoryStore::new())).layer(tool.clone());
/// // A call without a request key is not deduplicated: it goes to the inner service as is.
/// for _ in 0..2 {
///     let response = service.call(unkeyed(tools_call(RequestKey::random(), "t"))).await.unwrap();
///     assert_eq!(response.status(), http::StatusCode::OK);
///     assert!(response.headers().get("mcp-framing-dedupe").is_none());
/// }
/// assert_eq!(tool.executions(), 2);
/// # });
/// # }
/// ```
#[derive(Clone)]
pub struct DedupeService<S> {
    inner: S,
    shared: Arc<Config>,
}

impl<S> fmt::Debug for DedupeService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DedupeService").finish_non_exhaustive()
    }
}

impl<S> DedupeService<S> {
    pub(super) fn new(inner: S, shared: Arc<Config>) -> Self {
        Self { inner, shared }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for DedupeService<S>
where
    S: tower_service::Service<Request<Full<Bytes>>, Response = Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: Body + Send + 'static,
    ReqBody::Data: Send,
    ReqBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError> + Send + 'static,
{
    type Response = Response<DedupeBody>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The service that was polled ready handles this request; a clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            // A body that declares more than the bound (Content-Length) is refused before any
            // of it is read; one that does not is read until it passes the bound, no further.
            if body.size_hint().lower() > shared.max_request_bytes as u64 {
                return Ok(plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "request body: larger than {} bytes",
                        shared.max_request_bytes
                    ),
                ));
            }
            let bytes = match Limited::new(body, shared.max_request_bytes).collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(err) => {
                    let status = if err.is::<http_body_util::LengthLimitError>() {
                        StatusCode::PAYLOAD_TOO_LARGE
                    } else {
                        StatusCode::BAD_REQUEST
                    };
                    return Ok(plain(status, format!("request body: {err}")));
                }
            };
            let principal = shared.principal.principal(&parts.headers);
            let header_key = match parts.headers.get(REQUEST_KEY_HEADER) {
                None => None,
                Some(value) => match value.to_str().ok().and_then(|v| v.trim().parse().ok()) {
                    Some(key) => Some(key),
                    None => {
                        return Ok(plain(
                            StatusCode::BAD_REQUEST,
                            "the Mcp-Framing-Request-Key header is not 32 hex digits".to_owned(),
                        ));
                    }
                },
            };
            let post = parts.method == http::Method::POST;
            let identified = identify(&shared, principal, header_key, post, &bytes);
            let request = Request::from_parts(parts, Full::new(bytes));
            let (call, id) = match identified {
                Identified::PassThrough => {
                    let response = inner.call(request).await?;
                    return Ok(response.map(box_body));
                }
                Identified::NotJson(err) => return Ok(parse_error(&err)),
                Identified::Invalid(reason) => return Ok(plain(StatusCode::BAD_REQUEST, reason)),
                Identified::Keyed(call, id) => (call, id),
            };
            match shared.dedup.begin(&call).await {
                Decision::Execute(guard) => {
                    // The call runs in a task of its own: a client that goes away, even before
                    // the response head, does not cancel it; it completes and is recorded, and
                    // the client's retry gets its result (SPEC.md §17.10).
                    let call = inner.call(request);
                    let task = tokio::spawn(async move {
                        let response = call.await?;
                        Ok(tag(capture(response, guard).await, "execute"))
                    });
                    match task.await {
                        Ok(result) => result,
                        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
                        Err(_) => Ok(plain(
                            StatusCode::SERVICE_UNAVAILABLE,
                            "the server is shutting down".to_owned(),
                        )),
                    }
                }
                Decision::Replay(stored) => Ok(tag(json(stored.to_response(&id)), "replay")),
                Decision::Refused(refusal) => Ok(tag(
                    json(refusal.to_response(&id, call.request_key())),
                    refusal.reason(),
                )),
                Decision::Unprotected => {
                    let response = inner.call(request).await?;
                    Ok(tag(response.map(box_body), "unprotected"))
                }
            }
        })
    }
}

fn plain(status: StatusCode, text: String) -> Response<DedupeBody> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(full(text))
        .expect("a valid response")
}

/// `400` with a JSON-RPC parse error (`-32700`, id `null`): the body is not one JSON text.
fn parse_error(err: &RequestJsonError) -> Response<DedupeBody> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null,
        "error": {"code": -32700, "message": format!("Parse error: {err}")}});
    let mut response = json(body.to_string());
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
}

fn json(text: String) -> Response<DedupeBody> {
    Response::builder()
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(full(text))
        .expect("a valid response")
}

fn tag(mut response: Response<DedupeBody>, decision: &'static str) -> Response<DedupeBody> {
    response
        .headers_mut()
        .insert(DEDUPE_HEADER, HeaderValue::from_static(decision));
    response
}
