//! The SSE mapping's decoder (SPEC.md §15): body bytes in, frame bytes out; and the final error
//! both mappings' decoders keep.

use bytes::BytesMut;

use super::base64::put_base64_decoded;
use super::parser::{SseEvent, SseParser, is_message_event};
use crate::mapping::{FRAME_EVENT, SseError};

/// Decodes the SSE mapping: body bytes in, frame bytes out (SPEC.md §15).
///
/// Feed the output to a [`StreamDecoder`](crate::StreamDecoder); at the end of the body call
/// [`finish`](Self::finish) and then the stream decoder's `decode_eof`, which decides whether the
/// stream was complete. An event cut before its blank line is discarded, so a body cut inside an
/// event is a truncation of the framed stream, never a shorter valid one.
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::internals::sse::{SseFrameDecoder, SseFrameEncoder};
/// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut wire = BytesMut::new();
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
/// enc.end(&mut wire)?;
/// let body = SseFrameEncoder::new().to_events(&wire);
///
/// let mut frames = BytesMut::new();
/// let mut dec = SseFrameDecoder::new();
/// for piece in body.chunks(7) {
///     dec.feed(piece, &mut frames).unwrap();
/// }
/// dec.finish();
/// assert_eq!(frames, wire); // byte-exact
/// let stream = StreamDecoder::new().decode_all(&frames).unwrap();
/// assert_eq!(stream.messages.len(), 1);
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Debug, Default)]
pub struct SseFrameDecoder {
    parser: SseParser,
    events: Vec<SseEvent>,
    frame_events: u64,
    failed: FirstError<SseError>,
}

impl SseFrameDecoder {
    /// A decoder with the default event data limit (`DEFAULT_MAX_EVENT_DATA`, 256 KiB).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::internals::sse::SseFrameDecoder::new().frame_events(), 0);
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder whose events may carry at most `max` bytes of base64 data.
    ///
    /// # Examples
    ///
    /// ```
    /// let dec = mcp_framing::internals::sse::SseFrameDecoder::with_max_event_data(1 << 20);
    /// assert_eq!(dec.frame_events(), 0);
    /// ```
    #[must_use]
    pub fn with_max_event_data(max: usize) -> Self {
        Self {
            parser: SseParser::with_max_event_data(max),
            ..Self::default()
        }
    }

    /// Bounds the lines in a row that carry no data (see [`SseParser::max_comments_in_a_row`]).
    #[must_use]
    pub(crate) fn max_comments_in_a_row(mut self, max: u32) -> Self {
        self.parser = self.parser.max_comments_in_a_row(max);
        self
    }

    /// `mcp-frame` events decoded so far.
    ///
    /// # Examples
    ///
    /// See [`SseFrameDecoder`].
    #[must_use]
    pub fn frame_events(&self) -> u64 {
        self.frame_events
    }

    /// Comment lines skipped so far (keep-alives).
    #[must_use]
    pub(crate) fn comments(&self) -> u64 {
        self.parser.comments()
    }

    /// Parses `input` and appends the frame bytes of every completed `mcp-frame` event to
    /// `frames`.
    ///
    /// Events without data (an `id`-only priming event, a named event without data) are skipped.
    ///
    /// # Errors
    ///
    /// [`SseError::UnexpectedEvent`] for a data event under another name (the body is not a
    /// framed stream: fail closed), [`SseError::InvalidBase64`], [`SseError::EventTooLarge`].
    /// After an error the decoder returns the same error again.
    ///
    /// Errors come in body order (SPEC.md §15): the frames of the events completed before the
    /// failing line or event are still appended to `frames`, so decode them before acting on
    /// the error; an error in them comes first in the body. What ends up in `frames` and which
    /// error is returned do not depend on how the body is split into calls.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{internals::sse::SseFrameDecoder, mapping::SseError};
    /// let mut dec = SseFrameDecoder::with_max_event_data(64);
    /// let mut frames = bytes::BytesMut::new();
    /// // One read: an event carrying three bytes, then a comment line over the limit.
    /// let body = format!("event: mcp-frame\ndata: AQID\n\n:{}\n", "x".repeat(100));
    /// let err = dec.feed(body.as_bytes(), &mut frames).unwrap_err();
    /// assert_eq!(err, SseError::EventTooLarge { max: 64 });
    /// assert_eq!(&frames[..], [1, 2, 3]); // the earlier event's bytes were handed over
    /// ```
    pub fn feed(&mut self, input: &[u8], frames: &mut BytesMut) -> Result<(), SseError> {
        self.failed.check()?;
        let result = self.feed_inner(input, frames);
        self.failed.keep(result)
    }

    fn feed_inner(&mut self, input: &[u8], frames: &mut BytesMut) -> Result<(), SseError> {
        // Errors come in body order (SPEC.md §15): the events completed before a line that fails
        // are handed over first, and an error in one of them is reported instead. Without this,
        // the error would depend on how the body was split into reads.
        let parsed = self.parser.feed(input, &mut self.events);
        for event in self.events.drain(..) {
            if event.data.is_empty() {
                // Nothing carried (an `id`-only priming event, a named event without data): SSE
                // itself would not dispatch it.
                continue;
            }
            match event.event.as_deref() {
                Some(FRAME_EVENT) => {
                    // SSE joins data lines with `\n`, which is not base64: a sender that split
                    // the base64 over several lines loses nothing.
                    let data = event.data.as_bytes();
                    let joined: Vec<u8>;
                    let text = if memchr::memchr(b'\n', data).is_some() {
                        joined = data.iter().copied().filter(|&b| b != b'\n').collect();
                        &joined[..]
                    } else {
                        data
                    };
                    // Decoded in place at the end of `frames`: the event's data, already within
                    // the event limit, bounds what is reserved.
                    if put_base64_decoded(text, frames).is_err() {
                        return Err(SseError::InvalidBase64 {
                            event: self.frame_events,
                        });
                    }
                    self.frame_events += 1;
                }
                name => {
                    let name = match name {
                        Some(name) if !is_message_event(Some(name)) => name,
                        _ => "message",
                    };
                    return Err(SseError::UnexpectedEvent {
                        name: name.to_owned(),
                    });
                }
            }
        }
        parsed
    }

    /// Ends the body; returns the bytes of an event left open (discarded, SPEC.md §15).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut dec = mcp_framing::internals::sse::SseFrameDecoder::new();
    /// dec.feed(b"event: mcp-frame\ndata: n00B", &mut bytes::BytesMut::new()).unwrap();
    /// assert_eq!(dec.finish(), 27);
    /// ```
    pub fn finish(&mut self) -> usize {
        self.parser.finish()
    }
}

/// The first error of a decoder whose errors are final: once it failed, every call returns
/// that error again (the SSE decoders of both mappings).
#[derive(Debug)]
pub(crate) struct FirstError<E>(Option<E>);

impl<E> Default for FirstError<E> {
    fn default() -> Self {
        Self(None)
    }
}

impl<E: Clone> FirstError<E> {
    /// `Err` with the error kept, if there is one.
    pub(crate) fn check(&self) -> Result<(), E> {
        self.0.clone().map_or(Ok(()), Err)
    }

    /// Keeps the error of `result`, if it is one, and returns `result`.
    pub(crate) fn keep(&mut self, result: Result<(), E>) -> Result<(), E> {
        if let Err(err) = &result {
            self.0 = Some(err.clone());
        }
        result
    }
}
