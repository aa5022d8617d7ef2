//! A framed body in any mapping, encoded sans-I/O (server side): the counterpart of
//! [`MappingDecoder`](crate::mapping::decoder::MappingDecoder) (SPEC.md §15, §16, §18).
//!
//! [`MappingEncoder`] is the one place that decides how a mapping writes a message, turns a
//! message over the limit into an ABORT of code 5 (§3.1) and cuts an ABORT reason to what its
//! frame holds: [`FramedBody`](crate::http::FramedBody) (every framing route of the rmcp layer,
//! its compatible pass-through included) and `mcp-frame encode` write through it.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::encoder::StreamEncoder;
use crate::error::EncodeError;
#[cfg(feature = "http")]
use crate::frame::Abort;
use crate::frame::{AbortCode, StreamHead};
use crate::limits::MAX_ABORT_REASON_LEN;
use crate::mapping::Mapping;
use crate::mapping::compat::{CompatEncodeError, CompatEncoder};
#[cfg(feature = "rmcp-server")]
use crate::mapping::compat::OpenRecord;
use crate::mapping::sse::SseFrameEncoder;
#[cfg(feature = "rmcp-server")]
use crate::mapping::sse::Parts;

/// Writes one framed response body in a [`Mapping`] (server side): the frames of a
/// [`StreamEncoder`] as the body itself (binary, SPEC.md §16), as base64 `mcp-frame` events
/// (§15), or as records beside the unchanged `message` events (the compatible mapping, §18).
///
/// The calls are the frame encoder's, and mean the same in every mapping; each writes the body
/// bytes it can into `dst`. In the compatible mapping an SSE event carries a whole message, so a
/// message given in pieces is written once it is finished, and a finished message is held until
/// the next call, so that the last one's record also carries the STREAM_END sentinel when
/// [`end`](Self::end) follows; [`flush`](Self::flush) writes a held message at once (a source
/// with nothing more ready).
///
/// A refused call writes nothing. [`fail`](Self::fail) ends the stream with the ABORT its error
/// calls for: code 5, message too large, for a message over the limit (which a client does not
/// retry, SPEC.md §11.6), code 1, internal error, otherwise. The errors are the compatible
/// mapping's ([`CompatEncodeError`]), whose refusals of a message an SSE event cannot carry
/// unchanged occur in that mapping alone; in the others every error is a
/// [`CompatEncodeError::Encode`].
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::{BodyDecoder, mapping::Mapping, StreamDecoder, StreamEncoder, StreamHead};
/// use mcp_framing::internals::body::MappingEncoder;
///
/// let result = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
/// for mapping in Mapping::ALL {
///     let mut body = BytesMut::new();
///     let mut enc = MappingEncoder::new(mapping, StreamEncoder::new(StreamHead::for_request(None)));
///     enc.message(result, &mut body)?;
///     enc.end(&mut body)?;
///
///     let mut decoder = BodyDecoder::new(mapping, StreamDecoder::new());
///     decoder.feed(&body);
///     decoder.finish();
///     while decoder.next_event().unwrap().is_some() {}
///     assert!(decoder.outcome().is_clean(), "{mapping:?}");
/// }
/// # Ok::<(), mcp_framing::internals::sse_compat::CompatEncodeError>(())
/// ```
///
/// A message over the limit ends the stream with ABORT code 5:
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::{AbortCode, DecodeError, mapping::Mapping, StreamDecoder, StreamEncoder, StreamHead};
/// use mcp_framing::internals::body::MappingEncoder;
///
/// let encoder = StreamEncoder::builder().max_message_size(4).build(StreamHead::for_request(None));
/// let mut enc = MappingEncoder::new(Mapping::Binary, encoder);
/// let mut body = BytesMut::new();
/// let err = enc.message(b"12345", &mut body).unwrap_err();
/// assert_eq!(enc.fail(&err, &mut body), Some(AbortCode::MessageTooLarge));
/// let Err(DecodeError::PeerAbort(abort)) = StreamDecoder::new().decode_all(&body) else { panic!() };
/// assert_eq!(abort.reason, "message of at least 5 bytes exceeds the limit of 4");
/// ```
pub struct MappingEncoder {
    writer: Writer,
    /// Frames written and not yet turned into events (SSE mapping).
    frames: BytesMut,
}

impl fmt::Debug for MappingEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MappingEncoder")
            .field("mapping", &self.mapping())
            .field("head", &self.head())
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

/// What writes the body: frames (binary, or base64 in events), or records and events.
enum Writer {
    Binary(StreamEncoder),
    Sse(StreamEncoder),
    Compat {
        encoder: CompatEncoder,
        /// A finished message not written yet: its record gets the sentinel if the stream ends
        /// next.
        held: Held,
    },
}

/// A finished message the compatible mapping holds (see [`MappingEncoder`]).
#[derive(Default)]
enum Held {
    #[default]
    Nothing,
    /// Given in pieces: its bytes are in the encoder.
    Pushed,
    /// Given whole, as a shared buffer: held as it is, not copied.
    // Given by `FramedBody` (feature `http`) alone.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Whole(Bytes),
}

impl MappingEncoder {
    /// The body of `mapping`, its frames written by `encoder` (its head, frame size and message
    /// limit).
    ///
    /// # Examples
    ///
    /// See [`MappingEncoder`].
    #[must_use]
    pub fn new(mapping: Mapping, encoder: StreamEncoder) -> Self {
        let writer = match mapping {
            Mapping::Binary => Writer::Binary(encoder),
            Mapping::Sse => Writer::Sse(encoder),
            Mapping::Compat => Writer::Compat {
                encoder: CompatEncoder::new(encoder),
                held: Held::Nothing,
            },
        };
        Self {
            writer,
            frames: BytesMut::new(),
        }
    }

    /// The mapping written.
    #[must_use]
    pub(crate) fn mapping(&self) -> Mapping {
        match self.writer {
            Writer::Binary(_) => Mapping::Binary,
            Writer::Sse(_) => Mapping::Sse,
            Writer::Compat { .. } => Mapping::Compat,
        }
    }

    fn frame_encoder(&self) -> &StreamEncoder {
        match &self.writer {
            Writer::Binary(encoder) | Writer::Sse(encoder) => encoder,
            Writer::Compat { encoder, .. } => encoder.encoder(),
        }
    }

    /// The stream's head (request key and attempt id).
    #[must_use]
    pub(crate) fn head(&self) -> StreamHead {
        self.frame_encoder().head()
    }

    /// Whether a whole message of `len` bytes would be written now ([`StreamEncoder::check_message`]):
    /// for a writer that writes it in pieces ([`push`](Self::push)) and wants a refusal before
    /// its first frame, as [`message`](Self::message) refuses it.
    #[cfg(feature = "http")]
    pub(crate) fn check_message(&self, len: usize) -> Result<(), CompatEncodeError> {
        if self.in_message() {
            return Err(EncodeError::MessageOpen.into());
        }
        self.frame_encoder().check_message(len).map_err(Into::into)
    }

    /// The DATA payload size of the frames written.
    #[cfg(feature = "http")]
    pub(crate) fn frame_size(&self) -> usize {
        self.frame_encoder().frame_size()
    }

    /// Whether the stream was ended or aborted.
    #[must_use]
    pub(crate) fn is_finished(&self) -> bool {
        self.frame_encoder().is_finished()
    }

    /// Whether a message given in pieces is open ([`push`](Self::push) without
    /// [`finish_message`](Self::finish_message)); a finished message held in the compatible
    /// mapping is not open.
    #[must_use]
    pub(crate) fn in_message(&self) -> bool {
        match &self.writer {
            Writer::Binary(encoder) | Writer::Sse(encoder) => encoder.in_message(),
            Writer::Compat { encoder, held } => {
                encoder.in_message() && matches!(held, Held::Nothing)
            }
        }
    }

    /// Runs `write` on the frame encoder, the frames going to `dst` (binary) or, as events, through
    /// the SSE scratch buffer (SSE).
    fn frames<T>(
        &mut self,
        dst: &mut BytesMut,
        write: impl FnOnce(&mut StreamEncoder, &mut BytesMut) -> Result<T, EncodeError>,
    ) -> Result<T, CompatEncodeError> {
        let written = match &mut self.writer {
            Writer::Binary(encoder) => write(encoder, dst),
            Writer::Sse(encoder) => {
                let written = write(encoder, &mut self.frames);
                // One event per frame (SPEC.md §15); nothing was written on error.
                SseFrameEncoder::new().encode(&self.frames, dst);
                self.frames.clear();
                written
            }
            Writer::Compat { .. } => unreachable!("the compatible mapping writes records"),
        };
        written.map_err(CompatEncodeError::Encode)
    }

    /// Writes a held message (compatible mapping): its record, without the sentinel, and its
    /// event.
    fn release(&mut self, dst: &mut BytesMut) -> Result<(), CompatEncodeError> {
        if let Writer::Compat { encoder, held } = &mut self.writer {
            match std::mem::take(held) {
                Held::Nothing => {}
                Held::Pushed => {
                    encoder.finish_message(dst)?;
                }
                Held::Whole(message) => {
                    encoder.message(&message, dst)?;
                }
            }
        }
        Ok(())
    }

    /// Writes the HEAD frame now, if it was not written yet (binary and SSE mappings: the
    /// response's attempt id is committed before the first message exists). In the compatible
    /// mapping HEAD goes in the first record, with what follows it.
    ///
    /// # Errors
    ///
    /// [`CompatEncodeError::Encode`] as [`StreamEncoder::open`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{mapping::Mapping, StreamEncoder, StreamHead};
    /// use mcp_framing::internals::body::MappingEncoder;
    /// let mut enc = MappingEncoder::new(Mapping::Binary, StreamEncoder::new(StreamHead::for_request(None)));
    /// let mut body = bytes::BytesMut::new();
    /// enc.open(&mut body)?;
    /// assert_eq!(body.len(), 52);
    /// # Ok::<(), mcp_framing::internals::sse_compat::CompatEncodeError>(())
    /// ```
    pub fn open(&mut self, dst: &mut BytesMut) -> Result<(), CompatEncodeError> {
        match self.writer {
            Writer::Compat { .. } => Ok(()),
            _ => self.frames(dst, StreamEncoder::open),
        }
    }

    /// Appends `chunk` to the current message ([`StreamEncoder::push`]; in the compatible
    /// mapping the message is buffered until it is finished, within the message limit).
    ///
    /// # Errors
    ///
    /// [`CompatEncodeError::Encode`] with [`EncodeError::MessageTooLarge`] past the limit, or as
    /// [`StreamEncoder::push`]; in the compatible mapping also the errors of a held message
    /// written first ([`message`](Self::message)).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{mapping::Mapping, StreamEncoder, StreamHead};
    /// use mcp_framing::internals::body::MappingEncoder;
    /// let mut enc = MappingEncoder::new(Mapping::Compat, StreamEncoder::new(StreamHead::for_request(None)));
    /// let mut body = bytes::BytesMut::new();
    /// enc.push(b"{}", &mut body)?;
    /// assert!(body.is_empty()); // an event carries a whole message
    /// enc.finish_message(&mut body)?;
    /// assert!(body.is_empty()); // held: the sentinel may join its record
    /// enc.flush(&mut body)?;
    /// assert!(body.ends_with(b"data: {}\n\n"));
    /// # Ok::<(), mcp_framing::internals::sse_compat::CompatEncodeError>(())
    /// ```
    pub fn push(&mut self, chunk: &[u8], dst: &mut BytesMut) -> Result<(), CompatEncodeError> {
        if let Writer::Compat { .. } = self.writer {
            self.release(dst)?;
            let Writer::Compat { encoder, .. } = &mut self.writer else {
                unreachable!()
            };
            return encoder.push(chunk);
        }
        self.frames(dst, |encoder, dst| encoder.push(chunk, dst))
    }

    /// Finishes the current message ([`StreamEncoder::finish_message`]); in the compatible
    /// mapping it is held until the next call (see [`MappingEncoder`]).
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push); in the compatible mapping [`CompatEncodeError::EmptyMessage`]
    /// when no message was given.
    ///
    /// # Examples
    ///
    /// See [`push`](Self::push).
    pub fn finish_message(&mut self, dst: &mut BytesMut) -> Result<(), CompatEncodeError> {
        if let Writer::Compat { .. } = self.writer {
            self.release(dst)?;
            let Writer::Compat { encoder, held } = &mut self.writer else {
                unreachable!()
            };
            if !encoder.in_message() {
                return Err(CompatEncodeError::EmptyMessage);
            }
            *held = Held::Pushed;
            return Ok(());
        }
        self.frames(dst, |encoder, dst| encoder.finish_message(dst).map(drop))
    }

    /// Writes a whole message: [`push`](Self::push) then [`finish_message`](Self::finish_message).
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push); [`CompatEncodeError::Encode`] with [`EncodeError::MessageOpen`]
    /// if a message is open. In the compatible mapping the message must be one an SSE event
    /// carries unchanged: [`CompatEncodeError::NotUtf8`], [`CompatEncodeError::CarriageReturn`]
    /// and [`CompatEncodeError::EmptyMessage`] come when it is written (SPEC.md §18.3).
    ///
    /// # Examples
    ///
    /// See [`MappingEncoder`].
    pub fn message(&mut self, message: &[u8], dst: &mut BytesMut) -> Result<(), CompatEncodeError> {
        if let Writer::Compat { .. } = self.writer {
            if self.in_message() {
                return Err(EncodeError::MessageOpen.into());
            }
            self.push(message, dst)?;
            return self.finish_message(dst);
        }
        self.frames(dst, |encoder, dst| encoder.message(message, dst).map(drop))
    }

    /// [`message`](Self::message) of a shared buffer: the compatible mapping holds it as it is
    /// (after the checks [`push`](Self::push) makes), where `message` copies it.
    #[cfg(feature = "http")]
    pub(crate) fn message_shared(
        &mut self,
        message: Bytes,
        dst: &mut BytesMut,
    ) -> Result<(), CompatEncodeError> {
        if let Writer::Compat { .. } = self.writer {
            if self.in_message() {
                return Err(EncodeError::MessageOpen.into());
            }
            self.release(dst)?;
            let Writer::Compat { encoder, held } = &mut self.writer else {
                unreachable!()
            };
            encoder.check_push(message.len())?;
            *held = Held::Whole(message);
            return Ok(());
        }
        self.message(&message, dst)
    }

    /// Writes a KEEPALIVE frame (in the compatible mapping a record carrying it, SPEC.md §18.4).
    ///
    /// # Errors
    ///
    /// [`CompatEncodeError::Encode`] as [`StreamEncoder::keep_alive`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{mapping::Mapping, StreamEncoder, StreamHead};
    /// use mcp_framing::internals::body::MappingEncoder;
    /// let mut enc = MappingEncoder::new(Mapping::Sse, StreamEncoder::new(StreamHead::for_request(None)));
    /// let mut body = bytes::BytesMut::new();
    /// enc.keep_alive(&mut body)?; // HEAD and KEEPALIVE, one event each
    /// assert_eq!(body[..].split(|&b| b == b'\n').filter(|l| l.starts_with(b"event: mcp-frame")).count(), 2);
    /// # Ok::<(), mcp_framing::internals::sse_compat::CompatEncodeError>(())
    /// ```
    pub fn keep_alive(&mut self, dst: &mut BytesMut) -> Result<(), CompatEncodeError> {
        if let Writer::Compat { .. } = self.writer {
            self.release(dst)?;
            let Writer::Compat { encoder, .. } = &mut self.writer else {
                unreachable!()
            };
            return encoder.keep_alive(dst);
        }
        self.frames(dst, StreamEncoder::keep_alive)
    }

    /// Writes a held message (compatible mapping) now, without the sentinel; nothing in the
    /// other mappings. For a producer with nothing more ready: the message goes out.
    ///
    /// # Errors
    ///
    /// Those of writing the held message ([`message`](Self::message)).
    ///
    /// # Examples
    ///
    /// See [`push`](Self::push).
    pub fn flush(&mut self, dst: &mut BytesMut) -> Result<(), CompatEncodeError> {
        self.release(dst)
    }

    /// Ends the stream with the STREAM_END sentinel; in the compatible mapping a held message's
    /// record carries it.
    ///
    /// # Errors
    ///
    /// [`CompatEncodeError::Encode`] as [`StreamEncoder::end`]; in the compatible mapping the
    /// errors of writing a held message.
    ///
    /// # Examples
    ///
    /// See [`MappingEncoder`].
    pub fn end(&mut self, dst: &mut BytesMut) -> Result<(), CompatEncodeError> {
        if let Writer::Compat { encoder, held } = &mut self.writer {
            return match std::mem::take(held) {
                Held::Nothing => encoder.end(dst),
                Held::Pushed => encoder.finish_final_message(dst).map(drop),
                Held::Whole(message) => encoder.final_message(&message, dst).map(drop),
            };
        }
        self.frames(dst, StreamEncoder::end)
    }

    /// Aborts the stream with `code` and `reason`, the reason cut (at a character boundary) to
    /// the `MAX_ABORT_REASON_LEN` bytes its frame holds. A message open or held is dropped.
    ///
    /// # Errors
    ///
    /// [`CompatEncodeError::Encode`] with [`EncodeError::StreamFinished`] if the stream ended.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{AbortCode, DecodeError, mapping::Mapping, StreamDecoder, StreamEncoder, StreamHead};
    /// use mcp_framing::internals::body::MappingEncoder;
    /// let mut enc = MappingEncoder::new(Mapping::Binary, StreamEncoder::new(StreamHead::for_request(None)));
    /// let mut body = bytes::BytesMut::new();
    /// enc.abort(AbortCode::UpstreamFailed, &"é".repeat(600), &mut body)?;
    /// let Err(DecodeError::PeerAbort(abort)) = StreamDecoder::new().decode_all(&body) else { panic!() };
    /// assert_eq!(abort.reason.len(), 1024);
    /// # Ok::<(), mcp_framing::internals::sse_compat::CompatEncodeError>(())
    /// ```
    pub fn abort(
        &mut self,
        code: AbortCode,
        reason: &str,
        dst: &mut BytesMut,
    ) -> Result<(), CompatEncodeError> {
        let reason = fit_reason(reason);
        if let Writer::Compat { encoder, held } = &mut self.writer {
            *held = Held::Nothing;
            return encoder.abort(code, reason, dst);
        }
        self.frames(dst, |encoder, dst| encoder.abort(code, reason, dst))
    }

    /// Aborts with an [`Abort`] value ([`abort`](Self::abort)).
    ///
    /// # Errors
    ///
    /// As [`abort`](Self::abort).
    #[cfg(feature = "http")]
    pub(crate) fn abort_with(
        &mut self,
        abort: &Abort,
        dst: &mut BytesMut,
    ) -> Result<(), CompatEncodeError> {
        self.abort(abort.code, &abort.reason, dst)
    }

    /// Ends the stream with the ABORT that `err`, a refused call, calls for, and returns its code:
    /// [`AbortCode::MessageTooLarge`] for [`EncodeError::MessageTooLarge`] (a deterministic
    /// failure a client does not retry, SPEC.md §3.1, §11.6), [`AbortCode::InternalError`]
    /// otherwise (e.g. a message an SSE event cannot carry unchanged, §18.3); the reason is the
    /// error's text. `None` if the stream had already ended (nothing more can be written).
    ///
    /// # Examples
    ///
    /// See [`MappingEncoder`].
    pub fn fail(&mut self, err: &CompatEncodeError, dst: &mut BytesMut) -> Option<AbortCode> {
        let code = abort_code(err);
        self.abort(code, &err.to_string(), dst).ok().map(|()| code)
    }

    /// Writes only the record of a message whose `message` event the caller writes itself, right
    /// after it: a layer passing an upstream server's event through unchanged (compatible
    /// mapping, SPEC.md §18.4). `data` is the event's data as an SSE parser dispatches it (UTF-8,
    /// its lines joined with LF: no CR, which ends a line); with `end`, the record also carries
    /// the STREAM_END sentinel.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn passed_message_record(
        &mut self,
        data: &[u8],
        end: bool,
        dst: &mut BytesMut,
    ) -> Result<(), CompatEncodeError> {
        self.pass_through()
            .text_message_record(data, end, dst)
            .map(drop)
    }

    /// The compatible encoder of a layer passing an upstream server's events through, which
    /// holds no message of its own.
    #[cfg(feature = "rmcp-server")]
    fn pass_through(&mut self) -> &mut CompatEncoder {
        match &mut self.writer {
            Writer::Compat { encoder, held } => {
                debug_assert!(
                    matches!(held, Held::Nothing),
                    "a pass-through holds no message"
                );
                encoder
            }
            _ => unreachable!("a pass-through writes the compatible mapping"),
        }
    }

    /// A record of the next message begun before the message is whole, for
    /// [`passed_open_record`](Self::passed_open_record) (compatible mapping).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn open_record(&self) -> OpenRecord {
        match &self.writer {
            Writer::Compat { encoder, .. } => encoder.open_record(),
            _ => unreachable!("a pass-through writes the compatible mapping"),
        }
    }

    /// [`passed_message_record`](Self::passed_message_record) of a message whose first bytes
    /// went into `open` as they arrived: `rest` is the rest of its data.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn passed_open_record(
        &mut self,
        open: OpenRecord,
        rest: &Parts,
        end: bool,
        dst: &mut BytesMut,
    ) -> Result<(), CompatEncodeError> {
        self.pass_through()
            .close_record(open, rest, end, dst)
            .map(drop)
    }
}

/// The ABORT code for a refused write (SPEC.md §3.1).
fn abort_code(err: &CompatEncodeError) -> AbortCode {
    match err {
        CompatEncodeError::Encode(EncodeError::MessageTooLarge { .. }) => {
            AbortCode::MessageTooLarge
        }
        _ => AbortCode::InternalError,
    }
}

/// `reason` cut at a character boundary to what an ABORT frame holds (SPEC.md §3.1).
pub(crate) fn fit_reason(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_ABORT_REASON_LEN);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// The ABORT for a message of at least `len` bytes over the limit `max`, refused before it
/// reached an encoder (an upstream body read within the limit): the one a [`MappingEncoder`]
/// writes for [`EncodeError::MessageTooLarge`].
#[cfg(feature = "rmcp-server")]
pub(crate) fn too_large(len: u64, max: u64) -> Abort {
    let err = CompatEncodeError::Encode(EncodeError::MessageTooLarge { len, max });
    Abort::new(abort_code(&err), fit_reason(&err.to_string()))
}

// Through `FramedBody` too, so with feature `http`.
#[cfg(all(test, feature = "http"))]
mod tests;
