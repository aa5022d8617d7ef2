//! Request-key deduplication over HTTP (SPEC.md §17.10; features `http` and `dedupe`): a tower
//! layer for any MCP server answering Streamable HTTP POSTs (rmcp, axum, hyper).

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use serde_json::Value;

use crate::dedupe::{
    AuthorizationPrincipal, Decision, Deduplicator, ExecutionGuard, KeyedCall, PrincipalExtractor,
    RequestJsonError, parse_request_json,
};
use crate::http::REQUEST_KEY_HEADER;
use crate::ids::RequestKey;
use crate::jsonrpc::is_response;
use crate::limits::DEFAULT_MAX_MESSAGE_SIZE;
use crate::sse::{SseEvent, SseParser, is_message_event};

/// Response header a [`DedupeService`] sets on a deduplicated call's response: `execute`,
/// `replay`, `unprotected` or the refusal's reason (for operators and tests; clients rely on
/// the JSON-RPC body).
pub const DEDUPE_HEADER: &str = "mcp-framing-dedupe";

/// Default bound on a request body the layer reads to identify a call: 16 MiB, the default
/// maximum message size (SPEC.md §6). A larger body is answered `413`.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = DEFAULT_MAX_MESSAGE_SIZE as usize;

/// The response body of a [`DedupeService`].
pub type DedupeBody = UnsyncBoxBody<Bytes, DedupeBodyError>;

/// The inner response body failed (its error's text), as a [`DedupeBody`] reports it.
///
/// # Examples
///
/// ```
/// let err = mcp_framing::http::DedupeBodyError::new("connection reset");
/// assert_eq!(err.to_string(), "connection reset");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DedupeBodyError(String);

impl DedupeBodyError {
    /// An error with this text.
    ///
    /// # Examples
    ///
    /// See [`DedupeBodyError`].
    #[must_use]
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }
}

/// A tower layer that deduplicates keyed calls (SPEC.md §17.10) in front of any MCP server that
/// answers Streamable HTTP POSTs (rmcp's `StreamableHttpService`, an axum or hyper handler).
///
/// For every POST carrying a JSON-RPC request of a deduplicated method (default `tools/call`)
/// with a request key (header `Mcp-Framing-Request-Key` and/or `params._meta`), it reads the
/// body (bounded), identifies the call (principal, method, tool, key, fingerprint) and asks the
/// [`Deduplicator`]:
/// - **execute**: the request goes to the inner service; the inner response body is driven to
///   its end by a task of its own, independently of the client connection, its final JSON-RPC
///   response captured and recorded, and its bytes relayed to the client while it listens;
/// - **replay**: answered with the stored result under this attempt's id, `application/json`;
/// - **refused**: answered with the refusal's JSON-RPC error, `application/json`.
///
/// Everything else passes through. Put [`FramingLayer`](crate::rmcp_http::FramingLayer) *outside*
/// this layer (or use `FramingLayer::dedupe`), so that replays and refusals are framed afresh for
/// clients that opted in.
///
/// # Examples
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Full};
/// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
/// use mcp_framing::http::DedupeLayer;
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use tower_layer::Layer;
/// use tower_service::Service;
///
/// // Any inner service: here a tool that counts its executions.
/// #[derive(Clone)]
/// struct Tool(Arc<AtomicUsize>);
/// impl Service<http::Request<Full<Bytes>>> for Tool {
///     type Response = http::Response<Full<Bytes>>;
///     type Error = std::convert::Infallible;
///     type Future = std::future::Ready<Result<Self::Response, Self::Error>>;
///     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
///         std::task::Poll::Ready(Ok(()))
///     }
///     fn call(&mut self, _request: http::Request<Full<Bytes>>) -> Self::Future {
///         let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
///         let body = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"executions":{n}}}}}"#);
///         std::future::ready(Ok(http::Response::builder()
///             .header("content-type", "application/json").body(Full::new(body.into())).unwrap()))
///     }
/// }
///
/// # tokio_test::block_on(async {
/// let executions = Arc::new(AtomicUsize::new(0));
/// let mut service = DedupeLayer::new(Deduplicator::new(MemoryStore::new()))
///     .layer(Tool(executions.clone()));
/// let key = mcp_framing::RequestKey::random();
/// for id in [1, 2] {
///     let request = http::Request::post("/mcp")
///         .header("mcp-framing-request-key", key.to_string())
///         .body(Full::new(Bytes::from(format!(
///             r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t","arguments":{{}}}}}}"#))))
///         .unwrap();
///     let response = service.call(request).await.unwrap();
///     let body = response.into_body().collect().await.unwrap().to_bytes();
///     let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
///     assert_eq!((value["id"].as_i64(), value["result"]["executions"].as_i64()), (Some(id), Some(1)));
/// }
/// assert_eq!(executions.load(Ordering::SeqCst), 1); // the retry was replayed
/// # });
/// ```
#[derive(Clone)]
pub struct DedupeLayer {
    shared: Arc<Shared>,
}

struct Shared {
    dedup: Deduplicator,
    principal: Box<dyn PrincipalExtractor>,
    methods: Vec<String>,
    max_request_bytes: usize,
}

impl fmt::Debug for DedupeLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DedupeLayer")
            .field("dedup", &self.shared.dedup)
            .field("methods", &self.shared.methods)
            .field("max_request_bytes", &self.shared.max_request_bytes)
            .finish_non_exhaustive()
    }
}

impl DedupeLayer {
    /// A layer deduplicating `tools/call` with `dedup`, principals from the `Authorization`
    /// header ([`AuthorizationPrincipal`]), request bodies up to [`DEFAULT_MAX_REQUEST_BYTES`].
    ///
    /// # Examples
    ///
    /// See [`DedupeLayer`].
    #[must_use]
    pub fn new(dedup: Deduplicator) -> Self {
        Self {
            shared: Arc::new(Shared {
                dedup,
                principal: Box::new(AuthorizationPrincipal),
                methods: vec!["tools/call".to_owned()],
                max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            }),
        }
    }

    fn shared_mut(&mut self) -> &mut Shared {
        Arc::get_mut(&mut self.shared).expect("configured before it is cloned")
    }

    /// Sets how the caller's principal is found (default [`AuthorizationPrincipal`]).
    ///
    /// # Panics
    ///
    /// If the layer was cloned before (configure it first).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore, Principal};
    /// use mcp_framing::http::DedupeLayer;
    /// let layer = DedupeLayer::new(Deduplicator::new(MemoryStore::new()))
    ///     .principal(|headers: &http::HeaderMap| match headers.get("x-user") {
    ///         Some(user) => Principal::from_id(user.as_bytes()),
    ///         None => Principal::anonymous(),
    ///     });
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn principal(mut self, extractor: impl PrincipalExtractor) -> Self {
        self.shared_mut().principal = Box::new(extractor);
        self
    }

    /// Sets the deduplicated methods (default `["tools/call"]`). Declare the same in the
    /// discovery contract ([`Deduplication`](crate::Deduplication)).
    ///
    /// # Panics
    ///
    /// If the layer was cloned before.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// let layer = DedupeLayer::new(Deduplicator::new(MemoryStore::new()))
    ///     .methods(["tools/call", "sampling/createMessage"]);
    /// assert_eq!(layer.deduplicated_methods().len(), 2);
    /// ```
    #[must_use]
    pub fn methods<I, M>(mut self, methods: I) -> Self
    where
        I: IntoIterator<Item = M>,
        M: Into<String>,
    {
        self.shared_mut().methods = methods.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the bound on a request body read to identify a call (default
    /// [`DEFAULT_MAX_REQUEST_BYTES`]); a larger one is answered `413 Payload Too Large`.
    ///
    /// # Panics
    ///
    /// If the layer was cloned before.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// let layer = mcp_framing::http::DedupeLayer::new(Deduplicator::new(MemoryStore::new()))
    ///     .max_request_bytes(1 << 20);
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn max_request_bytes(mut self, max: usize) -> Self {
        self.shared_mut().max_request_bytes = max;
        self
    }

    /// The deduplicated methods.
    ///
    /// # Examples
    ///
    /// See [`methods`](Self::methods).
    #[must_use]
    pub fn deduplicated_methods(&self) -> &[String] {
        &self.shared.methods
    }

    /// The engine (its counters: [`Deduplicator::stats`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// let layer = mcp_framing::http::DedupeLayer::new(Deduplicator::new(MemoryStore::new()));
    /// assert_eq!(layer.deduplicator().stats().snapshot().executed, 0);
    /// ```
    #[must_use]
    pub fn deduplicator(&self) -> &Deduplicator {
        &self.shared.dedup
    }

    /// The contract member declaring what this layer does (SPEC.md §17.11), for
    /// [`FramingContract::with_deduplication`](crate::FramingContract::with_deduplication).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// let layer = mcp_framing::http::DedupeLayer::new(Deduplicator::new(MemoryStore::new()));
    /// assert_eq!(layer.declaration().window_ms, 24 * 3600 * 1000);
    /// ```
    #[must_use]
    pub fn declaration(&self) -> crate::contract::Deduplication {
        let mut declaration =
            crate::contract::Deduplication::new(self.shared.dedup.window_duration());
        declaration.methods = self.shared.methods.clone();
        declaration
    }
}

impl<S> tower_layer::Layer<S> for DedupeLayer {
    type Service = DedupeService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DedupeService {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// The service of [`DedupeLayer`]. Its inner service receives requests with a
/// `Full<Bytes>` body (the body was read to identify the call).
///
/// # Examples
///
/// See [`DedupeLayer`].
#[derive(Clone)]
pub struct DedupeService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> fmt::Debug for DedupeService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DedupeService").finish_non_exhaustive()
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
    ResBody::Error: fmt::Display + Send + 'static,
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
                Decision::Unprotected(_) => {
                    let response = inner.call(request).await?;
                    Ok(tag(response.map(box_body), "unprotected"))
                }
            }
        })
    }
}

enum Identified {
    PassThrough,
    NotJson(RequestJsonError),
    Invalid(String),
    Keyed(KeyedCall, Value),
}

fn identify(
    shared: &Shared,
    principal: crate::dedupe::Principal,
    header_key: Option<RequestKey>,
    post: bool,
    bytes: &[u8],
) -> Identified {
    // A POST body must be one JSON text, read strictly (SPEC.md §17.10: UTF-8, nesting bounded,
    // no duplicate member names); else it is answered with a JSON-RPC parse error. Only a
    // single JSON-RPC request of a deduplicated method is a candidate; anything else
    // (notifications, responses, batches, other HTTP methods) is the inner service's.
    let request = match parse_request_json(bytes) {
        Ok(request) => request,
        Err(err) if post => return Identified::NotJson(err),
        Err(_) => return Identified::PassThrough,
    };
    let Some(id) = request.get("id").cloned() else {
        return Identified::PassThrough;
    };
    let deduplicated = request
        .get("method")
        .and_then(Value::as_str)
        .is_some_and(|m| shared.methods.iter().any(|d| d == m));
    if !deduplicated {
        return Identified::PassThrough;
    }
    match KeyedCall::from_request(principal, header_key, &request, shared.dedup.rules()) {
        Ok(Some(call)) => Identified::Keyed(call, id),
        Ok(None) => Identified::PassThrough,
        Err(err) => Identified::Invalid(err.to_string()),
    }
}

fn box_body<B>(body: B) -> DedupeBody
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: fmt::Display,
{
    body.map_err(|err| DedupeBodyError(err.to_string()))
        .boxed_unsync()
}

fn full(bytes: impl Into<Bytes>) -> DedupeBody {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
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

/// Frames relayed from the capture task to the client; a few, so that a slow client slows the
/// relay but a gone one does not stop the capture.
const RELAY_FRAMES: usize = 16;

/// Drives the inner response body to its end in a task of its own, finds the final JSON-RPC
/// response in it and records it with the guard (SPEC.md §17.10), whatever the client does: a
/// client that goes away stops the relay, never the recording. An `application/json` body (one
/// message) is collected, answered whole (with its length, in one write), then recorded; an SSE
/// body is relayed to the client as it comes.
async fn capture<B>(response: Response<B>, guard: ExecutionGuard) -> Response<DedupeBody>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: fmt::Display + Send,
{
    let (parts, body) = response.into_parts();
    if parts.status.is_client_error() {
        // Rejected before anything ran (HTTP semantics of 4xx): the key is free again at once.
        tokio::spawn(async move {
            let _ = guard.release().await;
        });
        return Response::from_parts(parts, box_body(body));
    }
    let content_type = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let sse =
        crate::http::Mapping::from_content_type(content_type) == Some(crate::http::Mapping::Sse);
    if !sse {
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut body = std::pin::pin!(body);
            let mut whole = BytesMut::new();
            let mut failed = None;
            while let Some(frame) = body.as_mut().frame().await {
                match frame {
                    Ok(frame) => {
                        if let Some(data) = frame.data_ref() {
                            whole.extend_from_slice(data);
                        }
                    }
                    Err(err) => {
                        failed = Some(DedupeBodyError(err.to_string()));
                        break;
                    }
                }
            }
            match failed {
                Some(err) => {
                    no_final_response(&guard);
                    let _ = tx.send(Err(err));
                }
                None => {
                    let whole = whole.freeze();
                    // Answered first: recording is off the client's path (a retry that comes
                    // before it is recorded finds the claim in flight and waits for it).
                    let _ = tx.send(Ok(whole.clone()));
                    if whole.len() as u64 > DEFAULT_MAX_MESSAGE_SIZE {
                        record(guard, Found::TooLarge(whole.len() as u64)).await;
                    } else if std::str::from_utf8(&whole).is_ok_and(is_response) {
                        record(guard, Found::Message(whole)).await;
                    } else {
                        no_final_response(&guard);
                    }
                }
            }
        });
        let body = match rx.await {
            Ok(Ok(bytes)) => full(bytes),
            Ok(Err(err)) => failing(err),
            Err(_) => failing(DedupeBodyError::new("the response task stopped")),
        };
        return Response::from_parts(parts, body);
    }
    let mut finder = FinalResponse::new();
    let (tx, rx) =
        tokio::sync::mpsc::channel::<Result<Frame<Bytes>, DedupeBodyError>>(RELAY_FRAMES);
    tokio::spawn(async move {
        let mut body = std::pin::pin!(body);
        let mut guard = Some(guard);
        let mut client_gone = false;
        while let Some(frame) = body.as_mut().frame().await {
            let frame = match frame {
                Ok(frame) => frame,
                Err(err) => {
                    if !client_gone {
                        let _ = tx.send(Err(DedupeBodyError(err.to_string()))).await;
                    }
                    break;
                }
            };
            if let Some(data) = frame.data_ref() {
                if let Some(found) = finder.feed(data) {
                    if let Some(guard) = guard.take() {
                        record(guard, found).await;
                    }
                }
            }
            if !client_gone && tx.send(Ok(frame)).await.is_err() {
                client_gone = true;
                tracing::event!(target: "mcp_framing::dedupe", tracing::Level::DEBUG,
                    "client went away; driving the response to its end to record it");
            }
            if client_gone && guard.is_none() {
                // Recorded, and nobody listens: the rest of the body matters to no one.
                break;
            }
        }
        if let Some(guard) = guard.take() {
            no_final_response(&guard);
        }
    });
    Response::from_parts(parts, ChannelBody { rx }.boxed_unsync())
}

/// The response ended without a final response: the holder stopped, and the claim expires with
/// its lease (the guard is dropped by the caller).
fn no_final_response(guard: &ExecutionGuard) {
    tracing::event!(target: "mcp_framing::dedupe", tracing::Level::WARN,
        store_key = %guard.store_key(),
        "the response ended without a final response; the claim expires with its lease");
}

/// A body that fails at once with `err`.
fn failing(err: DedupeBodyError) -> DedupeBody {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.try_send(Err(err)).expect("an empty channel has room");
    ChannelBody { rx }.boxed_unsync()
}

async fn record(guard: ExecutionGuard, found: Found) {
    let store_key = guard.store_key();
    let result = match found {
        Found::Message(message) => guard.complete(&message).await,
        Found::TooLarge(size) => guard.complete_not_stored(size).await,
    };
    if let Err(err) = result {
        tracing::event!(target: "mcp_framing::dedupe", tracing::Level::ERROR,
            store_key = %store_key, error = %err, "the result could not be recorded");
    }
}

enum Found {
    Message(Bytes),
    TooLarge(u64),
}

/// Finds the final JSON-RPC response in an SSE body: the first `message` event that is a
/// response.
struct FinalResponse {
    parser: SseParser,
    found: bool,
}

impl FinalResponse {
    fn new() -> Self {
        Self {
            parser: SseParser::with_max_event_data(DEFAULT_MAX_MESSAGE_SIZE as usize),
            found: false,
        }
    }

    fn feed(&mut self, data: &Bytes) -> Option<Found> {
        if self.found {
            return None;
        }
        let mut events: Vec<SseEvent> = Vec::new();
        if self.parser.feed(data, &mut events).is_err() {
            // An event over the bound: nothing more can be told from this body.
            self.found = true;
            return None;
        }
        for event in events {
            if is_message_event(event.event.as_deref()) && is_response(&event.data) {
                self.found = true;
                return Some(Found::Message(Bytes::from(event.data)));
            }
        }
        None
    }
}

/// The client's side of the relay.
struct ChannelBody {
    rx: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, DedupeBodyError>>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = DedupeBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, DedupeBodyError>>> {
        self.rx.poll_recv(cx)
    }
}
