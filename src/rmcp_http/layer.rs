//! The server side: [`FramingLayer`] re-frames the responses of requests that opted in.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use futures_util::StreamExt;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;

use super::is_final_response;
use crate::codec::Outgoing;
use crate::encoder::{DEFAULT_MAX_MESSAGE_SIZE, StreamEncoder};
use crate::event::StreamHead;
use crate::event::{Abort, AbortCode};
use crate::http::{FramedBody, Mapping, OptIn, response_headers};
use crate::sse::{SseError, SseEvent, SseParser};

/// The response body of [`FramingService`].
pub type FramingBody<E> = UnsyncBoxBody<Bytes, E>;

/// A tower layer that frames responses for requests that opted in (server side).
///
/// # Examples
///
/// ```
/// use mcp_framing::rmcp_http::FramingLayer;
/// let layer = FramingLayer::new().frame_size(4096).max_message_size(64 << 20);
/// # let _ = layer;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FramingLayer {
    frame_size: usize,
    max_message_size: u64,
}

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
            frame_size: crate::encoder::DEFAULT_FRAME_SIZE,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
        }
    }

    /// Sets the DATA frame size (default 16 KiB; see `EncoderBuilder::frame_size`).
    ///
    /// # Examples
    ///
    /// See [`FramingLayer`].
    #[must_use]
    pub fn frame_size(mut self, size: usize) -> Self {
        self.frame_size = size;
        self
    }

    /// Sets the largest message the layer frames (default 16 MiB, as the decoder's default and
    /// rmcp's default JSON and SSE event limits, SPEC.md §6). The inner service's messages are
    /// read with this bound, whether they come as SSE events or as a JSON body; a larger one is
    /// not framed: the stream ends with an ABORT of code 5, message too large (SPEC.md §3.1),
    /// which a client does not retry.
    ///
    /// # Examples
    ///
    /// See [`FramingLayer`].
    #[must_use]
    pub fn max_message_size(mut self, max: u64) -> Self {
        self.max_message_size = max;
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
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await?;
            let Some(opt_in) = opt_in else {
                return Ok(response.map(|body| body.boxed_unsync()));
            };
            Ok(frame_response(response, opt_in, config))
        })
    }
}

fn fixed_body<E: 'static>(text: String) -> FramingBody<E> {
    http_body_util::Full::new(Bytes::from(text))
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

fn frame_response<B>(
    response: Response<B>,
    opt_in: OptIn,
    config: FramingLayer,
) -> Response<FramingBody<B::Error>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: fmt::Display + Send + 'static,
{
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let json = content_type.is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
    });
    let sse = Mapping::from_content_type(content_type) == Some(Mapping::Sse);
    // Errors (4xx/5xx), 202 Accepted and anything else pass through unframed (SPEC.md §16).
    if response.status() != StatusCode::OK || !(json || sse) {
        return response.map(|body| body.boxed_unsync());
    }
    let (mut parts, body) = response.into_parts();
    // Every inner message is read within the message limit, as an SSE event or a JSON body
    // (SPEC.md §6): the same bound the encoder and a default client apply.
    let max_message = usize::try_from(config.max_message_size)
        .unwrap_or(usize::MAX)
        .min(isize::MAX as usize);
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
    let mapping = opt_in.mapping();
    let encoder = StreamEncoder::builder()
        .frame_size(config.frame_size)
        .max_message_size(config.max_message_size)
        .build(StreamHead::for_request(opt_in.request_key));
    let framed = FramedBody::new(messages, encoder, mapping);
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.headers.extend(response_headers(mapping));
    let body = http_body_util::StreamBody::new(framed.map(|piece| piece.map(Frame::data)))
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
                                let is_message =
                                    matches!(event.event.as_deref(), None | Some("message"));
                                // Priming events (`id` only) and keep-alives carry no message.
                                if is_message && !event.data.is_empty() {
                                    this.final_seen |= is_final_response(&event.data);
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
