//! The HTTP binding (SPEC.md §10, §15, §16): per-request opt-in, and body adapters.
//!
//! - [`OptIn`] reads a request's `Mcp-Framing` / `Mcp-Framing-Request-Key` headers (server
//!   side); [`opt_in_headers`] writes them, [`set_request_key`](crate::set_request_key) and
//!   [`declare_framing_capability`] write the `_meta` entries (client side).
//! - [`FramedBody`] turns a stream of [`Outgoing`] items into a response body (axum's
//!   `Body::from_stream`, hyper via `http_body_util::StreamBody`): HEAD first, ABORT if the
//!   source fails, the STREAM_END sentinel when it ends.
//! - [`VerifiedResponse`] turns any `Stream<Item = Result<Bytes, E>>` (reqwest's
//!   `bytes_stream()`, an http-body `BodyDataStream`) into verified messages, ending in
//!   [`Delivery::Complete`] or a [`ReceiveError`] that says whether the response was abandoned.
//!
//! A framed response uses one of two mappings ([`Mapping`]): the binary body
//! (`application/vnd.mcp-framing`, only if the client listed it in `Accept`) or SSE events named
//! `mcp-frame` inside `text/event-stream` (what MCP infrastructure expects).

use std::convert::Infallible;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::codec::Outgoing;
use crate::decoder::StreamDecoder;
use crate::encoder::StreamEncoder;
use crate::error::{DecodeError, EncodeError, Progress};
use crate::event::{Abort, AbortCode, Event, StreamSummary, VerifiedMessage};
use crate::frame::MAX_ABORT_REASON_LEN;
use crate::ids::RequestKey;
use crate::outcome::Outcome;
use crate::sse::{SseError, SseFrameDecoder, SseFrameEncoder};

/// Request header by which a client opts in: the framing versions it accepts, comma separated
/// (`Mcp-Framing: 1`). A server echoes the version it used in the response (SPEC.md §10).
pub const OPT_IN_HEADER: HeaderName = HeaderName::from_static("mcp-framing");
/// Request header carrying the request key, 32 lowercase hex digits (SPEC.md §10).
pub const REQUEST_KEY_HEADER: HeaderName = HeaderName::from_static("mcp-framing-request-key");
/// Media type of the binary mapping (SPEC.md §16).
pub const MEDIA_TYPE: &str = "application/vnd.mcp-framing";
/// Media type of the SSE mapping (SPEC.md §15).
pub const EVENT_STREAM: &str = "text/event-stream";
/// The framing version this crate speaks, as it appears in [`OPT_IN_HEADER`].
pub const VERSION_TOKEN: &str = "1";

/// How a framed stream travels in an HTTP body.
///
/// # Examples
///
/// ```
/// use mcp_framing::http::Mapping;
/// assert_eq!(Mapping::from_content_type(Some("text/event-stream; charset=utf-8")), Some(Mapping::Sse));
/// assert_eq!(Mapping::from_content_type(Some("application/json")), None);
/// assert_eq!(Mapping::Binary.content_type(), "application/vnd.mcp-framing");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mapping {
    /// The frames are the body (`application/vnd.mcp-framing`, SPEC.md §16).
    Binary,
    /// The frames travel base64-encoded in `mcp-frame` SSE events (SPEC.md §15).
    Sse,
}

impl Mapping {
    /// The response `Content-Type` of this mapping.
    ///
    /// # Examples
    ///
    /// See [`Mapping`].
    #[must_use]
    pub const fn content_type(self) -> &'static str {
        match self {
            Self::Binary => MEDIA_TYPE,
            Self::Sse => EVENT_STREAM,
        }
    }

    /// The mapping a response `Content-Type` announces, if it is one of ours. Anything else
    /// (e.g. `application/json`) is not a framed body.
    ///
    /// # Examples
    ///
    /// See [`Mapping`].
    #[must_use]
    pub fn from_content_type(content_type: Option<&str>) -> Option<Self> {
        let essence = content_type?.split(';').next()?.trim();
        if essence.eq_ignore_ascii_case(MEDIA_TYPE) {
            Some(Self::Binary)
        } else if essence.eq_ignore_ascii_case(EVENT_STREAM) {
            Some(Self::Sse)
        } else {
            None
        }
    }
}

/// A malformed opt-in.
///
/// # Examples
///
/// ```
/// use mcp_framing::http::{OptIn, OptInError};
/// let mut headers = http::HeaderMap::new();
/// headers.insert("mcp-framing", "1".parse().unwrap());
/// headers.insert("mcp-framing-request-key", "not-hex".parse().unwrap());
/// assert_eq!(OptIn::from_headers(&headers), Err(OptInError::InvalidRequestKey));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptInError {
    /// The request key header is not 32 hex digits.
    #[error("the Mcp-Framing-Request-Key header is not 32 hex digits")]
    InvalidRequestKey,
    /// The request key in `params._meta` is malformed or differs from the header's.
    #[error(
        "the request key in params._meta is malformed or differs from the Mcp-Framing-Request-Key header"
    )]
    MetaMismatch,
}

/// A request's opt-in to framing (SPEC.md §10), as a server reads it.
///
/// # Examples
///
/// ```
/// use mcp_framing::RequestKey;
/// use mcp_framing::http::{Mapping, OptIn, opt_in_headers};
///
/// let key = RequestKey::random();
/// let headers = opt_in_headers(key, true);
/// let opt_in = OptIn::from_headers(&headers).unwrap().expect("opted in");
/// assert_eq!(opt_in.request_key, Some(key));
/// assert_eq!(opt_in.mapping(), Mapping::Binary);
///
/// // A request without the header is answered exactly as before:
/// assert_eq!(OptIn::from_headers(&http::HeaderMap::new()).unwrap(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptIn {
    /// The request key, if the request carried one.
    pub request_key: Option<RequestKey>,
    /// Whether the client accepts the binary mapping (`Accept` lists [`MEDIA_TYPE`]).
    pub accepts_binary: bool,
}

impl OptIn {
    /// Reads the opt-in from request headers: `Ok(None)` when the request did not opt in, or
    /// listed no version this crate speaks (answer it unframed).
    ///
    /// # Errors
    ///
    /// [`OptInError::InvalidRequestKey`] when the key header is malformed.
    ///
    /// # Examples
    ///
    /// See [`OptIn`].
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, OptInError> {
        let speaks_ours = headers.get_all(OPT_IN_HEADER).iter().any(|value| {
            value
                .to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim() == VERSION_TOKEN))
        });
        if !speaks_ours {
            return Ok(None);
        }
        let request_key = match headers.get(REQUEST_KEY_HEADER) {
            Some(value) => Some(
                value
                    .to_str()
                    .ok()
                    .and_then(|v| v.trim().parse::<RequestKey>().ok())
                    .ok_or(OptInError::InvalidRequestKey)?,
            ),
            None => None,
        };
        let accepts_binary = headers.get_all(http::header::ACCEPT).iter().any(|value| {
            value.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|t| Mapping::from_content_type(Some(t)) == Some(Mapping::Binary))
            })
        });
        Ok(Some(Self {
            request_key,
            accepts_binary,
        }))
    }

    /// Checks the JSON-RPC request's `params._meta` key against the header's (SPEC.md §10):
    /// a missing `_meta` key is accepted, a different one is not.
    ///
    /// # Errors
    ///
    /// [`OptInError::MetaMismatch`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{RequestKey, set_request_key};
    /// use mcp_framing::http::OptIn;
    /// let key = RequestKey::random();
    /// let opt_in = OptIn { request_key: Some(key), accepts_binary: false };
    /// let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}});
    /// set_request_key(&mut request, key).unwrap();
    /// assert!(opt_in.check_meta(&request).is_ok());
    /// set_request_key(&mut request, RequestKey::random()).unwrap();
    /// assert!(opt_in.check_meta(&request).is_err());
    /// ```
    pub fn check_meta(&self, request: &serde_json::Value) -> Result<(), OptInError> {
        let meta = crate::request::request_key(request).map_err(|_| OptInError::MetaMismatch)?;
        match (meta, self.request_key) {
            (Some(meta), Some(header)) if meta != header => Err(OptInError::MetaMismatch),
            (Some(_), None) => Err(OptInError::MetaMismatch),
            _ => Ok(()),
        }
    }

    /// The mapping to answer with: binary if the client accepts it, SSE otherwise.
    ///
    /// # Examples
    ///
    /// See [`OptIn`].
    #[must_use]
    pub fn mapping(&self) -> Mapping {
        if self.accepts_binary {
            Mapping::Binary
        } else {
            Mapping::Sse
        }
    }
}

/// The headers a client adds to opt in (SPEC.md §10): `Mcp-Framing: 1`, the request key, and
/// with `binary`, an `Accept` listing [`MEDIA_TYPE`] before MCP's two types.
///
/// # Examples
///
/// ```
/// let headers = mcp_framing::http::opt_in_headers(mcp_framing::RequestKey::from_bytes([0xab; 16]), false);
/// assert_eq!(headers["mcp-framing"], "1");
/// assert_eq!(headers["mcp-framing-request-key"], "abababababababababababababababab");
/// ```
#[must_use]
pub fn opt_in_headers(key: RequestKey, binary: bool) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(OPT_IN_HEADER, HeaderValue::from_static(VERSION_TOKEN));
    headers.insert(
        REQUEST_KEY_HEADER,
        HeaderValue::from_str(&key.to_string()).expect("hex digits are a valid header value"),
    );
    let accept = if binary {
        "application/vnd.mcp-framing, application/json, text/event-stream"
    } else {
        "application/json, text/event-stream"
    };
    headers.insert(http::header::ACCEPT, HeaderValue::from_static(accept));
    headers
}

/// The headers of a framed response: `Content-Type` of the mapping, `Mcp-Framing: 1`,
/// `Cache-Control: no-cache` and `X-Accel-Buffering: no` (so that proxies stream it).
///
/// # Examples
///
/// ```
/// use mcp_framing::http::{Mapping, response_headers};
/// assert_eq!(response_headers(Mapping::Sse)["content-type"], "text/event-stream");
/// ```
#[must_use]
pub fn response_headers(mapping: Mapping) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(mapping.content_type()),
    );
    headers.insert(OPT_IN_HEADER, HeaderValue::from_static(VERSION_TOKEN));
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    headers.insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    headers
}

/// `_meta` key under which a 2026-07-28 request carries its client capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of a 2026-07-28 request's protocol version.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// Declares the framing capability in a 2026-07-28 request (SPEC.md §16):
/// `params._meta["io.modelcontextprotocol/clientCapabilities"].extensions["io.github.mcp-framing/framing"]
/// = {"versions": [1]}`. Only requests that carry `_meta["io.modelcontextprotocol/protocolVersion"]`
/// (stateless requests carry their capabilities with them) are changed; returns whether it did.
///
/// # Examples
///
/// ```
/// use mcp_framing::http::{declare_framing_capability, declares_framing_capability};
/// let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
///     "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
/// assert!(declare_framing_capability(&mut request));
/// assert!(declares_framing_capability(&request));
/// let mut legacy = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
/// assert!(!declare_framing_capability(&mut legacy));
/// ```
pub fn declare_framing_capability(request: &mut serde_json::Value) -> bool {
    let Some(meta) = request
        .get_mut("params")
        .and_then(|p| p.get_mut("_meta"))
        .and_then(serde_json::Value::as_object_mut)
    else {
        return false;
    };
    if !meta.contains_key(META_PROTOCOL_VERSION) {
        return false;
    }
    let capabilities = meta
        .entry(META_CLIENT_CAPABILITIES)
        .or_insert_with(|| serde_json::json!({}));
    let Some(extensions) = capabilities
        .as_object_mut()
        .map(|c| {
            c.entry("extensions")
                .or_insert_with(|| serde_json::json!({}))
        })
        .and_then(serde_json::Value::as_object_mut)
    else {
        return false;
    };
    extensions.insert(
        crate::contract::EXTENSION_KEY.to_owned(),
        serde_json::json!({"versions": [1]}),
    );
    true
}

/// Whether a request declares the framing capability in its `_meta` (SPEC.md §16).
///
/// # Examples
///
/// See [`declare_framing_capability`].
#[must_use]
pub fn declares_framing_capability(request: &serde_json::Value) -> bool {
    request
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(crate::contract::EXTENSION_KEY))
        .and_then(|f| f.get("versions"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|versions| versions.iter().any(|v| v == 1))
}

/// A framed response body built from a stream of [`Outgoing`] items (server side).
///
/// The HEAD frame is emitted at the first poll. An `Err` from the source becomes an ABORT frame
/// (code internal error, reason the error's text); the end of the source becomes the STREAM_END
/// sentinel, or an ABORT if the producer left a message open; an item the encoder refuses
/// (e.g. a message over the limit) becomes an ABORT with the matching code. After the terminal
/// frame the body ends; it never fails, so a client always gets an explicit ending.
///
/// # Examples
///
/// ```
/// use futures::{StreamExt, stream};
/// use mcp_framing::http::{FramedBody, Mapping};
/// use mcp_framing::{Outgoing, StreamDecoder, StreamEncoder, StreamHead};
///
/// # tokio_test::block_on(async {
/// let source = stream::iter([
///     Ok::<_, std::io::Error>(Outgoing::Message(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into())),
/// ]);
/// let body = FramedBody::new(source, StreamEncoder::new(StreamHead::for_request(None)), Mapping::Binary);
/// let chunks: Vec<_> = body.map(|chunk| chunk.unwrap()).collect().await;
/// let stream = StreamDecoder::new().decode_all(&chunks.concat()).unwrap();
/// assert_eq!(stream.messages.len(), 1); // and the sentinel was there
/// # });
/// ```
pub struct FramedBody<S> {
    source: S,
    encoder: StreamEncoder,
    mapping: Mapping,
    done: bool,
}

impl<S> fmt::Debug for FramedBody<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FramedBody")
            .field("mapping", &self.mapping)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<S> FramedBody<S> {
    /// A body that frames `source` with `encoder` in `mapping`.
    ///
    /// # Examples
    ///
    /// See [`FramedBody`].
    pub fn new(source: S, encoder: StreamEncoder, mapping: Mapping) -> Self {
        Self {
            source,
            encoder,
            mapping,
            done: false,
        }
    }

    fn output(&self, frames: BytesMut) -> Bytes {
        match self.mapping {
            Mapping::Binary => frames.freeze(),
            Mapping::Sse => SseFrameEncoder::new().to_events(&frames),
        }
    }

    fn abort(&mut self, code: AbortCode, reason: &str, dst: &mut BytesMut) {
        // Only fails if the stream already ended or the sequence space is exhausted; then
        // there is nothing more to write.
        let _ = self.encoder.abort(code, cut_reason(reason), dst);
        self.done = true;
    }

    fn encode(&mut self, item: Outgoing, dst: &mut BytesMut) {
        let result = match item {
            Outgoing::Chunk(bytes) => self.encoder.push(&bytes, dst),
            Outgoing::FinishMessage => self.encoder.finish_message(dst).map(drop),
            Outgoing::Message(bytes) => self.encoder.message(&bytes, dst).map(drop),
            Outgoing::KeepAlive => self.encoder.keep_alive(dst),
            Outgoing::End => self.encoder.end(dst),
            Outgoing::Abort(abort) => self.encoder.abort_with(&abort, dst),
        };
        match result {
            Ok(()) => self.done = self.encoder.is_finished(),
            Err(err @ EncodeError::MessageTooLarge { .. }) => {
                self.abort(AbortCode::MessageTooLarge, &err.to_string(), dst);
            }
            Err(err) => self.abort(AbortCode::InternalError, &err.to_string(), dst),
        }
    }
}

impl<S, E> Stream for FramedBody<S>
where
    S: Stream<Item = Result<Outgoing, E>> + Unpin,
    E: fmt::Display,
{
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let mut frames = BytesMut::new();
        if this.encoder.messages() == 0 && !this.encoder.in_message() && !this.done {
            // Commit the HEAD (idempotent once written).
            let _ = this.encoder.open(&mut frames);
        }
        while frames.is_empty() && !this.done {
            match Pin::new(&mut this.source).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(item))) => this.encode(item, &mut frames),
                Poll::Ready(Some(Err(err))) => {
                    this.abort(AbortCode::InternalError, &err.to_string(), &mut frames);
                }
                Poll::Ready(None) if this.encoder.in_message() => this.abort(
                    AbortCode::InternalError,
                    "the producer ended inside a message",
                    &mut frames,
                ),
                Poll::Ready(None) => {
                    let _ = this.encoder.end(&mut frames);
                    this.done = true;
                }
            }
        }
        if frames.is_empty() {
            Poll::Ready(None)
        } else {
            Poll::Ready(Some(Ok(this.output(frames))))
        }
    }
}

/// What a [`VerifiedResponse`] yields.
///
/// # Examples
///
/// See [`VerifiedResponse`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// A message whose length and SHA-256 were verified.
    Message(VerifiedMessage),
    /// The body ended after the STREAM_END sentinel: the response is complete. Always the last
    /// item of a clean response.
    Complete(StreamSummary),
}

/// Why a framed response did not complete (client side).
///
/// # Examples
///
/// ```
/// use mcp_framing::http::ReceiveError;
/// let err = ReceiveError::<std::io::Error>::NotFramed { content_type: Some("application/json".into()) };
/// assert_eq!(err.kind(), "NotFramed");
/// assert!(!err.is_abandoned());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiveError<E> {
    /// The client opted in but the response is not framed (a backend that ignored the opt-in,
    /// or a proxy that rewrote the response): fail closed, nothing in it is trusted.
    #[error(
        "response is not framed (content-type {content_type:?}) although framing was requested"
    )]
    NotFramed {
        /// The response's content type.
        content_type: Option<String>,
    },
    /// The SSE mapping is broken (an unframed event, invalid base64, an oversized event).
    #[error("SSE mapping: {0}")]
    Sse(#[source] SseError),
    /// The framed stream is invalid, truncated ([`DecodeError::Truncated`]) or aborted by the
    /// server ([`DecodeError::PeerAbort`]).
    #[error(transparent)]
    Decode(DecodeError),
    /// The body failed (connection reset) before the sentinel: the response was abandoned.
    #[error("response body failed after {} frames, {} bytes: {source}", progress.frames, progress.bytes)]
    Body {
        /// The body's error.
        source: E,
        /// What had been received.
        progress: Progress,
    },
}

impl<E> ReceiveError<E> {
    /// A stable name for telemetry: the [`DecodeError::kind`] for decode errors, otherwise
    /// `NotFramed`, `Sse` or `Body`.
    ///
    /// # Examples
    ///
    /// See [`ReceiveError`].
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotFramed { .. } => "NotFramed",
            Self::Sse(_) => "Sse",
            Self::Decode(err) => err.kind(),
            Self::Body { .. } => "Body",
        }
    }

    /// Whether the response was abandoned mid-way: the stream was cut before its sentinel
    /// ([`DecodeError::Truncated`]) or its body failed. (A server ABORT is deliberate, and an
    /// invalid stream is corruption; neither is reported as abandoned.)
    ///
    /// # Examples
    ///
    /// See [`VerifiedResponse`].
    #[must_use]
    pub fn is_abandoned(&self) -> bool {
        matches!(
            self,
            Self::Decode(DecodeError::Truncated { .. }) | Self::Body { .. }
        )
    }

    /// The classification of this error as issue 3's [`Outcome`] (verdict, regime, what was
    /// received), for telemetry and retry decisions. `None` for [`ReceiveError::NotFramed`] and
    /// [`ReceiveError::Sse`]: the body was not a framed stream, so the error itself is the verdict.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{DecodeError, Progress, Truncation, Verdict};
    /// use mcp_framing::http::ReceiveError;
    /// let err = ReceiveError::<std::io::Error>::Decode(DecodeError::Truncated {
    ///     at: Truncation::BetweenMessages { messages: 1 },
    ///     progress: Progress::default(),
    /// });
    /// assert!(matches!(err.outcome().unwrap().verdict, Verdict::Abandoned { .. }));
    /// ```
    #[must_use]
    pub fn outcome(&self) -> Option<Outcome> {
        match self {
            Self::Decode(err) => Some(Outcome::from_eof(&Err(err.clone()))),
            Self::Body { progress, .. } => {
                // The transport failed before the sentinel: abandoned, as the table decides.
                let mut outcome = Outcome::from_eof(&Ok(Some(Event::KeepAlive)));
                outcome.received = *progress;
                Some(outcome)
            }
            Self::NotFramed { .. } | Self::Sse(_) => None,
        }
    }

    /// What had been received when the response stopped, if known.
    ///
    /// # Examples
    ///
    /// See [`VerifiedResponse`].
    #[must_use]
    pub fn progress(&self) -> Option<Progress> {
        match self {
            Self::Decode(DecodeError::Truncated { progress, .. }) | Self::Body { progress, .. } => {
                Some(*progress)
            }
            _ => None,
        }
    }
}

/// Verifies a framed response body as it arrives (client side).
///
/// Yields every message once verified, then [`Delivery::Complete`] when the body ended after
/// the sentinel; or a [`ReceiveError`] as its last item. It never yields a message that failed
/// verification or was cut, and a body that ends without the sentinel is always an error.
///
/// # Examples
///
/// ```
/// use bytes::Bytes;
/// use futures::{StreamExt, stream};
/// use mcp_framing::http::{Delivery, Mapping, VerifiedResponse};
/// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut wire = bytes::BytesMut::new();
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
/// enc.end(&mut wire)?;
///
/// # tokio_test::block_on(async {
/// // A proxy cut the body 10 bytes early, with a normal HTTP ending:
/// let body = stream::iter([Ok::<_, std::io::Error>(Bytes::copy_from_slice(&wire[..wire.len() - 10]))]);
/// let mut response = VerifiedResponse::new(body, Mapping::Binary, StreamDecoder::new());
/// // The message itself was complete and verified (its MESSAGE_END arrived):
/// assert!(matches!(response.next().await, Some(Ok(Delivery::Message(_)))));
/// // but the stream lacks its sentinel: abandoned, never `Complete`.
/// let Some(Err(err)) = response.next().await else { panic!() };
/// assert!(err.is_abandoned());
/// assert_eq!(err.progress().unwrap().messages, 1);
/// assert!(response.next().await.is_none());
/// # });
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
pub struct VerifiedResponse<S> {
    body: S,
    mapping: Mapping,
    sse: SseFrameDecoder,
    decoder: StreamDecoder,
    buf: BytesMut,
    summary: Option<StreamSummary>,
    body_ended: bool,
    done: bool,
    outcome: Option<Outcome>,
}

impl<S> fmt::Debug for VerifiedResponse<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedResponse")
            .field("mapping", &self.mapping)
            .field("progress", &self.decoder.progress())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<S> VerifiedResponse<S> {
    /// Verifies `body`, carried in `mapping`, with `decoder` (configure its limits and the
    /// expected request key with [`StreamDecoder::builder`]).
    ///
    /// # Examples
    ///
    /// See [`VerifiedResponse`].
    pub fn new(body: S, mapping: Mapping, decoder: StreamDecoder) -> Self {
        Self {
            body,
            mapping,
            sse: SseFrameDecoder::new(),
            decoder,
            buf: BytesMut::new(),
            summary: None,
            body_ended: false,
            done: false,
            outcome: None,
        }
    }

    /// The classification of the response (issue 3's [`Outcome`]: clean, abandoned with what was
    /// received, aborted, corrupt, spliced, cross-wired, contract violation), once the stream
    /// yielded its last item. `None` before, and after an [`ReceiveError::Sse`] (the body was not
    /// a framed stream at the SSE level: that error is the verdict).
    ///
    /// # Examples
    ///
    /// ```
    /// use futures::StreamExt;
    /// use mcp_framing::{StreamDecoder, Verdict, http::{Mapping, VerifiedResponse}};
    /// # tokio_test::block_on(async {
    /// let body = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"\x9f\x4d\x01"))]);
    /// let mut response = VerifiedResponse::new(body, Mapping::Binary, StreamDecoder::new());
    /// while response.next().await.is_some() {}
    /// let outcome = response.outcome().unwrap();
    /// assert!(matches!(outcome.verdict, Verdict::Abandoned { .. }));
    /// assert_eq!(outcome.received.bytes, 3);
    /// # });
    /// ```
    #[must_use]
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    /// What has been received so far.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamDecoder, http::{Mapping, VerifiedResponse}};
    /// let body = futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>();
    /// assert_eq!(VerifiedResponse::new(body, Mapping::Sse, StreamDecoder::new()).progress().frames, 0);
    /// ```
    #[must_use]
    pub fn progress(&self) -> Progress {
        self.decoder.progress()
    }

    /// The stream head (request key, attempt id) once HEAD arrived.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamDecoder, http::{Mapping, VerifiedResponse}};
    /// let body = futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>();
    /// assert!(VerifiedResponse::new(body, Mapping::Sse, StreamDecoder::new()).head().is_none());
    /// ```
    #[must_use]
    pub fn head(&self) -> Option<crate::event::StreamHead> {
        self.decoder.head()
    }

    /// `:` comment lines (keep-alives) skipped in an SSE-mapped body.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamDecoder, http::{Mapping, VerifiedResponse}};
    /// let body = futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>();
    /// assert_eq!(VerifiedResponse::new(body, Mapping::Sse, StreamDecoder::new()).sse_comments(), 0);
    /// ```
    #[must_use]
    pub fn sse_comments(&self) -> u64 {
        self.sse.comments()
    }

    fn next_event<E>(&mut self) -> Option<Result<Delivery, ReceiveError<E>>> {
        loop {
            let result = if self.body_ended {
                self.decoder.decode_eof(&mut self.buf)
            } else {
                self.decoder.decode(&mut self.buf)
            };
            match result {
                Ok(Some(Event::Message(message))) => return Some(Ok(Delivery::Message(message))),
                Ok(Some(Event::End(summary))) => self.summary = Some(summary),
                Ok(Some(Event::Aborted(abort))) => {
                    return Some(Err(ReceiveError::Decode(DecodeError::PeerAbort(abort))));
                }
                Ok(Some(_)) => {}
                Ok(None) if self.body_ended => {
                    let summary = self.summary.take()?;
                    return Some(Ok(Delivery::Complete(summary)));
                }
                Ok(None) => return None,
                Err(err) => return Some(Err(ReceiveError::Decode(err))),
            }
        }
    }
}

impl<S, E> VerifiedResponse<S>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    /// Like [`new`](Self::new), with the mapping taken from the response's `Content-Type`.
    ///
    /// # Errors
    ///
    /// [`ReceiveError::NotFramed`] when the content type is neither mapping's (e.g. a backend
    /// that ignored the opt-in answered `application/json`).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::StreamDecoder;
    /// use mcp_framing::http::VerifiedResponse;
    /// let body = futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>();
    /// let err = VerifiedResponse::from_content_type(body, Some("application/json"), StreamDecoder::new()).unwrap_err();
    /// assert_eq!(err.kind(), "NotFramed");
    /// ```
    pub fn from_content_type(
        body: S,
        content_type: Option<&str>,
        decoder: StreamDecoder,
    ) -> Result<Self, ReceiveError<E>> {
        match Mapping::from_content_type(content_type) {
            Some(mapping) => Ok(Self::new(body, mapping, decoder)),
            None => Err(ReceiveError::NotFramed {
                content_type: content_type.map(str::to_owned),
            }),
        }
    }
}

impl<S, E> Stream for VerifiedResponse<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Delivery, ReceiveError<E>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            if let Some(item) = this.next_event() {
                match &item {
                    Ok(Delivery::Message(_)) => {}
                    Ok(Delivery::Complete(_)) => {
                        this.done = true;
                        this.outcome = Some(Outcome::from_decoder(&this.decoder, &Ok(None)));
                    }
                    Err(ReceiveError::Decode(err)) => {
                        this.done = true;
                        this.outcome =
                            Some(Outcome::from_decoder(&this.decoder, &Err(err.clone())));
                    }
                    Err(_) => this.done = true,
                }
                return Poll::Ready(Some(item));
            }
            if this.body_ended {
                // decode_eof answered Ok(None) without a summary: only after an earlier
                // terminal item, which set `done`.
                this.done = true;
                continue;
            }
            match Pin::new(&mut this.body).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(bytes))) => match this.mapping {
                    Mapping::Binary => this.buf.extend_from_slice(&bytes),
                    Mapping::Sse => {
                        if let Err(err) = this.sse.feed(&bytes, &mut this.buf) {
                            this.done = true;
                            return Poll::Ready(Some(Err(ReceiveError::Sse(err))));
                        }
                    }
                },
                Poll::Ready(Some(Err(source))) => {
                    this.done = true;
                    this.outcome = Some(Outcome::transport_failed(&this.decoder));
                    let mut progress = this.decoder.progress();
                    progress.bytes += this.buf.len() as u64;
                    return Poll::Ready(Some(Err(ReceiveError::Body { source, progress })));
                }
                Poll::Ready(None) => {
                    this.sse.finish();
                    this.body_ended = true;
                }
            }
        }
    }
}

/// Collects a [`VerifiedResponse`]: all verified messages if the response completed.
///
/// # Errors
///
/// The [`ReceiveError`] that ended the response; the messages verified before it are dropped
/// with it (use the stream directly to act on them as they arrive).
///
/// # Examples
///
/// ```
/// use mcp_framing::http::{Mapping, VerifiedResponse, collect_messages};
/// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
/// let mut wire = bytes::BytesMut::new();
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// enc.message(b"{}", &mut wire)?;
/// enc.end(&mut wire)?;
/// let body = futures::stream::iter([Ok::<_, std::io::Error>(wire.freeze())]);
/// # tokio_test::block_on(async {
/// let messages = collect_messages(VerifiedResponse::new(body, Mapping::Binary, StreamDecoder::new())).await.unwrap();
/// assert_eq!(messages.len(), 1);
/// # });
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
pub async fn collect_messages<S, E>(
    mut response: VerifiedResponse<S>,
) -> Result<Vec<VerifiedMessage>, ReceiveError<E>>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let mut messages = Vec::new();
    while let Some(item) = std::future::poll_fn(|cx| Pin::new(&mut response).poll_next(cx)).await {
        match item? {
            Delivery::Message(message) => messages.push(message),
            Delivery::Complete(_) => return Ok(messages),
        }
    }
    // Not reached: a verified response ends with `Complete` or an error. Fail closed anyway.
    Err(ReceiveError::Decode(DecodeError::Truncated {
        at: crate::error::Truncation::NoFrame,
        progress: response.progress(),
    }))
}

fn cut_reason(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_ABORT_REASON_LEN);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// An [`Abort`] for a server-side failure, with a reason cut to the frame's limit.
///
/// # Examples
///
/// ```
/// let abort = mcp_framing::http::abort_for("upstream timed out");
/// assert_eq!(abort.reason, "upstream timed out");
/// ```
#[must_use]
pub fn abort_for(reason: &str) -> Abort {
    Abort::new(AbortCode::UpstreamFailed, cut_reason(reason))
}
