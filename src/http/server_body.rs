//! The server body: a framed response built from a stream of [`Outgoing`] items.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_core::Stream;

use crate::encoder::StreamEncoder;
use crate::event::AbortCode;
use crate::mapping::Mapping;
#[cfg(feature = "rmcp-server")]
use crate::mapping::compat::OpenRecord;
use crate::mapping::compat::CompatEncodeError;
use crate::mapping::encoder::MappingEncoder;
#[cfg(feature = "rmcp-server")]
use crate::mapping::sse::Parts;
use crate::outgoing::Outgoing;

/// The frames a [`FramedBody`] gathers from several ready items before it hands them out.
const CHUNK_TARGET: usize = 64 * 1024;

/// The pieces of a larger message after its first (of [`CHUNK_TARGET`], so that the transfer
/// starts as early as before): small enough that the client verifies a piece while the next is
/// hashed (the pipeline of issue 21), large enough that the HTTP server writes a 1 MiB message
/// in 5 writes rather than 16 (each write wakes the client, and its loopback delivery is charged
/// to the server).
const PIECE_TARGET: usize = 256 * 1024;

/// Bytes passed on unchanged at least this long go out as they came (no copy); shorter ones are
/// copied into the chunk being built, so that a small event leaves as one piece.
#[cfg(feature = "rmcp-server")]
const PASS_AS_IS: usize = 4096;

/// What a [`FramedBody`] writes: an [`Outgoing`] item, or what a layer passing an upstream SSE
/// body through in the compatible mapping hands on (SPEC.md §18.4).
pub(crate) enum Item {
    Out(Outgoing),
    /// Upstream bytes passed on unchanged.
    #[cfg(feature = "rmcp-server")]
    Passed(Bytes),
    /// An upstream `message` event passed on, after its record.
    #[cfg(feature = "rmcp-server")]
    Event(Box<PassedEvent>),
}

/// An upstream `message` event passed on: its record (begun as its data arrived, `record`, or
/// written from `data`, the event's data as an SSE parser dispatches it), with the STREAM_END
/// sentinel if `last`, then its `lines` unchanged. A record refused (a message over the limit,
/// ...) ends the body with the ABORT it calls for, without the event.
#[cfg(feature = "rmcp-server")]
pub(crate) struct PassedEvent {
    pub(crate) record: Option<OpenRecord>,
    pub(crate) data: Parts,
    pub(crate) last: bool,
    pub(crate) lines: Vec<Bytes>,
}

/// Hands `piece` on after `out` and `ready`: a short piece copied into `out`, a long one as it
/// is, after what `out` held.
#[cfg(feature = "rmcp-server")]
fn pass(out: &mut BytesMut, ready: &mut VecDeque<Bytes>, piece: Bytes) {
    if piece.len() < PASS_AS_IS {
        out.extend_from_slice(&piece);
    } else {
        if !out.is_empty() {
            ready.push_back(out.split().freeze());
        }
        ready.push_back(piece);
    }
}

/// `first` and the bytes passed on queued after it, handed on as [`pass`] does: a long piece as
/// it is, short ones joined up to the next long one.
#[cfg(feature = "rmcp-server")]
pub(crate) fn gather(first: Bytes, queue: &mut VecDeque<Item>) -> Bytes {
    if first.len() >= PASS_AS_IS {
        return first;
    }
    let mut out = BytesMut::from(first.as_ref());
    while let Some(Item::Passed(next)) = queue.front() {
        if next.len() >= PASS_AS_IS {
            break;
        }
        out.extend_from_slice(next);
        queue.pop_front();
    }
    out.freeze()
}

/// A framed response body built from a stream of [`Outgoing`] items (server side).
///
/// An `Err` from the source becomes an ABORT frame (code internal error, reason the error's
/// text); the end of the source becomes the STREAM_END sentinel, or an ABORT if the producer left
/// a message open; an item the encoder refuses (e.g. a message over the limit) becomes an ABORT
/// with the matching code. After the terminal frame the body ends; it never fails, so a client
/// always gets an explicit ending.
///
/// Each chunk holds everything that is ready (several items up to about 64 KiB): the HEAD frame
/// goes out with the first item, the DATA frames of a message with its MESSAGE_END, and the
/// sentinel with the last message when the source ends at once. A chunk is handed out as soon as
/// the source has nothing more ready, so a streamed response stays live; and since small writes
/// come together, a server with Nagle's algorithm on (`axum::serve` as is) does not stall a
/// response behind a delayed ACK.
///
/// A whole message larger than that (binary and SSE mappings) is written in pieces, about 64 KiB
/// first and about 256 KiB each after it, each handed out as soon as its frames are hashed, and
/// the body lets its task yield once before the next piece, so that the HTTP server writes the
/// piece to the socket first: the client receives and verifies the message while the rest of it
/// is hashed, and no buffer of the message's size is made. The message is checked whole first
/// (size, sequence space), so that a refusal still comes before any of its frames; the frames
/// are those [`MappingEncoder::message`] writes.
///
/// In the compatible SSE mapping (SPEC.md §18.4) each message is written whole, a record then a
/// `message` event, once its last byte is known; a finished message is held until the next item
/// is ready or the source has nothing ready, so that the last message's record also carries the
/// sentinel when the source ends at once; a keep-alive is a record with a KEEPALIVE frame.
///
/// # Examples
///
/// ```
/// use futures::{StreamExt, stream};
/// use mcp_framing::{http::FramedBody, mapping::Mapping};
/// use mcp_framing::{Outgoing, StreamDecoder, StreamEncoder, StreamHead};
///
/// # tokio_test::block_on(async {
/// let source = stream::iter([
///     Ok::<_, std::io::Error>(Outgoing::Message(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into())),
/// ]);
/// let body = FramedBody::new(source, StreamEncoder::new(StreamHead::for_request(None)), Mapping::Binary);
/// let chunks: Vec<_> = body.map(|chunk| chunk.unwrap()).collect().await;
/// assert_eq!(chunks.len(), 1); // HEAD, DATA, MESSAGE_END and STREAM_END in one write
/// let stream = StreamDecoder::new().decode_all(&chunks.concat()).unwrap();
/// assert_eq!(stream.messages.len(), 1); // and the sentinel was there
/// # });
/// ```
pub struct FramedBody<S> {
    source: S,
    /// Writes the body in its mapping (the choice of mapping, the ABORT for a refused item).
    encoder: MappingEncoder,
    /// Body bytes written and not handed out yet (the HEAD waits here for the first item).
    out: BytesMut,
    /// Pieces handed out before `out`: long upstream bytes passed on as they came.
    ready: VecDeque<Bytes>,
    /// An item was encoded: from now on a pending source flushes what is ready.
    started: bool,
    /// A whole message written in pieces: its bytes and how many were written.
    pieces: Option<(Bytes, usize)>,
    /// A piece of a message was handed out: the task yields before the next one.
    yield_next: bool,
    /// The encoder refused an item: the body ended with the ABORT it calls for.
    refused: bool,
    done: bool,
}

impl<S> fmt::Debug for FramedBody<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FramedBody")
            .field("mapping", &self.encoder.mapping())
            .field("buffered", &self.out.len())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<S> FramedBody<S> {
    /// A body that frames `source` with `encoder` in `mapping`.
    ///
    /// # Examples
    ///
    /// ```
    /// use futures::{StreamExt, stream};
    /// use mcp_framing::http::{FramedBody, OptIn, opt_in_headers};
    /// use mcp_framing::{BodyDecoder, Event, Outgoing, RequestKey, StreamDecoder, StreamEncoder};
    ///
    /// // The request opted in (without accepting the binary mapping): answer in its mapping, with its key.
    /// let key = RequestKey::random();
    /// let opt_in = OptIn::from_headers(&opt_in_headers(key, false)).unwrap().unwrap();
    /// # tokio_test::block_on(async {
    /// let source = stream::iter([
    ///     Ok::<_, std::io::Error>(Outgoing::Message(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into())),
    /// ]);
    /// let body = FramedBody::new(source, opt_in.encoder(StreamEncoder::builder()), opt_in.mapping());
    /// let bytes: Vec<u8> = body.map(|chunk| chunk.unwrap()).collect::<Vec<_>>().await.concat();
    /// assert!(bytes.starts_with(b"event: mcp-frame\n")); // the SSE mapping
    ///
    /// // What the client reads back: the message, verified, under the request's key.
    /// let mut client = BodyDecoder::new(opt_in.mapping(), StreamDecoder::builder().expect_request_key(key).build());
    /// client.feed(&bytes);
    /// client.finish();
    /// let mut messages = 0;
    /// while let Some(event) = client.next_event().unwrap() {
    ///     messages += usize::from(matches!(event, Event::Message(_)));
    /// }
    /// assert_eq!(messages, 1);
    /// # });
    /// ```
    pub fn new(source: S, encoder: StreamEncoder, mapping: Mapping) -> Self {
        Self {
            source,
            encoder: MappingEncoder::new(mapping, encoder),
            out: BytesMut::new(),
            ready: VecDeque::new(),
            started: false,
            pieces: None,
            yield_next: false,
            refused: false,
            done: false,
        }
    }

    /// The bytes of a message written at a time once `written` are: whole frames, about
    /// [`CHUNK_TARGET`] first, then about [`PIECE_TARGET`].
    fn piece_len(&self, written: usize) -> usize {
        let frame = self.encoder.frame_size();
        let target = if written == 0 {
            CHUNK_TARGET
        } else {
            PIECE_TARGET
        };
        (target / frame).max(1) * frame
    }

    /// Whether the `len` bytes of a message left once `written` are goes out in more than one
    /// piece: over a piece and a half (no short last piece), never in the compatible mapping,
    /// whose event carries a message whole.
    fn in_pieces(&self, len: usize, written: usize) -> bool {
        let piece = self.piece_len(written);
        self.encoder.mapping() != Mapping::Compat && len > piece + piece / 2
    }

    /// Writes the next piece of the message in pieces, and its MESSAGE_END after the last (the
    /// last piece takes what is left, up to a piece and a half).
    fn write_piece(&mut self) {
        let Some((message, written)) = self.pieces.take() else {
            return;
        };
        let end = if self.in_pieces(message.len() - written, written) {
            written + self.piece_len(written)
        } else {
            message.len()
        };
        let (encoder, dst) = (&mut self.encoder, &mut self.out);
        let mut result = encoder.push(&message[written..end], dst);
        if end == message.len() {
            result = result.and_then(|()| encoder.finish_message(dst));
        } else if result.is_ok() {
            self.pieces = Some((message, end));
        }
        self.settle(result);
    }

    fn abort(&mut self, code: AbortCode, reason: &str) {
        // Only fails if the stream already ended: then there is nothing more to write.
        let _written = self.encoder.abort(code, reason, &mut self.out).is_ok();
        self.done = true;
    }

    /// Writes a message held in the compatible mapping: its record without the sentinel.
    fn release(&mut self) {
        let result = self.encoder.flush(&mut self.out);
        self.settle(result);
    }

    fn write(&mut self, item: Item) {
        match item {
            Item::Out(item) => self.encode(item),
            #[cfg(feature = "rmcp-server")]
            Item::Passed(piece) => {
                self.started = true;
                pass(&mut self.out, &mut self.ready, piece);
            }
            #[cfg(feature = "rmcp-server")]
            Item::Event(event) => {
                let PassedEvent {
                    record,
                    data,
                    last,
                    lines,
                } = *event;
                self.started = true;
                let (encoder, dst) = (&mut self.encoder, &mut self.out);
                let written = match record {
                    // Begun as the data arrived: the rest of it is left to hash.
                    Some(record) => {
                        let rest = data.split_off(record.len());
                        encoder.passed_open_record(record, &rest, last, dst)
                    }
                    None => encoder.passed_message_record(&data.into_bytes(), last, dst),
                };
                match written {
                    // The body ends with the source (which may still pass the LF of the final
                    // event's CRLF).
                    Ok(()) => {
                        for line in lines {
                            pass(&mut self.out, &mut self.ready, line);
                        }
                    }
                    // The event is dropped: no message without its record.
                    Err(err) => self.settle(Err(err)),
                }
            }
        }
    }

    fn encode(&mut self, item: Outgoing) {
        self.started = true;
        if let Outgoing::Chunk(bytes) = &item {
            // A message sent on as it arrives: the chunk of frames is made in a buffer sized
            // once for a whole chunk, not grown item by item (each growth a copy of what it
            // holds: ~0.28 M instructions a 1 MiB message through the sidecar).
            let room = CHUNK_TARGET + CHUNK_TARGET / 2;
            if self.out.capacity() < room && bytes.len() < room {
                self.out.reserve(room - self.out.len());
            }
        }
        if let Outgoing::Message(bytes) = &item {
            if self.in_pieces(bytes.len(), 0) {
                // Written by `poll_next`, a piece at a time, once the whole message is checked.
                match self.encoder.check_message(bytes.len()) {
                    Ok(()) => self.pieces = Some((bytes.clone(), 0)),
                    Err(err) => self.settle(Err(err)),
                }
                return;
            }
        }
        let (encoder, dst) = (&mut self.encoder, &mut self.out);
        let result = match item {
            Outgoing::Chunk(bytes) => encoder.push(&bytes, dst),
            Outgoing::FinishMessage => encoder.finish_message(dst),
            Outgoing::Message(bytes) => encoder.message_shared(bytes, dst),
            Outgoing::KeepAlive => encoder.keep_alive(dst),
            // The last message held in the compatible mapping: its record carries the sentinel.
            Outgoing::End => encoder.end(dst),
            Outgoing::Abort(abort) => encoder.abort_with(&abort, dst),
        };
        self.settle(result);
    }

    /// Acts on an encoder's answer: finished, or the ABORT for a refused item (code 5 for a
    /// message over the limit).
    fn settle(&mut self, result: Result<(), CompatEncodeError>) {
        match result {
            Ok(()) => self.done = self.encoder.is_finished(),
            Err(err) => {
                self.encoder.fail(&err, &mut self.out);
                self.refused = true;
                self.done = true;
            }
        }
    }

    /// Whether the encoder refused an item (e.g. a message an SSE event cannot carry unchanged
    /// in the compatible mapping): the body ended with the ABORT in its place.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn refused(&self) -> bool {
        self.refused
    }
}

impl<S, E> Stream for FramedBody<S>
where
    S: Stream<Item = Result<Outgoing, E>> + Unpin,
    E: fmt::Display,
{
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.poll_framed(cx, |source, cx, _| {
            Pin::new(source)
                .poll_next(cx)
                .map(|item| item.map(|item| item.map(Item::Out)))
        })
    }
}

impl<S> FramedBody<S> {
    /// The next chunk of the body, the items coming from `poll_source` (given the source and
    /// the encoder, whose state a source may need to begin a message's record).
    pub(crate) fn poll_framed<E: fmt::Display>(
        &mut self,
        cx: &mut Context<'_>,
        mut poll_source: impl FnMut(
            &mut S,
            &mut Context<'_>,
            &MappingEncoder,
        ) -> Poll<Option<Result<Item, E>>>,
    ) -> Poll<Option<Result<Bytes, Infallible>>> {
        let this = self;
        if let Some(piece) = this.ready.pop_front() {
            return Poll::Ready(Some(Ok(piece)));
        }
        if std::mem::take(&mut this.yield_next) {
            // The piece handed out last goes to the socket before the next is hashed.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if !this.started && !this.done {
            // The HEAD, held until the first item (idempotent once written; in the compatible
            // mapping it goes in the first record).
            let _ = this.encoder.open(&mut this.out);
        }
        let mut extra_look = true;
        while !this.done {
            if this.pieces.is_some() {
                this.write_piece();
                if this.pieces.is_some() {
                    this.yield_next = true;
                    break;
                }
                // The last piece: the message's end, and the sentinel if the source ends now.
                continue;
            }
            if this.out.len() >= CHUNK_TARGET {
                // Over the target, one more look at the source when a message just ended: its
                // end (MESSAGE_END with STREAM_END) goes in the same chunk.
                if !extra_look || this.encoder.in_message() {
                    this.release();
                    break;
                }
                extra_look = false;
            }
            if !this.ready.is_empty() {
                // Upstream bytes passed on as they came: handed out before the source is read on.
                break;
            }
            match poll_source(&mut this.source, cx, &this.encoder) {
                Poll::Pending => {
                    // Nothing more is ready: a held message goes out now, without the sentinel.
                    this.release();
                    if this.out.is_empty() || !this.started {
                        return Poll::Pending;
                    }
                    break;
                }
                Poll::Ready(Some(Ok(item))) => this.write(item),
                Poll::Ready(Some(Err(err))) => {
                    this.abort(AbortCode::InternalError, &err.to_string());
                }
                // A source that passed its final event on: its record carried the sentinel.
                Poll::Ready(None) if this.encoder.is_finished() => this.done = true,
                Poll::Ready(None) if this.encoder.in_message() => this.abort(
                    AbortCode::InternalError,
                    "the producer ended inside a message",
                ),
                Poll::Ready(None) => {
                    this.encode(Outgoing::End);
                    this.done = true;
                }
            }
        }
        if let Some(piece) = this.ready.pop_front() {
            Poll::Ready(Some(Ok(piece)))
        } else if this.out.is_empty() {
            Poll::Ready(None)
        } else {
            Poll::Ready(Some(Ok(this.out.split().freeze())))
        }
    }
}

#[cfg(all(test, feature = "rmcp-server"))]
mod tests {
    use std::collections::VecDeque;

    use bytes::{Bytes, BytesMut};

    use super::{Item, PASS_AS_IS, gather, pass};

    #[test]
    fn bytes_passed_on_unframed_leave_in_the_chunks_a_framed_body_writes_them_in() {
        let short = |len| Bytes::from(vec![b's'; len]);
        let long = || Bytes::from(vec![b'l'; PASS_AS_IS]);
        for pieces in [
            vec![short(1)],
            vec![long()],
            vec![short(1), short(2), long(), short(3), long(), long(), short(4)],
            vec![long(), short(1), short(PASS_AS_IS - 1), short(5)],
        ] {
            let (mut out, mut written) = (BytesMut::new(), VecDeque::new());
            for piece in &pieces {
                pass(&mut out, &mut written, piece.clone());
            }
            written.extend((!out.is_empty()).then(|| out.freeze()));
            let mut queue: VecDeque<Item> = pieces.into_iter().map(Item::Passed).collect();
            let mut gathered = Vec::new();
            while let Some(Item::Passed(first)) = queue.pop_front() {
                gathered.push(gather(first, &mut queue));
            }
            assert_eq!(gathered, Vec::from(written));
        }
    }
}
