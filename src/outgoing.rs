//! [`Outgoing`]: one write to a framed stream, the item of the codec's `Encoder` and of
//! `http::FramedBody`'s source.

use bytes::Bytes;

#[cfg(doc)]
use crate::encoder::StreamEncoder;
use crate::frame::Abort;

/// One write to a framed stream: what `FramedWrite` (feature `codec`) and `http::FramedBody`
/// (feature `http`) take.
///
/// # Examples
///
/// ```
/// use bytes::Bytes;
/// use futures::SinkExt;
/// use mcp_framing::{Outgoing, StreamEncoder, StreamHead};
/// use tokio_util::codec::FramedWrite;
///
/// # tokio_test::block_on(async {
/// let mut sink = FramedWrite::new(Vec::new(), StreamEncoder::new(StreamHead::for_request(None)));
/// sink.send(Outgoing::Chunk(Bytes::from_static(b"{\"id\":1,"))).await?;
/// sink.send(Outgoing::Chunk(Bytes::from_static(b"\"result\":{}}"))).await?;
/// sink.send(Outgoing::FinishMessage).await?;
/// sink.send(Outgoing::End).await?;
/// let wire: Vec<u8> = sink.into_inner();
/// assert_eq!(mcp_framing::StreamDecoder::new().decode_all(&wire).unwrap().messages.len(), 1);
/// # Ok::<(), mcp_framing::CodecError>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outgoing {
    /// Bytes appended to the current message ([`StreamEncoder::push`]).
    Chunk(Bytes),
    /// Close the current message ([`StreamEncoder::finish_message`]).
    FinishMessage,
    /// A whole message ([`StreamEncoder::message`]).
    Message(Bytes),
    /// A KEEPALIVE frame ([`StreamEncoder::keep_alive`]).
    KeepAlive,
    /// The STREAM_END sentinel ([`StreamEncoder::end`]).
    End,
    /// An ABORT frame ([`StreamEncoder::abort`]).
    Abort(Abort),
}
