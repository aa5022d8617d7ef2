//! The server body: a framed response built from a stream of [`Outgoing`] items.

use std::convert::Infallible;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_core::Stream;

use super::Mapping;
use crate::codec::Outgoing;
use crate::encoder::StreamEncoder;
use crate::error::EncodeError;
use crate::event::{Abort, AbortCode};
use crate::frame::MAX_ABORT_REASON_LEN;
use crate::sse::SseFrameEncoder;
use crate::sse_compat::{CompatEncodeError, CompatEncoder};

/// A framed response body built from a stream of [`Outgoing`] items (server side).
///
/// The HEAD frame is emitted at the first poll (in the compatible SSE mapping, with the first
/// record: each message is written whole, as a record and a `message` event, once its last byte
/// is known; a keep-alive is a record with a KEEPALIVE frame). An `Err` from the source becomes an ABORT frame
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
    writer: Writer,
    mapping: Mapping,
    done: bool,
}

/// What writes the body: frames (binary, or base64 in events) or records and events.
enum Writer {
    Frames(StreamEncoder),
    Compat(CompatEncoder),
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
        let writer = match mapping {
            Mapping::Compat => Writer::Compat(CompatEncoder::new(encoder)),
            _ => Writer::Frames(encoder),
        };
        Self {
            source,
            writer,
            mapping,
            done: false,
        }
    }

    fn output(&self, written: BytesMut) -> Bytes {
        match self.mapping {
            Mapping::Sse => SseFrameEncoder::new().to_events(&written),
            _ => written.freeze(),
        }
    }

    fn in_message(&self) -> bool {
        match &self.writer {
            Writer::Frames(encoder) => encoder.in_message(),
            Writer::Compat(encoder) => encoder.in_message(),
        }
    }

    fn abort(&mut self, code: AbortCode, reason: &str, dst: &mut BytesMut) {
        // Only fails if the stream already ended or the sequence space is exhausted; then
        // there is nothing more to write.
        let reason = cut_reason(reason);
        let _written = match &mut self.writer {
            Writer::Frames(encoder) => encoder.abort(code, reason, dst).is_ok(),
            Writer::Compat(encoder) => encoder.abort(code, reason, dst).is_ok(),
        };
        self.done = true;
    }

    fn encode(&mut self, item: Outgoing, dst: &mut BytesMut) {
        let result = match &mut self.writer {
            Writer::Frames(encoder) => match item {
                Outgoing::Chunk(bytes) => encoder.push(&bytes, dst),
                Outgoing::FinishMessage => encoder.finish_message(dst).map(drop),
                Outgoing::Message(bytes) => encoder.message(&bytes, dst).map(drop),
                Outgoing::KeepAlive => encoder.keep_alive(dst),
                Outgoing::End => encoder.end(dst),
                Outgoing::Abort(abort) => encoder.abort_with(&abort, dst),
            }
            .map(|()| encoder.is_finished())
            .map_err(CompatEncodeError::Encode),
            Writer::Compat(encoder) => match item {
                Outgoing::Chunk(bytes) => encoder.push(&bytes),
                Outgoing::FinishMessage => encoder.finish_message(dst).map(drop),
                Outgoing::Message(bytes) => encoder.message(&bytes, dst).map(drop),
                Outgoing::KeepAlive => encoder.keep_alive(dst),
                Outgoing::End => encoder.end(dst),
                Outgoing::Abort(abort) => encoder.abort(abort.code, &abort.reason, dst),
            }
            .map(|()| encoder.is_finished()),
        };
        match result {
            Ok(finished) => self.done = finished,
            Err(CompatEncodeError::Encode(err @ EncodeError::MessageTooLarge { .. })) => {
                self.abort(AbortCode::MessageTooLarge, &err.to_string(), dst);
            }
            // A message an SSE event cannot carry unchanged, a call out of order.
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
        if let Writer::Frames(encoder) = &mut this.writer {
            if encoder.messages() == 0 && !encoder.in_message() && !this.done {
                // Commit the HEAD (idempotent once written).
                let _ = encoder.open(&mut frames);
            }
        }
        while frames.is_empty() && !this.done {
            match Pin::new(&mut this.source).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(item))) => this.encode(item, &mut frames),
                Poll::Ready(Some(Err(err))) => {
                    this.abort(AbortCode::InternalError, &err.to_string(), &mut frames);
                }
                Poll::Ready(None) if this.in_message() => this.abort(
                    AbortCode::InternalError,
                    "the producer ended inside a message",
                    &mut frames,
                ),
                Poll::Ready(None) => this.encode(Outgoing::End, &mut frames),
            }
        }
        if frames.is_empty() {
            Poll::Ready(None)
        } else {
            Poll::Ready(Some(Ok(this.output(frames))))
        }
    }
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
