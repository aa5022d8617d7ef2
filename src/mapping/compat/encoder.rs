//! The compatible mapping's encoder (SPEC.md §18): each message as a standard `message` event,
//! the frames around it in records.

use bytes::{BufMut, BytesMut};

use crate::encoder::StreamEncoder;
use crate::error::EncodeError;
use crate::event::MessageSummary;
use crate::frame::AbortCode;
use crate::mapping::sse::put_base64;
#[cfg(feature = "rmcp-server")]
use crate::mapping::sse::Parts;

use super::record::{RECORD_OVERHEAD, RECORD_PREFIX};

/// Why a [`CompatEncoder`] refused to write (it wrote nothing then).
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::sse_compat::{CompatEncodeError, CompatEncoder};
/// use mcp_framing::{StreamEncoder, StreamHead};
/// let mut enc = CompatEncoder::new(StreamEncoder::new(StreamHead::for_request(None)));
/// let err = enc.message(b"{\r\n}", &mut bytes::BytesMut::new()).unwrap_err();
/// assert!(matches!(err, CompatEncodeError::CarriageReturn { at: 1 }));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompatEncodeError {
    /// The frame layer refused (the stream ended, a message over the limit, ...).
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The message is not UTF-8: SSE would replace the invalid bytes, so the event could not
    /// carry it unchanged.
    #[error("message is not UTF-8 (valid up to byte {valid_up_to}): an SSE event cannot carry it")]
    NotUtf8 {
        /// Length of the valid UTF-8 prefix.
        valid_up_to: usize,
    },
    /// The message contains a CR: SSE reads it as a line break, so the event could not carry it
    /// unchanged.
    #[error("message contains a carriage return at byte {at}: an SSE event cannot carry it")]
    CarriageReturn {
        /// Offset of the first CR.
        at: usize,
    },
    /// The message is empty: SSE does not dispatch an event without data.
    #[error("an empty message cannot be carried by an SSE event")]
    EmptyMessage,
}

/// Writes a response in the compatible SSE mapping (the server side, SPEC.md §18.4).
///
/// Each message becomes one record (its DATA headers and MESSAGE_END, with HEAD before the first
/// message and STREAM_END after the last one when known) followed by one `message` event
/// carrying the message unchanged. The frame layer under it is a [`StreamEncoder`]: its frame
/// size and message limit apply.
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::internals::sse_compat::CompatEncoder;
/// use mcp_framing::{AbortCode, StreamEncoder, StreamHead};
///
/// let mut enc = CompatEncoder::new(StreamEncoder::new(StreamHead::for_request(None)));
/// let mut body = BytesMut::new();
/// enc.message(br#"{"jsonrpc":"2.0","method":"notifications/message"}"#, &mut body)?;
/// enc.abort(AbortCode::UpstreamFailed, "tool backend went away", &mut body)?;
/// assert!(enc.end(&mut BytesMut::new()).is_err()); // the stream is finished
/// let lines: Vec<&[u8]> = body[..].split(|&b| b == b'\n').collect();
/// assert!(lines[0].starts_with(b":mcp-framing ")); // HEAD, DATA header, MESSAGE_END
/// assert!(lines[1].starts_with(b"data: {"));       // the message event
/// assert!(lines[3].starts_with(b":mcp-framing ")); // ABORT
/// # Ok::<(), mcp_framing::internals::sse_compat::CompatEncodeError>(())
/// ```
#[derive(Debug)]
pub struct CompatEncoder {
    encoder: StreamEncoder,
    frames: BytesMut,
    /// The bytes of a message given in pieces ([`push`](Self::push)), written at its end.
    message: BytesMut,
}


/// The record of a message begun before the message is whole (the layer passing a long
/// upstream event through, SPEC.md §18.4, reads its data line as it arrives): its DATA frames'
/// headers are written, and their CRC-32 and the message's SHA-256 computed, as the bytes come,
/// on a copy of the frame encoder that [`CompatEncoder::close_record`] takes over once the
/// message is whole and accepted; dropped, it leaves the encoder as it was (a message then
/// refused is never in the stream, nor are its frames' sequence numbers).
#[cfg(feature = "rmcp-server")]
#[derive(Debug)]
pub(crate) struct OpenRecord {
    encoder: StreamEncoder,
    frames: BytesMut,
    /// Bytes of the message pushed.
    len: usize,
}

#[cfg(feature = "rmcp-server")]
impl OpenRecord {
    /// The next bytes of the message (DATA frames of the encoder's frame size at most).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<(), CompatEncodeError> {
        self.encoder.push_detached(bytes, &mut self.frames)?;
        self.len += bytes.len();
        Ok(())
    }

    /// The next bytes of the message as the `pieces` they lie in (the parts of the reads they
    /// came in): frames of the encoder's frame size, as [`push`](Self::push) of the bytes
    /// joined would write, a frame cut where a piece ends hashed from both pieces (the bytes
    /// are not joined). `len` bytes are taken from the pieces.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn push_pieces<'a>(
        &mut self,
        pieces: impl Iterator<Item = &'a [u8]>,
        len: usize,
    ) -> Result<(), CompatEncodeError> {
        let frame = self.encoder.frame_size();
        let mut left = len;
        // A frame begun at the end of a piece: its pieces so far and their length.
        let mut open: Vec<&[u8]> = Vec::new();
        let mut open_len = 0;
        for piece in pieces {
            let mut piece = &piece[..piece.len().min(left)];
            left -= piece.len();
            if open_len > 0 {
                let (first, rest) = piece.split_at(piece.len().min(frame - open_len));
                open.push(first);
                open_len += first.len();
                piece = rest;
                if open_len == frame || left == 0 && piece.is_empty() {
                    self.encoder.push_detached_frame(&open, &mut self.frames)?;
                    self.len += open_len;
                    open.clear();
                    open_len = 0;
                }
            }
            // The whole frames in the piece, in place; the rest begins a frame.
            let whole = if left == 0 {
                piece.len()
            } else {
                piece.len() / frame * frame
            };
            self.push(&piece[..whole])?;
            if whole < piece.len() {
                open.push(&piece[whole..]);
                open_len += piece.len() - whole;
            }
            if left == 0 {
                break;
            }
        }
        if open_len > 0 {
            self.encoder.push_detached_frame(&open, &mut self.frames)?;
            self.len += open_len;
        }
        Ok(())
    }

    /// Bytes of the message pushed.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl CompatEncoder {
    /// An encoder writing the frames of `encoder` (its head, frame size and message limit).
    ///
    /// # Examples
    ///
    /// See [`CompatEncoder`].
    #[must_use]
    pub fn new(encoder: StreamEncoder) -> Self {
        Self {
            encoder,
            frames: BytesMut::new(),
            message: BytesMut::new(),
        }
    }

    /// The frame encoder underneath (head, messages written, whether finished).
    #[must_use]
    pub(crate) fn encoder(&self) -> &StreamEncoder {
        &self.encoder
    }

    /// Whether a message given in pieces is open ([`push`](Self::push) without
    /// [`finish_message`](Self::finish_message)).
    #[must_use]
    pub(crate) fn in_message(&self) -> bool {
        !self.message.is_empty()
    }

    /// Appends `chunk` to the current message, which is written (record and event) by
    /// [`finish_message`](Self::finish_message): an SSE event is dispatched whole, so a message
    /// cannot be sent before its last byte is known. The message is buffered here, within the
    /// frame encoder's message limit.
    ///
    /// # Errors
    ///
    /// [`CompatEncodeError::Encode`] with [`EncodeError::MessageTooLarge`] past the limit (abort
    /// the stream then), or [`EncodeError::StreamFinished`]. Nothing is buffered on error.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<(), CompatEncodeError> {
        self.check_push(chunk.len())?;
        self.message.extend_from_slice(chunk);
        Ok(())
    }

    /// The checks of [`push`](Self::push) for `len` more bytes: the stream not finished, the
    /// message within the limit.
    pub(crate) fn check_push(&self, len: usize) -> Result<(), CompatEncodeError> {
        if self.encoder.is_finished() {
            return Err(EncodeError::StreamFinished.into());
        }
        let len = (self.message.len() + len) as u64;
        let max = self.encoder.max_message_size();
        if len > max {
            return Err(EncodeError::MessageTooLarge { len, max }.into());
        }
        Ok(())
    }

    /// Writes the message given in pieces by [`push`](Self::push), as
    /// [`message`](Self::message) does.
    ///
    /// # Errors
    ///
    /// As [`message`](Self::message); [`CompatEncodeError::EmptyMessage`] if nothing was pushed.
    /// The pushed bytes are dropped on error.
    pub(crate) fn finish_message(
        &mut self,
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, CompatEncodeError> {
        self.finish_pushed(false, dst)
    }

    /// [`finish_message`](Self::finish_message) for the last message of the stream: its record
    /// also carries the STREAM_END sentinel, as with [`final_message`](Self::final_message).
    ///
    /// # Errors
    ///
    /// As [`finish_message`](Self::finish_message).
    pub(crate) fn finish_final_message(
        &mut self,
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, CompatEncodeError> {
        self.finish_pushed(true, dst)
    }

    fn finish_pushed(
        &mut self,
        end: bool,
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, CompatEncodeError> {
        let message = self.message.split();
        self.record_and_event(&message, end, dst)
    }

    /// Writes a record carrying a KEEPALIVE frame (and HEAD, if nothing was written): a comment
    /// line to a stock client, traffic that keeps intermediaries from timing out, and a frame to
    /// a framing client, whose idle timeout it restarts (SPEC.md §18.4). Allowed while a message
    /// is given in pieces: nothing of it has been written yet, so the frame is between messages.
    ///
    /// # Errors
    ///
    /// [`CompatEncodeError::Encode`] as [`StreamEncoder::keep_alive`].
    pub(crate) fn keep_alive(&mut self, dst: &mut BytesMut) -> Result<(), CompatEncodeError> {
        self.record(dst, StreamEncoder::keep_alive)
    }

    /// Writes `message` as a record and the `message` event that carries it.
    ///
    /// # Errors
    ///
    /// [`CompatEncodeError::NotUtf8`], [`CompatEncodeError::CarriageReturn`],
    /// [`CompatEncodeError::EmptyMessage`] for a message an SSE event cannot carry unchanged
    /// (abort the stream then); [`CompatEncodeError::Encode`] as
    /// [`StreamEncoder::message`]. Nothing is written on error.
    ///
    /// # Examples
    ///
    /// See [`CompatEncoder`].
    pub fn message(
        &mut self,
        message: &[u8],
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, CompatEncodeError> {
        self.record_and_event(message, false, dst)
    }

    /// Writes the last message of the stream: its record also carries the STREAM_END sentinel,
    /// so the stream is complete once the event has arrived.
    ///
    /// # Errors
    ///
    /// As [`message`](Self::message).
    ///
    /// # Examples
    ///
    /// See [`CompatEncoder`].
    pub fn final_message(
        &mut self,
        message: &[u8],
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, CompatEncodeError> {
        self.record_and_event(message, true, dst)
    }

    /// A message's record (with STREAM_END if `end`), then its event.
    fn record_and_event(
        &mut self,
        message: &[u8],
        end: bool,
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, CompatEncodeError> {
        let summary = self.message_record(message, end, dst)?;
        write_message_event(message, dst);
        Ok(summary)
    }

    /// Writes only the record of a message whose event the caller writes itself, right after
    /// it: e.g. a layer that passes an upstream server's `message` event through unchanged.
    /// `data` is the event's data as an SSE parser dispatches it (lines joined with LF); with
    /// `end`, the record also carries the STREAM_END sentinel.
    ///
    /// # Errors
    ///
    /// As [`message`](Self::message).
    pub(crate) fn message_record(
        &mut self,
        data: &[u8],
        end: bool,
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, CompatEncodeError> {
        self.checked_record(data, check_event_data, end, dst)
    }

    /// [`message_record`](Self::message_record) for data an SSE parser dispatched (UTF-8 with
    /// replacement, its lines joined with LF): of the checks of SPEC.md §18.3 only the one for an
    /// empty message is made; the UTF-8 validation and the search for a CR, passes over the whole
    /// message, are not repeated (a CR ends an SSE line, so none is in a line's value; issue 21).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn text_message_record(
        &mut self,
        data: &[u8],
        end: bool,
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, CompatEncodeError> {
        debug_assert!(
            std::str::from_utf8(data).is_ok() && memchr::memchr(b'\r', data).is_none(),
            "an SSE parser's data is UTF-8 without a CR"
        );
        self.checked_record(data, check_not_empty, end, dst)
    }

    /// A record of the next message begun before the message is whole ([`OpenRecord`]).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn open_record(&self) -> OpenRecord {
        OpenRecord {
            encoder: self.encoder.clone(),
            frames: BytesMut::new(),
            len: 0,
        }
    }

    /// [`text_message_record`](Self::text_message_record) of a message whose first bytes went
    /// into `open` as they arrived: `rest` is the rest of it. The encoder takes over `open`'s
    /// state (the frames and the digest written into it).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn close_record(
        &mut self,
        mut open: OpenRecord,
        rest: &Parts,
        end: bool,
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, CompatEncodeError> {
        if self.in_message() {
            return Err(EncodeError::MessageOpen.into());
        }
        if open.len == 0 && rest.is_empty() {
            return Err(CompatEncodeError::EmptyMessage);
        }
        open.push_pieces(rest.pieces(), rest.len())?;
        let summary = open.encoder.finish_message(&mut open.frames)?;
        if end {
            open.encoder.end(&mut open.frames)?;
        }
        self.encoder = open.encoder;
        write_record(&open.frames, dst);
        Ok(summary)
    }

    /// Writes the record of `data` once `check` accepted it.
    fn checked_record(
        &mut self,
        data: &[u8],
        check: impl FnOnce(&[u8]) -> Result<(), CompatEncodeError>,
        end: bool,
        dst: &mut BytesMut,
    ) -> Result<MessageSummary, CompatEncodeError> {
        if self.in_message() {
            return Err(EncodeError::MessageOpen.into());
        }
        check(data)?;
        self.frames.clear();
        let summary = self.encoder.message_detached(data, &mut self.frames)?;
        if end {
            // Cannot fail: the message was just finished and the sequence space checked for
            // it; a failure here would leave the stream open, which the receiver reports.
            self.encoder.end(&mut self.frames)?;
        }
        write_record(&self.frames, dst);
        Ok(summary)
    }

    /// Ends the stream with a record carrying STREAM_END (and HEAD, if nothing was written).
    ///
    /// # Errors
    ///
    /// [`CompatEncodeError::Encode`] as [`StreamEncoder::end`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::sse_compat::CompatEncoder;
    /// use mcp_framing::{StreamEncoder, StreamHead};
    /// let mut enc = CompatEncoder::new(StreamEncoder::new(StreamHead::for_request(None)));
    /// let mut body = bytes::BytesMut::new();
    /// enc.end(&mut body)?; // a stream without messages: one record, HEAD and STREAM_END
    /// assert_eq!(body.len(), 13 + 108 + 1);
    /// # Ok::<(), mcp_framing::internals::sse_compat::CompatEncodeError>(())
    /// ```
    pub fn end(&mut self, dst: &mut BytesMut) -> Result<(), CompatEncodeError> {
        if self.in_message() {
            return Err(EncodeError::MessageOpen.into());
        }
        self.record(dst, StreamEncoder::end)
    }

    /// Aborts the stream with a record carrying ABORT (and HEAD, if nothing was written).
    ///
    /// # Errors
    ///
    /// [`CompatEncodeError::Encode`] as [`StreamEncoder::abort`].
    ///
    /// # Examples
    ///
    /// See [`CompatEncoder`].
    pub fn abort(
        &mut self,
        code: AbortCode,
        reason: &str,
        dst: &mut BytesMut,
    ) -> Result<(), CompatEncodeError> {
        self.record(dst, |encoder, frames| encoder.abort(code, reason, frames))?;
        self.message.clear();
        Ok(())
    }

    /// Writes a record of the frames `write` has the frame encoder write; nothing on error.
    fn record(
        &mut self,
        dst: &mut BytesMut,
        write: impl FnOnce(&mut StreamEncoder, &mut BytesMut) -> Result<(), EncodeError>,
    ) -> Result<(), CompatEncodeError> {
        self.frames.clear();
        write(&mut self.encoder, &mut self.frames)?;
        write_record(&self.frames, dst);
        Ok(())
    }
}

/// Checks that an SSE event carries `data` unchanged (SPEC.md §18.3): UTF-8, no CR, not empty.
fn check_event_data(data: &[u8]) -> Result<(), CompatEncodeError> {
    match simdutf8::compat::from_utf8(data) {
        Ok(text) => check_event_text(text),
        Err(err) => Err(CompatEncodeError::NotUtf8 {
            valid_up_to: err.valid_up_to(),
        }),
    }
}

/// [`check_event_data`] for text: not empty, no CR.
fn check_event_text(text: &str) -> Result<(), CompatEncodeError> {
    check_not_empty(text.as_bytes())?;
    match memchr::memchr(b'\r', text.as_bytes()) {
        Some(at) => Err(CompatEncodeError::CarriageReturn { at }),
        None => Ok(()),
    }
}

/// An event carries a message: it is not empty (SPEC.md §18.3).
fn check_not_empty(data: &[u8]) -> Result<(), CompatEncodeError> {
    if data.is_empty() {
        return Err(CompatEncodeError::EmptyMessage);
    }
    Ok(())
}

/// Writes a record line carrying `frames` (SPEC.md §18.2).
fn write_record(frames: &[u8], dst: &mut BytesMut) {
    let start = dst.len();
    let text_len = frames.len().div_ceil(3) * 4;
    dst.reserve(RECORD_OVERHEAD + text_len);
    dst.put_slice(RECORD_PREFIX.as_bytes());
    put_base64(frames, dst);
    debug_assert_eq!(dst.len(), start + RECORD_PREFIX.len() + text_len);
    dst.put_u8(b'\n');
}

/// Writes a `message` event carrying `message` (checked by [`check_event_data`]): one `data: `
/// line per LF-separated piece, then the blank line (SPEC.md §18.3).
fn write_message_event(message: &[u8], dst: &mut BytesMut) {
    // Room for a one-line message (a compact JSON text); a line more grows it as it comes, so
    // that the message is looked at once.
    dst.reserve(message.len() + 8);
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', message).chain([message.len()]) {
        dst.put_slice(b"data: ");
        dst.put_slice(&message[start..end]);
        dst.put_u8(b'\n');
        start = end + 1;
    }
    dst.put_u8(b'\n');
}

#[cfg(all(test, feature = "rmcp-server"))]
mod tests {
    use bytes::Bytes;
    use proptest::prelude::*;

    use super::*;
    use crate::frame::StreamHead;

    #[test]
    fn an_upstream_event_passed_through_after_its_record_decodes_clean() {
        // rmcp writes `data: ...` then `id: ...`; a layer passes those bytes through unchanged.
        let data = br#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#;
        let key = crate::RequestKey::random();
        let head = StreamHead::for_request(Some(key));
        let mut enc = CompatEncoder::new(StreamEncoder::builder().frame_size(8).build(head));
        let mut body = BytesMut::new();
        body.extend_from_slice(b"data: \nid: 0\nretry: 3000\n\n"); // a priming event
        enc.message_record(data, true, &mut body).unwrap();
        assert!(enc.encoder().is_finished());
        body.extend_from_slice(b"data: ");
        body.extend_from_slice(data);
        body.extend_from_slice(b"\nid: 1\n\n");
        body.extend_from_slice(b":\n\n"); // rmcp's keep-alive
        assert_eq!(decode_clean(&body, key), [&data[..]]);
    }

    #[test]
    fn a_keep_alive_first_is_one_comment_record_with_the_head_and_the_keepalive_frame() {
        let mut enc = CompatEncoder::new(StreamEncoder::new(StreamHead::for_request(None)));
        let mut body = BytesMut::new();
        enc.keep_alive(&mut body).unwrap(); // HEAD (52 bytes) and KEEPALIVE (20)
        assert!(body.starts_with(b":mcp-framing n00BA"));
        assert_eq!(body.len(), 13 + 96 + 1);
    }

    /// The messages of `body`, a compatible body for `key` that must end clean (its sentinel).
    fn decode_clean(body: &[u8], key: crate::RequestKey) -> Vec<Bytes> {
        let mut frames = BytesMut::new();
        let mut decoder = super::super::CompatDecoder::new();
        decoder.feed(body, &mut frames).unwrap();
        decoder.finish();
        let decoded = crate::StreamDecoder::builder()
            .expect_request_key(key)
            .build()
            .decode_all(&frames)
            .unwrap();
        assert!(decoded.summary.sentinel_seen);
        decoded.messages.iter().map(|m| m.bytes().clone()).collect()
    }

    #[test]
    fn messages_an_event_cannot_carry_unchanged_are_refused_and_nothing_is_written() {
        let key = crate::RequestKey::random();
        let head = StreamHead::for_request(Some(key));
        let mut enc = CompatEncoder::new(StreamEncoder::builder().frame_size(16).build(head));
        assert_eq!(enc.encoder().head(), head);
        let mut body = BytesMut::new();
        assert!(matches!(
            enc.message(b"{\"a\":\"\xff\"}", &mut body),
            Err(CompatEncodeError::NotUtf8 { valid_up_to: 6 })
        ));
        assert!(matches!(
            enc.message(b"{\r\n}", &mut body),
            Err(CompatEncodeError::CarriageReturn { at: 1 })
        ));
        assert!(matches!(
            enc.message(b"", &mut body),
            Err(CompatEncodeError::EmptyMessage)
        ));
        assert!(body.is_empty());
        assert_eq!(enc.encoder().messages(), 0);
        enc.final_message(b"{}", &mut body).unwrap();
        assert!(matches!(
            enc.message(b"{}", &mut body),
            Err(CompatEncodeError::Encode(EncodeError::StreamFinished))
        ));
        assert_eq!(decode_clean(&body, key), [&b"{}"[..]]);
    }

    #[test]
    fn a_message_pushed_in_pieces_is_written_whole_when_finished() {
        let mut enc = CompatEncoder::new(StreamEncoder::new(StreamHead::for_request(None)));
        let mut body = BytesMut::new();
        for token in ["{\"jsonrpc\":\"2.0\",", "\"id\":1,\"result\":{}}"] {
            enc.push(token.as_bytes()).unwrap(); // as a producer streams them
        }
        assert!(enc.in_message() && body.is_empty());
        enc.finish_message(&mut body).unwrap();
        assert!(body.ends_with(b"\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"));
    }

    #[test]
    fn a_pushed_message_finished_as_the_final_one_finishes_the_stream() {
        let mut enc = CompatEncoder::new(StreamEncoder::new(StreamHead::for_request(None)));
        let mut body = BytesMut::new();
        enc.push(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap();
        enc.finish_final_message(&mut body).unwrap();
        assert!(enc.encoder().is_finished());
    }

    proptest! {
        #[test]
        fn a_record_begun_from_the_parts_a_message_came_in_is_the_record_of_the_message_whole(
            len in 1usize..50_000,
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
            frame in prop::sample::select(vec![1024usize, 4096, 16 * 1024]),
            begun in any::<prop::sample::Index>(),
        ) {
            let message: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let head = StreamHead::for_request(None);
            let encoder = StreamEncoder::builder().frame_size(frame).build(head);
            let mut expected = BytesMut::new();
            CompatEncoder::new(encoder.clone())
                .text_message_record(&message, true, &mut expected)
                .unwrap();
            // The message as the parts of the reads it came in, cut at `cuts`; its first
            // `begun` bytes (whole frames) hashed as they arrived, the rest at its end.
            let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(len + 1)).collect();
            cuts.sort_unstable();
            let shared = Bytes::from(message);
            let ends = cuts.iter().copied().chain(Some(len));
            let starts = Some(0).into_iter().chain(cuts.iter().copied());
            let parts = Parts::from_buffers(starts.zip(ends).map(|(a, b)| shared.slice(a..b)));
            let begun = begun.index(len + 1) / frame * frame;
            let mut pieces = CompatEncoder::new(encoder);
            let mut open = pieces.open_record();
            open.push_pieces(parts.pieces(), begun).unwrap();
            prop_assert_eq!(open.len(), begun);
            let mut written = BytesMut::new();
            pieces
                .close_record(open, &parts.split_off(begun), true, &mut written)
                .unwrap();
            prop_assert_eq!(written, expected);
        }
    }
}
