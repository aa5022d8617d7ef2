//! A framed body in either mapping, decoded sans-I/O: body bytes in, decoder events out, in body
//! order (SPEC.md §15, §16). The one SSE-to-events path: the HTTP client adapter
//! ([`VerifiedResponse`](crate::http::VerifiedResponse)) and the `mcp-frame` tool both read
//! bodies through it.

use std::fmt;

use bytes::BytesMut;

use crate::decoder::StreamDecoder;
use crate::error::{DecodeError, Progress};
use crate::event::Event;
use crate::limits::event_data_limit;
use crate::mapping::{Mapping, MappingViolation, SseError};
use crate::outcome::Outcome;
use crate::sse::SseFrameDecoder;

/// Why a framed body is not a complete stream: the frame decoder's verdict or the SSE mapping's.
///
/// # Examples
///
/// ```
/// use mcp_framing::{BodyError, DecodeError};
/// let err = BodyError::Decode(DecodeError::InvalidAbort);
/// assert_eq!(err.kind(), "InvalidAbort");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// The framed stream is invalid, truncated ([`DecodeError::Truncated`]) or aborted by the
    /// server ([`DecodeError::PeerAbort`]).
    #[error(transparent)]
    Decode(DecodeError),
    /// The SSE mapping is broken (an unframed event, invalid base64, an oversized event).
    #[error(transparent)]
    Sse(SseError),
}

impl BodyError {
    /// The error kind as named in SPEC.md and in the conformance manifest
    /// ([`DecodeError::kind`] or [`SseError::kind`]).
    ///
    /// # Examples
    ///
    /// See [`BodyError`].
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Decode(err) => err.kind(),
            Self::Sse(err) => err.kind(),
        }
    }

    /// The outcome of this error alone, when the [`BodyDecoder`] is gone (with nothing
    /// received): [`Outcome::from_error`] for a decode error, a
    /// [`Verdict::MappingViolation`](crate::Verdict::MappingViolation) for an SSE error. Never
    /// clean.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyError, VerdictKind};
    /// use mcp_framing::mapping::SseError;
    /// let err = BodyError::Sse(SseError::InvalidBase64 { event: 0 });
    /// assert_eq!(err.outcome().verdict.kind(), VerdictKind::ContractViolation);
    /// ```
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        match self {
            Self::Decode(err) => Outcome::from_error(err),
            Self::Sse(err) => Outcome::mapping_violation(MappingViolation::Sse(err.clone())),
        }
    }
}

/// Decodes a framed body carried in a [`Mapping`], sans-I/O (client side).
///
/// [`feed`](Self::feed) body bytes as they arrive, take the events with
/// [`next_event`](Self::next_event) until it answers `Ok(None)`, and call
/// [`finish`](Self::finish) when the body ends; after that, `Ok(None)` means the stream is
/// complete (its sentinel arrived and nothing followed it). In the SSE mapping the `mcp-frame`
/// events' frames go to the [`StreamDecoder`], and an SSE error comes after the frames of the
/// events before it (body order, SPEC.md §15): the result never depends on how the body was split
/// into reads. [`outcome`](Self::outcome) classifies the body at any time.
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::sse::SseFrameEncoder;
/// use mcp_framing::{BodyDecoder, Event, Mapping, StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut wire = BytesMut::new();
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
/// enc.end(&mut wire)?;
/// let body = SseFrameEncoder::new().to_events(&wire);
///
/// let mut decoder = BodyDecoder::new(Mapping::Sse, StreamDecoder::new());
/// let mut messages = 0;
/// for piece in body.chunks(5) {
///     decoder.feed(piece);
///     while let Some(event) = decoder.next_event().unwrap() {
///         messages += usize::from(matches!(event, Event::Message(_)));
///     }
/// }
/// decoder.finish();
/// while let Some(_event) = decoder.next_event().unwrap() {}
/// assert_eq!(messages, 1);
/// assert!(decoder.outcome().is_clean());
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
///
/// An unframed event is an error, after the frames before it:
///
/// ```
/// use mcp_framing::{BodyDecoder, BodyError, Mapping, StreamDecoder, Verdict};
///
/// let mut decoder = BodyDecoder::new(Mapping::Sse, StreamDecoder::new());
/// decoder.feed(b"event: message\ndata: {\"jsonrpc\":\"2.0\"}\n\n");
/// assert!(matches!(decoder.next_event(), Err(BodyError::Sse(_))));
/// assert!(matches!(decoder.outcome().verdict, Verdict::MappingViolation(_)));
/// ```
pub struct BodyDecoder {
    mapping: Mapping,
    sse: SseFrameDecoder,
    decoder: StreamDecoder,
    /// Frame bytes not decoded yet.
    frames: BytesMut,
    /// An SSE error waiting until the frames buffered before it are decoded (body order).
    sse_error: Option<SseError>,
    /// The SSE error that ended the body, once reported.
    sse_failure: Option<SseError>,
    body_ended: bool,
}

impl fmt::Debug for BodyDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyDecoder")
            .field("mapping", &self.mapping)
            .field("progress", &self.decoder.progress())
            .field("buffered", &self.frames.len())
            .field("body_ended", &self.body_ended)
            .finish_non_exhaustive()
    }
}

impl BodyDecoder {
    /// Decodes a body carried in `mapping` with `decoder` (its limits and expected request key).
    /// In the SSE mapping, the bound on one event's data follows the decoder's frame limit
    /// ([`event_data_limit`], SPEC.md §15), and the bound on lines without data is the
    /// decoder's [`Limits::max_sse_comments_in_a_row`](crate::Limits::max_sse_comments_in_a_row).
    ///
    /// # Examples
    ///
    /// See [`BodyDecoder`].
    #[must_use]
    pub fn new(mapping: Mapping, decoder: StreamDecoder) -> Self {
        let limits = decoder.limits();
        let sse = SseFrameDecoder::with_max_event_data(event_data_limit(limits.max_frame_payload))
            .max_comments_in_a_row(limits.max_sse_comments_in_a_row);
        Self {
            mapping,
            sse,
            decoder,
            frames: BytesMut::new(),
            sse_error: None,
            sse_failure: None,
            body_ended: false,
        }
    }

    /// Bounds the data of one SSE event at `max` bytes instead of the bound derived from the
    /// decoder's frame limit (for a transport configured with its own event limit). Call it
    /// before the first [`feed`](Self::feed): it replaces the SSE parser.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, BodyError, Mapping, StreamDecoder};
    /// use mcp_framing::sse::SseError;
    /// let mut decoder = BodyDecoder::new(Mapping::Sse, StreamDecoder::new()).max_event_data(8);
    /// decoder.feed(b"event: mcp-frame\ndata: AAAAAAAAAAAA\n\n");
    /// assert_eq!(decoder.next_event(), Err(BodyError::Sse(SseError::EventTooLarge { max: 8 })));
    /// ```
    #[must_use]
    pub fn max_event_data(mut self, max: usize) -> Self {
        let comments = self.decoder.limits().max_sse_comments_in_a_row;
        self.sse = SseFrameDecoder::with_max_event_data(max).max_comments_in_a_row(comments);
        self
    }

    /// Appends body bytes. Nothing is decoded yet, and nothing fails here: errors come from
    /// [`next_event`](Self::next_event), in body order. Bytes after an SSE error are ignored.
    ///
    /// # Examples
    ///
    /// See [`BodyDecoder`].
    pub fn feed(&mut self, body: &[u8]) {
        match self.mapping {
            Mapping::Binary => self.frames.extend_from_slice(body),
            Mapping::Sse => {
                if self.sse_error.is_none() && self.sse_failure.is_none() {
                    // On an error, the frames of the events before the failing line are in
                    // `frames`: they are decoded first, an error in them comes earlier in the body.
                    if let Err(err) = self.sse.feed(body, &mut self.frames) {
                        self.sse_error = Some(err);
                    }
                }
            }
        }
    }

    /// The body ended. An SSE event left open is discarded (SPEC.md §15); the stream decoder
    /// decides whether the stream was complete (SPEC.md §7).
    ///
    /// # Examples
    ///
    /// See [`BodyDecoder`].
    pub fn finish(&mut self) {
        self.sse.finish();
        self.body_ended = true;
    }

    /// The next event in body order. `Ok(None)`: more body bytes are needed or, after
    /// [`finish`](Self::finish), the stream is complete.
    ///
    /// # Errors
    ///
    /// [`BodyError::Decode`] as [`StreamDecoder::decode`] (and at the end of the body as
    /// [`StreamDecoder::decode_eof`]: a truncation or the peer's abort), [`BodyError::Sse`] when
    /// the SSE mapping breaks. Errors are final: later calls return the same error.
    ///
    /// # Examples
    ///
    /// See [`BodyDecoder`].
    pub fn next_event(&mut self) -> Result<Option<Event>, BodyError> {
        if let Some(err) = &self.sse_failure {
            return Err(BodyError::Sse(err.clone()));
        }
        // After an SSE error the body did not end normally: no end-of-input verdict.
        let result = if self.body_ended && self.sse_error.is_none() {
            self.decoder.decode_eof(&mut self.frames)
        } else {
            self.decoder.decode(&mut self.frames)
        };
        match result {
            Ok(None) => match self.sse_error.take() {
                // The frames before the failing SSE line are decoded and verified: the SSE error
                // is next in body order (SPEC.md §15).
                Some(err) => {
                    self.sse_failure = Some(err.clone());
                    Err(BodyError::Sse(err))
                }
                None => Ok(None),
            },
            Ok(Some(event)) => Ok(Some(event)),
            Err(err) => Err(BodyError::Decode(err)),
        }
    }

    /// How the body ended, so far: [`StreamDecoder::outcome`] (clean only after
    /// [`finish`](Self::finish) and the sentinel), or, after an SSE error,
    /// [`Verdict::MappingViolation`](crate::Verdict::MappingViolation) with what was received
    /// before it.
    ///
    /// # Examples
    ///
    /// See [`BodyDecoder`].
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        match &self.sse_failure {
            Some(err) => {
                let mut outcome = Outcome::mapping_violation(MappingViolation::Sse(err.clone()));
                outcome.received = self.progress();
                outcome.head = self.decoder.head();
                outcome
            }
            None => self.decoder.outcome(),
        }
    }

    /// What has been received: the decoder's progress, plus frame bytes buffered and not yet
    /// decoded.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, Mapping, StreamDecoder};
    /// let mut decoder = BodyDecoder::new(Mapping::Binary, StreamDecoder::new());
    /// decoder.feed(b"\x9f\x4d\x01");
    /// assert_eq!(decoder.progress().bytes, 3);
    /// ```
    #[must_use]
    pub fn progress(&self) -> Progress {
        let mut progress = self.decoder.progress();
        progress.bytes += self.frames.len() as u64;
        progress
    }

    /// The stream decoder (its head, progress and limits).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, Mapping, StreamDecoder};
    /// let decoder = BodyDecoder::new(Mapping::Binary, StreamDecoder::new());
    /// assert!(decoder.decoder().head().is_none());
    /// ```
    #[must_use]
    pub fn decoder(&self) -> &StreamDecoder {
        &self.decoder
    }

    /// The mapping the body is read in.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, Mapping, StreamDecoder};
    /// assert_eq!(BodyDecoder::new(Mapping::Sse, StreamDecoder::new()).mapping(), Mapping::Sse);
    /// ```
    #[must_use]
    pub fn mapping(&self) -> Mapping {
        self.mapping
    }

    /// `:` comment lines (keep-alives) skipped in an SSE body.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, Mapping, StreamDecoder};
    /// let mut decoder = BodyDecoder::new(Mapping::Sse, StreamDecoder::new());
    /// decoder.feed(b": keep-alive\n\n");
    /// assert_eq!(decoder.sse_comments(), 1);
    /// ```
    #[must_use]
    pub fn sse_comments(&self) -> u64 {
        self.sse.comments()
    }
}
