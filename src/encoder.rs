//! The sans-I/O stream encoder: the server side (SPEC.md §1–§5).

use bytes::BytesMut;
use sha2::{Digest, Sha256};

use crate::error::EncodeError;
use crate::event::MessageSummary;
use crate::frame::{
    Abort, AbortCode, FrameKind, HEAD_PAYLOAD_LEN, HEADER_LEN, MESSAGE_END_PAYLOAD_LEN, MessageEnd,
    STREAM_END_PAYLOAD_LEN, StreamEnd, StreamHead, write_frame, write_header,
};
use crate::limits::{DEFAULT_FRAME_SIZE, Limits, MAX_ABORT_REASON_LEN};

const SEQUENCE_SPACE: u64 = 1 << 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Fresh,
    BetweenMessages,
    InMessage,
    Finished,
}

/// Builds a [`StreamEncoder`] with non-default limits.
///
/// # Examples
///
/// ```
/// use mcp_framing::{StreamEncoder, StreamHead};
///
/// let enc = StreamEncoder::builder()
///     .frame_size(4096)
///     .max_message_size(1 << 20)
///     .build(StreamHead::for_request(None));
/// # let _ = enc;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct EncoderBuilder {
    frame_size: usize,
    max_message_size: u64,
}

impl EncoderBuilder {
    /// Largest DATA payload the encoder writes; larger chunks are cut into several frames.
    /// Default `DEFAULT_FRAME_SIZE` (16 KiB; the reason is written
    /// there).
    ///
    /// # Panics
    ///
    /// If `size` is 0 or above `u32::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = mcp_framing::StreamEncoder::builder().frame_size(1024);
    /// # let _ = b;
    /// ```
    #[must_use]
    pub fn frame_size(mut self, size: usize) -> Self {
        assert!(
            size > 0 && u32::try_from(size).is_ok(),
            "frame size must be in 1..=u32::MAX"
        );
        self.frame_size = size;
        self
    }

    /// Largest message the encoder accepts: the receivers' limit
    /// ([`Limits::max_message_size`], default 16 MiB), since they would refuse a larger message
    /// anyway.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = mcp_framing::StreamEncoder::builder().max_message_size(64 << 20);
    /// # let _ = b;
    /// ```
    #[must_use]
    pub fn max_message_size(mut self, max: u64) -> Self {
        self.max_message_size = max;
        self
    }

    /// Lowers the frame size and the message limit to a receiver's limits, where it sent them
    /// (SPEC.md §11.3, §16: `Mcp-Framing-Limits`): the encoder then sends nothing the receiver
    /// would refuse. A limit the receiver did not send (`None`) leaves the encoder's own.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let enc = StreamEncoder::builder()
    ///     .max_message_size(64 << 20)
    ///     .within(Some(4096), None)
    ///     .build(StreamHead::for_request(None));
    /// assert_eq!(enc.max_message_size(), 64 << 20); // not announced: the encoder's own
    /// ```
    // Hidden: the opt-in applies the receiver's limits (`http::OptIn::encoder`); the layers and the tests call it.
    #[doc(hidden)]
    #[must_use]
    pub fn within(mut self, max_frame_payload: Option<u32>, max_message_size: Option<u64>) -> Self {
        if let Some(max) = max_frame_payload {
            let max = usize::try_from(max).unwrap_or(usize::MAX);
            self.frame_size = self.frame_size.min(max);
        }
        if let Some(max) = max_message_size {
            self.max_message_size = self.max_message_size.min(max);
        }
        self
    }

    /// The frame size and the message limit set.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn limits(&self) -> (usize, u64) {
        (self.frame_size, self.max_message_size)
    }

    /// Creates the encoder for one response stream.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let head = StreamHead::for_request(None);
    /// let mut enc = StreamEncoder::builder().frame_size(1024).max_message_size(1 << 20).build(head);
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(&[b'1'; 3000], &mut wire)?; // three DATA frames
    /// enc.end(&mut wire)?;
    ///
    /// let stream = StreamDecoder::new().decode_all(&wire).unwrap();
    /// assert_eq!((stream.head, stream.messages[0].bytes().len()), (head, 3000));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn build(self, head: StreamHead) -> StreamEncoder {
        StreamEncoder {
            head,
            frame_size: self.frame_size,
            max_message_size: self.max_message_size,
            next_sequence: head.initial_sequence(),
            frames: 0,
            state: State::Fresh,
            message_len: 0,
            hasher: Sha256::new(),
            messages: 0,
        }
    }
}

/// Writes one framed response stream (the server side).
///
/// The HEAD frame is written by [`open`](Self::open) or before the first other frame. Then push
/// message bytes in any chunks ([`push`](Self::push), [`finish_message`](Self::finish_message)),
/// or whole messages ([`message`](Self::message), [`json`](Self::json)), then
/// [`end`](Self::end) the stream or [`abort`](Self::abort) it. Frames go into a `BytesMut`; the
/// encoder does no I/O. With the `codec` feature it is also a `tokio_util::codec::Encoder`.
///
/// Every method either writes complete frames or returns an error and writes nothing.
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::{RequestKey, StreamDecoder, StreamEncoder, StreamHead};
///
/// let key = RequestKey::random(); // from the request's Mcp-Framing-Request-Key header
/// let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
/// let mut wire = BytesMut::new();
///
/// // A notification first, then the response, streamed in tiny pieces:
/// enc.json(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress"}), &mut wire)?;
/// for piece in [&b"{\"jsonrpc\":\"2.0\","[..], b"\"id\":1,", b"\"result\":{}}"] {
///     enc.push(piece, &mut wire)?;
/// }
/// enc.finish_message(&mut wire)?;
/// enc.end(&mut wire)?;
///
/// let stream = StreamDecoder::builder().expect_request_key(key).build().decode_all(&wire).unwrap();
/// assert_eq!(stream.messages.len(), 2);
/// assert_eq!(stream.messages[1].bytes().as_ref(), br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Debug)]
pub struct StreamEncoder {
    head: StreamHead,
    frame_size: usize,
    max_message_size: u64,
    next_sequence: u32,
    frames: u64,
    state: State,
    message_len: u64,
    hasher: Sha256,
    messages: u64,
}

impl StreamEncoder {
    /// An encoder with the default limits.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{RequestKey, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let key = RequestKey::random(); // the request's key, echoed in the stream head
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
    /// enc.end(&mut wire)?;
    ///
    /// // The client that sent `key` accepts the stream: its head echoes the key.
    /// let stream = StreamDecoder::builder().expect_request_key(key).build().decode_all(&wire).unwrap();
    /// assert_eq!(stream.head.request_key, Some(key));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn new(head: StreamHead) -> Self {
        Self::builder().build(head)
    }

    /// A builder for non-default limits.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{EncodeError, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::builder()
    ///     .max_message_size(8)
    ///     .build(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(b"[1,2,3]", &mut wire)?;
    /// let err = enc.message(b"[1,2,3,4,5]", &mut wire).unwrap_err(); // 11 bytes: over the limit
    /// assert!(matches!(err, EncodeError::MessageTooLarge { .. }));
    /// # Ok::<(), EncodeError>(())
    /// ```
    #[must_use]
    pub fn builder() -> EncoderBuilder {
        EncoderBuilder {
            frame_size: DEFAULT_FRAME_SIZE,
            max_message_size: Limits::DEFAULT.max_message_size,
        }
    }

    /// The largest message this encoder accepts.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Limits, StreamEncoder, StreamHead};
    /// let enc = StreamEncoder::new(StreamHead::for_request(None));
    /// assert_eq!(enc.max_message_size(), Limits::default().max_message_size);
    /// ```
    // Hidden: for the tests and the CLI; a user needs none of it to write or read a stream.
    #[doc(hidden)]
    #[must_use]
    pub fn max_message_size(&self) -> u64 {
        self.max_message_size
    }

    /// The stream's head (request key and attempt id).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let head = StreamHead::for_request(None);
    /// assert_eq!(StreamEncoder::new(head).head(), head);
    /// ```
    // Hidden: for the tests and the CLI; a user needs none of it to write or read a stream.
    #[doc(hidden)]
    #[must_use]
    pub fn head(&self) -> StreamHead {
        self.head
    }

    /// Messages finished so far.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// enc.message(b"{}", &mut bytes::BytesMut::new())?;
    /// assert_eq!(enc.messages(), 1);
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    // Hidden: for the tests and the CLI; a user needs none of it to write or read a stream.
    #[doc(hidden)]
    #[must_use]
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Whether the stream was ended or aborted.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// enc.end(&mut bytes::BytesMut::new())?;
    /// assert!(enc.is_finished());
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    // Hidden: for the tests and the CLI; a user needs none of it to write or read a stream.
    #[doc(hidden)]
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.state == State::Finished
    }

    /// Whether a message is open (bytes pushed, not yet finished).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// enc.push(b"{", &mut bytes::BytesMut::new())?;
    /// assert!(enc.in_message());
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    // Hidden: for the tests and the CLI; a user needs none of it to write or read a stream.
    #[doc(hidden)]
    #[must_use]
    pub fn in_message(&self) -> bool {
        self.state == State::InMessage
    }

    /// Writes the HEAD frame now, if it was not written yet. Useful to commit the response
    /// headers and the attempt id before the first byte of a message exists.
    ///
    /// # Errors
    ///
    /// [`EncodeError::StreamFinished`] after the end; otherwise infallible.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.open(&mut wire)?;
    /// assert_eq!(wire.len(), 20 + 32);
    /// enc.open(&mut wire)?; // idempotent
    /// assert_eq!(wire.len(), 52);
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn open(&mut self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        self.prepare(0, 0, dst)
    }

    /// Appends `chunk` to the current message (opening one if none is open), as one DATA frame,
    /// or several if it is longer than the frame size. An empty chunk writes nothing.
    ///
    /// # Errors
    ///
    /// [`EncodeError::StreamFinished`] after the end, [`EncodeError::MessageTooLarge`] if the
    /// message would exceed the limit (abort the stream then), [`EncodeError::SequenceExhausted`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::builder().max_message_size(4).build(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.push(b"1234", &mut wire)?;
    /// assert!(enc.push(b"5", &mut wire).is_err());
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn push(&mut self, chunk: &[u8], dst: &mut BytesMut) -> Result<(), EncodeError> {
        self.push_frames(chunk, dst, true)
    }

    /// [`push`](Self::push) with the DATA frames' headers only, their payloads left out (the
    /// compatible SSE mapping, SPEC.md §18: a record written as its message arrives).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn push_detached(
        &mut self,
        chunk: &[u8],
        dst: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        self.push_frames(chunk, dst, false)
    }

    /// [`push_detached`](Self::push_detached) of one frame whose payload lies in several
    /// `pieces` (at most the frame size in all: a frame of a message kept as the parts it
    /// arrived in, cut where a part ends), hashed piece by piece, not joined first.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn push_detached_frame(
        &mut self,
        pieces: &[&[u8]],
        dst: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        let payload: usize = pieces.iter().map(|piece| piece.len()).sum();
        debug_assert!(payload <= self.frame_size);
        if payload == 0 {
            return self.check_not_finished();
        }
        let len = self.message_len_with(payload)?;
        self.prepare(1, HEADER_LEN, dst)?;
        let mut crc = crc32fast::Hasher::new();
        for piece in pieces {
            crc.update(piece);
            self.hasher.update(piece);
        }
        let header = crate::frame::FrameHeader {
            kind: FrameKind::Data.to_byte(),
            sequence: self.take_sequence(),
            len: u32::try_from(payload).expect("a frame's payload fits its length field"),
            payload_crc: crc.finalize(),
        };
        dst.extend_from_slice(&header.to_bytes());
        self.message_len = len;
        self.state = State::InMessage;
        Ok(())
    }

    /// [`push`](Self::push), writing the DATA frames' payloads only if `payloads` (otherwise
    /// their headers alone: the compatible SSE mapping carries the bytes in an event, SPEC.md §18).
    fn push_frames(
        &mut self,
        chunk: &[u8],
        dst: &mut BytesMut,
        payloads: bool,
    ) -> Result<(), EncodeError> {
        if chunk.is_empty() {
            return self.check_not_finished();
        }
        let frames = chunk.len().div_ceil(self.frame_size);
        let len = self.message_len_with(chunk.len())?;
        let inline = if payloads { chunk.len() } else { 0 };
        self.prepare(frames as u64, inline + frames * HEADER_LEN, dst)?;
        if frames == 1 {
            // One frame (a token, a small message): straight-line code, which the compiler
            // inlines whole (a loop of one here cost ~8% of the per-frame instructions).
            self.write_data(chunk, dst, payloads);
            self.hasher.update(chunk);
        } else {
            for piece in chunk.chunks(self.frame_size) {
                self.write_data(piece, dst, payloads);
                // Frame by frame, while the piece is in cache from its CRC and copy.
                self.hasher.update(piece);
            }
        }
        self.message_len = len;
        self.state = State::InMessage;
        Ok(())
    }

    /// The open message's length with `added` more bytes, within the message limit (a finished
    /// stream is refused first).
    #[inline(always)]
    fn message_len_with(&self, added: usize) -> Result<u64, EncodeError> {
        let len = self.message_len + added as u64;
        if len > self.max_message_size {
            self.check_not_finished()?;
            return Err(EncodeError::MessageTooLarge {
                len,
                max: self.max_message_size,
            });
        }
        Ok(len)
    }

    /// Writes one DATA frame carrying `piece` (its header alone without `payloads`).
    #[inline(always)]
    fn write_data(&mut self, piece: &[u8], dst: &mut BytesMut, payloads: bool) {
        let sequence = self.take_sequence();
        if payloads {
            write_frame(FrameKind::Data, sequence, piece, dst);
        } else {
            write_header(FrameKind::Data, sequence, piece, dst);
        }
    }

    /// Closes the current message with its length and SHA-256 (a MESSAGE_END frame). With no
    /// message open it writes an empty message.
    ///
    /// # Errors
    ///
    /// [`EncodeError::StreamFinished`] after the end, [`EncodeError::SequenceExhausted`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.push(b"{}", &mut wire)?;
    /// let summary = enc.finish_message(&mut wire)?;
    /// assert_eq!((summary.index, summary.len), (0, 2));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn finish_message(&mut self, dst: &mut BytesMut) -> Result<MessageSummary, EncodeError> {
        self.prepare(1, HEADER_LEN + MESSAGE_END_PAYLOAD_LEN as usize, dst)?;
        let end = MessageEnd {
            len: self.message_len,
            sha256: std::mem::take(&mut self.hasher).finalize().into(),
        };
        end.encode(self.take_sequence(), dst);
        let summary = MessageSummary {
            index: self.messages,
            len: end.len,
            sha256: end.sha256,
        };
        self.messages += 1;
        self.message_len = 0;
        self.state = State::BetweenMessages;
        Ok(summary)
    }

    /// Writes a whole message: [`push`](Self::push) then [`finish_message`](Self::finish_message).
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push); also [`EncodeError::MessageOpen`] if a message is already open
    /// (its bytes would be merged with these).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn message(
        &mut self,
        message: &[u8],
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, EncodeError> {
        self.message_frames(message, dst, true)
    }

    /// [`message`](Self::message) with the DATA frames' headers only, their payloads left out:
    /// the compatible SSE mapping carries the message in a `message` event (SPEC.md §18).
    #[cfg(feature = "sse")]
    pub(crate) fn message_detached(
        &mut self,
        message: &[u8],
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, EncodeError> {
        self.message_frames(message, dst, false)
    }

    fn message_frames(
        &mut self,
        message: &[u8],
        dst: &mut BytesMut,
        payloads: bool,
    ) -> Result<MessageSummary, EncodeError> {
        self.check_message(message.len())?;
        let frames = message.len().div_ceil(self.frame_size) + 1;
        let inline = if payloads { message.len() } else { 0 };
        let bytes = inline + frames * HEADER_LEN + MESSAGE_END_PAYLOAD_LEN as usize;
        self.prepare(frames as u64, bytes, dst)?;
        self.push_frames(message, dst, payloads)?;
        self.finish_message(dst)
    }

    /// Checks that a whole message of `len` bytes can be written now, as
    /// [`message`](Self::message) checks before it writes anything: no message open, within the
    /// limit, in the sequence space (its DATA frames and MESSAGE_END), the stream not finished.
    /// For a writer that then writes it in pieces ([`push`](Self::push)), so that a refusal
    /// still comes before any of its frames.
    pub(crate) fn check_message(&self, len: usize) -> Result<(), EncodeError> {
        if self.state == State::InMessage {
            return Err(EncodeError::MessageOpen);
        }
        self.check_not_finished()?;
        if len as u64 > self.max_message_size {
            return Err(EncodeError::MessageTooLarge {
                len: len as u64,
                max: self.max_message_size,
            });
        }
        let head = u64::from(self.state == State::Fresh);
        let frames = len.div_ceil(self.frame_size) as u64 + 1;
        if self.frames + head + frames > SEQUENCE_SPACE {
            return Err(EncodeError::SequenceExhausted);
        }
        Ok(())
    }

    /// The DATA payload size: the largest piece one frame carries.
    #[cfg(feature = "http")]
    pub(crate) fn frame_size(&self) -> usize {
        self.frame_size
    }

    /// Serializes `value` as JSON and writes it as one message.
    ///
    /// # Errors
    ///
    /// [`EncodeError::Json`] if serialization fails; otherwise as [`message`](Self::message).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.json(&serde_json::json!({"jsonrpc": "2.0", "id": 7, "result": {"content": []}}), &mut wire)?;
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn json<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, EncodeError> {
        let bytes = serde_json::to_vec(value).map_err(EncodeError::Json)?;
        self.message(&bytes, dst)
    }

    /// Writes a KEEPALIVE frame (allowed anywhere, also inside a message).
    ///
    /// # Errors
    ///
    /// [`EncodeError::StreamFinished`] after the end, [`EncodeError::SequenceExhausted`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.keep_alive(&mut wire)?;
    /// assert_eq!(wire.len(), 52 + 20); // HEAD, then a bare header
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn keep_alive(&mut self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        self.prepare(1, HEADER_LEN, dst)?;
        let sequence = self.take_sequence();
        write_frame(FrameKind::KeepAlive, sequence, &[], dst);
        Ok(())
    }

    /// Ends the stream with the STREAM_END sentinel.
    ///
    /// # Errors
    ///
    /// [`EncodeError::MessageOpen`] if a message is open (finish it, or abort the stream),
    /// [`EncodeError::StreamFinished`] if already ended.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{EncodeError, StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.push(b"{", &mut wire)?;
    /// assert!(matches!(enc.end(&mut wire), Err(EncodeError::MessageOpen)));
    /// # Ok::<(), EncodeError>(())
    /// ```
    pub fn end(&mut self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        if self.state == State::InMessage {
            return Err(EncodeError::MessageOpen);
        }
        self.prepare(1, HEADER_LEN + STREAM_END_PAYLOAD_LEN as usize, dst)?;
        let end = StreamEnd {
            messages: self.messages,
        };
        end.encode(self.take_sequence(), dst);
        self.state = State::Finished;
        Ok(())
    }

    /// Aborts the stream: an ABORT frame with a code and reason. Any open message is discarded by
    /// the receiver. Allowed at any point before the end.
    ///
    /// # Errors
    ///
    /// [`EncodeError::AbortReasonTooLong`] for a reason over
    /// `MAX_ABORT_REASON_LEN` bytes,
    /// [`EncodeError::StreamFinished`] if already ended.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{AbortCode, StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.push(b"{\"partial", &mut wire)?;
    /// enc.abort(AbortCode::UpstreamFailed, "model backend went away", &mut wire)?;
    /// // The stream is over: nothing more can be written.
    /// assert!(matches!(enc.end(&mut wire), Err(mcp_framing::EncodeError::StreamFinished)));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn abort(
        &mut self,
        code: AbortCode,
        reason: &str,
        dst: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        if reason.len() > MAX_ABORT_REASON_LEN {
            return Err(EncodeError::AbortReasonTooLong { len: reason.len() });
        }
        self.prepare(1, HEADER_LEN + 2 + reason.len(), dst)?;
        Abort::new(code, reason).encode(self.take_sequence(), dst);
        self.state = State::Finished;
        Ok(())
    }

    /// Aborts with an [`Abort`] value. See [`abort`](Self::abort).
    ///
    /// # Errors
    ///
    /// As [`abort`](Self::abort).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Abort, AbortCode, StreamEncoder, StreamHead};
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// enc.abort_with(&Abort::new(AbortCode::Cancelled, ""), &mut bytes::BytesMut::new())?;
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    // Hidden: the same as `abort(code, reason)`, for the callers that hold an `Abort` already (the layers, the CLI).
    #[doc(hidden)]
    pub fn abort_with(&mut self, abort: &Abort, dst: &mut BytesMut) -> Result<(), EncodeError> {
        self.abort(abort.code, &abort.reason, dst)
    }

    fn check_not_finished(&self) -> Result<(), EncodeError> {
        if self.state == State::Finished {
            Err(EncodeError::StreamFinished)
        } else {
            Ok(())
        }
    }

    /// Checks that `frames` more frames (plus HEAD if unwritten) fit the sequence space, reserves
    /// room for them and writes HEAD if needed. Writes nothing on error.
    fn prepare(
        &mut self,
        frames: u64,
        bytes: usize,
        dst: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        self.check_not_finished()?;
        let head = u64::from(self.state == State::Fresh);
        if self.frames + head + frames > SEQUENCE_SPACE {
            return Err(EncodeError::SequenceExhausted);
        }
        if head == 1 {
            dst.reserve(bytes + HEADER_LEN + HEAD_PAYLOAD_LEN as usize);
            self.head.encode(dst);
            self.take_sequence();
            self.state = State::BetweenMessages;
        } else {
            dst.reserve(bytes);
        }
        Ok(())
    }

    /// The sequence number of the next frame, counted as written.
    #[inline]
    fn take_sequence(&mut self) -> u32 {
        let sequence = self.next_sequence;
        self.next_sequence = sequence.wrapping_add(1);
        self.frames += 1;
        sequence
    }
}
