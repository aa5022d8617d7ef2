//! The server side: [`FramingLayer`] re-frames the responses of requests that opted in (and, with
//! [`FramingLayer::frame_all_responses`], every response).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use futures_util::StreamExt;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;

use super::compat_body::CompatPassthrough;
use crate::codec::Outgoing;
use crate::encoder::{EncoderBuilder, StreamEncoder};
use crate::event::{Abort, AbortCode};
use crate::http::{FramedBody, Mapping, OptIn, response_headers};
use crate::jsonrpc::is_response;
use crate::sse::{SseError, SseEvent, SseParser, is_message_event};

/// The response body of [`FramingService`].
pub type FramingBody<E> = UnsyncBoxBody<Bytes, E>;

/// A tower layer that frames responses for requests that opted in (server side), and with
/// [`frame_all_responses`](Self::frame_all_responses) every response, in the compatible SSE
/// mapping for requests that did not opt in.
///
/// # Examples
///
/// ```
/// use mcp_framing::rmcp_http::FramingLayer;
/// let layer = FramingLayer::new().frame_size(4096).max_message_size(64 << 20);
/// // Frame every response: stock clients read the compatible mapping as a plain MCP stream.
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
    /// See [`FramingLayer`].
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
    /// [`FramingContract::with_always_framed`](crate::FramingContract::with_always_framed).
    ///
    /// # Examples
    ///
    /// See [`FramingLayer`].
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
    /// See [`FramingLayer`].
    #[must_use]
    pub fn frame_size(mut self, size: usize) -> Self {
        self.encoder = self.encoder.frame_size(size);
        self
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
    /// See [`FramingLayer`].
    #[must_use]
    pub fn max_message_size(mut self, max: u64) -> Self {
        self.encoder = self.encoder.max_message_size(max);
        self
    }
}

impl<S> tower_layer::Layer<S> for FramingLayer {
    type Service = FramingService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FramingService {
            inner,
            config: *self,
        }
    }
}

/// The service of [`FramingLayer`].
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
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for FramingService<S>
where
    S: tower_service::Service<Request<ReqBody>, Response = Response<ResBody>>,
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
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await?;
            Ok(match (opt_in, unsolicited) {
                (Some(opt_in), _) if opt_in.mapping() == Mapping::Compat => {
                    compat_response(response, Some(opt_in), Unsolicited::No, config).await
                }
                (Some(opt_in), _) => frame_response(response, opt_in, config).await,
                (None, Some(json_to_sse)) => {
                    let unsolicited = Unsolicited::Yes { json_to_sse };
                    compat_response(response, None, unsolicited, config).await
                }
                (None, None) => response.map(|body| body.boxed_unsync()),
            })
        })
    }
}

/// Whether a request's `Accept` lists `text/event-stream` (or any type).
fn accepts_event_stream(headers: &http::HeaderMap) -> bool {
    headers.get_all(http::header::ACCEPT).iter().any(|value| {
        value.to_str().is_ok_and(|v| {
            v.split(',').any(|t| {
                let essence = t.split(';').next().unwrap_or_default().trim();
                essence.eq_ignore_ascii_case(crate::http::EVENT_STREAM)
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

/// Whether a response is framed although its request did not opt in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unsolicited {
    /// The request opted in and asked for the compatible mapping.
    No,
    /// The layer frames every response; a JSON answer becomes SSE only if `json_to_sse` (the
    /// client's `Accept` lists `text/event-stream`).
    Yes { json_to_sse: bool },
}

/// Frames a response in the compatible SSE mapping (SPEC.md §18): an SSE response passes
/// through with a record before each message event; a JSON response becomes one event. A JSON
/// body an event cannot carry unchanged (over the limit, not UTF-8, with a CR) gets an ABORT
/// record when the request opted in; otherwise it passes through unchanged, as the client expects
/// it.
async fn compat_response<B: InnerBody>(
    response: Response<B>,
    opt_in: Option<OptIn>,
    unsolicited: Unsolicited,
    config: FramingLayer,
) -> Response<FramingBody<B::Error>> {
    let json_to_sse = unsolicited != Unsolicited::Yes { json_to_sse: false };
    let Some(sse) = framed_kind(&response, json_to_sse) else {
        return response.map(|body| body.boxed_unsync());
    };
    let builder = config.encoder;
    // Within the smaller of the layer's limits and the client's, if it said (SPEC.md §11.3, §16).
    let encoder = match opt_in {
        Some(opt_in) => opt_in.encoder(builder),
        None => builder.build(crate::event::StreamHead::for_request(None)),
    };
    let max_message = buffer_limit(encoder.max_message_size());
    let (mut parts, body) = response.into_parts();
    let framed = if sse {
        let mut passthrough = CompatPassthrough::new(body, encoder, max_message);
        // As for the other mappings, the head waits a little for the first message's record and
        // event (see `FramingLayer::head_wait`).
        let first = head_start(&mut passthrough, config.head_wait).await;
        let pieces = futures_util::stream::iter(first).chain(passthrough);
        http_body_util::StreamBody::new(pieces.map(|piece| piece.map(Frame::data))).boxed_unsync()
    } else {
        // The whole JSON body, within the message limit, before the response head is sent.
        let mut body = Box::pin(body);
        let mut json = BytesMut::new();
        let mut failure = None;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        json.extend_from_slice(&data);
                        if json.len() > max_message {
                            failure = Some(AbortCode::MessageTooLarge);
                            break;
                        }
                    }
                }
                Err(_) => {
                    failure = Some(AbortCode::InternalError);
                    break;
                }
            }
        }
        let mut compat = crate::sse_compat::CompatEncoder::new(encoder);
        let mut out = BytesMut::new();
        let written = match failure {
            None => compat
                .final_message(&json, &mut out)
                .map_err(|err| match err {
                    crate::sse_compat::CompatEncodeError::Encode(
                        crate::EncodeError::MessageTooLarge { .. },
                    ) => AbortCode::MessageTooLarge,
                    _ => AbortCode::InternalError,
                }),
            Some(code) => Err(code),
        };
        if let Err(code) = written {
            if unsolicited != Unsolicited::No {
                // Not opted in: the client gets the body as it was, the bytes read so far and
                // then the rest.
                let read =
                    futures_util::stream::once(std::future::ready(Ok(Frame::data(json.freeze()))));
                let rest = http_body_util::BodyStream::new(body);
                let body = http_body_util::StreamBody::new(read.chain(rest));
                return Response::from_parts(parts, body.boxed_unsync());
            }
            out.clear();
            let _written = compat
                .abort(
                    code,
                    "the JSON response cannot be framed in the compatible mapping",
                    &mut out,
                )
                .is_ok();
        }
        http_body_util::Full::new(out.freeze()).boxed_unsync()
    };
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.headers.extend(response_headers(Mapping::Compat));
    Response::from_parts(
        parts,
        framed
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    )
}

/// An inner response body the layer can frame.
trait InnerBody: Body<Data = Bytes, Error: fmt::Display + Send + 'static> + Send + 'static {}

impl<B> InnerBody for B where
    B: Body<Data = Bytes, Error: fmt::Display + Send + 'static> + Send + 'static
{
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

fn fixed_body<E: 'static>(text: String) -> FramingBody<E> {
    http_body_util::Full::new(Bytes::from(text))
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

/// The first piece of a framed body if it is ready within `wait` (none if `wait` is zero): the
/// response head then leaves with it (see [`FramingLayer::head_wait`]).
async fn head_start<P, T>(body: &mut P, wait: Duration) -> Option<T>
where
    P: Stream<Item = T> + Unpin,
{
    if wait.is_zero() {
        None
    } else {
        tokio::time::timeout(wait, body.next()).await.ok().flatten()
    }
}

async fn frame_response<B: InnerBody>(
    response: Response<B>,
    opt_in: OptIn,
    config: FramingLayer,
) -> Response<FramingBody<B::Error>> {
    let Some(sse) = framed_kind(&response, true) else {
        return response.map(|body| body.boxed_unsync());
    };
    let (mut parts, body) = response.into_parts();
    // Within the smaller of the layer's limits and the client's (SPEC.md §11.3, §16).
    let mapping = opt_in.mapping();
    let encoder = opt_in.encoder(config.encoder);
    // Every inner message is read within the message limit, as an SSE event or a JSON body
    // (SPEC.md §6, §16): the bound the encoder applies, so one byte more is an ABORT of code 5.
    let max_message = buffer_limit(encoder.max_message_size());
    let messages = InnerMessages {
        body: Box::pin(body),
        parser: sse.then(|| SseParser::with_max_event_data(max_message)),
        max_message,
        json: BytesMut::new(),
        queue: VecDeque::new(),
        final_seen: false,
        done: false,
        comments: 0,
    };
    let mut framed = FramedBody::new(messages, encoder, mapping);
    // The head waits (a little) for the first chunk, which holds the HEAD frame and the first
    // message, so that they leave together (see `FramingLayer::head_wait`).
    let first = head_start(&mut framed, config.head_wait).await;
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.headers.extend(response_headers(mapping));
    let pieces = futures_util::stream::iter(first).chain(framed);
    let body = http_body_util::StreamBody::new(pieces.map(|piece| piece.map(Frame::data)))
        .map_err(|never: Infallible| match never {})
        .boxed_unsync();
    Response::from_parts(parts, body)
}

/// The JSON-RPC messages of an inner (rmcp) response body, as [`Outgoing`] items.
struct InnerMessages<B> {
    body: Pin<Box<B>>,
    parser: Option<SseParser>,
    max_message: usize,
    json: BytesMut,
    queue: VecDeque<Outgoing>,
    final_seen: bool,
    done: bool,
    comments: u64,
}

impl<B> Stream for InnerMessages<B>
where
    B: Body<Data = Bytes>,
    B::Error: fmt::Display,
{
    type Item = Result<Outgoing, String>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(item) = this.queue.pop_front() {
                return Poll::Ready(Some(Ok(item)));
            }
            if this.done || this.final_seen {
                // After the final response the POST stream has nothing more for this request.
                return Poll::Ready(None);
            }
            match this.body.as_mut().poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(err))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(format!("upstream body failed: {err}"))));
                }
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    match &mut this.parser {
                        Some(parser) => {
                            let mut events: Vec<SseEvent> = Vec::new();
                            if let Err(err) = parser.feed(&data, &mut events) {
                                this.done = true;
                                return Poll::Ready(Some(Ok(match err {
                                    // An event (one JSON-RPC message) over the message limit.
                                    SseError::EventTooLarge { .. } => too_large(this.max_message),
                                    other => Outgoing::Abort(Abort::new(
                                        AbortCode::InternalError,
                                        other.to_string(),
                                    )),
                                })));
                            }
                            // rmcp's `:` keep-alive comments become KEEPALIVE frames, so that
                            // intermediaries keep seeing traffic during a long tool call.
                            if parser.comments() > this.comments {
                                this.comments = parser.comments();
                                this.queue.push_back(Outgoing::KeepAlive);
                            }
                            for event in events {
                                // Priming events (`id` only) and keep-alives carry no message.
                                if is_message_event(event.event.as_deref())
                                    && !event.data.is_empty()
                                {
                                    this.final_seen |= is_response(&event.data);
                                    this.queue
                                        .push_back(Outgoing::Message(Bytes::from(event.data)));
                                }
                            }
                        }
                        None => {
                            if this.json.len() + data.len() > this.max_message {
                                this.done = true;
                                return Poll::Ready(Some(Ok(too_large(this.max_message))));
                            }
                            this.json.extend_from_slice(&data);
                        }
                    }
                }
                Poll::Ready(None) => {
                    this.done = true;
                    if this.parser.is_none() {
                        let message = this.json.split().freeze();
                        this.final_seen = true;
                        return Poll::Ready(Some(Ok(Outgoing::Message(message))));
                    }
                    return Poll::Ready(Some(Err(
                        "the upstream response stream ended before its final response".to_owned(),
                    )));
                }
            }
        }
    }
}

/// The ABORT for an inner message over the limit: code 5, message too large (SPEC.md §3.1), a
/// deterministic failure that a client does not retry.
fn too_large(max: usize) -> Outgoing {
    Outgoing::Abort(Abort::new(
        AbortCode::MessageTooLarge,
        format!("the response message exceeds the message limit of {max} bytes"),
    ))
}
