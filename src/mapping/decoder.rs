//! A framed body in any mapping, decoded sans-I/O: body bytes in, decoder events out, in body
//! order (SPEC.md §15, §16, §18). The one SSE-to-events path: the HTTP client adapter
//! ([`VerifiedResponse`](crate::http::VerifiedResponse)) and the `mcp-frame` tool both read
//! bodies through it.

use std::fmt;

use bytes::BytesMut;

use crate::decoder::StreamDecoder;
use crate::error::{DecodeError, Progress};
use crate::event::Event;
use crate::limits::{Limits, compat_event_data_limit, event_data_limit};
use crate::mapping::compat::CompatDecoder;
use crate::mapping::sse::SseFrameDecoder;
use crate::mapping::{CompatError, Mapping, MappingViolation, SseError};
use crate::outcome::Outcome;

/// Why a framed body is not a complete stream: the frame decoder's verdict or the mapping's.
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
    /// The compatible SSE mapping is broken (an invalid record, an event no record announced,
    /// an event of another length than its DATA frames, SPEC.md §18.5).
    #[error(transparent)]
    Compat(CompatError),
}

impl BodyError {
    /// The error kind as named in SPEC.md and in the conformance manifest
    /// ([`DecodeError::kind`], [`SseError::kind`] or [`CompatError::kind`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, StreamDecoder, StreamEncoder, StreamHead, mapping::Mapping};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(b"{}", &mut wire)?;
    ///
    /// // A body that ends inside its first frame: the kind names the truncation.
    /// let mut decoder = BodyDecoder::new(Mapping::Binary, StreamDecoder::new());
    /// decoder.feed(&wire[..5]);
    /// decoder.finish();
    /// let err = decoder.next_event().unwrap_err();
    /// assert_eq!(err.kind(), "Truncated");
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Decode(err) => err.kind(),
            Self::Sse(err) => err.kind(),
            Self::Compat(err) => err.kind(),
        }
    }

    /// The outcome of this error alone, when the [`BodyDecoder`] is gone (with nothing
    /// received): [`Outcome::from_error`] for a decode error, a
    /// [`Verdict::MappingViolation`](crate::outcome::Verdict::MappingViolation) for a mapping's error.
    /// Never clean.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::BodyError;
    /// use mcp_framing::mapping::SseError;
    /// let err = BodyError::Sse(SseError::InvalidBase64 { event: 0 });
    /// assert_eq!(err.outcome().verdict.name(), "contract_violation");
    /// ```
    // Hidden: `BodyDecoder::outcome` reports it with what was received; the clients call it for an error alone.
    #[doc(hidden)]
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        match self {
            Self::Decode(err) => Outcome::from_error(err),
            Self::Sse(err) => Outcome::mapping_violation(MappingViolation::Sse(err.clone())),
            Self::Compat(err) => Outcome::mapping_violation(MappingViolation::Compat(err.clone())),
        }
    }
}

/// The mapping's half of a [`BodyDecoder`]: a framed body's bytes in, the frame bytes it
/// carries out, unchecked (SPEC.md §15, §16, §18). [`BodyDecoder`] hands them to a
/// [`StreamDecoder`]; a tool that lists the frames of a capture (`mcp-frame inspect`) walks them
/// itself.
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::internals::sse::SseFrameEncoder;
/// use mcp_framing::{Limits, mapping::Mapping, StreamEncoder, StreamHead};
/// use mcp_framing::internals::body::MappingDecoder;
///
/// let mut wire = BytesMut::new();
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// enc.end(&mut wire)?;
/// let body = SseFrameEncoder::new().to_events(&wire);
///
/// let mut unwrap = MappingDecoder::new(Mapping::Sse, &Limits::default(), None);
/// let mut frames = BytesMut::new();
/// unwrap.feed(&body, &mut frames).unwrap();
/// unwrap.finish();
/// assert_eq!(frames, wire);
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum MappingDecoder {
    /// The body is the frames (SPEC.md §16).
    Binary,
    /// Base64 in `mcp-frame` events (SPEC.md §15).
    #[doc(hidden)]
    // holds the mapping's own decoder, for the in-repo CLI's counts (`internals`)
    Sse(SseFrameDecoder),
    /// Records in comments and messages in `message` events (SPEC.md §18).
    #[doc(hidden)]
    // holds the mapping's own decoder, for the in-repo CLI's counts (`internals`)
    Compat(CompatDecoder),
}

impl MappingDecoder {
    /// The decoder of `mapping`, its bounds from a receiver's `limits`: the bound on one event's
    /// data is `max_event_data`, or with `None` the one that follows the limits in force (one
    /// frame of the frame limit in base64, at least 256 KiB, in the SSE mapping, SPEC.md §15;
    /// one message plus 64 KiB in the compatible mapping, §18.7); the bound on
    /// lines without data is [`Limits::max_sse_comments_in_a_row`].
    ///
    /// # Examples
    ///
    /// See [`MappingDecoder`].
    #[must_use]
    pub fn new(mapping: Mapping, limits: &Limits, max_event_data: Option<usize>) -> Self {
        let comments = limits.max_sse_comments_in_a_row;
        match mapping {
            Mapping::Binary => Self::Binary,
            Mapping::Sse => Self::Sse(
                SseFrameDecoder::with_max_event_data(
                    max_event_data.unwrap_or_else(|| event_data_limit(limits.max_frame_payload)),
                )
                .max_comments_in_a_row(comments),
            ),
            Mapping::Compat => Self::Compat(
                CompatDecoder::with_max_event_data(
                    max_event_data
                        .unwrap_or_else(|| compat_event_data_limit(limits.max_message_size)),
                )
                .max_comments_in_a_row(comments),
            ),
        }
    }

    /// The decoder for a [`BodyDecoder`], whose frame decoder takes the compatible mapping's
    /// checks made as the data arrived (see [`CompatDecoder`]'s `prehash`).
    fn for_frame_decoder(self) -> Self {
        match self {
            Self::Compat(compat) => Self::Compat(compat.prehash()),
            other => other,
        }
    }

    /// The mapping decoded.
    #[must_use]
    pub(crate) fn mapping(&self) -> Mapping {
        match self {
            Self::Binary => Mapping::Binary,
            Self::Sse(_) => Mapping::Sse,
            Self::Compat(_) => Mapping::Compat,
        }
    }

    /// Parses `body` and appends the frame bytes it carries to `frames`.
    ///
    /// # Errors
    ///
    /// [`BodyError::Sse`] or [`BodyError::Compat`] when the mapping breaks; the frame bytes
    /// that precede the error in the body are appended first (decode them before acting on the
    /// error, SPEC.md §15, §18.5), and the decoder must not be fed afterwards.
    ///
    /// # Examples
    ///
    /// See [`MappingDecoder`].
    pub fn feed(&mut self, body: &[u8], frames: &mut BytesMut) -> Result<(), BodyError> {
        match self {
            Self::Binary => {
                frames.extend_from_slice(body);
                Ok(())
            }
            Self::Sse(sse) => sse.feed(body, frames).map_err(BodyError::Sse),
            Self::Compat(compat) => compat.feed(body, frames).map_err(BodyError::Compat),
        }
    }

    /// The body ended: an SSE event left open is discarded (SPEC.md §15, §18.5).
    ///
    /// # Examples
    ///
    /// See [`MappingDecoder`].
    pub fn finish(&mut self) {
        match self {
            Self::Binary => {}
            Self::Sse(sse) => {
                sse.finish();
            }
            Self::Compat(compat) => {
                compat.finish();
            }
        }
    }

    /// `:` comment lines (keep-alives) skipped so far; in the compatible mapping, those that are
    /// not framing records. Zero in the binary mapping.
    #[must_use]
    pub(crate) fn comments(&self) -> u64 {
        match self {
            Self::Binary => 0,
            Self::Sse(sse) => sse.comments(),
            Self::Compat(compat) => compat.keep_alives(),
        }
    }
}

/// Decodes a framed body carried in a [`Mapping`], sans-I/O (client side).
///
/// [`feed`](Self::feed) body bytes as they arrive, take the events with
/// [`next_event`](Self::next_event) until it answers `Ok(None)`, and call
/// [`finish`](Self::finish) when the body ends; after that, `Ok(None)` means the stream is
/// complete: its sentinel arrived and nothing followed it, or, for a decoder that expects a
/// request key, the body ended after the verified final response (SPEC.md §7 row 4; the last
/// event is then [`Event::End`] without [`sentinel_seen`](crate::StreamSummary::sentinel_seen)). In the SSE mapping the `mcp-frame`
/// events' frames go to the [`StreamDecoder`], and an SSE error comes after the frames of the
/// events before it (body order, SPEC.md §15): the result never depends on how the body was split
/// into reads. [`outcome`](Self::outcome) classifies the body at any time.
///
/// # Examples
///
/// ```
/// use futures::{StreamExt, stream};
/// use mcp_framing::http::FramedBody;
/// use mcp_framing::{BodyDecoder, Event, Outgoing, StreamDecoder, StreamEncoder, StreamHead, mapping::Mapping};
///
/// # tokio_test::block_on(async {
/// // A response body in the SSE mapping, as the server writes it.
/// let source = stream::iter([
///     Ok::<_, std::io::Error>(Outgoing::Message(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into())),
/// ]);
/// let body = FramedBody::new(source, StreamEncoder::new(StreamHead::for_request(None)), Mapping::Sse);
/// let body: Vec<u8> = body.map(|chunk| chunk.unwrap()).collect::<Vec<_>>().await.concat();
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
/// # });
/// ```
///
/// An unframed event is an error, after the frames before it:
///
/// ```
/// use mcp_framing::{BodyDecoder, BodyError, mapping::Mapping, outcome::Verdict, StreamDecoder};
///
/// let mut decoder = BodyDecoder::new(Mapping::Sse, StreamDecoder::new());
/// decoder.feed(b"event: message\ndata: {\"jsonrpc\":\"2.0\"}\n\n");
/// assert!(matches!(decoder.next_event(), Err(BodyError::Sse(_))));
/// assert!(matches!(decoder.outcome().verdict, Verdict::MappingViolation(_)));
/// ```
pub struct BodyDecoder {
    /// Body bytes to frame bytes, in the mapping of the body.
    mapping: MappingDecoder,
    decoder: StreamDecoder,
    /// Frame bytes not decoded yet.
    frames: BytesMut,
    /// A mapping's error waiting until the frames buffered before it are decoded (body order).
    mapping_error: Option<BodyError>,
    /// The mapping's error that ended the body, once reported.
    mapping_failure: Option<BodyError>,
    body_ended: bool,
}

impl fmt::Debug for BodyDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyDecoder")
            .field("mapping", &self.mapping.mapping())
            .field("progress", &self.decoder.progress())
            .field("buffered", &self.frames.len())
            .field("body_ended", &self.body_ended)
            .finish_non_exhaustive()
    }
}

impl BodyDecoder {
    /// Decodes a body carried in `mapping` with `decoder` (its limits and expected request key).
    /// The bound on one event's data follows the decoder's frame limit in the SSE mapping
    /// (the base64 of one whole frame, at least 256 KiB; SPEC.md §15) and its message limit in
    /// the compatible one (one message plus 64 KiB; SPEC.md §18.7); in both, the bound on lines
    /// without data
    /// is the decoder's [`Limits::max_sse_comments_in_a_row`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, RequestKey, StreamDecoder, mapping::Mapping};
    ///
    /// // The mapping the response's Content-Type named, and the checks of this request.
    /// let key = RequestKey::random();
    /// let mapping = Mapping::from_content_type(Some("application/vnd.mcp-framing")).unwrap();
    /// let decoder = BodyDecoder::new(mapping, StreamDecoder::builder().expect_request_key(key).build());
    /// assert!(!decoder.outcome().is_clean()); // nothing received yet
    /// ```
    #[must_use]
    pub fn new(mapping: Mapping, decoder: StreamDecoder) -> Self {
        Self {
            mapping: MappingDecoder::new(mapping, decoder.limits(), None).for_frame_decoder(),
            decoder,
            frames: BytesMut::new(),
            mapping_error: None,
            mapping_failure: None,
            body_ended: false,
        }
    }

    /// Bounds the data of one SSE event at `max` bytes instead of the bound derived from the
    /// decoder's limits (for a transport configured with its own event limit), in either SSE
    /// mapping. Call it before the first [`feed`](Self::feed): it replaces the SSE parser.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, BodyError, mapping::Mapping, StreamDecoder};
    /// use mcp_framing::mapping::SseError;
    /// let mut decoder = BodyDecoder::new(Mapping::Sse, StreamDecoder::new()).max_event_data(8);
    /// decoder.feed(b"event: mcp-frame\ndata: AAAAAAAAAAAA\n\n");
    /// assert_eq!(decoder.next_event(), Err(BodyError::Sse(SseError::EventTooLarge { max: 8 })));
    /// ```
    #[must_use]
    pub fn max_event_data(mut self, max: usize) -> Self {
        let mapping = self.mapping.mapping();
        self.mapping =
            MappingDecoder::new(mapping, self.decoder.limits(), Some(max)).for_frame_decoder();
        self
    }

    /// Appends body bytes. Nothing is decoded yet, and nothing fails here: errors come from
    /// [`next_event`](Self::next_event), in body order. Bytes after an SSE error are ignored.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, Event, StreamDecoder, StreamEncoder, StreamHead, mapping::Mapping};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(b"{}", &mut wire)?;
    /// enc.end(&mut wire)?;
    ///
    /// let mut decoder = BodyDecoder::new(Mapping::Binary, StreamDecoder::new());
    /// decoder.feed(&wire[..10]); // a first read
    /// assert_eq!(decoder.next_event(), Ok(None)); // not a whole frame yet
    /// decoder.feed(&wire[10..]);
    /// assert!(matches!(decoder.next_event(), Ok(Some(Event::Opened(_)))));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn feed(&mut self, body: &[u8]) {
        if self.mapping_error.is_some() || self.mapping_failure.is_some() {
            return;
        }
        // On an error, the frames of the body before the failing line are in `frames`: they
        // are decoded first, an error in them comes earlier in the body (SPEC.md §15, §18.5).
        self.mapping_error = self.mapping.feed(body, &mut self.frames).err();
        // The compatible mapping hashed the message events' data as it arrived: the frame
        // decoder compares those checks instead of making them again, and takes the payloads
        // from the data, of which `frames` holds only the DATA headers (issue 21). Every entry
        // goes in before the headers after its first payload are decoded.
        if let MappingDecoder::Compat(compat) = &mut self.mapping {
            compat
                .take_prehashed()
                .for_each(|entry| self.decoder.add_prehashed(entry));
        }
    }

    /// The body ended. An SSE event left open is discarded (SPEC.md §15, §18.5); the stream
    /// decoder decides whether the stream was complete (SPEC.md §7).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, BodyError, DecodeError, StreamDecoder, StreamEncoder, StreamHead};
    /// use mcp_framing::mapping::Mapping;
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(b"{}", &mut wire)?; // and no STREAM_END: the body stops here
    ///
    /// let mut decoder = BodyDecoder::new(Mapping::Binary, StreamDecoder::new());
    /// decoder.feed(&wire);
    /// while decoder.next_event().unwrap().is_some() {} // before finish: waiting for more
    /// decoder.finish();
    /// let err = decoder.next_event().unwrap_err(); // after: the body is cut short
    /// assert!(matches!(err, BodyError::Decode(DecodeError::Truncated { .. })));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn finish(&mut self) {
        self.mapping.finish();
        self.body_ended = true;
    }

    /// The next event in body order. `Ok(None)`: more body bytes are needed or, after
    /// [`finish`](Self::finish), the stream is complete (with its sentinel, or a final response
    /// delivered without it, SPEC.md §7 rows 2 and 4).
    ///
    /// # Errors
    ///
    /// [`BodyError::Decode`] as [`StreamDecoder::decode`] (and at the end of the body as
    /// [`StreamDecoder::decode_eof`]: a truncation or the peer's abort), [`BodyError::Sse`] or
    /// [`BodyError::Compat`] when the mapping breaks. Errors are final: later calls return the
    /// same error.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, Event, StreamDecoder, StreamEncoder, StreamHead, mapping::Mapping};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(b"[1]", &mut wire)?;
    /// enc.end(&mut wire)?;
    ///
    /// let mut decoder = BodyDecoder::new(Mapping::Binary, StreamDecoder::new());
    /// decoder.feed(&wire);
    /// decoder.finish();
    /// let mut events = Vec::new();
    /// while let Some(event) = decoder.next_event().unwrap() {
    ///     events.push(event);
    /// }
    /// assert!(matches!(events.as_slice(), [Event::Opened(_), .., Event::End(_)]));
    /// assert!(events.iter().any(|e| matches!(e, Event::Message(m) if m.bytes().as_ref() == b"[1]")));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn next_event(&mut self) -> Result<Option<Event>, BodyError> {
        if let Some(err) = &self.mapping_failure {
            return Err(err.clone());
        }
        // After a mapping's error the body did not end normally: no end-of-input verdict.
        let result = if self.body_ended && self.mapping_error.is_none() {
            self.decoder.decode_eof(&mut self.frames)
        } else {
            self.decoder.decode(&mut self.frames)
        };
        match result {
            Ok(None) => match self.mapping_error.take() {
                // The frames before the failing line are decoded and verified: the mapping's
                // error is next in body order (SPEC.md §15, §18.5).
                Some(err) => {
                    self.mapping_failure = Some(err.clone());
                    Err(err)
                }
                None => Ok(None),
            },
            Ok(Some(event)) => Ok(Some(event)),
            Err(err) => Err(BodyError::Decode(err)),
        }
    }

    /// How the body ended, so far: [`StreamDecoder::outcome`] (clean only after
    /// [`finish`](Self::finish), with the sentinel or a delivered final response), or, after a
    /// mapping's error,
    /// [`Verdict::MappingViolation`](crate::outcome::Verdict::MappingViolation) with what was received
    /// before it.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, StreamDecoder, StreamEncoder, StreamHead};
    /// use mcp_framing::{mapping::Mapping, outcome::Verdict};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(b"{}", &mut wire)?;
    /// enc.end(&mut wire)?;
    ///
    /// let mut decoder = BodyDecoder::new(Mapping::Binary, StreamDecoder::new());
    /// decoder.feed(&wire[..wire.len() - 1]); // the last byte has not arrived
    /// decoder.finish();
    /// while let Ok(Some(_)) = decoder.next_event() {}
    /// assert!(matches!(decoder.outcome().verdict, Verdict::Abandoned { .. }));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        match &self.mapping_failure {
            Some(err) => {
                let mut outcome = err.outcome();
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
    /// use mcp_framing::{BodyDecoder, mapping::Mapping, StreamDecoder};
    /// let mut decoder = BodyDecoder::new(Mapping::Binary, StreamDecoder::new());
    /// decoder.feed(b"\x9f\x4d\x01");
    /// assert_eq!(decoder.progress().bytes, 3);
    /// ```
    // Hidden: the same as `decoder().progress()`, for the CLI.
    #[doc(hidden)]
    #[must_use]
    pub fn progress(&self) -> Progress {
        let mut progress = self.decoder.progress();
        progress.bytes += self.frames.len() as u64;
        progress
    }

    /// The stream decoder (its progress, whether the stream is complete).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, mapping::Mapping, StreamDecoder};
    /// let decoder = BodyDecoder::new(Mapping::Binary, StreamDecoder::new());
    /// assert_eq!(decoder.decoder().progress().frames, 0);
    /// assert!(!decoder.decoder().is_complete());
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
    /// use mcp_framing::{BodyDecoder, mapping::Mapping, StreamDecoder};
    /// assert_eq!(BodyDecoder::new(Mapping::Sse, StreamDecoder::new()).mapping(), Mapping::Sse);
    /// ```
    // Hidden: the mapping the caller chose, read back by the CLI and the tests.
    #[doc(hidden)]
    #[must_use]
    pub fn mapping(&self) -> Mapping {
        self.mapping.mapping()
    }

    /// `:` comment lines (keep-alives) skipped in an SSE body; in the compatible mapping, those
    /// that are not framing records.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{BodyDecoder, mapping::Mapping, StreamDecoder};
    /// let mut decoder = BodyDecoder::new(Mapping::Sse, StreamDecoder::new());
    /// decoder.feed(b": keep-alive\n\n");
    /// assert_eq!(decoder.sse_comments(), 1);
    /// ```
    // Hidden: the CLI's and the tests' count; the limit on comments is what a user sets.
    #[doc(hidden)]
    #[must_use]
    pub fn sse_comments(&self) -> u64 {
        self.mapping.comments()
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::MappingDecoder;
    use crate::{Limits, mapping::Mapping};

    #[test]
    fn a_mapping_decoder_reports_its_mapping_and_the_comments_it_skipped() {
        let compat = MappingDecoder::new(Mapping::Compat, &Limits::default(), None);
        assert_eq!(compat.mapping(), Mapping::Compat);
        let mut sse = MappingDecoder::new(Mapping::Sse, &Limits::default(), None);
        sse.feed(b": keep-alive\n\n", &mut BytesMut::new()).unwrap();
        assert_eq!(sse.comments(), 1);
    }
}
