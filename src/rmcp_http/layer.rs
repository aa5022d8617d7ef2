//! The server side: [`FramingLayer`] re-frames the responses of requests that opted in (and, with
//! [`FramingLayer::frame_all_responses`], every response), and declares its framing contract in
//! the discovery results that pass through it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use futures_util::StreamExt;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;

use super::compat_body::SsePassthrough;
use super::declare::{Declaration, RequestBody, unframeable};
use super::inner::{Failure, InnerBody, drain_rest};
use super::streamed::Streamed;
use crate::contract::{Deduplication, FramingContract};
use crate::encoder::{EncoderBuilder, StreamEncoder};
use crate::jsonrpc::message_text;
use crate::limits::MIN_MAX_FRAME_PAYLOAD;
use crate::outgoing::Outgoing;
use crate::{
    http::{FramedBody, OptIn, response_headers},
    mapping::Mapping,
};
use crate::{
    mapping::SseError,
    mapping::sse::{Parts, RawItem, SseParser, is_message_event},
};
use serde_json::Value;

/// The response body of [`FramingService`]; `E` is the error of the inner service's body.
///
/// # Examples
///
/// ```
/// use mcp_framing::http::opt_in_headers;
/// use mcp_framing::rmcp_http::{FramingBody, FramingLayer};
/// use mcp_framing::{RequestKey, StreamDecoder};
/// use tower_layer::Layer;
/// use tower_service::Service;
/// # use bytes::Bytes;
/// # use http_body_util::{BodyExt, Full};
/// # #[derive(Clone)]
/// # struct Mcp; // an MCP server: answers every POST with one JSON-RPC result
/// # impl<B> tower_service::Service<http::Request<B>> for Mcp {
/// #     type Response = http::Response<Full<Bytes>>;
/// #     type Error = std::convert::Infallible;
/// #     type Future = std::future::Ready<Result<Self::Response, Self::Error>>;
/// #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
/// #         std::task::Poll::Ready(Ok(()))
/// #     }
/// #     fn call(&mut self, _: http::Request<B>) -> Self::Future {
/// #         std::future::ready(Ok(http::Response::builder().header("content-type", "application/json")
/// #             .body(Full::new(Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#))).unwrap()))
/// #     }
/// # }
/// # fn post(headers: http::HeaderMap) -> http::Request<Full<Bytes>> {
/// #     let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#);
/// #     let mut request = http::Request::post("/mcp").body(Full::new(body)).unwrap();
/// #     *request.headers_mut() = headers;
/// #     request
/// # }
///
/// # tokio_test::block_on(async {
/// let mut service = FramingLayer::new().layer(Mcp);
/// let key = RequestKey::random();
/// // `Full`'s body cannot fail: the framed body's error is `Infallible` too.
/// let response: http::Response<FramingBody<std::convert::Infallible>> =
///     service.call(post(opt_in_headers(key, true))).await.unwrap();
/// let body = response.into_body().collect().await.unwrap().to_bytes();
/// let stream = StreamDecoder::builder().expect_request_key(key).build().decode_all(&body).unwrap();
/// assert_eq!(stream.messages.len(), 1);
/// # });
/// ```
pub type FramingBody<E> = UnsyncBoxBody<Bytes, E>;

/// A tower layer that frames responses for requests that opted in (server side), and with
/// [`frame_all_responses`](Self::frame_all_responses) every response, in the compatible SSE
/// mapping for requests that did not opt in.
///
/// It declares what it does: its framing contract ([`contract`](Self::contract)) is written into
/// every `initialize` and `server/discover` result that passes through it, framed or not, so
/// that any client learns it from the exchange it performs anyway (SPEC.md §11.2). The layer
/// edits the result's JSON text where the contract goes (`capabilities.experimental` of an
/// `initialize` result, `capabilities.extensions` of a `server/discover` result) and leaves every
/// other byte as the handler wrote it. A contract the handler declared there itself stays when it
/// has the layer's values, and is replaced by the layer's otherwise, with a warning: the layer is
/// what frames the responses, so only its declaration is true.
///
/// In the binary and SSE mappings a large message (over 16 KiB) is framed as it arrives: its
/// DATA frames leave while the inner service still writes it, and its MESSAGE_END (length and
/// SHA-256) follows its last byte. A message that then turns out not to be framed (not JSON-RPC,
/// the answer to another request, over the message limit) ends the stream with an ABORT in its
/// place, so the client never verifies it; so does an SSE event whose `event:` field, written after
/// more than 16 KiB of its data, names another type than `message` (the SDKs write it first). In
/// the compatible mapping a message's record, its digest included, goes before its event (SPEC.md
/// §18.4): a message leaves once whole, though a large one is read and hashed as it arrives.
///
/// A framed response ends with the inner service's final response: the client gets the sentinel
/// and the end of the body at once. What the inner body still holds (the end of its SSE stream)
/// is then read in a task of its own, at most 64 KiB within a second, so that an inner body that
/// comes over HTTP (a proxy's upstream connection) ends cleanly and its connection is reused. A
/// client that goes away before the final response drops the inner body unread: the inner
/// server sees its request cancelled.
///
/// # Examples
///
/// ```
/// use mcp_framing::rmcp_http::FramingLayer;
/// let layer = FramingLayer::new().frame_size(4096).max_message_size(64 << 20);
/// // Frame every response: stock clients read the compatible mapping as a plain MCP stream.
/// // (declared in discovery: `"alwaysFramed": "compat"`).
/// let every_response = FramingLayer::new().frame_all_responses(true);
/// # let _ = (layer, every_response);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FramingLayer {
    /// The encoder settings (frame size, message limit); each request's encoder starts here.
    encoder: EncoderBuilder,
    all_responses: bool,
    head_wait: Duration,
}

/// How long a framed response's head waits for the first message by default: more than the
/// 40 ms a client may delay its ACK (see [`FramingLayer::head_wait`]).
const DEFAULT_HEAD_WAIT: Duration = Duration::from_millis(50);

impl Default for FramingLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl FramingLayer {
    /// A layer with the encoder's default frame size (16 KiB).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::http::opt_in_headers;
    /// use mcp_framing::rmcp_http::FramingLayer;
    /// use mcp_framing::{RequestKey, StreamDecoder};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    /// # use bytes::Bytes;
    /// # use http_body_util::{BodyExt, Full};
    /// # #[derive(Clone)]
    /// # struct Mcp(&'static str); // an MCP server: answers every POST with this JSON-RPC message
    /// # impl<B> tower_service::Service<http::Request<B>> for Mcp {
    /// #     type Response = http::Response<Full<Bytes>>;
    /// #     type Error = std::convert::Infallible;
    /// #     type Future = std::future::Ready<Result<Self::Response, Self::Error>>;
    /// #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
    /// #         std::task::Poll::Ready(Ok(()))
    /// #     }
    /// #     fn call(&mut self, _: http::Request<B>) -> Self::Future {
    /// #         std::future::ready(Ok(http::Response::builder().header("content-type", "application/json")
    /// #             .body(Full::new(Bytes::from_static(self.0.as_bytes()))).unwrap()))
    /// #     }
    /// # }
    /// # fn post(headers: http::HeaderMap) -> http::Request<Full<Bytes>> {
    /// #     let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#);
    /// #     let mut request = http::Request::post("/mcp").body(Full::new(body)).unwrap();
    /// #     *request.headers_mut() = headers;
    /// #     request
    /// # }
    ///
    /// # tokio_test::block_on(async {
    /// let mut service = FramingLayer::new().layer(Mcp(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
    /// // A request that opted in (binary mapping) gets its answer framed, under its key:
    /// let key = RequestKey::random();
    /// let response = service.call(post(opt_in_headers(key, true))).await.unwrap();
    /// assert_eq!(response.headers()["content-type"], "application/vnd.mcp-framing");
    /// let body = response.into_body().collect().await.unwrap().to_bytes();
    /// let stream = StreamDecoder::builder().expect_request_key(key).build().decode_all(&body).unwrap();
    /// assert_eq!(stream.messages[0].bytes().as_ref(), br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    ///
    /// // One that did not is answered exactly as the server answered:
    /// let response = service.call(post(http::HeaderMap::new())).await.unwrap();
    /// assert_eq!(response.headers()["content-type"], "application/json");
    /// # });
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Self {
            encoder: StreamEncoder::builder(),
            all_responses: false,
            head_wait: DEFAULT_HEAD_WAIT,
        }
    }

    /// Frames the response to every POST, whether the request opted in or not (default `false`:
    /// only requests that opted in are framed). A request that did not opt in is answered in the
    /// compatible SSE mapping (SPEC.md §18, §18.8): its JSON-RPC messages stay plain MCP `message`
    /// events, byte for byte what the inner server sent, and the frames ride in `:mcp-framing`
    /// comment lines, which every SSE parser drops; its HEAD carries no request key. A request
    /// that opted in gets the mapping it asked for, as without this switch. A JSON response is
    /// sent as a one-event SSE stream when the request's `Accept` lists `text/event-stream` (MCP
    /// clients list both types), unchanged otherwise; `202 Accepted`, error statuses and GET
    /// streams are never framed. Declare it in discovery with
    /// [`FramingContract::with_always_framed`](crate::contract::FramingContract::with_always_framed).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::rmcp_http::FramingLayer;
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    /// # use bytes::Bytes;
    /// # use http_body_util::{BodyExt, Full};
    /// # #[derive(Clone)]
    /// # struct Mcp(&'static str); // an MCP server: answers every POST with this JSON-RPC message
    /// # impl<B> tower_service::Service<http::Request<B>> for Mcp {
    /// #     type Response = http::Response<Full<Bytes>>;
    /// #     type Error = std::convert::Infallible;
    /// #     type Future = std::future::Ready<Result<Self::Response, Self::Error>>;
    /// #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
    /// #         std::task::Poll::Ready(Ok(()))
    /// #     }
    /// #     fn call(&mut self, _: http::Request<B>) -> Self::Future {
    /// #         std::future::ready(Ok(http::Response::builder().header("content-type", "application/json")
    /// #             .body(Full::new(Bytes::from_static(self.0.as_bytes()))).unwrap()))
    /// #     }
    /// # }
    /// # fn post(headers: http::HeaderMap) -> http::Request<Full<Bytes>> {
    /// #     let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#);
    /// #     let mut request = http::Request::post("/mcp").body(Full::new(body)).unwrap();
    /// #     *request.headers_mut() = headers;
    /// #     request
    /// # }
    ///
    /// # tokio_test::block_on(async {
    /// let mut service = FramingLayer::new()
    ///     .frame_all_responses(true)
    ///     .layer(Mcp(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
    /// // A stock MCP client: no opt-in, it takes JSON or an event stream.
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("accept", "application/json, text/event-stream".parse().unwrap());
    /// let response = service.call(post(headers)).await.unwrap();
    /// assert_eq!(response.headers()["content-type"], "text/event-stream");
    /// let body = response.into_body().collect().await.unwrap().to_bytes();
    /// let text = std::str::from_utf8(&body).unwrap();
    /// // The message is a plain SSE event; the frames ride in comment lines SSE parsers drop.
    /// assert!(text.contains(r#"data: {"jsonrpc":"2.0","id":1,"result":{}}"#));
    /// assert!(text.lines().any(|line| line.starts_with(":mcp-framing ")));
    /// # });
    /// ```
    #[must_use]
    pub fn frame_all_responses(mut self, all: bool) -> Self {
        self.all_responses = all;
        self
    }

    /// Sets how long a framed response's head (status and headers) waits for the inner
    /// service's first message, so that both leave in one write (default 50 ms; zero sends the
    /// head at once).
    ///
    /// A head written alone is a small segment; with Nagle's algorithm on (TCP_NODELAY off, as
    /// `axum::serve` and hyper leave it) the next small segment, a short result, waits until the
    /// client acknowledges the head, and clients delay that ACK by up to 40 ms. Waiting a little
    /// longer than that for the first message spares every quick tool call the stall; a slower
    /// one gets its head when the wait ends, as before (a keep-alive also ends it). Needs tokio's
    /// timer, as rmcp's service does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let layer = mcp_framing::rmcp_http::FramingLayer::new().head_wait(Duration::ZERO);
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn head_wait(mut self, wait: Duration) -> Self {
        self.head_wait = wait;
        self
    }

    /// Sets the DATA frame size ([`EncoderBuilder::frame_size`], default 16 KiB).
    ///
    /// # Panics
    ///
    /// If `size` is 0 or above `u32::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::http::opt_in_headers;
    /// use mcp_framing::rmcp_http::FramingLayer;
    /// use mcp_framing::{Event, RequestKey, StreamDecoder};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    /// # use bytes::Bytes;
    /// # use http_body_util::{BodyExt, Full};
    /// # #[derive(Clone)]
    /// # struct Mcp(&'static str); // an MCP server: answers every POST with this JSON-RPC message
    /// # impl<B> tower_service::Service<http::Request<B>> for Mcp {
    /// #     type Response = http::Response<Full<Bytes>>;
    /// #     type Error = std::convert::Infallible;
    /// #     type Future = std::future::Ready<Result<Self::Response, Self::Error>>;
    /// #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
    /// #         std::task::Poll::Ready(Ok(()))
    /// #     }
    /// #     fn call(&mut self, _: http::Request<B>) -> Self::Future {
    /// #         std::future::ready(Ok(http::Response::builder().header("content-type", "application/json")
    /// #             .body(Full::new(Bytes::from_static(self.0.as_bytes()))).unwrap()))
    /// #     }
    /// # }
    /// # fn post(headers: http::HeaderMap) -> http::Request<Full<Bytes>> {
    /// #     let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#);
    /// #     let mut request = http::Request::post("/mcp").body(Full::new(body)).unwrap();
    /// #     *request.headers_mut() = headers;
    /// #     request
    /// # }
    ///
    /// # tokio_test::block_on(async {
    /// let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#; // 48 bytes
    /// let mut service = FramingLayer::new().frame_size(16).layer(Mcp(answer));
    /// let response = service.call(post(opt_in_headers(RequestKey::random(), true))).await.unwrap();
    /// let mut body = bytes::BytesMut::from(&response.into_body().collect().await.unwrap().to_bytes()[..]);
    /// let mut decoder = StreamDecoder::new();
    /// let mut chunks = 0;
    /// while let Some(event) = decoder.decode(&mut body).unwrap() {
    ///     chunks += usize::from(matches!(event, Event::Chunk(_)));
    /// }
    /// assert_eq!(chunks, 3); // 48 bytes in DATA frames of 16
    /// # });
    /// ```
    #[must_use]
    pub fn frame_size(mut self, size: usize) -> Self {
        self.encoder = self.encoder.frame_size(size);
        self
    }

    /// The framing contract the layer declares (SPEC.md §11.1): format version 1 with the
    /// sentinel required, the binary, SSE and compatible mappings, the frame size as
    /// `maxFramePayload` (at least 1026, the room its control frames take) and the message limit
    /// as `maxMessageSize`, `alwaysFramed: "compat"` when it
    /// [frames every response](Self::frame_all_responses);
    /// [`dedupe`](Self::dedupe) adds the deduplication it does. The layer writes it into the
    /// discovery results that pass through it (see [`FramingLayer`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::contract::FramingContract;
    /// use mcp_framing::rmcp_http::FramingLayer;
    /// let contract = FramingLayer::new().frame_size(4096).max_message_size(1 << 20).contract();
    /// assert_eq!(contract, FramingContract::v1().with_limits(4096, 1 << 20));
    /// // Frames of 512 bytes: the control frames still take up to 1026.
    /// assert_eq!(FramingLayer::new().frame_size(512).contract().max_frame_payload, 1026);
    /// ```
    // Hidden: the layer writes it into the `initialize` and `server/discover` results it frames (SPEC.md §11.2), where clients read it; the tests read it back here.
    #[doc(hidden)]
    #[must_use]
    pub fn contract(&self) -> FramingContract {
        self.contract_with(None)
    }

    /// [`contract`](Self::contract), with `deduplication` declared when the layer deduplicates.
    pub(super) fn contract_with(&self, deduplication: Option<Deduplication>) -> FramingContract {
        let (frame_size, max_message_size) = self.encoder.limits();
        let max_frame_payload = u32::try_from(frame_size)
            .unwrap_or(u32::MAX)
            .max(MIN_MAX_FRAME_PAYLOAD);
        let mut contract = FramingContract::v1().with_limits(max_frame_payload, max_message_size);
        if self.all_responses {
            contract = contract.with_always_framed(Mapping::Compat.name());
        }
        if let Some(deduplication) = deduplication {
            contract = contract.with_deduplication(deduplication);
        }
        contract
    }

    /// The service around `inner`, declaring `contract`.
    pub(super) fn service<S>(&self, inner: S, contract: FramingContract) -> FramingService<S> {
        FramingService {
            inner,
            config: *self,
            contract: Arc::new(contract),
        }
    }

    /// Sets the largest message the layer frames (default 16 MiB, as the decoder's default and
    /// rmcp's default JSON and SSE event limits, SPEC.md §6), lowered for each request to the
    /// client's own limit when it sent one (`Mcp-Framing-Limits`, SPEC.md §11.3, §16; the frame
    /// size likewise). The inner service's messages are read with this bound, whether they come
    /// as SSE events or as a JSON body; a larger one is not framed: the stream ends with an ABORT
    /// of code 5, message too large (SPEC.md §3.1), which a client does not retry.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::http::opt_in_headers;
    /// use mcp_framing::rmcp_http::FramingLayer;
    /// use mcp_framing::{AbortCode, DecodeError, RequestKey, StreamDecoder};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    /// # use bytes::Bytes;
    /// # use http_body_util::{BodyExt, Full};
    /// # #[derive(Clone)]
    /// # struct Mcp(&'static str); // an MCP server: answers every POST with this JSON-RPC message
    /// # impl<B> tower_service::Service<http::Request<B>> for Mcp {
    /// #     type Response = http::Response<Full<Bytes>>;
    /// #     type Error = std::convert::Infallible;
    /// #     type Future = std::future::Ready<Result<Self::Response, Self::Error>>;
    /// #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
    /// #         std::task::Poll::Ready(Ok(()))
    /// #     }
    /// #     fn call(&mut self, _: http::Request<B>) -> Self::Future {
    /// #         std::future::ready(Ok(http::Response::builder().header("content-type", "application/json")
    /// #             .body(Full::new(Bytes::from_static(self.0.as_bytes()))).unwrap()))
    /// #     }
    /// # }
    /// # fn post(headers: http::HeaderMap) -> http::Request<Full<Bytes>> {
    /// #     let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#);
    /// #     let mut request = http::Request::post("/mcp").body(Full::new(body)).unwrap();
    /// #     *request.headers_mut() = headers;
    /// #     request
    /// # }
    ///
    /// # tokio_test::block_on(async {
    /// let mut service = FramingLayer::new()
    ///     .max_message_size(32)
    ///     .layer(Mcp(r#"{"jsonrpc":"2.0","id":1,"result":{"content":["more than 32 bytes"]}}"#));
    /// let response = service.call(post(opt_in_headers(RequestKey::random(), true))).await.unwrap();
    /// let body = response.into_body().collect().await.unwrap().to_bytes();
    /// // Not framed: the stream ends with an ABORT, message too large (not retried).
    /// let err = StreamDecoder::new().decode_all(&body).unwrap_err();
    /// assert!(matches!(err, DecodeError::PeerAbort(abort) if abort.code == AbortCode::MessageTooLarge));
    /// # });
    /// ```
    #[must_use]
    pub fn max_message_size(mut self, max: u64) -> Self {
        self.encoder = self.encoder.max_message_size(max);
        self
    }
}

impl<S> tower_layer::Layer<S> for FramingLayer {
    type Service = FramingService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        self.service(inner, self.contract())
    }
}

/// The service of [`FramingLayer`]. Its inner service receives each request with its body
/// wrapped in a [`RequestBody`] (the same bytes, read as they pass to find the discovery
/// requests).
///
/// # Examples
///
/// ```
/// use mcp_framing::rmcp_http::FramingLayer;
/// use tower_layer::Layer;
/// let service = FramingLayer::new().layer(tower_service_fn());
/// # fn tower_service_fn() {}
/// # let _ = service;
/// ```
#[derive(Clone, Debug)]
pub struct FramingService<S> {
    inner: S,
    config: FramingLayer,
    /// What it declares in discovery results.
    contract: Arc<FramingContract>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for FramingService<S>
where
    S: tower_service::Service<Request<RequestBody<ReqBody>>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: fmt::Display + Send + 'static,
{
    type Response = Response<FramingBody<ResBody::Error>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let opt_in = match OptIn::from_headers(request.headers()) {
            Ok(opt_in) => opt_in,
            Err(err) => {
                let response = Response::builder()
                    .status(StatusCode::BAD_REQUEST)
                    .body(fixed_body(err.to_string()))
                    .expect("a valid response");
                return Box::pin(async move { Ok(response) });
            }
        };
        let config = self.config;
        // Without an opt-in, a POST is framed in the compatible mapping when the layer frames
        // every response (SPEC.md §18.8); a JSON answer only if the client also takes SSE.
        let unsolicited = (config.all_responses && request.method() == http::Method::POST)
            .then(|| accepts_event_stream(request.headers()));
        let (parts, body) = request.into_parts();
        // Only a response the layer frames needs the id its final response must answer.
        let wants_id = opt_in.is_some() || unsolicited.is_some();
        let (body, read) = RequestBody::new(body, wants_id);
        let future = self.inner.call(Request::from_parts(parts, body));
        let contract = self.contract.clone();
        Box::pin(async move {
            let response = future.await?;
            // The inner service read the request to answer it: whether it was a discovery
            // request (SPEC.md §11.2), and the id its final response answers, are known now.
            let read = read.get();
            let request_id = read.and_then(|read| read.id.clone());
            Ok(match read.and_then(|read| read.discovery) {
                None => respond(response, opt_in, unsolicited, config, request_id).await,
                Some(source) => {
                    let declaration = Declaration::new(contract, source);
                    let max_message = buffer_limit(config.encoder.limits().1);
                    let response = declare(response, declaration, max_message).await;
                    respond(response, opt_in, unsolicited, config, request_id).await
                }
            })
        })
    }
}

/// Frames `response` as the request asked (or, `unsolicited`, in the compatible mapping, a
/// JSON answer only if `Some(true)`: the client's `Accept` lists `text/event-stream`), or passes
/// it on. `request_id` is the id the final response must answer, when the request had one.
async fn respond<B: InnerBody>(
    response: Response<B>,
    opt_in: Option<OptIn>,
    unsolicited: Option<bool>,
    config: FramingLayer,
    request_id: Option<Value>,
) -> Response<FramingBody<B::Error>> {
    // Within the smaller of the layer's limits and the client's, if it said (SPEC.md §11.3, §16).
    let (mapping, encoder, json) = match (opt_in, unsolicited) {
        (Some(opt_in), _) => (opt_in.mapping(), opt_in.encoder(config.encoder), true),
        (None, Some(json_to_sse)) => {
            let encoder = config
                .encoder
                .build(crate::event::StreamHead::for_request(None));
            (Mapping::Compat, encoder, json_to_sse)
        }
        (None, None) => return response.map(|body| body.boxed_unsync()),
    };
    let Some(sse) = framed_kind(&response, json) else {
        return response.map(|body| body.boxed_unsync());
    };
    // Every inner message is read within the message limit, as an SSE event or a JSON body
    // (SPEC.md §6, §16): the bound the encoder applies, so one byte more is an ABORT of code 5.
    let max_message = buffer_limit(encoder.max_message_size());
    let (mut parts, body) = response.into_parts();
    // The head waits (a little) for the first chunk, which holds the HEAD frame and the first
    // message (in the compatible mapping its record and event), so that they leave together.
    let body = match (mapping, sse) {
        (Mapping::Compat, true) => {
            let passthrough = SsePassthrough::compat(body, encoder, max_message, request_id);
            head_waiting(passthrough, config.head_wait).await
        }
        (Mapping::Compat, false) => {
            let plain = opt_in.is_none();
            match compat_json(body, encoder, max_message, request_id, plain).await {
                Ok(framed) => framed,
                // Not opted in: the client gets the body as it was.
                Err(original) => return Response::from_parts(parts, original),
            }
        }
        (mapping, sse) => {
            let messages = InnerMessages::new(body, sse, max_message, request_id);
            let framed = FramedBody::new(messages, encoder, mapping);
            head_waiting(framed, config.head_wait).await
        }
    };
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.headers.extend(response_headers(mapping));
    Response::from_parts(parts, body)
}

/// The response to a discovery request with the layer's contract written into its result
/// (SPEC.md §11.2), to be framed, or not, as any response: a JSON body is read whole (within
/// `max_message` bytes), an SSE body event by event. A body that cannot be read so passes on
/// unchanged.
async fn declare<B: InnerBody>(
    response: Response<B>,
    declaration: Declaration,
    max_message: usize,
) -> Response<FramingBody<B::Error>> {
    match framed_kind(&response, true) {
        Some(true) => response.map(|body| {
            let events = SsePassthrough::plain(body, max_message, declaration);
            http_body_util::StreamBody::new(events.map(|piece| piece.map(Frame::data)))
                .boxed_unsync()
        }),
        Some(false) => {
            let (mut parts, body) = response.into_parts();
            let body = match read_json(body, max_message).await {
                Json::Whole(json) => match declaration.apply_bytes(&json) {
                    Some(text) => {
                        parts.headers.remove(http::header::CONTENT_LENGTH);
                        fixed_body(text)
                    }
                    None => fixed_body(json),
                },
                Json::Unread {
                    read,
                    rest,
                    failure,
                } => {
                    if let Failure::TooLarge { len, max } = failure {
                        declaration.not_declared(&format!(
                            "the response holds more than {max} bytes (at least {len})"
                        ));
                    }
                    unread(read, rest)
                }
            };
            Response::from_parts(parts, body)
        }
        None => response.map(|body| body.boxed_unsync()),
    }
}

/// A JSON body, read whole within a limit or not.
enum Json<B> {
    /// The whole body.
    Whole(Bytes),
    /// It could not be read whole: what was read, the rest, and why.
    Unread {
        read: Bytes,
        rest: Pin<Box<B>>,
        failure: Failure,
    },
}

/// Reads a JSON body whole, within `max` bytes (the response head waits for it).
async fn read_json<B: InnerBody>(body: B, max: usize) -> Json<B> {
    let mut body = Box::pin(body);
    // A body of one chunk is that chunk; one of several is joined once, at its end.
    let mut json = Parts::default();
    while let Some(frame) = body.frame().await {
        let failure = match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => {
                    json.push_shared(data, max);
                    if json.len() <= max {
                        continue;
                    }
                    let (len, max) = (json.len() as u64, max as u64);
                    Failure::TooLarge { len, max }
                }
                Err(_) => continue,
            },
            Err(err) => Failure::failed(err),
        };
        return Json::Unread {
            read: json.into_bytes(),
            rest: body,
            failure,
        };
    }
    Json::Whole(json.into_bytes())
}

/// A body of `read` and then what `rest` still holds: a body passed on as it was.
fn unread<B: InnerBody>(read: Bytes, rest: Pin<Box<B>>) -> FramingBody<B::Error> {
    let read = futures_util::stream::once(std::future::ready(Ok(Frame::data(read))));
    let rest = http_body_util::BodyStream::new(rest);
    http_body_util::StreamBody::new(read.chain(rest)).boxed_unsync()
}

/// Whether a request's `Accept` lists `text/event-stream` (or any type).
fn accepts_event_stream(headers: &http::HeaderMap) -> bool {
    headers.get_all(http::header::ACCEPT).iter().any(|value| {
        value.to_str().is_ok_and(|v| {
            v.split(',').any(|t| {
                let essence = t.split(';').next().unwrap_or_default().trim();
                essence.eq_ignore_ascii_case(crate::mapping::EVENT_STREAM)
                    || essence == "*/*"
                    || essence.eq_ignore_ascii_case("text/*")
            })
        })
    })
}

/// A message limit as a buffer size.
fn buffer_limit(max_message_size: u64) -> usize {
    usize::try_from(max_message_size)
        .unwrap_or(usize::MAX)
        .min(isize::MAX as usize)
}

/// A JSON response in the compatible SSE mapping (SPEC.md §18): one event, or the ABORT record
/// in its place. The whole body is read, within `max_message` bytes, before the response head is
/// sent. A body an event cannot carry unchanged (over the limit, not UTF-8, with a CR, not read
/// whole) is an `Err`, passed on as it came (the bytes read so far and then the rest), when the
/// request did not opt in (`plain`).
async fn compat_json<B: InnerBody>(
    body: B,
    encoder: StreamEncoder,
    max_message: usize,
    request_id: Option<Value>,
    plain: bool,
) -> Result<FramingBody<B::Error>, FramingBody<B::Error>> {
    let (item, original) = match read_json(body, max_message).await {
        Json::Whole(json) => {
            let carried = message_text(json.clone()).1;
            let item = match unframeable(&carried, |id| json[id].to_vec(), request_id.as_ref()) {
                // Code 1, an invalid inner response (SPEC.md §3.1).
                Some(reason) => Outgoing::Abort(Failure::Internal(reason).abort()),
                None => Outgoing::Message(json.clone()),
            };
            (item, fixed_body(json))
        }
        Json::Unread {
            read,
            rest,
            failure,
        } => (Outgoing::Abort(failure.abort()), unread(read, rest)),
    };
    if plain && matches!(item, Outgoing::Abort(_)) {
        return Err(original);
    }
    // Every item is ready: the body is written at once, and sent with its length.
    let source = futures_util::stream::iter([Ok::<_, Infallible>(item)]);
    let mut framed = FramedBody::new(source, encoder, Mapping::Compat);
    let mut chunks = Vec::new();
    while let Some(Ok(chunk)) = framed.next().await {
        chunks.push(chunk);
    }
    if plain && framed.refused() {
        return Err(original);
    }
    Ok(match <[Bytes; 1]>::try_from(chunks) {
        Ok([chunk]) => fixed_body(chunk),
        Err(chunks) => fixed_body(chunks.concat()),
    })
}

/// Whether the layer frames an inner response, from its status and `Content-Type`: `Some(true)`
/// for an SSE body, `Some(false)` for a JSON body if `json` (it becomes one message). Error
/// statuses, `202 Accepted` and anything else pass through unframed (SPEC.md §16, §18.8).
fn framed_kind<B>(response: &Response<B>, json: bool) -> Option<bool> {
    if response.status() != StatusCode::OK {
        return None;
    }
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if Mapping::from_content_type(content_type) == Some(Mapping::Sse) {
        return Some(true);
    }
    let is_json = content_type.is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
    });
    (json && is_json).then_some(false)
}

fn fixed_body<E: 'static>(bytes: impl Into<Bytes>) -> FramingBody<E> {
    http_body_util::Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

/// A framed body whose first piece is awaited for up to `wait` (not at all if `wait` is zero):
/// the response head then leaves with it (see [`FramingLayer::head_wait`]).
async fn head_waiting<P, E>(mut framed: P, wait: Duration) -> FramingBody<E>
where
    P: Stream<Item = Result<Bytes, Infallible>> + Unpin + Send + 'static,
{
    let first = if wait.is_zero() {
        None
    } else {
        tokio::time::timeout(wait, framed.next())
            .await
            .ok()
            .flatten()
    };
    let pieces = futures_util::stream::iter(first).chain(framed);
    http_body_util::StreamBody::new(pieces.map(|piece| piece.map(Frame::data)))
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

/// The JSON-RPC messages of an inner (rmcp) response body, as [`Outgoing`] items: a message
/// whole, or a large one as it arrives ([`Streamed`]: its chunks, then its end or an ABORT).
struct InnerMessages<B> {
    /// The inner body; handed to [`drain_rest`] after the final response.
    body: Option<Pin<Box<B>>>,
    parser: Option<SseParser>,
    max_message: usize,
    /// A JSON body as far as it arrived, as the chunks it came in.
    json: Parts,
    /// The message arriving (the open event's data, the JSON body): what of it went out.
    streamed: Streamed,
    queue: VecDeque<Outgoing>,
    final_seen: bool,
    done: bool,
    comments: u64,
    /// The id the final response must answer (SPEC.md §3.1: another is an invalid inner
    /// response).
    request_id: Option<Value>,
}

impl<B> InnerMessages<B> {
    /// The messages of `body`, an SSE stream if `sse` (a JSON body otherwise), each within
    /// `max_message` bytes.
    fn new(body: B, sse: bool, max_message: usize, request_id: Option<Value>) -> Self {
        Self {
            body: Some(Box::pin(body)),
            parser: sse.then(|| SseParser::with_max_event_data(max_message).data_unchecked()),
            max_message,
            json: Parts::default(),
            streamed: Streamed::default(),
            queue: VecDeque::new(),
            final_seen: false,
            done: false,
            comments: 0,
            request_id,
        }
    }

    /// Queues a whole message as it arrived (`data`, read as an SSE client reads it), or what is
    /// left of it after the part that went out: then its end, or the ABORT of code 1 that keeps
    /// a message that is not JSON-RPC, or that answers another request, from being verified.
    /// `false` when the stream ends there.
    fn message(&mut self, data: Parts) -> bool {
        let mut streamed = std::mem::take(&mut self.streamed);
        // Checked and read as it arrived: only its last bytes are left to read.
        let (text, carried, _) = streamed.read_whole(data);
        let refusal = unframeable(&carried, |id| text.copy_range(id), self.request_id.as_ref());
        let whole = if streamed.started() {
            // The parts that came after those sent, as they came.
            let rest = text.split_off(streamed.sent());
            for piece in rest.into_buffers().filter(|piece| !piece.is_empty()) {
                self.queue.push_back(Outgoing::Chunk(piece));
            }
            None
        } else {
            Some(text.into_bytes())
        };
        if let Some(reason) = refusal {
            // Never framed as a verified message: the stream ends with ABORT code 1 after the
            // messages before (inside this one if it was being sent).
            self.end(Failure::Internal(reason));
            return false;
        }
        self.final_seen |= carried.is_final();
        self.queue
            .push_back(whole.map_or(Outgoing::FinishMessage, Outgoing::Message));
        true
    }

    /// Ends the stream with the ABORT `failure` calls for, after what is queued.
    fn end(&mut self, failure: Failure) {
        self.done = true;
        self.queue.push_back(Outgoing::Abort(failure.abort()));
    }

    /// Sends on what can go of the event data line still arriving (the event's first data line,
    /// of an event that is a message so far), once the final response has not been seen.
    fn stream_pending(&mut self, latest: &Bytes) {
        let Some(parser) = &self.parser else {
            return;
        };
        if self.final_seen || parser.event_has_data() || !parser.open_event_is_message() {
            return;
        }
        // The line as it was kept: a `data` line, once its first bytes tell where its value
        // starts.
        let line = parser.pending_parts();
        let Some(at) = line.data_value_start() else {
            return;
        };
        if let Some(chunk) = self.streamed.next(line, at, latest) {
            self.queue.push_back(Outgoing::Chunk(chunk));
        }
    }
}

impl<B: InnerBody> Stream for InnerMessages<B> {
    type Item = Result<Outgoing, String>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(item) = this.queue.pop_front() {
                return Poll::Ready(Some(Ok(item)));
            }
            if this.done || this.final_seen {
                // After the final response the POST stream has nothing more for this request:
                // its end is read apart (the framed body ends now).
                if let Some(body) = this.body.take().filter(|_| !this.done) {
                    drain_rest(body);
                }
                this.done = true;
                return Poll::Ready(None);
            }
            let Some(body) = this.body.as_mut() else {
                return Poll::Ready(None);
            };
            match body.as_mut().poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(err))) => this.end(Failure::failed(err)),
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    match &mut this.parser {
                        Some(parser) => {
                            // The events' data as slices of the inner chunks: a message is not
                            // copied on its way to the encoder.
                            let mut items = Vec::new();
                            if let Err(err) = parser.feed_raw_shared(&data, &mut items) {
                                let max = this.max_message as u64;
                                this.end(match err {
                                    // An event (one JSON-RPC message) over the message limit.
                                    SseError::EventTooLarge { .. } => {
                                        Failure::TooLarge { len: max + 1, max }
                                    }
                                    other => Failure::Internal(other.to_string()),
                                });
                                continue;
                            }
                            // rmcp's `:` keep-alive comments become KEEPALIVE frames, so that
                            // intermediaries keep seeing traffic during a long tool call.
                            if parser.comments() > this.comments {
                                this.comments = parser.comments();
                                this.queue.push_back(Outgoing::KeepAlive);
                            }
                            for item in items {
                                // Priming events (`id` only) and keep-alives carry no message.
                                let RawItem::Event { name, data, .. } = item else {
                                    continue;
                                };
                                let message = is_message_event(name.as_deref());
                                if this.streamed.started() && !message {
                                    // Its data went out as a message's before its `event` field
                                    // named another type: it cannot be verified (code 1).
                                    this.end(Failure::Internal(format!(
                                        "the upstream named an event {:?} after its data",
                                        name.unwrap_or_default()
                                    )));
                                    break;
                                }
                                if message && !data.is_empty() {
                                    if !this.message(data) {
                                        break;
                                    }
                                } else {
                                    this.streamed = Streamed::default();
                                }
                            }
                            if !this.done {
                                this.stream_pending(&data);
                            }
                        }
                        None => {
                            let len = this.json.len() + data.len();
                            if len > this.max_message {
                                let (len, max) = (len as u64, this.max_message as u64);
                                this.end(Failure::TooLarge { len, max });
                                continue;
                            }
                            this.json.push_shared(data.clone(), this.max_message);
                            if let Some(chunk) = this.streamed.next(&this.json, 0, &data) {
                                this.queue.push_back(Outgoing::Chunk(chunk));
                            }
                        }
                    }
                }
                Poll::Ready(None) => {
                    this.done = true;
                    if this.parser.is_none() {
                        // A JSON body is one message, the final response.
                        let message = std::mem::take(&mut this.json);
                        if this.message(message) {
                            this.final_seen = true;
                        }
                        continue;
                    }
                    // Cleanly or not, an end before the final response is the upstream's failure
                    // (code 4, SPEC.md §3.1), never a clean end.
                    this.end(Failure::ended());
                }
            }
        }
    }
}
