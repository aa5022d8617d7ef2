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

/// A framed response body built from a stream of [`Outgoing`] items (server side).
///
/// The HEAD frame is emitted at the first poll. An `Err` from the source becomes an ABORT frame
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
    encoder: StreamEncoder,
    mapping: Mapping,
    done: bool,
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
        Self {
            source,
            encoder,
            mapping,
            done: false,
        }
    }

    fn output(&self, frames: BytesMut) -> Bytes {
        match self.mapping {
            Mapping::Binary => frames.freeze(),
            Mapping::Sse => SseFrameEncoder::new().to_events(&frames),
        }
    }

    fn abort(&mut self, code: AbortCode, reason: &str, dst: &mut BytesMut) {
        // Only fails if the stream already ended or the sequence space is exhausted; then
        // there is nothing more to write.
        let _ = self.encoder.abort(code, cut_reason(reason), dst);
        self.done = true;
    }

    fn encode(&mut self, item: Outgoing, dst: &mut BytesMut) {
        let result = match item {
            Outgoing::Chunk(bytes) => self.encoder.push(&bytes, dst),
            Outgoing::FinishMessage => self.encoder.finish_message(dst).map(drop),
            Outgoing::Message(bytes) => self.encoder.message(&bytes, dst).map(drop),
            Outgoing::KeepAlive => self.encoder.keep_alive(dst),
            Outgoing::End => self.encoder.end(dst),
            Outgoing::Abort(abort) => self.encoder.abort_with(&abort, dst),
        };
        match result {
            Ok(()) => self.done = self.encoder.is_finished(),
            Err(err @ EncodeError::MessageTooLarge { .. }) => {
                self.abort(AbortCode::MessageTooLarge, &err.to_string(), dst);
            }
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
        if this.encoder.messages() == 0 && !this.encoder.in_message() && !this.done {
            // Commit the HEAD (idempotent once written).
            let _ = this.encoder.open(&mut frames);
        }
        while frames.is_empty() && !this.done {
            match Pin::new(&mut this.source).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(item))) => this.encode(item, &mut frames),
                Poll::Ready(Some(Err(err))) => {
                    this.abort(AbortCode::InternalError, &err.to_string(), &mut frames);
                }
                Poll::Ready(None) if this.encoder.in_message() => this.abort(
                    AbortCode::InternalError,
                    "the producer ended inside a message",
                    &mut frames,
                ),
                Poll::Ready(None) => {
                    let _ = this.encoder.end(&mut frames);
                    this.done = true;
                }
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
