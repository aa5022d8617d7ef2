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
//! | `layout.rs` | the fixed numbers: magic, version, the header's and each control payload's length |
//!
//! DATA payloads are message bytes and KEEPALIVE has none, so they need no type. Each payload
//! type reads itself from a payload slice (`load`) and writes its whole frame into a buffer
//! (`encode`). [`StreamDecoder`](crate::StreamDecoder) and [`StreamEncoder`](crate::StreamEncoder)
//! build the stream rules on top; tools that list the frames of a capture (the `inspect`
//! command) use this module directly.
//!
//! ```
//! use mcp_framing::internals::frame::{FrameHeader, HEADER_LEN, StreamEnd};
//! use mcp_framing::{FrameKind, StreamEncoder, StreamHead};
//!
//! let mut wire = bytes::BytesMut::new();
//! let mut enc = StreamEncoder::new(StreamHead::for_request(None));
//! enc.message(b"{}", &mut wire)?;
//! enc.message(b"[]", &mut wire)?;
//! enc.end(&mut wire)?;
//! let frame = &wire[wire.len() - (HEADER_LEN + 8)..]; // the last frame: STREAM_END
//! let header: &[u8; HEADER_LEN] = frame[..HEADER_LEN].try_into().unwrap();
//! assert!(FrameHeader::header_crc_ok(header));
//! let header = FrameHeader::read(header);
//! assert_eq!(FrameKind::from_byte(header.kind), Some(FrameKind::StreamEnd));
//! assert!(header.payload_crc_ok(&frame[HEADER_LEN..]));
//! assert_eq!(StreamEnd::load(&frame[HEADER_LEN..]), Ok(StreamEnd { messages: 2 }));
//! # Ok::<(), mcp_framing::EncodeError>(())
//! ```

pub(crate) mod abort;
mod crc;
mod head;
mod header;
mod kind;
mod layout;
mod message_end;
mod stream_end;

pub use abort::{Abort, AbortCode};
pub(crate) use crc::PayloadCrc;
pub use head::StreamHead;
pub use header::FrameHeader;
pub(crate) use header::{HeaderError, write_frame, write_header};
pub use kind::{FrameKind, PayloadError};
pub use layout::{HEADER_LEN, MAGIC, MAX_ABORT_REASON_LEN, VERSION};
pub(crate) use layout::{
    HEAD_PAYLOAD_LEN, MAX_ABORT_PAYLOAD_LEN, MESSAGE_END_PAYLOAD_LEN, STREAM_END_PAYLOAD_LEN,
};
pub use message_end::MessageEnd;
pub use stream_end::StreamEnd;

