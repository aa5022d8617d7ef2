//! The sans-I/O stream decoder: the client side (SPEC.md §2–§7).

use bytes::{Buf, Bytes, BytesMut};
use sha2::{Digest, Sha256};

use crate::error::{DecodeError, Progress, StreamState, Truncation};
use crate::event::{Event, MessageSummary, StreamSummary, UnverifiedChunk, VerifiedMessage};
use crate::frame::{
    Abort, FrameHeader, FrameKind, HEADER_LEN, MessageEnd, PayloadCrc, StreamEnd, StreamHead,
};
use crate::ids::RequestKey;
use crate::limits::Limits;
use crate::outcome::Outcome;

mod check;
mod prehashed;
mod state;

use check::{Expect, Runs, check_partial_header, checked_header};
#[cfg(feature = "sse")]
pub(crate) use prehashed::Prehashed;
use prehashed::{Known, Prehashes};
use state::{Answer, Message, Pending, Position, State};

/// Builds a [`StreamDecoder`] with non-default limits or checks.
///
/// # Examples
///
/// ```
/// use mcp_framing::{Limits, RequestKey, StreamDecoder};
///
/// let key = RequestKey::random(); // the key the client sent with its request
/// let decoder = StreamDecoder::builder()
///     .limits(Limits::default().max_frame_payload(16 * 1024).max_message_size(4 << 20))
///     .expect_request_key(key)
///     .build();
/// # let _ = decoder;
/// ```
#[derive(Clone, Debug)]
pub struct DecoderBuilder {
    limits: Limits,
    request_key: Option<RequestKey>,
    assemble: bool,
}

impl DecoderBuilder {
    crate::limits::limit_setters!(limits, "mcp_framing::StreamDecoder::builder()");

    /// Requires the stream head to echo this request key; another key (or none) is
    /// [`DecodeError::RequestKeyMismatch`]: a response that belongs to another request.
    ///
    /// The key binds the stream to the request, so a decoder that expects one and assembles
    /// messages also recognizes the stream's final JSON-RPC response
    /// ([`VerifiedMessage::is_final_response`]) and delivers it when the input ends after it
    /// without the STREAM_END sentinel (SPEC.md §7 row 4, §7.1): [`decode_eof`](StreamDecoder::decode_eof)
    /// then reports [`Event::End`] with [`StreamSummary::sentinel_seen`] `false`, and the outcome
    /// is clean in Regime B.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{DecodeError, RequestKey, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(Some(RequestKey::random())));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.end(&mut wire)?;
    /// let err = StreamDecoder::builder()
    ///     .expect_request_key(RequestKey::random())
    ///     .build()
    ///     .decode_all(&wire)
    ///     .unwrap_err();
    /// assert!(matches!(err, DecodeError::RequestKeyMismatch { .. }));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn expect_request_key(mut self, key: RequestKey) -> Self {
        self.request_key = Some(key);
        self
    }

    /// Whether to assemble each message and report it as [`Event::Message`] (default `true`).
    /// With `false`, the decoder keeps no message bytes: it reports the chunks and then
    /// [`Event::MessageVerified`], and its memory stays within one frame whatever the message
    /// size (for consumers that stream a message onwards).
    ///
    /// # Examples
    ///
    /// ```
    /// let d = mcp_framing::StreamDecoder::builder().assemble_messages(false).build();
    /// # let _ = d;
    /// ```
    #[must_use]
    pub fn assemble_messages(mut self, assemble: bool) -> Self {
        self.assemble = assemble;
        self
    }

    /// Creates the decoder for one response stream.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Limits, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut wire = bytes::BytesMut::new();
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
    /// enc.end(&mut wire)?;
    ///
    /// let decoder = StreamDecoder::builder().limits(Limits::default().max_message_size(1 << 20)).build();
    /// assert!(!decoder.is_complete()); // nothing decoded yet
    /// let stream = decoder.decode_all(&wire).unwrap();
    /// assert_eq!(stream.messages.len(), 1);
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn build(self) -> StreamDecoder {
        StreamDecoder {
            config: self,
            state: State::Open {
                at: Position::AwaitingHead,
                pending: None,
            },
            expected_sequence: 0,
            progress: Progress::default(),
            runs: Runs::default(),
            hasher: Sha256::new(),
            payload_crc: PayloadCrc::new(),
            prehashes: Prehashes::default(),
            elided: 0,
        }
    }
}

/// Reads one framed response stream (the client side), in any split of its bytes.
///
/// Feed it bytes as they arrive with [`decode`](Self::decode) (`Ok(None)`: need more bytes),
/// and call [`decode_eof`](Self::decode_eof) when the input ends: it returns `Ok(None)` only after
/// the STREAM_END sentinel, or after the verified final response of a decoder that expects a
/// request key (SPEC.md §7 row 4: delivered without the sentinel), and a precise
/// [`DecodeError::Truncated`] otherwise. With the `codec` feature it is also a
/// `tokio_util::codec::Decoder` for `FramedRead`.
///
/// The decoder examines each byte once, checks a header before waiting for its payload, never
/// reserves memory from a declared length, and hands out DATA bytes as zero-copy slices of the
/// read buffer. Any error is final: later calls return it again.
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::{Event, StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = BytesMut::new();
/// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
/// enc.end(&mut wire)?;
///
/// // Feed the bytes three at a time, as a slow network would.
/// let mut dec = StreamDecoder::new();
/// let mut buf = BytesMut::new();
/// let mut messages = Vec::new();
/// for piece in wire.chunks(3) {
///     buf.extend_from_slice(piece);
///     while let Some(event) = dec.decode(&mut buf).unwrap() {
///         if let Event::Message(m) = event {
///             messages.push(m);
///         }
///     }
/// }
/// assert_eq!(dec.decode_eof(&mut buf), Ok(None)); // clean: the sentinel arrived
/// assert_eq!(messages.len(), 1);
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
///
/// A stream cut short is an error at end of input, never a clean end:
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::{DecodeError, StreamDecoder, StreamEncoder, StreamHead, Truncation};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = BytesMut::new();
/// enc.message(b"{}", &mut wire)?;
/// // no enc.end(): the server died, the proxy closed the body normally.
/// let err = StreamDecoder::new().decode_all(&wire).unwrap_err();
/// assert!(matches!(err, DecodeError::Truncated { at: Truncation::BetweenMessages { messages: 1 }, .. }));
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Debug)]
pub struct StreamDecoder {
    config: DecoderBuilder,
    /// Where the stream is, the open message's bytes, and how it ended: the one state.
    state: State,
    /// Sequence number the next frame must carry (after HEAD).
    expected_sequence: u32,
    progress: Progress,
    /// KEEPALIVE and ignorable frames since the last DATA or MESSAGE_END (SPEC.md §6.1).
    runs: Runs,
    /// The open message's running SHA-256, fresh at every message start: a scratch value like
    /// `payload_crc`, kept here so that it is not moved with every state change.
    hasher: Sha256,
    payload_crc: PayloadCrc,
    /// Payload checks made before the payloads arrived (the compatible mapping's decoder).
    prehashes: Prehashes,
    /// Bytes of the stream whose payloads came with their checks rather than in the input
    /// (`prehashes`): the stream's bytes so far minus these are the input's bytes consumed.
    elided: u64,
}

impl Default for StreamDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// A whole stream decoded by [`StreamDecoder::decode_all`].
///
/// # Examples
///
/// ```
/// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
///
/// let head = StreamHead::for_request(None);
/// let mut enc = StreamEncoder::new(head);
/// let mut wire = bytes::BytesMut::new();
/// enc.message(b"{}", &mut wire)?;
/// enc.message(b"[]", &mut wire)?;
/// enc.end(&mut wire)?;
///
/// let stream = StreamDecoder::new().decode_all(&wire).unwrap();
/// assert_eq!(stream.head, head);
/// assert_eq!(stream.messages.len(), 2);
/// assert!(stream.summary.sentinel_seen);
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodedStream {
    /// The stream head.
    pub head: StreamHead,
    /// Every message, verified (empty when the decoder does not assemble messages).
    pub messages: Vec<VerifiedMessage>,
    /// The totals reported with the end ([`StreamSummary::sentinel_seen`]: the sentinel
    /// arrived, or the final response was delivered without it).
    pub summary: StreamSummary,
}

impl StreamDecoder {
    /// A decoder with the default limits and no request-key check.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut wire = bytes::BytesMut::new();
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
    /// enc.end(&mut wire)?;
    ///
    /// let decoder = StreamDecoder::new(); // `Limits::default()`, any request key
    /// assert!(!decoder.is_complete());
    /// let stream = decoder.decode_all(&wire).unwrap();
    /// assert!(stream.summary.sentinel_seen);
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder for non-default limits or a request-key check.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{DecodeError, Limits, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// // A sender whose frames are larger than this receiver accepts.
    /// let mut wire = bytes::BytesMut::new();
    /// let mut enc = StreamEncoder::builder().frame_size(8192).build(StreamHead::for_request(None));
    /// enc.message(&[b'1'; 8192], &mut wire)?;
    ///
    /// let decoder = StreamDecoder::builder().limits(Limits::default().max_frame_payload(4096)).build();
    /// let err = decoder.decode_all(&wire).unwrap_err(); // refused at the header, before the payload
    /// assert!(matches!(err, DecodeError::FrameTooLarge { .. }));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn builder() -> DecoderBuilder {
        DecoderBuilder {
            limits: Limits::DEFAULT,
            request_key: None,
            assemble: true,
        }
    }

    /// Takes the checks of payloads to come, made on exactly their bytes before they reach the
    /// decoder (the compatible mapping's decoder, SPEC.md §18.5, issue 21): such a payload's
    /// CRC-32 and its message's SHA-256 are compared as they are, not computed again, and the
    /// payload is not in the input: the input holds its header, and the decoder takes the
    /// payload from the entry's message (the compatible mapping hands over no copy of the
    /// message, issue 21). Entries come in stream order, each pushed before the input holds the
    /// headers after its first payload; an entry's places are those of the input handed to this
    /// decoder.
    #[cfg(feature = "sse")]
    pub(crate) fn add_prehashed(&mut self, entry: Prehashed) {
        self.prehashes.push(entry);
    }

    /// The limits this decoder enforces.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Limits, StreamDecoder};
    /// assert_eq!(*StreamDecoder::new().limits(), Limits::default());
    /// ```
    // Hidden: the limits a receiver set are its own; the HTTP layer, the CLI and the fuzz
    // oracles read them back.
    #[doc(hidden)]
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    /// The largest frame payload this decoder accepts ([`Limits::max_frame_payload`]). Bounds
    /// that derive from it, such as the SSE event bound (the base64 of one whole frame), read it
    /// here.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Limits, StreamDecoder};
    /// assert_eq!(StreamDecoder::new().max_frame_payload(), Limits::default().max_frame_payload);
    /// assert_eq!(StreamDecoder::builder().max_frame_payload(1 << 20).build().max_frame_payload(), 1 << 20);
    /// ```
    // Hidden: the limits a receiver set are its own; the HTTP layer, the CLI and the fuzz
    // oracles read them back.
    #[doc(hidden)]
    #[must_use]
    pub fn max_frame_payload(&self) -> u32 {
        self.config.limits.max_frame_payload
    }

    /// The largest message this decoder accepts ([`Limits::max_message_size`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Limits, StreamDecoder};
    /// assert_eq!(StreamDecoder::new().max_message_size(), Limits::default().max_message_size);
    /// ```
    // Hidden: the limits a receiver set are its own; the HTTP layer, the CLI and the fuzz
    // oracles read them back.
    #[doc(hidden)]
    #[must_use]
    pub fn max_message_size(&self) -> u64 {
        self.config.limits.max_message_size
    }

    /// The stream head, once HEAD arrived.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::StreamDecoder;
    /// assert_eq!(StreamDecoder::new().head(), None);
    /// ```
    // Hidden: `Event::Opened` hands the head over; the CLI and the tests read it back.
    #[doc(hidden)]
    #[must_use]
    pub fn head(&self) -> Option<StreamHead> {
        self.state.head()
    }

    /// What has been received so far (complete frames; `bytes` counts buffered bytes only once
    /// they were consumed).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::StreamDecoder;
    /// assert_eq!(StreamDecoder::new().progress().frames, 0);
    /// ```
    #[must_use]
    pub fn progress(&self) -> Progress {
        self.progress
    }

    /// Where the stream is.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamDecoder, StreamState};
    /// assert_eq!(StreamDecoder::new().state(), StreamState::AwaitingHead);
    /// ```
    // Hidden: the tests' and the CLI's view; a user asks `is_complete` or reads an error's state.
    #[doc(hidden)]
    #[must_use]
    pub fn state(&self) -> StreamState {
        self.state.stream_state()
    }

    /// Whether the STREAM_END sentinel was received (and nothing is wrong). A final response
    /// delivered without it (SPEC.md §7 row 4) is clean, but not complete in this sense.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::StreamDecoder;
    /// assert!(!StreamDecoder::new().is_complete());
    /// ```
    #[must_use]
    pub fn is_complete(&self) -> bool {
        matches!(&self.state, State::Complete { summary, .. } if summary.sentinel_seen)
    }

    /// How the stream ended, from this decoder's own state (SPEC.md §7, §11.4): the one way to
    /// obtain a [`Verdict::Clean`](crate::outcome::Verdict::Clean).
    ///
    /// Call it once the input ended and [`decode_eof`](Self::decode_eof) returned `Ok(None)` or
    /// an error (or when the transport failed, or reading stopped early):
    ///
    /// | the decoder saw | verdict |
    /// |---|---|
    /// | STREAM_END, then the end of input (`decode_eof` returned `Ok(None)`) | `Clean` (Regime A, [`sentinel_seen`](Outcome::sentinel_seen)) |
    /// | the final response, then the end of input before STREAM_END (`decode_eof` reported [`Event::End`] without [`sentinel_seen`](StreamSummary::sentinel_seen), then `Ok(None)`; SPEC.md §7 row 4) | `Clean` (Regime B, the sentinel not seen) |
    /// | ABORT | `Aborted` (Regime A) |
    /// | a truncation at the end of input | `Abandoned { at: Some(..) }` |
    /// | any other error | as [`Outcome::from_error`] |
    /// | no end of input yet (the transport failed, or the reader stopped; also right after STREAM_END, since bytes may still follow it) | `Abandoned { at: None }` |
    ///
    /// The received counts and the head are the decoder's (for a truncation, the partial frame's
    /// bytes included).
    ///
    /// # Examples
    ///
    /// A sans-I/O loop that stops at `Ok(None)` ("need more bytes") when the body ends has not
    /// told the decoder that the input ended: the stream is not clean, whatever was received.
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use mcp_framing::{outcome::Verdict, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = BytesMut::new();
    /// enc.push(b"{\"cut here", &mut wire)?; // the body ends inside a message
    ///
    /// let mut decoder = StreamDecoder::new();
    /// while let Some(_event) = decoder.decode(&mut wire).unwrap() {}
    /// assert_eq!(decoder.outcome().verdict, Verdict::Abandoned { at: None });
    /// // Telling it the input ended gives the truncation point:
    /// assert!(decoder.decode_eof(&mut wire).is_err());
    /// assert!(matches!(decoder.outcome().verdict, Verdict::Abandoned { at: Some(_) }));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        let head = self.head();
        match &self.state {
            State::Complete {
                input_ended: true,
                summary,
                ..
            } if summary.sentinel_seen => Outcome::clean(self.progress, head),
            // SPEC.md §7 row 4: the final response, then the end of input before STREAM_END.
            State::Complete {
                input_ended: true, ..
            } => Outcome::delivered(self.progress, head),
            State::Aborted { abort, .. } => Outcome::aborted(abort.clone(), self.progress, head),
            State::Failed { error, .. } => {
                let received = match error {
                    DecodeError::Truncated { progress, .. } => *progress,
                    _ => self.progress,
                };
                Outcome::of_error(error, received, head)
            }
            State::Open { .. }
            | State::Complete {
                input_ended: false, ..
            } => Outcome::abandoned(None, self.progress, head),
        }
    }

    /// Decodes the next event from `buf`, consuming the bytes it used. `Ok(None)` means more
    /// bytes are needed (or the stream is finished and `buf` is empty).
    ///
    /// # Errors
    ///
    /// Any [`DecodeError`] but `Truncated` and `PeerAbort` (those are end-of-input verdicts,
    /// see [`decode_eof`](Self::decode_eof)). After an error the decoder is finished and returns
    /// the same error again.
    ///
    /// # Examples
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use mcp_framing::{Event, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = BytesMut::new();
    /// enc.message(b"{}", &mut wire)?;
    ///
    /// let mut dec = StreamDecoder::new();
    /// let mut buf = BytesMut::from(&wire[..1]);
    /// assert_eq!(dec.decode(&mut buf), Ok(None)); // one byte: need more
    /// buf.extend_from_slice(&wire[1..]);
    /// assert!(matches!(dec.decode(&mut buf), Ok(Some(Event::Opened(_)))));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[inline]
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, DecodeError> {
        self.decode_frames(buf, false)
    }

    /// Call when the input has ended: returns the remaining events one by one, then `Ok(None)`
    /// if and only if the stream is complete (SPEC.md §7): it ended with its STREAM_END
    /// sentinel (row 2), or the input ended after its verified final response (row 4, a decoder
    /// that expects a request key and assembles messages, SPEC.md §7.1). In the second case the
    /// last event is [`Event::End`] with [`StreamSummary::sentinel_seen`] `false`, reported here
    /// (not by [`decode`](Self::decode)), and the bytes of a frame cut after the response (a
    /// STREAM_END cut short) are consumed with it: `buf` is empty after it, so that
    /// `tokio_util`'s `FramedRead` ends the stream with `None`.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Truncated`] saying where the stream stopped and what was received if the
    /// sentinel is missing and no final response was delivered (also for a stream cut right
    /// after a header), and [`DecodeError::PeerAbort`] if the peer aborted; otherwise as
    /// [`decode`](Self::decode).
    ///
    /// # Examples
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use mcp_framing::{DecodeError, StreamDecoder, Truncation};
    ///
    /// let mut dec = StreamDecoder::new();
    /// let err = dec.decode_eof(&mut BytesMut::new()).unwrap_err();
    /// assert!(matches!(err, DecodeError::Truncated { at: Truncation::NoFrame, .. }));
    /// ```
    ///
    /// A final response whose STREAM_END was cut is delivered by a decoder that expects the key:
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use mcp_framing::{Event, RequestKey, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let key = RequestKey::random();
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
    /// let mut wire = BytesMut::new();
    /// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
    /// enc.end(&mut wire)?;
    /// wire.truncate(wire.len() - 5); // cut inside STREAM_END
    ///
    /// let mut dec = StreamDecoder::builder().expect_request_key(key).build();
    /// let mut last = None;
    /// while let Some(event) = dec.decode_eof(&mut wire).unwrap() {
    ///     last = Some(event);
    /// }
    /// let Some(Event::End(summary)) = last else { panic!("{last:?}") };
    /// assert!(!summary.sentinel_seen);
    /// assert!(dec.outcome().is_clean());
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[inline]
    pub fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, DecodeError> {
        self.decode_frames(buf, true)
    }

    /// What [`decode_eof`](Self::decode_eof) returns once no further frame can be decoded:
    /// `Ok(None)` for a complete stream, or [`Event::End`] once for a final response the end of
    /// input delivers just now (SPEC.md §7 row 4), or the error. Out of line, so that building
    /// that event does not make every event `decode_eof` passes on cost a copy more.
    #[cold]
    #[inline(never)]
    fn end_of_input_event(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, DecodeError> {
        let ended = self.end_of_input(buf)?;
        Ok(ended.delivered.then_some(Event::End(ended.summary)))
    }

    /// The verdict once no further frame can be decoded from `buf` and the input ended
    /// (SPEC.md §7): the head and totals of a complete stream (`delivered`: the input ended
    /// right after the final response, just now, row 4), or why it is not.
    #[cold]
    fn end_of_input(&mut self, buf: &mut BytesMut) -> Result<Ended, DecodeError> {
        let err = match &mut self.state {
            State::Complete {
                head,
                summary,
                input_ended,
            } => {
                *input_ended = true;
                return Ok(Ended {
                    head: *head,
                    summary: *summary,
                    delivered: false,
                });
            }
            State::Failed { error, .. } => return Err(error.clone()),
            State::Aborted { abort, .. } => DecodeError::PeerAbort(abort.clone()),
            State::Open {
                at:
                    Position::Streaming {
                        head,
                        message,
                        answer,
                    },
                pending,
            } if answer.delivers_at_end(
                self.progress.messages,
                message.as_ref(),
                pending.as_ref(),
            ) =>
            {
                // SPEC.md §7 row 4: the final response was verified and nothing but filler
                // frames, or part of one more frame (its header, or STREAM_END's or an
                // ignorable frame's payload), followed it. Those bytes are consumed with the
                // stream, so the buffer is empty at its end.
                let head = *head;
                self.progress.bytes += buf.len() as u64;
                buf.clear();
                let summary = self.complete(head, false);
                return Ok(Ended {
                    head,
                    summary,
                    delivered: true,
                });
            }
            State::Open { at, pending } => {
                let at = match pending {
                    Some(pending) => Truncation::InPayload {
                        kind: pending.kind,
                        received: buf.len(),
                        declared: pending.header.len,
                    },
                    None if !buf.is_empty() => Truncation::InHeader {
                        received: buf.len(),
                    },
                    None => match at {
                        Position::AwaitingHead => Truncation::NoFrame,
                        Position::Streaming { message: None, .. } => Truncation::BetweenMessages {
                            messages: self.progress.messages,
                        },
                        Position::Streaming {
                            message: Some(_), ..
                        } => Truncation::InMessage {
                            message_bytes: self.progress.open_message_bytes,
                        },
                    },
                };
                let mut progress = self.progress;
                progress.bytes += buf.len() as u64;
                DecodeError::Truncated { at, progress }
            }
        };
        Err(self.failed_with(err))
    }

    /// Decodes a whole stream held in memory, requiring its sentinel or, for a decoder that
    /// expects a request key, its final response (SPEC.md §7 row 4: the summary then says
    /// [`sentinel_seen`](StreamSummary::sentinel_seen) `false`).
    ///
    /// # Errors
    ///
    /// The first [`DecodeError`] of the stream, [`DecodeError::Truncated`] if the sentinel is
    /// missing (and no final response was delivered), [`DecodeError::PeerAbort`] if it was
    /// aborted.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(b"[1,2,3]", &mut wire)?;
    /// enc.end(&mut wire)?;
    ///
    /// let stream = StreamDecoder::new().decode_all(&wire).unwrap();
    /// assert_eq!(stream.messages[0].bytes().as_ref(), b"[1,2,3]");
    ///
    /// // Any strict prefix is an error, never a shorter valid stream:
    /// for cut in 0..wire.len() {
    ///     assert!(StreamDecoder::new().decode_all(&wire[..cut]).is_err());
    /// }
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn decode_all(mut self, input: &[u8]) -> Result<DecodedStream, DecodeError> {
        let mut buf = BytesMut::from(input);
        let mut messages = Vec::new();
        while let Some(event) = self.decode(&mut buf)? {
            if let Event::Message(message) = event {
                messages.push(message);
            }
        }
        let Ended { head, summary, .. } = self.end_of_input(&mut buf)?;
        Ok(DecodedStream {
            head,
            messages,
            summary,
        })
    }

    /// Records `err` as the decoder's final state and returns it.
    #[cold]
    #[inline(never)]
    fn failed_with(&mut self, err: DecodeError) -> DecodeError {
        self.state = State::Failed {
            head: self.state.head(),
            error: err.clone(),
        };
        err
    }

    /// Call when the input has ended: every remaining event in `buf`, followed by the
    /// end-of-input verdict if it is an error (see [`decode_eof`](Self::decode_eof)). A list that
    /// does not end with an error means the stream is complete: it ends with [`Event::End`],
    /// with the sentinel or for a delivered final response (SPEC.md §7 rows 2 and 4).
    ///
    /// # Examples
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use mcp_framing::{DecodeError, Event, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = BytesMut::new();
    /// enc.message(b"{}", &mut wire)?;
    /// let events = StreamDecoder::builder().max_message_size(1024).build().decode_to_end(&mut wire);
    /// assert!(matches!(events[..], [Ok(Event::Opened(_)), Ok(Event::Chunk(_)), Ok(Event::Message(_)),
    ///                               Err(DecodeError::Truncated { .. })]));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    // Hidden: every event at once, for the tests; `decode_all` is the whole-buffer call.
    #[doc(hidden)]
    pub fn decode_to_end(&mut self, buf: &mut BytesMut) -> Vec<Result<Event, DecodeError>> {
        let mut events = Vec::new();
        loop {
            match self.decode_eof(buf) {
                Ok(Some(event)) => events.push(Ok(event)),
                Ok(None) => return events,
                Err(err) => {
                    events.push(Err(err));
                    return events;
                }
            }
        }
    }

    /// What `decode` (`eof` false) and `decode_eof` (`eof` true) return: frames from `buf` are
    /// decoded until one yields an event, more bytes are needed (then, at the end of input, the
    /// end-of-input verdict), or a check fails, which is recorded as the final state.
    ///
    /// A frame goes through named steps: its header checked before its payload is awaited
    /// ([`checked_header`]), its payload awaited or known ([`known_payload`]), checked
    /// ([`check_payload`]) and taken ([`take_payload`]), then what its kind does: DATA adds to
    /// the open message ([`Message::add`]), MESSAGE_END verifies it ([`verify_message`]) and
    /// may be the final response ([`Answer::is_final_response`]), HEAD, STREAM_END and ABORT
    /// act out of line. The steps are inlined and take the fields they use rather than the
    /// decoder, and every failure is recorded here: the loop compiles to about the machine code
    /// of one function (one instruction more a DATA frame). Measured with callgrind and not
    /// kept: methods that passed the frame and its outcome between them (8 instructions more a
    /// 16-byte frame, 7-9 % on the token benches), and the header and payload wait as one step
    /// returning `Result<Option<(Pending, Option<Box<Known>>)>, _>` (15 more).
    ///
    /// Every result is built here, where it is returned, never matched and moved on by a
    /// caller: an event is written once, into the caller's slot (each move of an `Event` costs a
    /// small frame more than the checks of its header).
    #[inline]
    fn decode_frames(
        &mut self,
        buf: &mut BytesMut,
        eof: bool,
    ) -> Result<Option<Event>, DecodeError> {
        loop {
            let State::Open { at, pending } = &mut self.state else {
                return self.after_end(buf, eof);
            };
            let (frame, known) = match pending {
                Some(waiting) => {
                    // Asked again, not kept from when the header came: the compatible mapping
                    // may hand over the payload's checks in a later `feed` than its header's.
                    let known = known_payload(&mut self.prehashes, waiting, self.elided);
                    if known.is_none() && buf.len() < waiting.header.len as usize {
                        // Wait; the buffer grows with the bytes that arrive, we reserve nothing.
                        return self.no_frame(buf, eof);
                    }
                    let waiting = *waiting;
                    *pending = None;
                    (waiting, known)
                }
                None => {
                    let Some(raw) = buf.first_chunk::<HEADER_LEN>() else {
                        return self.partial_header(buf, eof);
                    };
                    let expect = Expect {
                        limits: &self.config.limits,
                        sequence: self.expected_sequence,
                        message_bytes: self.progress.open_message_bytes,
                        messages: self.progress.messages,
                        runs: self.runs,
                    };
                    let frame = match checked_header(raw, at, expect, self.progress.bytes) {
                        Ok(frame) => frame,
                        Err(err) => return Err(self.failed_with(err)),
                    };
                    buf.advance(HEADER_LEN);
                    self.progress.bytes += HEADER_LEN as u64;
                    let known = known_payload(&mut self.prehashes, &frame, self.elided);
                    if known.is_none() && buf.len() < frame.header.len as usize {
                        *pending = Some(frame);
                        return self.no_frame(buf, eof);
                    }
                    (frame, known)
                }
            };
            if let Err(err) = check_payload(&self.payload_crc, buf, &frame, known.as_deref()) {
                return Err(self.failed_with(err));
            }
            let header = frame.header;
            let payload = take_payload(buf, header.len, known.as_deref(), &mut self.elided);
            self.progress.bytes += u64::from(header.len);
            self.progress.frames += 1;
            self.progress.last_sequence = Some(header.sequence);
            self.expected_sequence = header.sequence.wrapping_add(1);
            let Position::Streaming {
                head,
                message,
                answer,
            } = at
            else {
                // Only HEAD passes the header check before the stream is open.
                let opened = self.open_stream(&header, frame.kind, &payload);
                return self.recorded(opened);
            };
            return Ok(Some(match frame.kind {
                FrameKind::Data => {
                    self.runs = Runs::default();
                    let offset = self.progress.open_message_bytes;
                    self.progress.open_message_bytes += payload.len() as u64;
                    let assemble = self.config.assemble;
                    Message::add(message, &payload, assemble, known, &mut self.hasher);
                    Event::Chunk(UnverifiedChunk {
                        message_index: self.progress.messages,
                        offset,
                        bytes: payload,
                    })
                }
                FrameKind::MessageEnd => {
                    let index = self.progress.messages;
                    let received = self.progress.open_message_bytes;
                    let hasher = &mut self.hasher;
                    let (summary, bytes, utf8) =
                        match verify_message(&payload, message, index, received, hasher) {
                            Ok(verified) => verified,
                            Err(err) => return Err(self.failed_with(err)),
                        };
                    self.progress.messages += 1;
                    self.progress.open_message_bytes = 0;
                    self.runs = Runs::default();
                    if self.config.assemble {
                        let final_response = answer.is_final_response(index, &bytes, utf8);
                        Event::Message(VerifiedMessage {
                            summary,
                            bytes,
                            final_response,
                        })
                    } else {
                        Event::MessageVerified(summary)
                    }
                }
                FrameKind::KeepAlive => {
                    self.runs.keepalives += 1;
                    Event::KeepAlive
                }
                FrameKind::Ignorable(_) => {
                    // Checked and consumed like any frame; it yields nothing and decoding goes
                    // on.
                    self.runs.ignorable += 1;
                    continue;
                }
                FrameKind::StreamEnd => {
                    let head = *head;
                    let ended = self.end_stream(head, &payload);
                    return self.recorded(ended);
                }
                FrameKind::Abort => {
                    let head = *head;
                    let aborted = self.abort_stream(head, &payload);
                    return self.recorded(aborted);
                }
                // A second HEAD fails the header check; fail closed all the same.
                FrameKind::Head => {
                    let state = at.stream_state();
                    let kind = frame.kind;
                    return Err(self.failed_with(DecodeError::UnexpectedFrame { kind, state }));
                }
            }));
        }
    }

    /// What `decode` returns while `buf` holds less than a header: a body that is not framed at
    /// all (a short JSON error, an HTML proxy page) is rejected as soon as its first bytes show
    /// it, not as a truncation; otherwise as [`no_frame`](Self::no_frame).
    #[inline(always)]
    fn partial_header(
        &mut self,
        buf: &mut BytesMut,
        eof: bool,
    ) -> Result<Option<Event>, DecodeError> {
        if let Err(err) = check_partial_header(buf, self.progress.bytes) {
            return Err(self.failed_with(err));
        }
        self.no_frame(buf, eof)
    }

    /// `decode` after STREAM_END or ABORT (nothing may follow, SPEC.md §3), or after a failure
    /// (the same error again); with `eof`, then the end-of-input verdict.
    #[cold]
    #[inline(never)]
    fn after_end(&mut self, buf: &mut BytesMut, eof: bool) -> Result<Option<Event>, DecodeError> {
        let err = match &self.state {
            State::Failed { error, .. } => error.clone(),
            _ if !buf.is_empty() => DecodeError::TrailingData { len: buf.len() },
            _ => return self.no_frame(buf, eof),
        };
        Err(self.failed_with(err))
    }

    /// What `decode` returns when no further frame can be decoded from `buf` yet (`Ok(None)`),
    /// and `decode_eof` (`eof`) when none can be at all: the end-of-input verdict.
    #[inline]
    fn no_frame(&mut self, buf: &mut BytesMut, eof: bool) -> Result<Option<Event>, DecodeError> {
        if eof {
            self.end_of_input_event(buf)
        } else {
            Ok(None)
        }
    }

    /// `result` of a step that acts on a whole frame, with its error recorded as the final
    /// state.
    #[cold]
    #[inline(never)]
    fn recorded(
        &mut self,
        result: Result<Option<Event>, DecodeError>,
    ) -> Result<Option<Event>, DecodeError> {
        result.map_err(|err| self.failed_with(err))
    }

    /// Acts on the HEAD frame (SPEC.md §3, §4).
    #[cold]
    #[inline(never)]
    fn open_stream(
        &mut self,
        header: &FrameHeader,
        kind: FrameKind,
        payload: &[u8],
    ) -> Result<Option<Event>, DecodeError> {
        if kind != FrameKind::Head {
            // The header check lets only HEAD through first; fail closed all the same.
            return Err(DecodeError::UnexpectedFrame {
                kind,
                state: StreamState::AwaitingHead,
            });
        }
        let head = StreamHead::load(payload)?;
        // SPEC.md §4: HEAD's sequence number is the attempt id's first four bytes.
        if header.sequence != head.initial_sequence() {
            return Err(DecodeError::ForeignFrame {
                expected: head.initial_sequence(),
                found: header.sequence,
            });
        }
        // SPEC.md §10: a client that sent a key rejects a head that echoes another (or none).
        if let Some(expected) = self.config.request_key {
            if head.request_key != Some(expected) {
                return Err(DecodeError::RequestKeyMismatch {
                    expected,
                    found: head.request_key,
                });
            }
        }
        // SPEC.md §7.1: only a decoder that expects a key and keeps the messages looks for the
        // final response.
        let answer = if self.config.request_key.is_some() && self.config.assemble {
            Answer::Awaited
        } else {
            Answer::Unchecked
        };
        self.state = State::Open {
            at: Position::Streaming {
                head,
                message: None,
                answer,
            },
            pending: None,
        };
        Ok(Some(Event::Opened(head)))
    }

    /// Acts on the STREAM_END sentinel (SPEC.md §3).
    #[cold]
    #[inline(never)]
    fn end_stream(
        &mut self,
        head: StreamHead,
        payload: &[u8],
    ) -> Result<Option<Event>, DecodeError> {
        let declared = StreamEnd::load(payload)?.messages;
        if declared != self.progress.messages {
            return Err(DecodeError::MessageCountMismatch {
                declared,
                received: self.progress.messages,
            });
        }
        Ok(Some(Event::End(self.complete(head, true))))
    }

    /// Ends the stream as complete, with what was received: with its sentinel (SPEC.md §7 row 2;
    /// the end of input must still come) or without it, at the end of input right after the
    /// final response (row 4).
    fn complete(&mut self, head: StreamHead, sentinel_seen: bool) -> StreamSummary {
        let summary = StreamSummary {
            messages: self.progress.messages,
            frames: self.progress.frames,
            bytes: self.progress.bytes,
            sentinel_seen,
        };
        self.state = State::Complete {
            head,
            summary,
            input_ended: !sentinel_seen,
        };
        summary
    }

    /// Acts on an ABORT frame: the stream ends, the open message is discarded, never delivered
    /// (SPEC.md §3 ABORT).
    #[cold]
    #[inline(never)]
    fn abort_stream(
        &mut self,
        head: StreamHead,
        payload: &[u8],
    ) -> Result<Option<Event>, DecodeError> {
        let abort = Abort::load(payload)?;
        self.state = State::Aborted {
            head,
            abort: abort.clone(),
        };
        Ok(Some(Event::Aborted(abort)))
    }
}

/// How the end of input ended a stream that is not in error (SPEC.md §7 rows 2 and 4).
#[derive(Clone, Copy, Debug)]
struct Ended {
    head: StreamHead,
    summary: StreamSummary,
    /// The end of input delivered the final response just now (row 4): `decode_eof` reports
    /// [`Event::End`] for it, once.
    delivered: bool,
}

/// What is known of the DATA payload that follows the header of `frame`, whose place in the input
/// is its place in the stream less the `elided` payloads before it (see
/// [`StreamDecoder::add_prehashed`]).
#[inline]
fn known_payload(prehashes: &mut Prehashes, frame: &Pending, elided: u64) -> Option<Box<Known>> {
    let at = frame.offset + HEADER_LEN as u64 - elided;
    if frame.kind == FrameKind::Data && prehashes.may_know(at) {
        prehashes.payload(at, frame.header.len)
    } else {
        None
    }
}

/// SPEC.md §2: the payload CRC of `frame`, before any payload byte is interpreted or delivered:
/// over the payload at the start of `buf`, or as computed while the payload arrived (`known`,
/// when the mapping's decoder did).
#[inline(always)]
fn check_payload(
    crc: &PayloadCrc,
    buf: &[u8],
    frame: &Pending,
    known: Option<&Known>,
) -> Result<(), DecodeError> {
    let stored = frame.header.payload_crc;
    let computed = match known {
        Some(known) => known.crc,
        None => crc.checksum(&buf[..frame.header.len as usize]),
    };
    if computed != stored {
        return Err(DecodeError::PayloadChecksumMismatch {
            kind: frame.kind,
            stored,
            computed,
            offset: frame.offset,
        });
    }
    Ok(())
}

/// The checked payload of `len` bytes: taken from the start of `buf`, or, when it is not in the
/// input, its slice of the message its checks were made on (`known`; counted in `elided`).
#[inline(always)]
fn take_payload(buf: &mut BytesMut, len: u32, known: Option<&Known>, elided: &mut u64) -> Bytes {
    match known {
        Some(known) => {
            *elided += u64::from(len);
            known.payload.clone()
        }
        None => buf.split_to(len as usize).freeze(),
    }
}

/// SPEC.md §3 MESSAGE_END: the open `message` (message `index`, of which `received` bytes
/// arrived) checked against the length, then the SHA-256, that its MESSAGE_END `payload`
/// declares, before the message is complete. Returns its summary, its bytes (empty when not
/// assembling) and whether they are known to be UTF-8; `hasher` is left fresh for the next
/// message.
#[inline(always)]
fn verify_message(
    payload: &[u8],
    message: &mut Option<Message>,
    index: u64,
    received: u64,
    hasher: &mut Sha256,
) -> Result<(MessageSummary, Bytes, bool), DecodeError> {
    let end = MessageEnd::load(payload)?;
    if end.len != received {
        return Err(DecodeError::LengthMismatch {
            index,
            declared: end.len,
            received,
        });
    }
    let (computed, bytes, utf8) = Message::finish(message.take(), hasher);
    if end.sha256 != computed {
        return Err(DecodeError::DigestMismatch {
            index,
            declared: end.sha256,
            computed,
        });
    }
    let summary = MessageSummary {
        index,
        len: received,
        sha256: computed,
    };
    Ok((summary, bytes, utf8))
}
