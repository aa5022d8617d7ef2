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
use crate::http::{FramedBody, Mapping, OptIn, response_headers};
use crate::sse::{SseEvent, SseParser};

/// The response body of [`FramingService`].
pub type FramingBody<E> = UnsyncBoxBody<Bytes, E>;

/// A tower layer that frames responses for requests that opted in (server side).
///
/// # Examples
///
/// ```
/// use mcp_framing::rmcp_http::FramingLayer;
/// let layer = FramingLayer::new().frame_size(4096);
/// # let _ = layer;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FramingLayer {
    frame_size: usize,
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
}

impl<S> tower_layer::Layer<S> for FramingLayer {
    type Service = FramingService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FramingService {
            inner,
            frame_size: self.frame_size,
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
    frame_size: usize,
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
        let frame_size = self.frame_size;
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await?;
            let Some(opt_in) = opt_in else {
                return Ok(response.map(|body| body.boxed_unsync()));
            };
            Ok(frame_response(response, opt_in, frame_size))
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
    frame_size: usize,
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
    let messages = InnerMessages {
        body: Box::pin(body),
        parser: if sse { Some(SseParser::new()) } else { None },
        json: BytesMut::new(),
        queue: VecDeque::new(),
        final_seen: false,
        done: false,
        comments: 0,
    };
    let mapping = opt_in.mapping();
    let encoder = StreamEncoder::builder()
        .frame_size(frame_size)
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
                                return Poll::Ready(Some(Err(err.to_string())));
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
                            if this.json.len() + data.len() > DEFAULT_MAX_MESSAGE_SIZE as usize {
                                this.done = true;
                                return Poll::Ready(Some(Err(
                                    "upstream JSON response too large".to_owned()
                                )));
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
