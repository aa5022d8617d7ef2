//! The sans-I/O stream decoder: the client side (SPEC.md §2–§7).

use bytes::{Buf, Bytes, BytesMut};
use sha2::{Digest, Sha256};

use crate::encoder::DEFAULT_MAX_MESSAGE_SIZE;
use crate::error::{DecodeError, Progress, StreamState, Truncation};
use crate::event::{
    Abort, Event, MessageSummary, StreamHead, StreamSummary, UnverifiedChunk, VerifiedMessage,
};
use crate::frame::{FrameHeader, FrameKind, HEADER_LEN, MAGIC, PayloadCrc, VERSION, be_u64};
use crate::ids::{AttemptId, RequestKey};

/// Default maximum frame payload a decoder accepts: 64 KiB (SPEC.md §6).
pub const DEFAULT_MAX_FRAME_PAYLOAD: u32 = 64 * 1024;

/// Smallest frame limit a decoder can be configured with: every control frame must fit.
pub const MIN_MAX_FRAME_PAYLOAD: u32 = 1026;

/// Distance within which a wrong sequence number counts as a gap or a replay (SPEC.md §4).
const SEQUENCE_WINDOW: u32 = 1 << 20;

/// Builds a [`StreamDecoder`] with non-default limits or checks.
///
/// # Examples
///
/// ```
/// use mcp_framing::{RequestKey, StreamDecoder};
///
/// let key = RequestKey::random(); // the key the client sent with its request
/// let decoder = StreamDecoder::builder()
///     .max_frame_payload(16 * 1024)
///     .max_message_size(4 << 20)
///     .expect_request_key(key)
///     .build();
/// # let _ = decoder;
/// ```
#[derive(Clone, Debug)]
pub struct DecoderBuilder {
    max_frame_payload: u32,
    max_message_size: u64,
    request_key: Option<RequestKey>,
    assemble: bool,
}

impl DecoderBuilder {
    /// Largest frame payload accepted; checked on the raw header field before any byte of the
    /// payload is awaited or reserved. Default [`DEFAULT_MAX_FRAME_PAYLOAD`] (64 KiB): four times
    /// the default sender frame size, while bounding the read buffer to about 64 KiB per stream.
    ///
    /// # Panics
    ///
    /// If `max` is below [`MIN_MAX_FRAME_PAYLOAD`] (1026 bytes, the largest control frame).
    ///
    /// # Examples
    ///
    /// ```
    /// let d = mcp_framing::StreamDecoder::builder().max_frame_payload(1 << 20).build();
    /// # let _ = d;
    /// ```
    #[must_use]
    pub fn max_frame_payload(mut self, max: u32) -> Self {
        assert!(
            max >= MIN_MAX_FRAME_PAYLOAD,
            "max frame payload must be at least {MIN_MAX_FRAME_PAYLOAD}"
        );
        self.max_frame_payload = max;
        self
    }

    /// Largest message accepted, checked at every DATA header before its payload arrives.
    /// Default [`DEFAULT_MAX_MESSAGE_SIZE`] (16 MiB): room for tool results with embedded images.
    ///
    /// # Examples
    ///
    /// ```
    /// let d = mcp_framing::StreamDecoder::builder().max_message_size(1 << 20).build();
    /// # let _ = d;
    /// ```
    #[must_use]
    pub fn max_message_size(mut self, max: u64) -> Self {
        self.max_message_size = max;
        self
    }

    /// Requires the stream head to echo this request key; another key (or none) is
    /// [`DecodeError::RequestKeyMismatch`]: a response that belongs to another request.
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
    /// See [`DecoderBuilder`].
    #[must_use]
    pub fn build(self) -> StreamDecoder {
        StreamDecoder {
            config: self,
            phase: Phase::Header,
            state: StreamState::AwaitingHead,
            aborted: None,
            failed: None,
            head: None,
            expected_sequence: 0,
            progress: Progress::default(),
            hasher: Sha256::new(),
            payload_crc: PayloadCrc::new(),
            first_chunk: None,
            assembled: BytesMut::new(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    Header,
    Payload {
        header: FrameHeader,
        kind: FrameKind,
        offset: u64,
    },
}

/// Reads one framed response stream (the client side), in any split of its bytes.
///
/// Feed it bytes as they arrive with [`decode`](Self::decode) (`Ok(None)`: need more bytes),
/// and call [`decode_eof`](Self::decode_eof) when the input ends: it returns `Ok(None)` only after
/// the STREAM_END sentinel, and a precise [`DecodeError::Truncated`] otherwise. With the `codec`
/// feature it is also a `tokio_util::codec::Decoder` for `FramedRead`.
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
    phase: Phase,
    state: StreamState,
    aborted: Option<Abort>,
    failed: Option<DecodeError>,
    head: Option<StreamHead>,
    expected_sequence: u32,
    progress: Progress,
    hasher: Sha256,
    payload_crc: PayloadCrc,
    first_chunk: Option<Bytes>,
    assembled: BytesMut,
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
/// See [`StreamDecoder::decode_all`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodedStream {
    /// The stream head.
    pub head: StreamHead,
    /// Every message, verified (empty when the decoder does not assemble messages).
    pub messages: Vec<VerifiedMessage>,
    /// The totals reported with the sentinel.
    pub summary: StreamSummary,
}

impl StreamDecoder {
    /// A decoder with the default limits and no request-key check.
    ///
    /// # Examples
    ///
    /// See [`StreamDecoder`].
    #[must_use]
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder for non-default limits or a request-key check.
    ///
    /// # Examples
    ///
    /// See [`DecoderBuilder`].
    #[must_use]
    pub fn builder() -> DecoderBuilder {
        DecoderBuilder {
            max_frame_payload: DEFAULT_MAX_FRAME_PAYLOAD,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            request_key: None,
            assemble: true,
        }
    }

    /// The largest frame payload this decoder accepts (SPEC.md §6). Bounds that derive from it,
    /// such as the SSE event bound ([`sse::event_data_limit`](crate::sse::event_data_limit)),
    /// read it here.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{DEFAULT_MAX_FRAME_PAYLOAD, StreamDecoder};
    /// assert_eq!(StreamDecoder::new().max_frame_payload(), DEFAULT_MAX_FRAME_PAYLOAD);
    /// assert_eq!(StreamDecoder::builder().max_frame_payload(1 << 20).build().max_frame_payload(), 1 << 20);
    /// ```
    #[must_use]
    pub fn max_frame_payload(&self) -> u32 {
        self.config.max_frame_payload
    }

    /// The largest message this decoder accepts (SPEC.md §6).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{DEFAULT_MAX_MESSAGE_SIZE, StreamDecoder};
    /// assert_eq!(StreamDecoder::new().max_message_size(), DEFAULT_MAX_MESSAGE_SIZE);
    /// ```
    #[must_use]
    pub fn max_message_size(&self) -> u64 {
        self.config.max_message_size
    }

    /// The stream head, once HEAD arrived.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::StreamDecoder;
    /// assert_eq!(StreamDecoder::new().head(), None);
    /// ```
    #[must_use]
    pub fn head(&self) -> Option<StreamHead> {
        self.head
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
    #[must_use]
    pub fn state(&self) -> StreamState {
        self.state
    }

    /// Whether the STREAM_END sentinel was received (and nothing is wrong).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::StreamDecoder;
    /// assert!(!StreamDecoder::new().is_complete());
    /// ```
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.state == StreamState::Finished && self.aborted.is_none() && self.failed.is_none()
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
    /// See [`StreamDecoder`].
    #[inline]
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, DecodeError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        // Matched, not bound and re-checked: the event is moved once, into the caller's slot.
        match self.decode_inner(buf) {
            Err(err) => Err(self.failed_with(err)),
            ok => ok,
        }
    }

    /// Call when the input has ended: returns the remaining events one by one, then `Ok(None)`
    /// if and only if the stream ended with its STREAM_END sentinel (SPEC.md §7).
    ///
    /// # Errors
    ///
    /// [`DecodeError::Truncated`] saying where the stream stopped and what was received if the
    /// sentinel is missing (also for a stream cut right after a header), and
    /// [`DecodeError::PeerAbort`] if the peer aborted; otherwise as [`decode`](Self::decode).
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
    #[inline]
    pub fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, DecodeError> {
        // Returned as is, not re-wrapped: the event is built once, in the caller's slot.
        match self.decode(buf) {
            Ok(None) => self.end_of_input(buf),
            result => result,
        }
    }

    /// The verdict once no further frame can be decoded and the input ended (SPEC.md §7).
    #[cold]
    fn end_of_input(&mut self, buf: &BytesMut) -> Result<Option<Event>, DecodeError> {
        if self.state == StreamState::Finished {
            return match self.aborted.take() {
                Some(abort) => {
                    let err = DecodeError::PeerAbort(abort);
                    self.fail(err.clone());
                    Err(err)
                }
                None => Ok(None),
            };
        }
        let at = match self.phase {
            Phase::Payload { header, kind, .. } => Truncation::InPayload {
                kind,
                received: buf.len(),
                declared: header.len,
            },
            Phase::Header if !buf.is_empty() => Truncation::InHeader {
                received: buf.len(),
            },
            Phase::Header => match self.state {
                StreamState::InMessage => Truncation::InMessage {
                    message_bytes: self.progress.open_message_bytes,
                },
                StreamState::BetweenMessages => Truncation::BetweenMessages {
                    messages: self.progress.messages,
                },
                StreamState::AwaitingHead | StreamState::Finished => Truncation::NoFrame,
            },
        };
        let mut progress = self.progress;
        progress.bytes += buf.len() as u64;
        let err = DecodeError::Truncated { at, progress };
        self.fail(err.clone());
        Err(err)
    }

    /// Decodes a whole stream held in memory, requiring its sentinel.
    ///
    /// # Errors
    ///
    /// The first [`DecodeError`] of the stream, [`DecodeError::Truncated`] if the sentinel is
    /// missing, [`DecodeError::PeerAbort`] if it was aborted.
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
        let mut head = None;
        let mut messages = Vec::new();
        let mut summary = None;
        while let Some(event) = self.decode_eof(&mut buf)? {
            match event {
                Event::Opened(h) => head = Some(h),
                Event::Message(m) => messages.push(m),
                Event::End(s) => summary = Some(s),
                _ => {}
            }
        }
        match (head, summary) {
            (Some(head), Some(summary)) => Ok(DecodedStream {
                head,
                messages,
                summary,
            }),
            // decode_eof returns Ok(None) only after HEAD and STREAM_END were seen.
            _ => unreachable!("clean end without head or sentinel"),
        }
    }

    /// Records `err` as the decoder's final state and returns it.
    #[cold]
    #[inline(never)]
    fn failed_with(&mut self, err: DecodeError) -> DecodeError {
        self.fail(err.clone());
        err
    }

    /// Call when the input has ended: every remaining event in `buf`, followed by the
    /// end-of-input verdict if it is an error (see [`decode_eof`](Self::decode_eof)). A list that
    /// does not end with an error means the stream ended with its sentinel.
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

    fn fail(&mut self, err: DecodeError) {
        self.failed = Some(err);
        self.state = StreamState::Finished;
        self.first_chunk = None;
        self.assembled = BytesMut::new();
    }

    fn decode_inner(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, DecodeError> {
        loop {
            if self.state == StreamState::Finished {
                // SPEC.md §3: nothing may follow a terminal frame.
                if !buf.is_empty() {
                    return Err(DecodeError::TrailingData { len: buf.len() });
                }
                return Ok(None);
            }
            let (header, kind, offset) = match self.phase {
                Phase::Payload {
                    header,
                    kind,
                    offset,
                } => {
                    if buf.len() < header.len as usize {
                        // Wait; the buffer grows with the bytes that arrive, we reserve nothing.
                        return Ok(None);
                    }
                    self.phase = Phase::Header;
                    (header, kind, offset)
                }
                Phase::Header => {
                    let Some(raw) = buf.first_chunk::<HEADER_LEN>() else {
                        // Reject a body that is not framed at all (a short JSON error, an HTML
                        // proxy page) as soon as its first bytes show it, not as a truncation.
                        check_partial_header(buf, self.progress.bytes)?;
                        return Ok(None);
                    };
                    let offset = self.progress.bytes;
                    // SPEC.md §2 "Header first": magic, version, header CRC ...
                    let header = FrameHeader::parse(raw)
                        .map_err(|err| DecodeError::from_header(err, offset))?;
                    // ... then kind, sequence, state, length and limits, before any payload.
                    let kind = match self.accept_header(&header) {
                        Some(kind) => kind,
                        None => self.check_header(&header, offset)?,
                    };
                    buf.advance(HEADER_LEN);
                    self.progress.bytes += HEADER_LEN as u64;
                    if buf.len() < header.len as usize {
                        self.phase = Phase::Payload {
                            header,
                            kind,
                            offset,
                        };
                        return Ok(None);
                    }
                    (header, kind, offset)
                }
            };
            if let FrameKind::Ignorable(_) = kind {
                // Checked and consumed like any frame; it yields nothing and decoding goes on.
                self.skip_frame(header, kind, offset, buf)?;
                continue;
            }
            // Returned directly, not bound and re-checked: the event is moved once.
            return self.take_frame(header, kind, offset, buf);
        }
    }

    /// [`take_frame`](Self::take_frame) for a frame of an ignorable kind (it yields no event).
    #[cold]
    #[inline(never)]
    fn skip_frame(
        &mut self,
        header: FrameHeader,
        kind: FrameKind,
        offset: u64,
        buf: &mut BytesMut,
    ) -> Result<(), DecodeError> {
        self.take_frame(header, kind, offset, buf).map(|_| ())
    }

    /// Checks the payload CRC of a frame whose payload is in `buf`, consumes it and acts on it.
    #[inline(always)]
    fn take_frame(
        &mut self,
        header: FrameHeader,
        kind: FrameKind,
        offset: u64,
        buf: &mut BytesMut,
    ) -> Result<Option<Event>, DecodeError> {
        let len = header.len as usize;
        let computed = self.payload_crc.checksum(&buf[..len]);
        if computed != header.payload_crc {
            return Err(DecodeError::PayloadChecksumMismatch {
                kind,
                stored: header.payload_crc,
                computed,
                offset,
            });
        }
        let payload = buf.split_to(len);
        self.progress.bytes += len as u64;
        self.progress.frames += 1;
        self.progress.last_sequence = Some(header.sequence);
        self.expected_sequence = header.sequence.wrapping_add(1);
        self.handle_frame(header, kind, payload)
    }

    /// The kind of a header that passes every check of [`check_header`](Self::check_header),
    /// `None` if one fails. The hot path: a yes or no, without building an error.
    #[inline]
    fn accept_header(&self, header: &FrameHeader) -> Option<FrameKind> {
        let kind = FrameKind::from_byte(header.kind)?;
        let in_order = match self.state {
            StreamState::AwaitingHead => kind == FrameKind::Head,
            state => {
                header.sequence == self.expected_sequence
                    && match kind {
                        FrameKind::Head => false,
                        FrameKind::StreamEnd => state != StreamState::InMessage,
                        _ => true,
                    }
            }
        };
        let within_limits = kind.allows_len(header.len)
            && header.len <= self.config.max_frame_payload
            && (kind != FrameKind::Data
                || self.progress.open_message_bytes + u64::from(header.len)
                    <= self.config.max_message_size);
        (in_order && within_limits).then_some(kind)
    }

    /// Checks a header (whose CRC passed) before its payload is awaited, and names the first
    /// check that fails. Runs when [`accept_header`](Self::accept_header) refused the header.
    #[cold]
    #[inline(never)]
    fn check_header(&self, header: &FrameHeader, offset: u64) -> Result<FrameKind, DecodeError> {
        let kind = FrameKind::from_byte(header.kind).ok_or(DecodeError::UnknownFrameKind {
            kind: header.kind,
            offset,
        })?;
        if self.state == StreamState::AwaitingHead {
            // SPEC.md §3: HEAD MUST be the first frame. Its sequence number is checked against
            // the attempt id in its payload.
            if kind != FrameKind::Head {
                return Err(DecodeError::UnexpectedFrame {
                    kind,
                    state: self.state,
                });
            }
        } else {
            check_sequence(self.expected_sequence, header.sequence)?;
            let allowed = match kind {
                FrameKind::Head => false,
                FrameKind::StreamEnd => self.state != StreamState::InMessage,
                _ => true,
            };
            if !allowed {
                return Err(DecodeError::UnexpectedFrame {
                    kind,
                    state: self.state,
                });
            }
        }
        if !kind.allows_len(header.len) {
            return Err(DecodeError::InvalidFrameLength {
                kind,
                len: header.len,
            });
        }
        // SPEC.md §6: limits on the raw length field, before any reservation.
        if header.len > self.config.max_frame_payload {
            return Err(DecodeError::FrameTooLarge {
                len: header.len,
                max: self.config.max_frame_payload,
            });
        }
        if kind == FrameKind::Data {
            let len = self.progress.open_message_bytes + u64::from(header.len);
            if len > self.config.max_message_size {
                return Err(DecodeError::MessageTooLarge {
                    len,
                    max: self.config.max_message_size,
                });
            }
        }
        Ok(kind)
    }

    #[inline(always)]
    fn handle_frame(
        &mut self,
        header: FrameHeader,
        kind: FrameKind,
        payload: BytesMut,
    ) -> Result<Option<Event>, DecodeError> {
        Ok(Some(match kind {
            // HEAD comes once: out of line, so that its event is not built on the hot path.
            FrameKind::Head => return self.open_stream(header, &payload),
            FrameKind::Data => {
                let bytes = payload.freeze();
                let offset = self.progress.open_message_bytes;
                self.progress.open_message_bytes += bytes.len() as u64;
                self.state = StreamState::InMessage;
                if self.config.assemble {
                    // Hashed at MESSAGE_END over the assembled bytes, in one pass.
                    self.assemble(&bytes);
                } else {
                    // SHA-256 streams across the message's frames; finalized at MESSAGE_END.
                    self.hasher.update(&bytes);
                }
                Event::Chunk(UnverifiedChunk {
                    message_index: self.progress.messages,
                    offset,
                    bytes,
                })
            }
            FrameKind::MessageEnd => {
                let index = self.progress.messages;
                let declared = be_u64(&payload, 0);
                let received = self.progress.open_message_bytes;
                // SPEC.md §3 MESSAGE_END: length, then SHA-256, before the message is complete.
                if declared != received {
                    return Err(DecodeError::LengthMismatch {
                        index,
                        declared,
                        received,
                    });
                }
                let mut hasher = std::mem::take(&mut self.hasher);
                if self.config.assemble {
                    hasher.update(self.assembled_bytes());
                }
                let computed: [u8; 32] = hasher.finalize().into();
                if payload[8..40] != computed {
                    let mut declared = [0u8; 32];
                    declared.copy_from_slice(&payload[8..40]);
                    return Err(DecodeError::DigestMismatch {
                        index,
                        declared,
                        computed,
                    });
                }
                let summary = MessageSummary {
                    index,
                    len: received,
                    sha256: computed,
                };
                self.progress.messages += 1;
                self.progress.open_message_bytes = 0;
                self.state = StreamState::BetweenMessages;
                if self.config.assemble {
                    let bytes = if self.assembled.is_empty() {
                        self.first_chunk.take().unwrap_or_default()
                    } else {
                        self.assembled.split().freeze()
                    };
                    Event::Message(VerifiedMessage { summary, bytes })
                } else {
                    Event::MessageVerified(summary)
                }
            }
            FrameKind::StreamEnd => {
                let declared = be_u64(&payload, 0);
                if declared != self.progress.messages {
                    return Err(DecodeError::MessageCountMismatch {
                        declared,
                        received: self.progress.messages,
                    });
                }
                self.state = StreamState::Finished;
                Event::End(StreamSummary {
                    messages: self.progress.messages,
                    frames: self.progress.frames,
                    bytes: self.progress.bytes,
                })
            }
            FrameKind::Abort => {
                let code = u16::from_be_bytes([payload[0], payload[1]]);
                let reason = std::str::from_utf8(&payload[2..])
                    .map_err(|_| DecodeError::InvalidAbort)?
                    .to_owned();
                let abort = Abort::new(code.into(), reason);
                self.state = StreamState::Finished;
                self.aborted = Some(abort.clone());
                // The open message is discarded, never delivered (SPEC.md §3 ABORT).
                self.first_chunk = None;
                self.assembled = BytesMut::new();
                Event::Aborted(abort)
            }
            FrameKind::KeepAlive => Event::KeepAlive,
            FrameKind::Ignorable(_) => return Ok(None),
        }))
    }

    /// Acts on the HEAD frame (SPEC.md §3, §4).
    #[cold]
    #[inline(never)]
    fn open_stream(
        &mut self,
        header: FrameHeader,
        payload: &[u8],
    ) -> Result<Option<Event>, DecodeError> {
        let mut key = [0u8; 16];
        key.copy_from_slice(&payload[..16]);
        let mut attempt = [0u8; 16];
        attempt.copy_from_slice(&payload[16..32]);
        let attempt_id = AttemptId::from_bytes(attempt);
        // SPEC.md §4: HEAD's sequence number is the attempt id's first four bytes.
        if header.sequence != attempt_id.initial_sequence() {
            return Err(DecodeError::ForeignFrame {
                expected: attempt_id.initial_sequence(),
                found: header.sequence,
            });
        }
        // 16 zero bytes: the request carried no key (SPEC.md §3); never a key itself.
        let request_key = RequestKey::try_from(key).ok();
        if let Some(expected) = self.config.request_key {
            if request_key != Some(expected) {
                return Err(DecodeError::RequestKeyMismatch {
                    expected,
                    found: request_key,
                });
            }
        }
        let head = StreamHead {
            request_key,
            attempt_id,
        };
        self.head = Some(head);
        self.state = StreamState::BetweenMessages;
        Ok(Some(Event::Opened(head)))
    }

    /// The bytes of the open message (when assembling).
    fn assembled_bytes(&self) -> &[u8] {
        match &self.first_chunk {
            Some(first) if self.assembled.is_empty() => first,
            _ => &self.assembled,
        }
    }

    /// Keeps a message's bytes: a single-frame message stays the zero-copy chunk; from the second
    /// frame on, bytes are copied (once) into one buffer that grows as they arrive.
    fn assemble(&mut self, chunk: &Bytes) {
        if !self.assembled.is_empty() {
            self.assembled.extend_from_slice(chunk);
        } else if let Some(first) = self.first_chunk.take() {
            self.assembled.extend_from_slice(&first);
            self.assembled.extend_from_slice(chunk);
        } else {
            self.first_chunk = Some(chunk.clone());
        }
    }
}

/// Checks magic and version of a header whose 20 bytes have not all arrived (SPEC.md §2).
fn check_partial_header(buf: &[u8], offset: u64) -> Result<(), DecodeError> {
    if let [first, second, rest @ ..] = buf {
        if [*first, *second] != MAGIC {
            return Err(DecodeError::BadMagic {
                found: [*first, *second],
                offset,
            });
        }
        if let Some(&version) = rest.first() {
            if version != VERSION {
                return Err(DecodeError::UnsupportedVersion { version, offset });
            }
        }
    }
    Ok(())
}

/// SPEC.md §4: every frame after HEAD carries the previous sequence number plus one.
fn check_sequence(expected: u32, found: u32) -> Result<(), DecodeError> {
    let distance = found.wrapping_sub(expected);
    if distance == 0 {
        Ok(())
    } else if distance <= SEQUENCE_WINDOW {
        Err(DecodeError::SequenceGap { expected, found })
    } else if distance.wrapping_neg() <= SEQUENCE_WINDOW {
        Err(DecodeError::SequenceReplay { expected, found })
    } else {
        Err(DecodeError::ForeignFrame { expected, found })
    }
}

/// Decodes `input` with a default decoder and returns every event, followed by the end-of-input
/// verdict if it is an error. A convenience for tests and tools that compare event sequences.
///
/// # Examples
///
/// ```
/// use mcp_framing::{decode_all_events, DecodeError};
/// let events = decode_all_events(b"");
/// assert!(matches!(events[..], [Err(DecodeError::Truncated { .. })]));
/// ```
#[must_use]
pub fn decode_all_events(input: &[u8]) -> Vec<Result<Event, DecodeError>> {
    StreamDecoder::new().decode_to_end(&mut BytesMut::from(input))
}
