//! The frame layer: the header, the kinds, and one type per control frame payload (SPEC.md §2,
//! §3).
//!
//! This module is the lowest layer: it knows how one frame looks on the wire and nothing of
//! streams. Each file owns one piece of the layout, as h2's `src/frame/`:
//!
//! | file | owns |
//! |---|---|
//! | `header.rs` | the 20-byte header: [`FrameHeader`], the "header first" checks ([`HeaderError`]) |
//! | `kind.rs` | [`FrameKind`] and each kind's payload length rule |
//! | `head.rs` | the HEAD payload: [`StreamHead`] |
//! | `message_end.rs` | the MESSAGE_END payload: [`MessageEnd`] |
//! | `stream_end.rs` | the STREAM_END payload: [`StreamEnd`] |
//! | `abort.rs` | the ABORT payload: [`Abort`], [`AbortCode`] |
//! | `crc.rs` | CRC-32 (SPEC.md §2.1) |
//!
//! DATA payloads are message bytes and KEEPALIVE has none, so they need no type. Each payload
//! type reads itself from a payload slice (`load`) and writes its whole frame into a buffer
//! (`encode`). [`StreamDecoder`](crate::StreamDecoder) and [`StreamEncoder`](crate::StreamEncoder)
//! build the stream rules on top; tools that list the frames of a capture (the `inspect`
//! command) use this module directly.
//!
//! ```
//! use mcp_framing::internals::frame::{FrameHeader, FrameKind, HEADER_LEN, StreamEnd};
//!
//! let mut frame = bytes::BytesMut::new();
//! StreamEnd { messages: 2 }.encode(41, &mut frame);
//! let header = FrameHeader::parse(frame[..HEADER_LEN].try_into().unwrap()).unwrap();
//! assert_eq!(FrameKind::from_byte(header.kind), Some(FrameKind::StreamEnd));
//! assert_eq!(StreamEnd::load(&frame[HEADER_LEN..]), Ok(StreamEnd { messages: 2 }));
//! ```

use bytes::{BufMut, BytesMut};

pub(crate) mod abort;
mod crc;
mod head;
mod header;
mod kind;
mod message_end;
mod stream_end;

pub use abort::{Abort, AbortCode, MAX_ABORT_PAYLOAD_LEN, MAX_ABORT_REASON_LEN};
pub(crate) use crc::PayloadCrc;
pub use head::{HEAD_PAYLOAD_LEN, StreamHead};
pub use header::{FrameHeader, HEADER_LEN, HeaderError};
pub use kind::FrameKind;
pub use message_end::{MESSAGE_END_PAYLOAD_LEN, MessageEnd};
pub use stream_end::{STREAM_END_PAYLOAD_LEN, StreamEnd};

/// The two magic bytes that start every frame (SPEC.md §2).
///
/// `0x9F` can never start UTF-8 text, so unframed JSON or SSE text is rejected at byte 0.
pub const MAGIC: [u8; 2] = [0x9F, 0x4D];

/// The format version this crate implements (SPEC.md §8): the version byte of every header, and
/// the one version in the contract's `versions` and the `Mcp-Framing` header.
pub const VERSION: u8 = 1;

/// Why a payload does not have its kind's layout (the frame layer's error; the decoder checks
/// lengths from the header first and reports [`DecodeError`](crate::DecodeError) variants).
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::frame::{FrameKind, PayloadError, StreamEnd};
/// assert_eq!(
///     StreamEnd::load(&[1, 2, 3]),
///     Err(PayloadError::InvalidLength { kind: FrameKind::StreamEnd, len: 3 })
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// The payload length breaks the kind's rule (SPEC.md §3).
    #[error("invalid payload length {len} for a {kind} frame")]
    InvalidLength {
        /// Kind of the frame.
        kind: FrameKind,
        /// Length of the payload given.
        len: usize,
    },
    /// An ABORT frame's reason is not UTF-8 (SPEC.md §3).
    #[error("abort frame reason is not valid UTF-8")]
    AbortReasonNotUtf8,
}

impl PayloadError {
    #[cold]
    fn invalid_length(kind: FrameKind, payload: &[u8]) -> Self {
        Self::InvalidLength {
            kind,
            len: payload.len(),
        }
    }
}

/// Writes one whole frame (header and payload) into `dst`.
#[inline]
pub(crate) fn write_frame(kind: FrameKind, sequence: u32, payload: &[u8], dst: &mut BytesMut) {
    write_header(kind, sequence, payload, dst);
    dst.put_slice(payload);
}

/// Writes the header of a frame carrying `payload` into `dst`, without the payload: the
/// compatible SSE mapping carries a DATA payload in a `message` event (SPEC.md §18).
#[inline]
pub(crate) fn write_header(kind: FrameKind, sequence: u32, payload: &[u8], dst: &mut BytesMut) {
    let header = FrameHeader::for_payload(kind.to_byte(), sequence, payload);
    dst.put_slice(&header.to_bytes());
}
