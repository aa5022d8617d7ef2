//! `tokio_util::codec` glue: [`StreamDecoder`] is a `Decoder`, [`StreamEncoder`] an `Encoder`.
//!
//! Use them with `FramedRead` / `FramedWrite` over any `AsyncRead` / `AsyncWrite`. Unlike
//! `LengthDelimitedCodec`, `decode_eof` never turns a truncated stream into a clean end: a stream
//! that ends before its STREAM_END sentinel (even right after a header) yields
//! [`DecodeError::Truncated`]. The one end without the sentinel that is not an error is a verified
//! final response read by a decoder that expects a request key (SPEC.md §7 row 4): `FramedRead`
//! then yields [`Event::End`](crate::Event::End) with
//! [`sentinel_seen`](crate::StreamSummary::sentinel_seen) `false` as its last item, then `None`,
//! and `framed.decoder().outcome()` is clean in Regime B.

use std::io;

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::decoder::StreamDecoder;
use crate::encoder::StreamEncoder;
use crate::error::{DecodeError, EncodeError};
use crate::event::Event;
use crate::outgoing::Outgoing;

/// Errors of the codec layer: I/O, or the frame layer's decode or encode errors.
///
/// # Examples
///
/// ```
/// use mcp_framing::{CodecError, DecodeError};
/// let err = CodecError::from(DecodeError::InvalidAbort);
/// assert_eq!(err.to_string(), "abort frame reason is not valid UTF-8");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// Reading or writing the transport failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The stream is invalid, truncated or aborted.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The encoder refused a write.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

impl CodecError {
    /// The decode error, if this is one.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{CodecError, DecodeError};
    /// assert!(CodecError::from(DecodeError::InvalidAbort).as_decode().is_some());
    /// ```
    // Hidden: a `match` on `CodecError::Decode` says the same; the tests use it.
    #[doc(hidden)]
    #[must_use]
    pub fn as_decode(&self) -> Option<&DecodeError> {
        match self {
            Self::Decode(err) => Some(err),
            _ => None,
        }
    }
}

impl Decoder for StreamDecoder {
    type Item = Event;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Event>, CodecError> {
        Ok(StreamDecoder::decode(self, src)?)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Event>, CodecError> {
        Ok(StreamDecoder::decode_eof(self, src)?)
    }
}

impl Encoder<Outgoing> for StreamEncoder {
    type Error = CodecError;

    fn encode(&mut self, item: Outgoing, dst: &mut BytesMut) -> Result<(), CodecError> {
        match item {
            Outgoing::Chunk(bytes) => self.push(&bytes, dst)?,
            Outgoing::FinishMessage => {
                self.finish_message(dst)?;
            }
            Outgoing::Message(bytes) => {
                self.message(&bytes, dst)?;
            }
            Outgoing::KeepAlive => self.keep_alive(dst)?,
            Outgoing::End => self.end(dst)?,
            Outgoing::Abort(abort) => self.abort_with(&abort, dst)?,
        }
        Ok(())
    }
}
